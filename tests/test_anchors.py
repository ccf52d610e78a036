"""The anchor figures of DESIGN.md (from the seed articles), computed from real configs.

Each expected value is the seed's figure; tolerances match the precision the seed states.
"""

from __future__ import annotations

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cost.price import cost_of
from slotdiff.cost.roofline import experts_touched
from slotdiff.cost.workload import Workload

from conftest import raw

KiB, GiB = 1024, 1024**3


def cost(repo_id: str, **workload):  # type: ignore[no-untyped-def]
    return cost_of(load(raw(repo_id)).arch, Workload(**workload))


def test_llama3_8b_params_and_weights() -> None:
    c = cost("meta-llama/Meta-Llama-3-8B")
    assert c.params.total == 8_030_261_248  # "8.03B (8,030,261,248)"
    assert round(c.weights.bytes / 1e9, 2) == 16.06  # "BF16 weights 16.06 GB"


def test_llama3_8b_flops() -> None:
    c8k = cost("meta-llama/Meta-Llama-3-8B", context=8192)
    c128k = cost("meta-llama/Meta-Llama-3-8B", context=131072)
    assert c8k.flops.weights_per_token / 1e9 == pytest.approx(15, abs=0.1)  # "≈ 15 GFLOPs"
    assert round(c8k.flops.attention_per_token / 1e9, 1) == 4.3  # "4.3 GFLOPs at 8K"
    assert round(c128k.flops.attention_per_token / 1e9, 1) == 68.7  # "68.7 at 128K"


def test_llama3_8b_prefill_8k() -> None:
    # Seed 02: 8K prefill ≈ 140 TFLOP by the causal triangle, ≈ 158 without using the mask.
    c = cost("meta-llama/Meta-Llama-3-8B", context=8192)
    assert c.flops.prefill / 1e12 == pytest.approx(140, abs=1)
    assert c.flops.prefill_no_mask / 1e12 == pytest.approx(158, abs=1)


def test_llama3_8b_kv() -> None:
    c = cost("meta-llama/Meta-Llama-3-8B", context=131072)
    assert c.kv.bytes_per_token == 128 * KiB
    assert c.kv.bytes_at_context == 16 * GiB


def test_llama3_8b_kv_if_mha() -> None:
    from slotdiff.analysis.analyze import baseline
    from slotdiff.cost.counterfactual import _kv

    arch = load(raw("meta-llama/Meta-Llama-3-8B")).arch
    mha = _kv(arch, baseline("gpt2").fills["attention.kv"])
    assert cost_of(mha).kv.bytes_per_token == 512 * KiB


def test_llama3_8b_decode_bound() -> None:
    c = cost("meta-llama/Meta-Llama-3-8B", batch=1, context=8192)
    assert 4.5 <= c.decode.step_ms <= 4.8 + 0.005  # "4.5–4.8 ms"
    assert c.decode.bound == "memory"
    assert c.decode.ridge == pytest.approx(295, abs=1)  # "ridge ≈ 295 FLOP/byte"
    assert c.decode.compute_bound_batch_weights == pytest.approx(295, abs=2)  # "near batch ≈ 295"


def test_llama3_70b() -> None:
    c = cost("meta-llama/Llama-3.1-70B", context=131072)
    assert round(c.params.total / 1e9, 1) == 70.6
    assert c.kv.bytes_per_token == 320 * KiB
    assert c.kv.bytes_at_context == 40 * GiB


def test_gpt2_small() -> None:
    c = cost("openai-community/gpt2")
    assert round(c.params.total / 1e6) == 124
    assert c.kv.bytes_per_token == 36 * KiB


@pytest.mark.parametrize(("repo", "kib"), [("Qwen/Qwen3-8B", 144), ("Qwen/Qwen3-30B-A3B", 96)])
def test_qwen3_kv(repo: str, kib: int) -> None:
    assert cost(repo).kv.bytes_per_token == kib * KiB


def test_deepseek_v3() -> None:
    c = cost("deepseek-ai/DeepSeek-V3", context=131072)
    assert round(c.params.total / 1e9) == 671
    assert round(c.params.active / 1e9) in (37, 38)  # "37B activated" (card rounds down 37.55B)
    assert c.kv.bytes_per_token == 70_272  # "70,272 B (68.6 KiB)"
    assert round(c.kv.bytes_at_context / GiB, 1) == 8.6


def test_deepseek_v3_experts_touched() -> None:
    assert experts_touched(256, 8, 32) == pytest.approx(163, abs=0.5)
    assert experts_touched(256, 8, 128) == pytest.approx(252, abs=0.5)


def test_mixtral() -> None:
    c = cost("mistralai/Mixtral-8x7B-v0.1")
    assert round(c.params.total / 1e9, 1) == 46.7
    assert round(c.params.active / 1e9, 1) == 12.9


def test_deepseek_v3_mtp_and_hub_total() -> None:
    # DeepSeek-V3 README: "The total size of DeepSeek-V3 models on Hugging Face is 685B, which
    # includes 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP)
    # Module weights." The checkpoint stores the MTP layer with its own copies of the
    # embedding and the head (shared with the trunk in the model, so not in params.mtp).
    # The README's figures are rounded to whole billions: tolerance ±0.6B / ±0.2 %.
    c = cost("deepseek-ai/DeepSeek-V3")
    copies = 2 * 129280 * 7168
    assert abs((c.params.mtp + copies) / 1e9 - 14) < 0.6
    assert abs((c.params.total + c.params.mtp + copies) / 685e9 - 1) < 0.002
