"""slotdiff's vLLM pool model against vLLM's own code, release by release (the 2026-12 audit).

Every expected figure is worked by hand in the comment above its test from the vLLM formula
named there (file, function, release read from the released wheel), never taken from
slotdiff's output.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.gpus import gpu
from slotdiff.cost.memory import MemoryPlan
from slotdiff.cost.weights import effective_format
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.kvspec import kv_layout
from slotdiff.deploy.vllm import EngineArgs, vllm_fit

from conftest import RAW


def _gemma2(sliding: int, full: int):  # type: ignore[no-untyped-def]
    config = json.loads((RAW / "google__gemma-2-2b.json").read_text())
    config |= {
        "num_hidden_layers": sliding + full,
        "layer_types": ["sliding_attention"] * sliding + ["full_attention"] * full,
    }
    return load(config).arch


# vLLM v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size (0.9-0.11:
# _get_kv_cache_config_uniform_page_size): the group size is the smallest type's layer count,
# except that from 0.12 the largest type's count is taken when it is under 1.25× the smallest,
# and from 0.18 under 1.5×. Each type is cut into cdiv(n, size) groups; the last one is padded.
#   7 sliding + 6 full: ≤0.11 size 6 → sliding 2 groups (pad 5), full 1 → 3 groups, 5 padding;
#                       0.12 on: 7 < 7.5 → size 7 → 1 + 1 groups, full padded by 1.
#   8 sliding + 6 full: ≤0.17 size 6 (8 ≥ 7.5) → 2 + 1 groups, sliding padded by 4;
#                       0.18 on: 8 < 9 → size 8 → 1 + 1 groups, full padded by 2.
@pytest.mark.parametrize(
    ("sliding", "full", "version", "expected"),
    [
        (7, 6, "0.11.2", (6, 3, 5)),
        (7, 6, "0.12.0", (7, 2, 1)),
        (8, 6, "0.17.1", (6, 3, 4)),
        (8, 6, "0.18.0", (8, 2, 2)),
        (8, 6, "0.34.0", (8, 2, 2)),
    ],
)
def test_vllm_group_size_ratio_by_release(sliding: int, full: int, version: str, expected: tuple) -> None:
    arch = _gemma2(sliding, full)
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", parse_version(version), None, 16)
    assert (kv.group_size, kv.num_groups, kv.padded_layers) == expected


# vLLM v1/core/kv_cache_utils.py _report_kv_cache_config: from 0.20.1 the token line is
# int(max_concurrency × max_model_len); up to 0.20.0 it is num_blocks // groups × block.
# Llama-3.1-8B (one full group), block 16, max_model_len 10,001, 1,000 blocks:
#   blocks per request cdiv(10,001, 16) = 626; concurrency 1,000 / 626;
#   0.20.1: int(1,000 × 10,001 / 626) = int(15,976.04) = 15,976; 0.20.0: 1,000 × 16 = 16,000.
@pytest.mark.parametrize(("version", "tokens"), [("0.20.0", 16_000), ("0.20.1", 15_976), ("0.34.0", 15_976)])
def test_vllm_token_line_is_concurrency_times_length_from_0_20_1(version: str, tokens: int) -> None:
    arch = load(json.loads((RAW / "meta-llama__Llama-3.1-8B.json").read_text())).arch
    v = parse_version(version)
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", v, None, 16)
    conc = kv.concurrency(1000, 10_001, 8192, v)
    assert conc == pytest.approx(1000 / 626)
    assert kv.tokens_line(1000, conc, 10_001, v) == tokens


# vLLM 0.11+ DeepSeek-V3.2 (deepseek_v2.py Indexer → DeepseekV32IndexerCache.get_kv_cache_spec):
# every DSA layer has a second cache beside the latent, an MLAAttentionSpec of one head of
# index_head_dim + index_head_dim // 128 · 4 bytes (uint8: fp8 key + a float32 scale per 128),
# whatever --kv-cache-dtype. Both are FullAttentionSpecs, so they form one group
# (UniformTypeKVCacheSpecs) and num_blocks = K // Σ pages (get_kv_cache_config_from_groups).
# DeepSeek-V3.2: 61 layers, latent 512 + 64, index_head_dim 128 → indexer 128 + 4 = 132 B/token.
# Block 64 (sparse MLA). K = 40 GiB = 42,949,672,960 B; max_model_len 32,768 → 512 blocks/request.
#   fp8 (fp8_ds_mla, 656 B): (656 + 132) × 64 = 50,432 B a layer, × 61 = 3,076,352 B a block
#       → 13,961 blocks, 893,504 tokens, concurrency 13,961 / 512 = 27.27
#   bf16: (1,152 + 132) × 64 = 82,176 B, × 61 = 5,012,736 → 8,568 blocks, 548,352 tokens, 16.73
@pytest.mark.parametrize(
    ("kv_dtype", "page", "blocks"),
    [("float8_e4m3fn", 50_432, 13_961), ("bfloat16", 82_176, 8_568)],
)
def test_vllm_prices_the_dsa_indexer_key_cache(kv_dtype: str, page: int, blocks: int) -> None:
    arch = load(json.loads((RAW / "deepseek-ai__DeepSeek-V3.2.json").read_text())).arch
    v = parse_version("0.19.1")
    kv = kv_layout(arch, arch.layers, 1, kv_dtype, v, None, 64)
    assert {s.page_bytes for s in kv.specs} == {page}
    assert kv.num_blocks(40 * 2**30) == blocks
    conc = kv.concurrency(blocks, 32_768, 8192, v)
    assert conc == pytest.approx(blocks / 512)
    assert kv.tokens_line(blocks, conc, 32_768, v) == blocks * 64


# Layers that reuse another layer's top-k (index_topk_freq: deepseek_v2.py DeepseekV2MLAAttention
# _skip_topk; Mistral Large 4's "reuse" layers, MistralIndexerCache of the same size) build no
# indexer, so no key cache: their page is the latent's alone. The layers' pages then differ, but
# all are MLAAttentionSpecs: one group from 0.11, num_blocks = K // Σ pages.
# 4 layers of V3.2, the third reusing the second's selection, bf16, block 64: own 82,176 B,
# shared 1,152 × 64 = 73,728 B; Σ = 3 × 82,176 + 73,728 = 320,256 B a block;
# K = 1 GiB = 1,073,741,824 → 3,352 blocks (3,352 × 320,256 = 1,073,498,112).
def test_vllm_dsa_layers_without_an_indexer_share_one_group() -> None:
    arch = load(json.loads((RAW / "deepseek-ai__DeepSeek-V3.2.json").read_text())).arch
    layers = tuple(replace(s, index_shared=i == 2) for i, s in enumerate(arch.layers[:4]))
    kv = kv_layout(arch, layers, 1, "bfloat16", parse_version("0.26.0"), None, 64)
    assert sorted(s.page_bytes for s in kv.specs) == [73_728, 82_176, 82_176, 82_176]
    assert (kv.num_groups, kv.group_size) == (1, 4)
    assert kv.num_blocks(2**30) == 3_352


# Indexer caches slotdiff does not price for vLLM are refused, never left out of the pool:
# GLM-5-Next's pooled keys (glm5next/common/attention.py Glm5NextIndexerCache, tokens_per_state =
# index_kpool, and Glm5NextTailCache) and an indexer on softmax attention (MiniMax-M3's
# MiniMaxM3IndexerCache, whose dtype follows indexer_kv_dtype).
def test_vllm_refuses_indexer_caches_it_does_not_price() -> None:
    from test_glm5_next_constructs import CONFIG

    glm = load(CONFIG).arch
    with pytest.raises(SlotdiffError, match="index_kpool"):
        kv_layout(glm, glm.layers, 1, "bfloat16", parse_version("0.34.0"), None, 64)
    llama = load(json.loads((RAW / "meta-llama__Llama-3.1-8B.json").read_text())).arch
    layers = tuple(replace(s, sparse=True) for s in llama.layers)
    with pytest.raises(SlotdiffError, match="indexer on softmax attention"):
        kv_layout(llama, layers, 1, "bfloat16", parse_version("0.34.0"), None, 16)


# The hybrid block rule (attention block raised so its page holds a mamba page, then the mamba
# page padded to it): block = A · cdiv(mamba_page, A · attention bytes per token), kept where the
# configured block is already larger. A by release:
#   0.10-0.11 (models/config.py HybridAttentionMambaModelConfig): 16, MLA included;
#   0.12-0.19 (same function): 16, MLA 64 (kernel_block_alignment_size);
#   0.20 on (platforms/interface.py update_block_size_for_backend): max(the backend's smallest
#   kernel block, the configured block), MLA at least 128 from 0.27.
# Kimi Linear (transformers' defaults: KDA + MLA, latent 512 + 64 → 1,152 B a token in bf16,
# not split by TP). KDA page at TP 2: 1,085,440 B (test_recurrent_constructs).
#   0.11.2: 16 · cdiv(1,085,440, 16 · 1,152 = 18,432) = 16 · 59 = 944
#   0.19.1: 64 · cdiv(1,085,440, 73,728) = 64 · 15 = 960
#   0.24.0 on an H100 (FlashMLA's default block 64): max(16, 64) = 64 → 960
#   0.27.1: 128 · cdiv(1,085,440, 147,456) = 128 · 8 = 1,024
# Every page is then block × 1,152 (the KDA page padded to it).
@pytest.mark.parametrize(
    ("version", "block"), [("0.11.2", 944), ("0.19.1", 960), ("0.24.0", 960), ("0.27.1", 1024)]
)
def test_vllm_mla_hybrid_raises_the_latent_block(version: str, block: int) -> None:
    arch = load(json.loads((RAW.parent / "transformers-defaults" / "kimi_linear.json").read_text())).arch
    kv = kv_layout(arch, arch.layers, 2, "bfloat16", parse_version(version), None, 64)
    assert kv.block_size == block
    assert {s.page_bytes for s in kv.specs} == {block * 1152}


# A block set by --block-size is raised too when a mamba page does not fit ("override attention
# block size if it is too small, even if the user has explicitly set it"), and from 0.20 the flag's
# value is the alignment. Nemotron-3-Nano at TP 1: attention 2 · 2 KV heads · 128 · 2 B = 1,024 B a
# token; Mamba-2 page 2,134,016 B (test_recurrent_constructs).
#   0.19.1 default or --block-size 16: 16 · cdiv(2,134,016, 16,384) = 16 · 131 = 2,096
#   0.19.1 --block-size 4,096: 4,096 ≥ 2,096, kept
#   0.24.0 --block-size 256: 256 · cdiv(2,134,016, 262,144) = 256 · 9 = 2,304
@pytest.mark.parametrize(
    ("version", "flag", "block"),
    [("0.19.1", None, 2096), ("0.19.1", 16, 2096), ("0.19.1", 4096, 4096), ("0.24.0", 256, 2304)],
)
def test_vllm_hybrid_block_rule_overrides_a_small_flag(version: str, flag: int | None, block: int) -> None:
    arch = load(json.loads((RAW / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json").read_text())).arch
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", parse_version(version), flag, 16)
    assert kv.block_size == block
    assert {s.page_bytes for s in kv.specs} == {block * 1024}


# Prefix caching is on by default for hybrid models from vLLM 0.26 (ModelConfig.
# is_prefix_caching_supported), which sets mamba_cache_mode = "align" (models/config.py
# MambaModelConfig); a mamba page then holds 2 + num_prefill_checkpoint_blocks pages per request
# (kv_interface MambaSpec.max_memory_usage_bytes), the checkpoint block being Mamba-2's from 0.32
# (MambaMixer2.get_kv_cache_spec). Concurrency = blocks / Σ_groups cdiv(max_memory, page).
# Nemotron-3-Nano: 6 attention + 23 Mamba-2 layers → groups of 6: 1 attention + cdiv(23, 6) = 4
# mamba groups. Block 2,096 (test above); max_model_len 8,192 → attention cdiv(8,192, 2,096) = 4.
#   0.25.1: 4 + 4 × 1 = 8;  0.26.0: 4 + 4 × 2 = 12;  0.32.0: 4 + 4 × 3 = 16 blocks a request.
@pytest.mark.parametrize(("version", "per_request"), [("0.25.1", 8), ("0.26.0", 12), ("0.32.0", 16)])
def test_vllm_hybrid_mamba_pages_per_request_in_align_mode(version: str, per_request: int) -> None:
    arch = load(json.loads((RAW / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json").read_text())).arch
    v = parse_version(version)
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", v, None, 16)
    assert (kv.block_size, kv.group_size, kv.num_groups) == (2096, 6, 5)
    assert kv.blocks_per_request(8192, 8192) == per_request
    assert kv.concurrency(1000, 8192, 8192, v) == pytest.approx(1000 / per_request)


# An attention-free model keeps prefix caching off (is_prefix_caching_supported: attention_free
# → False), so its state stays one page a request in every release. A Gated DeltaNet hybrid from
# 0.33 adds a checkpoint block and aligns blocks to 64 only when its prefill runs on FlashInfer
# (qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend: by GPU and CUDA runtime): refused.
def test_vllm_align_mode_spares_attention_free_models_and_refuses_gdn_from_0_33() -> None:
    mamba = load(json.loads((RAW.parent / "transformers-defaults" / "mamba2.json").read_text())).arch
    kv = kv_layout(mamba, mamba.layers, 1, "bfloat16", parse_version("0.34.0"), None, 16)
    assert kv.blocks_per_request(8192, 8192) == 1
    qwen = load(json.loads((RAW / "Qwen__Qwen3.5-35B-A3B.json").read_text())).arch
    assert kv_layout(qwen, qwen.layers, 1, "bfloat16", parse_version("0.32.0"), None, 16)
    with pytest.raises(SlotdiffError, match="prefill-checkpoint"):
        kv_layout(qwen, qwen.layers, 1, "bfloat16", parse_version("0.33.0"), None, 16)


def test_vllm_serves_kimi_linear_with_the_generic_kda_and_no_checkpoint_pages() -> None:
    """From 0.29 vLLM's KDA exports prefill checkpoints only in Kimi-K3's and GLM-5-Next's own
    layers (kernel chosen at run time); Kimi Linear (KimiLinearForCausalLM) runs the generic
    KDA, which exports none: in align mode (0.26+) each KDA layer holds 2 pages a request and
    the 6 MLA layers cdiv(32,768, 1,920) = 18 blocks each (block 128 · cdiv(2,170,880 /
    (128 · 1,152)) = 1,920, the test above's rule). Kimi-K3's file is still refused."""
    arch = load(json.loads((RAW.parent / "transformers-defaults" / "kimi_linear.json").read_text())).arch
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", parse_version("0.34.0"), None, 16)
    kda = sum(1 for s in arch.layers if s.variant == "kda")
    mla = len(arch.layers) - kda
    assert kv.block_size == 1_920
    assert sum(s.blocks_per_request(kv.block_size, 32_768, 8_192) for s in kv.specs) == 2 * kda + 18 * mla
    k3 = load(json.loads((RAW / "moonshotai__Kimi-K3.json").read_text())).arch
    with pytest.raises(SlotdiffError, match="prefill-checkpoint"):
        kv_layout(k3, k3.layers, 1, "bfloat16", parse_version("0.34.0"), None, 16)


def test_vllm_without_prefix_caching_holds_one_recurrent_page() -> None:
    """--no-enable-prefix-caching: MambaModelConfig sets mamba_cache_mode "none", and
    MambaSpec.max_memory_usage_bytes is then one page a request (no speculative blocks), so
    Qwen3.5's gated-DeltaNet layers are sized at 0.34 where align mode is refused."""
    qwen = load(json.loads((RAW / "Qwen__Qwen3.5-35B-A3B.json").read_text())).arch
    kv = kv_layout(qwen, qwen.layers, 1, "bfloat16", parse_version("0.34.0"), None, 16, prefix_caching=False)
    mamba = [s for s in kv.specs if s.kind == "mamba"]
    assert mamba and all(s.blocks_per_request(kv.block_size, 8192, 8192) == 1 for s in mamba)
    with pytest.raises(SlotdiffError, match="--no-enable-prefix-caching"):
        kv_layout(qwen, qwen.layers, 1, "bfloat16", parse_version("0.34.0"), None, 16)


# From 0.26 a sliding window reserves blocks for every batch in flight, not one
# (SlidingWindowSpec.max_memory_usage_bytes over VllmConfig.max_in_flight_tokens =
# max_concurrent_batches × max_num_batched_tokens; async scheduling on by default: the V1 runner
# keeps 2 batches without PP, the V2 runner PP + 1). gpt-oss-20b (MoE: V1 runner at 0.26, V2 from
# 0.29): 12 sliding (window 128) + 12 full layers, 8 KV heads × 64 → 2 · 8 · 64 · 2 = 2,048 B a
# token, page 32,768; groups of 12 (2 groups). K = 40 GiB, max_model_len 32,768, 8,192 batched.
#   PP 1: blocks = 42,949,672,960 // (12 × 32,768) = 109,226; full cdiv(32,768, 16) = 2,048;
#     0.25.1: sliding cdiv(min(127 + 8,192 = 8,319, 32,768), 16) + 1 = 520 + 1 = 521 → 2,569
#     0.26.0 (2 batches): cdiv(127 + 16,384 = 16,511, 16) + 1 = 1,032 + 1 = 1,033 → 3,081
#   PP 2 at 0.34.0 (V2: 3 batches): each stage 6 + 6 layers, blocks = K // (6 × 32,768) = 218,453;
#     sliding cdiv(127 + 24,576 = 24,703, 16) + 1 = 1,544 + 1 = 1,545 → 3,593
@pytest.mark.parametrize(
    ("version", "pp", "blocks", "per_request"),
    [("0.25.1", 1, 109_226, 2_569), ("0.26.0", 1, 109_226, 3_081), ("0.34.0", 2, 218_453, 3_593)],
)
def test_vllm_sliding_windows_reserve_the_batches_in_flight(
    version: str, pp: int, blocks: int, per_request: int
) -> None:
    arch = load(json.loads((RAW / "openai__gpt-oss-20b.json").read_text())).arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    args = EngineArgs(version=version, max_model_len=32_768, available_kv_gib=40.0, pipeline_parallel_size=pp)
    fit = vllm_fit(arch, plan, gpu("h100-sxm"), args)
    assert min(s.blocks for s in fit.stages) == blocks
    assert fit.max_concurrency == pytest.approx(blocks / per_request)
