"""vLLM's page-size unification on Gemma-4 (google/gemma-4-26B-A4B as published), release by release.

Every expected figure is worked by hand in the comment above its test from the vLLM code named
there (read in the released wheels: 0.11.2, 0.12.0, 0.18.1, 0.19.0-0.34.0), never taken from
slotdiff's output.

The config: 30 layers, 25 sliding (window 1,024; head_dim 256, 8 KV heads) and 5 global
(global_head_dim 512, num_global_key_value_heads 2, attention_k_eq_v: vLLM's gemma4.py still
caches K and V, the K weights loaded into both). bf16 cache, block 16 (CUDA default; Triton or
FlashAttention on an H100 with a bf16 cache). Bytes a token, per layer, on one rank:
  sliding 2 · 8 · 256 · 2 B = 8,192 → page 16 × 8,192 = 131,072 B
  global  2 · 2 · 512 · 2 B = 4,096 → page 16 × 4,096 =  65,536 B
unify_kv_cache_spec_page_size (kv_cache_utils.py 0.12-0.32, kv_cache_planning.py 0.33-0.34):
131,072 % 65,536 = 0, ratio 2 → the global layers' block becomes 16 × 2 = 32, page 32 × 4,096 =
131,072. _get_kv_cache_groups_uniform_page_size: 25 ≥ 1.5 × 5, so group size 5 (the smallest
type's count): sliding 5 groups of 5, global 1 group of 5 → 6 groups, no padding layer.
get_kv_cache_config_from_groups: num_blocks = K // (5 × 131,072 = 655,360).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.gpus import gpu
from slotdiff.cost.memory import MemoryPlan
from slotdiff.cost.weights import effective_format
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.kvspec import kv_layout
from slotdiff.deploy.vllm import EngineArgs, EngineFit, vllm_fit
from slotdiff.deploy.vllm_profile import concurrent_batches

from conftest import RAW

K40 = 40 * 2**30  # 42,949,672,960 B → 42,949,672,960 // 655,360 = 65,536 blocks exactly


def _config(**text: Any) -> dict[str, Any]:
    config = json.loads((RAW / "google__gemma-4-26B-A4B.json").read_text())
    config["text_config"] |= text
    return config


def _fit(version: str, gpu_id: str = "h100-sxm", **args: Any) -> EngineFit:
    arch = load(_config()).arch
    kv = "float8_e4m3fn" if args.get("kv_cache_dtype") == "fp8" else "bfloat16"
    plan = MemoryPlan(arch, effective_format(arch, None)[0], kv)
    engine = EngineArgs(version=version, max_model_len=32_768, available_kv_gib=40.0, **args)
    return vllm_fit(arch, plan, gpu(gpu_id), engine)


# vLLM 0.19.0, TP 1, K = 40 GiB, max_model_len 32,768, max_num_batched_tokens 8,192 (one batch in
# flight before 0.26):
#   num_blocks 65,536 (above)
#   a request (get_max_concurrency_for_kv_cache_config: Σ over groups of blocks at the group's block):
#     sliding SlidingWindowSpec: cdiv(min(1,024 − 1 + 8,192 = 9,215, 32,768), 16) + 1 = 576 + 1 = 577,
#       × 5 groups = 2,885
#     global FullAttentionSpec at block 32: cdiv(32,768, 32) = 1,024
#     → 3,909 blocks; concurrency 65,536 / 3,909 = 16.765
#   token line (_report_kv_cache_config, to 0.20.0): num_blocks // 6 groups × min block 16 =
#     10,922 × 16 = 174,752
#   check_enough_kv_cache_memory: 5 layers a group × 131,072 × (2,885 + 1,024) =
#     (25 × 577 + 5 × 1,024) × 131,072 = 19,545 × 131,072 = 2,561,802,240 B
def test_vllm_0_19_evens_gemma4_pages_by_doubling_the_global_block() -> None:
    arch = load(_config()).arch
    v = parse_version("0.19.0")
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", v, None, 16)
    assert {(s.kind, s.page_bytes, s.block or kv.block_size) for s in kv.specs} == {
        ("sliding", 131_072, 16),
        ("full", 131_072, 32),
    }
    assert (kv.group_size, kv.num_groups, kv.padded_layers) == (5, 6, 0)
    assert kv.num_blocks(K40) == 65_536
    assert kv.blocks_per_request(32_768, 8_192) == 3_909
    conc = kv.concurrency(65_536, 32_768, 8_192, v)
    assert conc == pytest.approx(65_536 / 3_909)
    assert kv.tokens_line(65_536, conc, 32_768, v) == 174_752
    assert kv.needed_bytes(32_768, 8_192) == 2_561_802_240


# The same pool through `fit --engine vllm` at the default release (0.34.0; V2 runner, async
# scheduling: max_concurrent_batches = PP + 1 = 2, so a window reserves max_in_flight_tokens =
# 2 × 8,192 = 16,384 tokens, VllmConfig.max_in_flight_tokens / SlidingWindowSpec
# .max_admission_blocks_per_request):
#   sliding cdiv(min(1,023 + 16,384 = 17,407, 32,768), 16) + 1 = 1,088 + 1 = 1,089, × 5 = 5,445
#   global cdiv(32,768, 32) = 1,024 → 6,469 blocks a request
#   concurrency 65,536 / 6,469 = 10.131; token line (get_kv_cache_capacity)
#   int(concurrency × 32,768) = int(2,147,483,648 / 6,469) = 331,965
# 0.25.1 (one batch): 3,909 as above → int(2,147,483,648 / 3,909) = int(549,369.06) = 549,369.
@pytest.mark.parametrize(
    ("version", "per_request", "tokens"), [("0.25.1", 3_909, 549_369), ("0.34.0", 6_469, 331_965)]
)
def test_vllm_fit_prices_gemma4(version: str, per_request: int, tokens: int) -> None:
    fit = _fit(version)
    assert fit.stages[0].blocks == 65_536
    assert fit.stages[0].to_dict()["group_block_sizes"] == [16] * 5 + [32]
    assert fit.max_concurrency == pytest.approx(65_536 / per_request)
    assert fit.kv_pool_tokens == tokens
    assert any("evens the layer types' pages to 131,072 B" in n for n in fit.notes)


# TP 8: sliding max(1, 8 // 8) = 1 KV head → 2 · 1 · 256 · 2 = 1,024 B a token, page 16,384;
# global max(1, 2 // 8) = 1 head (replicated) → 2 · 1 · 512 · 2 = 2,048, page 32,768. Now the
# sliding page is the smaller: 32,768 / 16,384 = 2, sliding block 32. At 0.19.0, 8,192 batched:
#   sliding cdiv(9,215, 32) + 1 = 288 + 1 = 289, × 5 = 1,445; global cdiv(32,768, 16) = 2,048
#   → 3,493 blocks a request; num_blocks = K // (5 × 32,768 = 163,840) = 262,144 at 40 GiB.
# TP 4: sliding 2 heads → 2 · 2 · 256 · 2 = 2,048, global 1 head → 2,048: pages already equal,
# nothing raised (block 16 for both).
def test_vllm_gemma4_unification_follows_the_tp_degree() -> None:
    arch = load(_config()).arch
    v = parse_version("0.19.0")
    tp8 = kv_layout(arch, arch.layers, 8, "bfloat16", v, None, 16)
    assert {(s.kind, s.page_bytes, s.block or 16) for s in tp8.kinds} == {
        ("sliding", 32_768, 32),
        ("full", 32_768, 16),
    }
    assert tp8.blocks_per_request(32_768, 8_192) == 3_493
    assert tp8.num_blocks(K40) == 262_144
    tp4 = kv_layout(arch, arch.layers, 4, "bfloat16", v, None, 16)
    assert {(s.page_bytes, s.block) for s in tp4.kinds} == {(32_768, 0)}


# A global page that does not divide the sliding one: num_global_key_value_heads 3 →
# 2 · 3 · 512 · 2 = 6,144 B a token, page 98,304; 131,072 % 98,304 = 32,768 ≠ 0.
#   0.19-0.23: unify_kv_cache_spec_page_size raises NotImplementedError → refused;
#   0.24-0.28: padded only where the backend's indexes_kv_by_block_stride → refused;
#   0.29 on: a non-MLA page is padded to 131,072 (page_size_padded), its block kept at 16:
#     global cdiv(32,768, 16) = 2,048; sliding (two batches in flight) 1,089 × 5 = 5,445
#     → 7,493 blocks a request; num_blocks still 40 GiB // (5 × 131,072) = 65,536.
# Before 0.12 get_kv_cache_groups raises NotImplementedError for any pages that differ.
@pytest.mark.parametrize(
    ("version", "match"),
    [
        ("0.11.2", "vLLM 0.11.2 cannot serve it.*NotImplementedError"),
        ("0.19.0", "vLLM 0.19.0 raises NotImplementedError"),
        ("0.23.0", "vLLM 0.23.0 raises NotImplementedError"),
        ("0.26.0", "vLLM 0.26.0 pads it only where.*indexes_kv_by_block_stride"),
    ],
)
def test_vllm_refuses_pages_it_cannot_even(version: str, match: str) -> None:
    arch = load(_config(num_global_key_value_heads=3)).arch
    with pytest.raises(SlotdiffError, match=match):
        kv_layout(arch, arch.layers, 1, "bfloat16", parse_version(version), None, 16)


def test_vllm_pads_a_page_that_does_not_divide_from_0_29() -> None:
    arch = load(_config(num_global_key_value_heads=3)).arch
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", parse_version("0.29.0"), None, 16)
    assert {(s.kind, s.page_bytes, s.padded, s.block) for s in kv.kinds} == {
        ("sliding", 131_072, 0, 0),
        ("full", 131_072, 98_304, 0),
    }
    assert kv.num_blocks(K40) == 65_536
    assert kv.blocks_per_request(32_768, 16_384) == 7_493


# The registry (model_executor/models/registry.py) first lists Gemma4ForCausalLM and
# Gemma4ForConditionalGeneration in 0.19.0; the 0.18.1 wheel has neither.
def test_vllm_before_0_19_does_not_serve_gemma4() -> None:
    with pytest.raises(
        SlotdiffError, match=r"vLLM 0\.18\.1 does not serve gemma4 models \(first served in 0\.19\.0\)"
    ):
        _fit("0.18.1")


# Where FlashAttention 4 is built, Gemma4Config forces it on every layer, and its kernels then
# pick the block: 128 for 256-wide heads on Blackwell (0.29+), 64 for 512-wide heads with an fp8
# cache on Hopper (0.31+). Refused without --block-size; with --block-size 128 on a B200 every
# figure follows from it: sliding page 128 × 8,192 = 1,048,576, global block 256.
def test_vllm_gemma4_kernel_chosen_block_is_refused_without_the_flag() -> None:
    with pytest.raises(SlotdiffError, match="FlashAttention 4"):
        _fit("0.29.0", "b200")
    with pytest.raises(SlotdiffError, match="fp8 cache on Hopper"):
        _fit("0.31.0", kv_cache_dtype="fp8")
    assert _fit("0.28.0", "b200").block_size == 16
    fit = _fit("0.34.0", "b200", block_size=128)
    assert fit.stages[0].kv.page == 1_048_576
    assert fit.stages[0].to_dict()["group_block_sizes"] == [128] * 5 + [256]


# VllmConfig.max_concurrent_batches (0.26-0.33): async scheduling on by default; the V2 runner
# keeps PP + 1 batches, the V1 runner 2 without PP, else PP; 0.34 (V2 only) PP + 1. Before 0.26 a
# window reserves max_num_batched_tokens alone. Gemma-4 is MoE: V1 runner in 0.26-0.28 (V2 for
# MoE only from 0.29).
@pytest.mark.parametrize(
    ("version", "pp", "batches"),
    [
        ("0.25.1", 2, 1),
        ("0.26.0", 1, 2),
        ("0.26.0", 2, 2),
        ("0.26.0", 4, 4),
        ("0.29.0", 2, 3),
        ("0.34.0", 1, 2),
    ],
)
def test_vllm_windows_reserve_the_batches_in_flight(version: str, pp: int, batches: int) -> None:
    arch = load(_config()).arch
    assert concurrent_batches(arch, parse_version(version).parts, pp) == batches


def test_a_gpu_file_of_blackwell_or_hopper_is_judged_by_its_architecture() -> None:
    """A GPU described in a file is not a preset id: its architecture decides. Hopper is sm90
    (the fp8 rule applies); Blackwell's compute capability (sm100 FA4's 128-token pages vs sm120's
    16) is not in the file, so Gemma-4's default block is refused from 0.29 unless --block-size."""
    arch = load(_config()).arch
    b200, h100 = gpu("b200"), gpu("h100-sxm")
    mine = {
        "blackwell": replace(b200, id="my-b200", name="my B200"),
        "hopper": replace(h100, id="my-h100", name="my H100"),
    }
    engine = EngineArgs(version="0.29.0", max_model_len=32_768, available_kv_gib=40.0)
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    with pytest.raises(SlotdiffError, match="compute capability"):
        vllm_fit(arch, plan, mine["blackwell"], engine)
    fp8 = MemoryPlan(arch, effective_format(arch, None)[0], "float8_e4m3fn")
    with pytest.raises(SlotdiffError, match="fp8 cache on Hopper"):
        vllm_fit(arch, fp8, mine["hopper"], replace(engine, version="0.31.0", kv_cache_dtype="fp8"))
