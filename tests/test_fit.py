"""Memory verdicts (slotdiff fit) against cases worked by hand, and the per-GPU decode model.

Conventions used in the arithmetic: H100 SXM "80 GB" = 80 GiB = 85,899,345,920 B (the
preset); H200 "141 GB" = 141 GiB; the default runtime reserve is 10%, so 72 GiB =
77,309,411,328 B of an H100 is usable. Weights split evenly over the GPUs; KV follows the
KV heads. Every expected number below comes from the model's published sizes, not from
running the code.
"""

from __future__ import annotations

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import UsageError
from slotdiff.cost.price import cost_of
from slotdiff.cost.workload import Workload
from slotdiff.deploy.fit import fit
from slotdiff.deploy.serving import RESERVE_FRACTION, decode_step, deployment, kv_bytes_per_gpu

from conftest import raw

KiB, GiB = 1024, 1024**3
H100_USABLE = 77_309_411_328  # 0.9 × 80 GiB
LLAMA70_PARAMS = 70_553_706_496  # Llama-3-70B (3.1 config): DESIGN.md's 70.6B, counted exactly in the anchors
LLAMA70_BF16 = 2 * LLAMA70_PARAMS  # 141,107,412,992 B = 131.4 GiB
LLAMA70_EMBED = 128256 * 8192 * 2  # the token table, a gather at decode: 2,101,346,304 B


def arch(repo: str):  # type: ignore[no-untyped-def]
    return load(raw(repo)).arch


def test_reserve_default_is_ten_percent() -> None:
    assert RESERVE_FRACTION == 0.10
    assert 0.9 * 80 * GiB == H100_USABLE


def test_llama3_70b_bf16_does_not_fit_one_h100() -> None:
    # 141,107,412,992 B of weights > 77,309,411,328 B usable: no room for even one sequence.
    # At 8K one sequence adds 320 KiB × 8,192 = 2,684,354,560 B, so the shortfall is
    # 141,107,412,992 + 2,684,354,560 − 77,309,411,328 = 66,482,356,224 B (61.92 GiB).
    f = fit(arch("meta-llama/Llama-3.1-70B"), Workload(context=8192), gpus=1)
    assert f.weights_bytes == LLAMA70_BF16
    assert not f.fits
    assert f.shortfall_per_gpu == 66_482_356_224
    assert f.max_sequences == 0 and f.max_context == 0
    assert f.min_gpus == 2
    assert f.decode is None and f.decode_at_max is None


def test_llama3_70b_bf16_fits_two_h100_with_five_sequences_at_8k() -> None:
    # Per GPU: weights 141,107,412,992 / 2 = 70,553,706,496 B; free 77,309,411,328 −
    # 70,553,706,496 = 6,755,704,832 B. KV at 8K: 80 layers × 8 KV heads × 128 × 2 (K, V) ×
    # 2 B = 320 KiB/token × 8,192 = 2,684,354,560 B per sequence, 4 of the 8 heads per GPU:
    # 1,342,177,280 B. Sequences: floor(6,755,704,832 / 1,342,177,280) = floor(5.03) = 5.
    f = fit(arch("meta-llama/Llama-3.1-70B"), Workload(context=8192), gpus=2)
    assert f.fits
    assert f.kv_per_sequence == 2_684_354_560
    assert f.kv_per_sequence_per_gpu == 1_342_177_280
    assert f.kv_replication == 1
    assert f.max_sequences == 5
    # Longest single sequence: 6,755,704,832 / (160 KiB = 163,840 B per token per GPU) = 41,233.06.
    assert f.max_context == 41_233
    # Decode at 5 sequences, per GPU: weights read once without the embedding table,
    # (141,107,412,992 − 2,101,346,304) / 2 = 69,503,033,344 B, plus 5 × 1,342,177,280 =
    # 6,710,886,400 B of KV = 76,213,919,744 B / 3.35e12 B/s = 22.750 ms → 5 / 0.022750 s
    # = 219.8 tokens/s. FLOPs per GPU ≈ 5 × 160 GFLOP / 2 = 0.4 TFLOP = 0.41 ms: memory-bound.
    d = f.decode_at_max
    assert d is not None and d.batch == 5 and d.bound == "memory"
    assert d.bytes == pytest.approx((LLAMA70_BF16 - LLAMA70_EMBED) / 2 + 5 * 1_342_177_280)
    assert d.step_ms == pytest.approx(76_213_919_744 / 3.35e12 * 1e3)
    assert d.tokens_per_s == pytest.approx(219.78, abs=0.01)


def test_llama3_70b_on_eight_h100_at_128k() -> None:
    # The example. Per GPU: weights 141,107,412,992 / 8 = 17,638,426,624 B; free
    # 77,309,411,328 − 17,638,426,624 = 59,670,984,704 B. KV at 128K: 40 GiB per sequence
    # (seed 04), one of 8 heads per GPU: 5 GiB = 5,368,709,120 B. floor(59.67e9 / 5.37e9) = 11.
    f = fit(arch("meta-llama/Llama-3.1-70B"), Workload(context=131072), gpus=8)
    assert f.fits and f.kv_per_sequence == 40 * GiB
    assert f.max_sequences == 11
    # Longest single context: 59,670,984,704 / (40 KiB per token per GPU) = 1,456,811.1 tokens,
    # ten times the model's trained 131,072: memory is not what limits one sequence here.
    assert f.max_context == 1_456_811
    assert f.model_max_context == 131072


def test_batch_that_does_not_fit_reports_the_shortfall() -> None:
    # 12 sequences at 128K on 8 × H100, per GPU: 17,638,426,624 + 12 × 5,368,709,120 =
    # 82,062,936,064 B against 77,309,411,328: short 4,753,524,736 B per GPU. More GPUs: past
    # 8 each still holds one of the 8 KV heads (5 GiB per sequence), only the weights shrink:
    #   9 GPUs: 15,678,601,444 + 64,424,509,440 = 80,103,110,884 > usable
    #  10 GPUs: 14,110,741,299 + 64,424,509,440 = 78,535,250,739 > usable
    #  11 GPUs: 12,827,946,636 + 64,424,509,440 = 77,252,456,076 ≤ usable → 11.
    f = fit(arch("meta-llama/Llama-3.1-70B"), Workload(context=131072, batch=12), gpus=8)
    assert not f.fits
    assert f.shortfall_per_gpu == pytest.approx(4_753_524_736)
    assert f.min_gpus == 11


def test_gqa_heads_replicate_past_the_kv_head_count() -> None:
    # Llama-3-8B has 8 KV heads: on 16 GPUs each holds one head, KV stored twice over.
    a = arch("meta-llama/Meta-Llama-3-8B")
    one = kv_bytes_per_gpu(a, 8192, "bfloat16", 1)
    assert one == 1 * GiB  # 128 KiB × 8,192
    assert kv_bytes_per_gpu(a, 8192, "bfloat16", 8) == one / 8
    assert kv_bytes_per_gpu(a, 8192, "bfloat16", 16) == one / 8  # not /16
    f = fit(a, Workload(context=8192), gpus=16)
    assert f.kv_replication == 2
    assert any("replicated ×2" in n for n in f.assumptions)


def test_mla_latent_is_whole_on_every_gpu() -> None:
    # DeepSeek-V3: 61 layers × (512 latent + 64 RoPE key) × 2 B = 70,272 B/token; at 128K
    # 9,210,691,584 B (8.58 GiB) per sequence, all of it on each of the 8 GPUs.
    f = fit(arch("deepseek-ai/DeepSeek-V3"), Workload(gpu="h200", context=131072), gpus=8)
    assert f.kv_per_sequence == 61 * 576 * 2 * 131072 == 9_210_691_584
    assert f.kv_per_sequence_per_gpu == f.kv_per_sequence
    assert f.kv_replication == 8
    # Checkpoint fp8: ~671B params at 1 B plus scales and bf16 embeddings/norms: 671–676 GB.
    assert 671e9 <= f.weights_bytes <= 676e9
    # H200: 0.9 × 141 GiB = 136,257,837,465.6 B usable; weights/8 ≈ 84.1e9 leaves ≈ 52.1e9,
    # which holds 5 sequences of 9.21e9 (5.66).
    free = 0.9 * 141 * GiB - f.weights_bytes / 8
    assert f.max_sequences == int(free // 9_210_691_584) == 5
    assert any("MLA" in n for n in f.assumptions)


def test_sliding_window_everywhere_means_memory_does_not_bound_context() -> None:
    # Mistral-7B-v0.1: every layer slides over 4,096 tokens, so one sequence never holds
    # more than 4,096 × 128 KiB = 512 MiB of KV, however long its context.
    f = fit(arch("mistralai/Mistral-7B-v0.1"), Workload(context=131072), gpus=1)
    assert f.kv_per_sequence == 4096 * 128 * KiB
    assert f.max_context is None


def test_recurrent_state_counts_per_sequence() -> None:
    # Qwen3.5-35B-A3B: 30 Gated DeltaNet layers hold 32 value heads × 128 × 128 recurrent
    # state in float32 (its config says mamba_ssm_dtype float32) plus a 4-wide conv window
    # over (2 × 16 × 128 + 32 × 128) channels in bf16:
    # 30 × (524,288 × 4 B + 32,768 × 2 B) = 30 × 2,162,688 = 64,880,640 B per sequence.
    f = fit(arch("Qwen/Qwen3.5-35B-A3B"), Workload(context=8192, batch=4), gpus=1)
    state = 30 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 4 * 2)
    assert f.state_per_sequence == state == 64_880_640
    assert f.needed_per_gpu == pytest.approx(f.weights_bytes + 4 * (f.kv_per_sequence + state))


def test_reserve_and_gpus_are_checked() -> None:
    a = arch("meta-llama/Meta-Llama-3-8B")
    with pytest.raises(UsageError):
        fit(a, gpus=0)
    with pytest.raises(UsageError):
        fit(a, reserve=1.0)
    # No reserve: 80 GiB − 16,060,522,496 B of weights = 69,838,823,424 B for 1 GiB sequences → 65.
    assert fit(a, Workload(context=8192), reserve=0).max_sequences == 65


@pytest.mark.parametrize(
    "repo",
    ["meta-llama/Meta-Llama-3-8B", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-30B-A3B", "google/gemma-2-9b"],
)
@pytest.mark.parametrize(("batch", "context"), [(1, 8192), (64, 32768)])
def test_one_gpu_decode_step_equals_the_cost_pass(repo: str, batch: int, context: int) -> None:
    wl = Workload(batch=batch, context=context)
    a = arch(repo)
    ref = cost_of(a, wl).decode
    step = decode_step(deployment(a, wl), batch, context)
    assert step.bytes == pytest.approx(ref.bytes)
    assert step.flops == pytest.approx(ref.flops)
    assert step.step_ms == pytest.approx(ref.step_ms)
    assert step.bound == ref.bound


def test_tensor_parallel_divides_weights_and_flops() -> None:
    a = arch("meta-llama/Meta-Llama-3-8B")
    one = decode_step(deployment(a, Workload(), 1), 8, 8192)
    eight = decode_step(deployment(a, Workload(), 8), 8, 8192)
    assert eight.weight_bytes == pytest.approx(one.weight_bytes / 8)
    assert eight.kv_bytes == pytest.approx(one.kv_bytes / 8)  # 8 KV heads, one per GPU
    assert eight.flops == pytest.approx(one.flops / 8)
    assert eight.tokens_per_s == pytest.approx(8 * one.tokens_per_s)  # ideal scaling
