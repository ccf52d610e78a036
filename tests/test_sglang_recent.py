"""SGLang 0.5.11-0.5.23's KV pool checked against SGLang's own code (the PyPI wheels, read in
``deploy/sglang_recent.py``): every expected value below is worked by hand from the release's
formula, never taken from slotdiff's output.

0.5.11 moved the sizing into ``_profile_available_bytes`` and ``DefaultPoolConfigurator`` (0.5.16:
``mem_cache/kv_cache_configurator.py``) with 0.5.10's arithmetic: rest (GiB) = available − free ×
(1 − mem_fraction_static); tokens = int(rest × 2^30) // cell_size, floored to the page
(``calculate_pool_sizes``), then capped by --max-total-tokens and floored again
(``_apply_token_constraints``, ``calculate_pool_sizes_from_max_tokens``). ``fit`` pins ``free``
(--free-gib) and the weights (--weights-gib), so available = free − weights.
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
LLAMA3_8B = RAW / "meta-llama__Meta-Llama-3-8B.json"  # 32 layers, 8 KV heads, head_dim 4096 / 32 = 128
DEEPSEEK_V3 = RAW / "deepseek-ai__DeepSeek-V3.json"  # 61 MLA layers: kv_lora_rank 512 + rope 64
V32 = RAW / "deepseek-ai__DeepSeek-V3.2.json"  # the same latent, plus a DSA indexer of 128 on each layer
LLAVA = RAW / "llava-hf__llava-1.5-7b-hf.json"  # Llama-2-7B text: 32 layers, 32 KV heads × 128
GPT_OSS = RAW / "openai__gpt-oss-20b.json"  # 12 sliding-window + 12 full layers
QWEN3_NEXT = RAW / "Qwen__Qwen3-Next-80B-A3B-Thinking.json"  # Gated DeltaNet hybrid
LLAMA4 = RAW / "meta-llama__Llama-4-Scout-17B-16E-Instruct.json"  # 36 of 48 layers chunked (8,192)

RECENT = [f"0.5.{n}" for n in range(11, 24)]


def fit(path: Path, device: str = "h100-sxm", **flags: Any) -> EngineFit:
    arch = load(path).arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    base: dict[str, Any] = {"free_gib": 70, "weights_gib": 20, "max_model_len": 8192}
    args = EngineArgs(engine="sglang", **(base | flags))
    return sglang_fit(arch, plan, gpu(device), args)


# Llama-3-8B, free 70 GiB, weights 20 GiB, --mem-fraction-static 0.83, page 64:
# rest = (70 − 20) − 70 × 0.17 = 38.1 GiB; int(38.1 × 2^30) = 40,909,563,494 B.
# cell (get_num_kv_heads(tp) × (head_dim + v_head_dim) × layers × 2 B):
#   TP 1: 8 × (128 + 128) × 32 × 2 = 131,072 B → 40,909,563,494 // 131,072 = 312,115 → page 64: 312,064
#   TP 2: 4 heads, 65,536 B → 624,230 → 624,192
#   TP 16: max(1, 8 // 16) = 1 head (replicated), 16,384 B → 2,496,921 → 2,496,896
@pytest.mark.parametrize("version", RECENT)
@pytest.mark.parametrize(("tp", "tokens"), [(1, 312_064), (2, 624_192), (16, 2_496_896)])
def test_dense_gqa_pool_in_every_recent_release(version: str, tp: int, tokens: int) -> None:
    f = fit(
        LLAMA3_8B,
        version=version,
        tensor_parallel_size=tp,
        mem_fraction_static=0.83,
        block_size=64,
    )
    assert f.kv_pool_tokens == tokens
    assert f.block_size == 64


def test_max_total_tokens_caps_and_refloors() -> None:
    """--max-total-tokens 100,000 under the profiled 312,064: min(), then floored to page 64:
    100,000 // 64 = 1,562 pages → 99,968 tokens."""
    f = fit(LLAMA3_8B, version="0.5.23", mem_fraction_static=0.83, block_size=64, max_total_tokens=100_000)
    assert f.kv_pool_tokens == 99_968


# DeepSeek-V3 on an H200, TP 8, free 130 GiB, weights 90 GiB, --mem-fraction-static 0.9, page 1:
# rest = 40 − 130 × 0.1 = 27 GiB = 28,991,029,248 B. The MLA cell is the same on every rank:
#   bf16: (512 + 64) × 61 × 2 B = 70,272 B → 28,991,029,248 // 70,272 = 412,554
#     (70,272 × 412,554 = 28,990,994,688, remainder 34,560)
#   fp8:  (512 + 64) × 61 × 1 B = 35,136 B → 825,108 (a non-DSA model: calculate_mla_kv_cache_dim
#     is kv_lora_rank + qk_rope_head_dim whatever the dtype)
@pytest.mark.parametrize("version", ["0.5.11", "0.5.16", "0.5.17", "0.5.23"])
@pytest.mark.parametrize(("kv", "tokens"), [("auto", 412_554), ("fp8_e4m3", 825_108)])
def test_mla_pool(version: str, kv: str, tokens: int) -> None:
    f = fit(
        DEEPSEEK_V3,
        "h200",
        version=version,
        tensor_parallel_size=8,
        free_gib=130,
        weights_gib=90,
        mem_fraction_static=0.9,
        kv_cache_dtype=kv,
    )
    assert f.kv_pool_tokens == tokens


# DeepSeek-V3.2 (DSA), 50 GiB of rest pinned (--available-kv-gib), page 64 (passed: SGLang picks it
# by the config's architecture). Index keys: 128 + 128 // 128 × 4 = 132 B a layer (uint8).
#   bf16: (576 × 2 + 132) × 61 = 78,324 B; 53,687,091,200 // 78,324 = 685,449 → 685,440
#   fp8 (through 0.5.16, where the cell is still (kv_lora_rank + rope) × 1 B):
#     (576 + 132) × 61 = 43,188 B → 1,243,101 → 1,243,072
@pytest.mark.parametrize(
    ("version", "kv", "tokens"),
    [
        ("0.5.11", "bfloat16", 685_440),
        ("0.5.16", "fp8_e4m3", 1_243_072),
        ("0.5.17", "bfloat16", 685_440),
        ("0.5.23", "bfloat16", 685_440),
    ],
)
def test_dsa_pool(version: str, kv: str, tokens: int) -> None:
    f = fit(
        V32,
        "h200",
        version=version,
        tensor_parallel_size=8,
        available_kv_gib=50,
        mem_fraction_static=0.9,
        block_size=64,
        kv_cache_dtype=kv,
    )
    assert f.kv_pool_tokens == tokens


def test_shared_top_k_layers_priced_until_their_index_keys_are_elided(tmp_path: Path) -> None:
    """A GLM-5-style config (glm_moe_dsa, DeepSeek-V3.2's shapes) with index_topk_freq 2: layers
    2, 4, …, 60 reuse the previous top-k (30 of 61). Through 0.5.17 SGLang still keeps index keys
    on every layer: (576 × 2 + 132) × 61 = 78,324 B → 685,440 tokens (page 64, 50 GiB) as above;
    0.5.18 gives them none (dsa_layer_skips_topk): refused."""
    cfg = json.loads(V32.read_text()) | {
        "model_type": "glm_moe_dsa",
        "architectures": ["GlmMoeDsaForCausalLM"],
        "index_topk_freq": 2,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    flags: dict[str, Any] = {
        "available_kv_gib": 50,
        "mem_fraction_static": 0.9,
        "block_size": 64,
        "kv_cache_dtype": "bfloat16",
    }
    assert fit(path, "h200", version="0.5.17", **flags).kv_pool_tokens == 685_440
    with pytest.raises(SlotdiffError, match=r"SGLang 0\.5\.18 sizes shared-top-k layers"):
        fit(path, "h200", version="0.5.18", **flags)


def test_vision_model_priced_until_the_multimodal_reserve() -> None:
    """LLaVA-1.5 with --mem-fraction-static in 0.5.17: the text model's cell, 32 × 256 × 32 × 2 =
    524,288 B; 40,909,563,494 // 524,288 = 78,028 (page 1). 0.5.18 takes SGLANG_VLM_CACHE_SIZE_MB out
    of the rest for a multimodal model: refused."""
    assert fit(LLAVA, version="0.5.17", mem_fraction_static=0.83).kv_pool_tokens == 78_028
    with pytest.raises(SlotdiffError, match=r"not supported: SGLang 0\.5\.18 takes a multimodal reserve"):
        fit(LLAVA, version="0.5.18", mem_fraction_static=0.83)


def test_chunked_prefill_default_below_35_gib_from_0_5_20() -> None:
    """arg_groups/memory_hook.py: 2,048 below 35 GiB through 0.5.19, 4,096 from 0.5.20 (RTX 4090)."""
    assert fit(LLAMA3_8B, "rtx-4090", version="0.5.19", mem_fraction_static=0.8).batched_tokens == 2048
    assert fit(LLAMA3_8B, "rtx-4090", version="0.5.20", mem_fraction_static=0.8).batched_tokens == 4096


FRACTION = {"mem_fraction_static": 0.83}


@pytest.mark.parametrize(
    ("path", "flags", "reason"),
    [
        # the default fraction keeps 0.5.10's model-dependent (prefill) CUDA-graph reserve
        (LLAMA3_8B, {"version": "0.5.23"}, r"0\.5\.23.s default --mem-fraction-static .*\(prefill\)"),
        # a release after the newest read
        (LLAMA3_8B, {"version": "0.5.24"} | FRACTION, r"SGLang 0\.5\.24 is newer .*through 0\.5\.23"),
        # sliding-window layers: HybridSWAPoolConfigurator
        (GPT_OSS, {"version": "0.5.11"} | FRACTION, r"SGLang 0\.5\.11 may size sliding-window"),
        # chunked attention (Llama 4) is one of SGLang's hybrid-SWA architectures too
        (LLAMA4, {"version": "0.5.11"} | FRACTION, r"SGLang 0\.5\.11 may size sliding-window \(chunked"),
        # an fp8 DSA row sized by the DSA kernels from 0.5.17
        (
            V32,
            {"version": "0.5.17", "mem_fraction_static": 0.9, "block_size": 64, "kv_cache_dtype": "fp8_e4m3"},
            r"SGLang 0\.5\.17 sizes an fp8 DSA latent row",
        ),
        # the recurrent-state pool is read through 0.5.6 only
        (QWEN3_NEXT, {"version": "0.5.23"} | FRACTION, r"recurrent-state pool is read only through 0\.5\.6"),
    ],
)
def test_recent_refusals(path: Path, flags: dict[str, Any], reason: str) -> None:
    with pytest.raises(SlotdiffError, match=reason):
        fit(path, **flags)


GEMMA2_9B = RAW / "google__gemma-2-9b.json"  # 42 layers (21 sliding, window 4,096), 8 KV heads × 256
GEMMA3_1B = (
    FIXTURES / "conformance" / "published" / "google__gemma-3-1b-it.json"
)  # 26 layers, 1 KV head × 256


# Gemma 2/3: SGLang sets disable_hybrid_swa_memory for Gemma2ForCausalLM, Gemma3ForCausalLM and
# Gemma3ForConditionalGeneration in every release 0.5.11-0.5.23 (server_args.py, then
# arg_groups/overrides.py, then arg_groups/model_overrides/gemma2_gemma3.py), so is_hybrid_swa is
# false and DefaultPoolConfigurator sizes every layer, sliding or not, with the one cell.
# rest = (70 − 20) − 70 × 0.17 = 38.1 GiB; int(38.1 × 2^30) = 40,909,563,494 B; page 64:
#   Gemma 2 9B: 8 × (256 + 256) × 42 × 2 = 344,064 B; 40,909,563,494 // 344,064 = 118,901
#     (344,064 × 118,901 = 40,909,553,664, 9,830 B left) → 1,857 pages of 64 = 118,848;
#   Gemma 3 1B: 1 × (256 + 256) × 26 × 2 = 26,624 B; 40,909,563,494 // 26,624 = 1,536,567
#     (26,624 × 1,536,567 = 40,909,559,808, 3,686 B left) → 24,008 pages of 64 = 1,536,512.
@pytest.mark.parametrize("version", RECENT)
@pytest.mark.parametrize(("path", "tokens"), [(GEMMA2_9B, 118_848), (GEMMA3_1B, 1_536_512)])
def test_gemma_2_and_3_keep_the_default_pool(version: str, path: Path, tokens: int, tmp_path: Path) -> None:
    if path == GEMMA3_1B:  # the fixture holds the config under "config"
        config = json.loads(path.read_text(encoding="utf-8"))["config"]
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
    f = fit(path, version=version, block_size=64, kv_cache_dtype="bfloat16", **FRACTION)
    assert f.kv_pool_tokens == tokens
