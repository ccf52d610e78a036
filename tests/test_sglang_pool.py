"""SGLang's KV pool at start-up checked against SGLang's own code (the PyPI wheels
sglang 0.3.6, 0.4.3, 0.4.6, 0.4.9, 0.4.10, 0.5.1-0.5.10): every expected value below is worked
by hand from the release's formula, never taken from slotdiff's output.

``fit`` pins ``free`` (``--free-gib``) and the weights (``--weights-gib``), so the rest is
``(free − weights) − free × (1 − mem_fraction_static)`` and the terms are exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.gpus import gpu
from slotdiff.cost.memory import MemoryPlan
from slotdiff.cost.weights import effective_format
from slotdiff.deploy.sglang import sglang_fit
from slotdiff.deploy.vllm import EngineArgs, EngineFit

from conftest import FIXTURES, RAW

GiB = 2**30
DEFAULTS = FIXTURES / "corpus" / "transformers-defaults"
QWEN3_30B = RAW / "Qwen__Qwen3-30B-A3B.json"  # 48 layers, 4 KV heads, head_dim 128
LLAVA = RAW / "llava-hf__llava-1.5-7b-hf.json"  # CLIP ViT-L/14: 24 layers, hidden 1024
QWEN3_VL = RAW / "Qwen__Qwen3-VL-30B-A3B-Instruct.json"  # vision_config.depth, not num_hidden_layers


def fit(path: Path, device: str = "h100-sxm", **flags: Any) -> EngineFit:
    arch = load(path).arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    args = EngineArgs(engine="sglang", max_model_len=32768, free_gib=70, weights_gib=20, **flags)
    return sglang_fit(arch, plan, gpu(device), args)


def term(f: EngineFit, name: str) -> float:
    return next(t.bytes for t in f.stages[0].terms if t.name == name)


def fraction(f: EngineFit) -> float:
    """mem_fraction_static back from its term: reserved = free × (1 − fraction), free 70 GiB."""
    return 1 - term(f, "reserved_by_fraction") / (70 * GiB)


# server_args.py ServerArgs._handle_gpu_memory_settings (0.5.3 onwards; 0.5.2 still has the
# by-GPU-class table): reserved MiB = 512 + 1.5 × max(chunked_prefill_size, 2048)
# + 2 × cuda_graph_max_bs + tp × pp / 8 × 1024, at least 10 GiB above 60 GiB of memory;
# mem_fraction_static = round((gpu_mem − reserved) / gpu_mem, 3). chunked_prefill_size and
# cuda_graph_max_bs by gpu_mem: < 35 GiB 2,048 and (16 in 0.5.3-0.5.4, 24 from 0.5.5) below
# TP 4, else 80; < 60 GiB 4,096 and 32 / 160; < 160 GiB 8,192 and 256 / 512; else 16,384 and 512.
@pytest.mark.parametrize(
    ("device", "version", "tp", "expected", "chunked"),
    [
        # H100 (79.22 GiB), TP 4: 512 + 12,288 + 2 × 512 + 512 = 14,336 MiB = 14 GiB;
        # (79.22 − 14) / 79.22 = 0.82327 → 0.823 (a CUDA-graph batch of 256 would give 0.830)
        ("h100-sxm", "0.5.5", 4, 0.823, 8192),
        # 0.5.3 already has the 0.5.5 rule: TP 1, 512 + 12,288 + 512 + 128 = 13,440 MiB
        # = 13.125 GiB; (79.22 − 13.125) / 79.22 = 0.83432 → 0.834 (the old table: 0.874)
        ("h100-sxm", "0.5.3", 1, 0.834, 8192),
        # L4 (22.06 GiB), TP 1, 0.5.5: chunked 2,048, 24 graphs: 512 + 3,072 + 48 + 128 =
        # 3,760 MiB = 3.671875 GiB, no 10 GiB floor; 18.388125 / 22.06 = 0.83355 → 0.834
        ("l4", "0.5.5", 1, 0.834, 2048),
        # RTX 4090 (23.55 GiB), TP 1: 0.5.5 (24 graphs) 19.878125 / 23.55 = 0.84408 → 0.844;
        # 0.5.4 (16 graphs, 3,744 MiB = 3.65625 GiB) 19.89375 / 23.55 = 0.84475 → 0.845
        ("rtx-4090", "0.5.5", 1, 0.844, 2048),
        ("rtx-4090", "0.5.4", 1, 0.845, 2048),
        # A100 40 GB (39.61 GiB), TP 2, 0.5.9: chunked 4,096, 32 graphs: 512 + 6,144 + 64 +
        # 256 = 6,976 MiB = 6.8125 GiB; 32.7975 / 39.61 = 0.82801 → 0.828
        ("a100-40gb", "0.5.9", 2, 0.828, 4096),
        # 0.5.2 (by GPU class, rounded): H100, TP 8, 9.5 + 8 / 2 = 13.5 GiB;
        # 65.72 / 79.22 = 0.829588 → 0.83
        ("h100-sxm", "0.5.2", 8, 0.83, 8192),
        # 0.4.9-0.5.2 chunked prefill: 2,048 below 35 GiB; L4 TP 1: 2.8 + 0.1 = 2.9 GiB;
        # 19.16 / 22.06 = 0.86854 → 0.869
        ("l4", "0.4.9", 1, 0.869, 2048),
        # 0.4.6 and earlier: chunked 2,048 below 25,000 MB (24.41 GiB): the 4090 by TP (0.88)
        ("rtx-4090", "0.4.6", 1, 0.88, 2048),
    ],
)
def test_default_mem_fraction_and_chunked_prefill(
    device: str, version: str, tp: int, expected: float, chunked: int
) -> None:
    f = fit(QWEN3_30B, device, version=version, tensor_parallel_size=tp)
    assert fraction(f) == pytest.approx(expected, abs=1e-9)
    assert f.batched_tokens == chunked


def test_default_fraction_sets_the_tokens() -> None:
    """H100 TP 4, 0.5.5: fraction 0.823 (above). Qwen3-30B-A3B's cell on a TP 4 rank: 4 KV heads
    // 4 = 1 × 128 × 48 layers × 2 × 2 B = 24,576 B. rest = (70 − 20) − 70 × 0.177 = 37.61 GiB;
    tokens = 37.61 × 2^30 // 24,576 = 1,643,205 (37.61 × 1,073,741,824 = 40,383,429,980.6)."""
    f = fit(QWEN3_30B, "h100-sxm", version="0.5.5", tensor_parallel_size=4)
    assert term(f, "rest") == pytest.approx(37.61 * GiB, rel=1e-12)
    assert f.kv_pool_tokens == int(37.61 * GiB // 24576) == 1_643_205


def test_vision_model_fraction() -> None:
    """adjust_mem_fraction_for_vlm (0.4.10+): × 0.95 × clamp(1 − 0.1 × (layers × hidden² /
    (24 × 1024²) − 1), 0.8, 1.05). LLaVA-1.5's CLIP ViT-L/14 is the baseline: × 0.95 of the
    rounded 0.834 (H100 TP 1, 0.5.5) = 0.7923. 0.4.9 multiplies by 0.90: on an H100 at TP 1,
    9.5 + 0.5 = 10 GiB, 69.22 / 79.22 = 0.87377 → 0.874; × 0.9 = 0.7866."""
    assert fraction(fit(LLAVA, version="0.5.5")) == pytest.approx(0.834 * 0.95, abs=1e-9)
    assert fraction(fit(LLAVA, version="0.4.9")) == pytest.approx(0.874 * 0.9, abs=1e-9)


def test_vision_model_fraction_refused_where_sglang_reads_another_key() -> None:
    with pytest.raises(SlotdiffError, match=r"not supported: .*vision_config\.num_hidden_layers"):
        fit(QWEN3_VL, version="0.5.5")
    # the flag takes it instead
    assert fraction(fit(QWEN3_VL, version="0.5.5", mem_fraction_static=0.8)) == pytest.approx(0.8)


def test_releases_not_read_are_refused() -> None:
    # 0.5.10 reserves piecewise-CUDA-graph memory by model: the default fraction is refused ...
    with pytest.raises(SlotdiffError, match=r"not supported: .*piecewise"):
        fit(QWEN3_30B, version="0.5.10")
    assert fraction(fit(QWEN3_30B, version="0.5.10", mem_fraction_static=0.85)) == pytest.approx(0.85)
    # ... and a release after the newest read (0.5.23, tests/test_sglang_recent.py) entirely
    with pytest.raises(SlotdiffError, match=r"not supported: .*through 0\.5\.23"):
        fit(QWEN3_30B, version="0.5.24", mem_fraction_static=0.85)


LLAMA_8B = RAW / "meta-llama__Llama-3.1-8B.json"  # 32 layers, 8 KV heads, head_dim 128
V32 = RAW / "deepseek-ai__DeepSeek-V3.2.json"  # 61 DSA layers: latent 512 + rope 64, index_head_dim 128
MLLAMA = DEFAULTS / "mllama.json"  # 40 text layers, 8 of them cross-attention; 8 KV heads × 128


def pool(path: Path, device: str = "h100-sxm", **flags: Any) -> EngineFit:
    """The pool from a pinned rest (``available_kv_gib``): tokens = rest // cell, page-floored."""
    arch = load(path).arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    args = EngineArgs(engine="sglang", max_model_len=32768, mem_fraction_static=0.9, **flags)
    return sglang_fit(arch, plan, gpu(device), args)


@pytest.mark.parametrize(
    ("version", "tokens"),
    [
        # profile_max_num_token 0.5.2-0.5.6: get_num_kv_heads(tp) × head_dim × layers × 2 × 2 B
        # (V sized as head_dim): 8 × 128 × 32 × 2 × 2 = 131,072 B; 10 GiB // 131,072 = 81,920
        ("0.5.5", 81_920),
        ("0.5.6", 81_920),
        # get_cell_size_per_token from 0.5.7: × (head_dim + v_head_dim) = 8 × (128 + 64) × 32 ×
        # 2 = 98,304 B; 10,737,418,240 // 98,304 = 109,226
        ("0.5.7", 109_226),
    ],
)
def test_mha_cell_takes_v_head_dim_from_0_5_7(tmp_path: Path, version: str, tokens: int) -> None:
    cfg = json.loads(LLAMA_8B.read_text())
    cfg["v_head_dim"] = 64
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert pool(path, version=version, available_kv_gib=10).kv_pool_tokens == tokens


def test_mha_cell_counts_every_hidden_layer() -> None:
    """num_effective_layers is every hidden layer, cross-attention ones included (mllama: 40):
    8 × 128 × 2 × 40 × 2 B = 163,840 B; 10 GiB // 163,840 = 65,536 (32 layers would give 81,920)."""
    assert pool(MLLAMA, version="0.5.5", available_kv_gib=10).kv_pool_tokens == 65_536


@pytest.mark.parametrize(
    ("version", "device", "tokens", "page", "kv"),
    [
        # 0.5.4+: (512 + 64) × 2 B + the indexer's 128 + 128 // 128 × 4 = 132 B (uint8), × 61 layers
        # = 1,284 × 61 = 78,324 B; 50 GiB = 53,687,091,200 B // 78,324 = 685,449; page 64 (set
        # by _handle_model_specific_adjustments for DeepSeek NSA): 685,440
        ("0.5.5", "h200", 685_440, 64, "bfloat16"),
        # on Blackwell the KV dtype becomes fp8_e4m3: (576 + 132) × 61 = 43,188 B;
        # 53,687,091,200 // 43,188 = 1,243,101 → 1,243,072 (page 64)
        ("0.5.5", "b200", 1_243_072, 64, "float8_e4m3fn"),
        # 0.5.3 has no indexer term: 576 × 2 × 61 = 70,272 B; 764,006 → 763,968 (page 64)
        ("0.5.3", "h200", 763_968, 64, "bfloat16"),
    ],
)
def test_dsa_cell_page_and_dtype(version: str, device: str, tokens: int, page: int, kv: str) -> None:
    f = pool(V32, device, version=version, tensor_parallel_size=8, available_kv_gib=50)
    assert (f.kv_pool_tokens, f.block_size, f.kv_cache_dtype) == (tokens, page, kv)


def test_dsa_releases_and_flags() -> None:
    # 0.5.3 sets mem_fraction_static 0.8 for DeepSeek NSA over the flag (0.9 passed)
    f = pool(V32, "h200", version="0.5.3", tensor_parallel_size=8, free_gib=130, weights_gib=90)
    assert term(f, "reserved_by_fraction") == pytest.approx(130 * GiB * 0.2)
    with pytest.raises(SlotdiffError, match=r"not supported: SGLang 0\.5\.2 has no DeepSeek sparse"):
        pool(V32, "h200", version="0.5.2", available_kv_gib=50)
    # from 0.5.6 the page and dtype depend on the config's architecture: they must be passed
    with pytest.raises(SlotdiffError, match=r"not supported: .*pass --block-size"):
        pool(V32, "h200", version="0.5.6", available_kv_gib=50)
    f = pool(V32, "h200", version="0.5.6", available_kv_gib=50, block_size=64, kv_cache_dtype="bfloat16")
    assert f.kv_pool_tokens == 685_440


def test_gpt_oss_hybrid_swa_split_is_stated_beside_the_whole_pool() -> None:
    """gpt-oss-20b: 24 layers (12 sliding, 12 full), 8 KV heads × 64: cell 8 × 64 × 2 × 2 × 24 =
    49,152 B; 10 GiB // 49,152 = 218,453 tokens (the pool with hybrid SWA memory off, as SGLang
    runs it with the triton_kernel MoE backend). With it on, set_num_token_hybrid (0.5.2-0.5.6):
    full = int(218,453 × 24 / (0.8 × 12 + 12)) = int(5,242,872 / 21.6) = 242,725 and
    swa = int(242,725 × 0.8) = 194,180."""
    f = pool(RAW / "openai__gpt-oss-20b.json", version="0.5.5", available_kv_gib=10)
    assert f.kv_pool_tokens == 218_453
    assert any("full_layer_tokens=242725, swa_layer_tokens=194180" in n for n in f.notes)
    later = pool(RAW / "openai__gpt-oss-20b.json", version="0.5.7", available_kv_gib=10)
    assert not any("full_layer_tokens" in n for n in later.notes)
