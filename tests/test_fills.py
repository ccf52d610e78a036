"""Each family's slot fills, asserted against facts in its published config and model card.

Expected values come from the configs (and the seeds' slot table), never from slotdiff's own
output: e.g. Llama-3 has rope_theta 500000, 32 query heads and 8 KV heads.
"""

from __future__ import annotations

import pytest

from slotdiff.analysis.analyze import load

from conftest import raw


def fills(repo_id: str):  # type: ignore[no-untyped-def]
    return load(raw(repo_id)).fills


def test_gpt2_is_the_baseline_everywhere() -> None:
    f = fills("openai-community/gpt2")
    assert f["embedding.table"].size("vocab") == 50257
    assert f["position.encoding"].kind == "learned" and f["position.encoding"].size("rows") == 1024
    assert f["attention.kv"].kind == "mha" and f["attention.kv"].size("n_heads") == 12
    assert f["attention.range"].kind == "full"
    assert f["attention.mixer"].kind == "softmax"
    assert f["attention.qk_norm"].kind == "none"
    assert f["attention.bias"].kind == "qkv+out"
    assert f["ffn.activation"].kind == "gelu" and not f["ffn.activation"].attr("gated")
    assert f["ffn.activation"].size("d_ff") == 4 * 768
    assert f["ffn.experts"].kind == "dense"
    assert f["ffn.bias"].kind == "bias"
    assert f["norm.kind"].kind == "layernorm" and f["norm.kind"].attr("placement") == "pre"
    assert f["head.tying"].kind == "tied"
    assert f["objective.target"].kind == "next-token"
    assert f["decoding.steps"].kind == "one-token"
    assert f["precision.weights"].kind == "fp32"
    assert f["modality.input"].kind == "text"


@pytest.mark.parametrize(
    "repo", ["meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B"]
)
def test_llama3(repo: str) -> None:
    f = fills(repo)
    pos = f["position.encoding"]
    assert pos.kind == "rope" and pos.size("theta") == 500000
    kv = f["attention.kv"]
    assert kv.kind == "gqa" and kv.size("n_kv_heads") == 8
    assert f["ffn.activation"].kind == "swiglu"
    assert f["norm.kind"].kind == "rmsnorm"
    assert f["head.tying"].kind == "untied"
    assert f["attention.bias"].kind == "none"
    assert f["ffn.bias"].kind == "none"


def test_llama31_rope_scaling() -> None:
    assert fills("meta-llama/Llama-3.1-8B")["position.encoding"].attr("scaling") == "llama3"
    assert fills("meta-llama/Meta-Llama-3-8B")["position.encoding"].attr("scaling") is None


def test_llama32_tied() -> None:
    # Llama-3.2-1B/3B configs set tie_word_embeddings true.
    assert fills("meta-llama/Llama-3.2-1B")["head.tying"].kind == "tied"
    assert fills("meta-llama/Llama-3.2-3B")["head.tying"].kind == "tied"


def test_llama2_7b_is_mha() -> None:
    assert fills("meta-llama/Llama-2-7b-hf")["attention.kv"].kind == "mha"


def test_mistral_sliding_window() -> None:
    rng = fills("mistralai/Mistral-7B-v0.1")["attention.range"]
    assert rng.kind == "sliding" and rng.size("window") == 4096
    # v0.3 sets sliding_window null: full attention.
    assert fills("mistralai/Mistral-7B-Instruct-v0.3")["attention.range"].kind == "full"


def test_gemma2() -> None:
    f = fills("google/gemma-2-9b")
    rng = f["attention.range"]
    assert rng.kind == "interleave" and rng.size("window") == 4096
    assert rng.size("local_layers") == rng.size("global_layers") == 21  # 42 layers alternate
    assert f["norm.kind"].attr("placement") == "sandwich"
    assert f["head.tying"].kind == "tied" and f["head.tying"].size("softcap") == 30.0
    assert f["embedding.table"].attr("scaled")
    assert f["ffn.activation"].kind == "geglu"


@pytest.mark.parametrize("repo", ["Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", "Qwen/Qwen3-30B-A3B"])
def test_qwen3_qk_norm(repo: str) -> None:
    assert fills(repo)["attention.qk_norm"].kind == "qk-norm"


def test_qwen25_qkv_bias_only() -> None:
    assert fills("Qwen/Qwen2.5-7B")["attention.bias"].kind == "qkv"


def test_qwen3_moe() -> None:
    ex = fills("Qwen/Qwen3-30B-A3B")["ffn.experts"]
    assert ex.kind == "moe" and ex.size("experts") == 128 and ex.size("top_k") == 8
    assert not ex.attr("shared")


def test_mixtral_moe() -> None:
    ex = fills("mistralai/Mixtral-8x7B-v0.1")["ffn.experts"]
    assert ex.kind == "moe" and ex.size("experts") == 8 and ex.size("top_k") == 2


def test_deepseek_v3() -> None:
    f = fills("deepseek-ai/DeepSeek-V3")
    kv = f["attention.kv"]
    assert kv.kind == "mla"
    assert kv.size("kv_lora_rank") == 512 and kv.size("qk_rope_head_dim") == 64
    ex = f["ffn.experts"]
    assert ex.kind == "moe" and ex.size("experts") == 256 and ex.size("top_k") == 8
    assert ex.size("shared_experts") == 1 and ex.attr("dense_first")
    assert ex.size("moe_layers") == 61 - 3  # first_k_dense_replace 3
    assert f["objective.target"].kind == "mtp" and f["objective.target"].size("mtp_modules") == 1
    assert f["decoding.steps"].kind == "mtp-draft"
    assert f["precision.weights"].kind == "fp8-block"


def test_deepseek_v32_sparse_attention() -> None:
    rng = fills("deepseek-ai/DeepSeek-V3.2")["attention.range"]
    assert rng.kind == "sparse" and rng.size("index_topk") == 2048


def test_deepseek_v2_lite_full_q_projection() -> None:
    kv = fills("deepseek-ai/DeepSeek-V2-Lite")["attention.kv"]
    assert kv.kind == "mla" and kv.size("q_lora_rank") is None


def test_llava_modality() -> None:
    mod = fills("llava-hf/llava-1.5-7b-hf")["modality.input"]
    assert mod.kind == "vision-tokens"
    assert "clip_vision_model" in mod.detail


def test_evidence_names_the_keys() -> None:
    kv = fills("meta-llama/Meta-Llama-3-8B")["attention.kv"]
    ev = dict(kv.evidence)
    assert ev["num_key_value_heads"] == 8 and ev["num_attention_heads"] == 32


def defaults(name: str):  # type: ignore[no-untyped-def]
    from conftest import DEFAULTS

    return load(DEFAULTS / name).fills


def test_gpt_oss() -> None:
    # config: layer_types alternate sliding/full, sliding_window 128, quant_method mxfp4;
    # the model card: attention sinks, 32 experts top-4.
    f = fills("openai/gpt-oss-20b")
    rng = f["attention.range"]
    assert rng.kind == "interleave" and rng.size("window") == 128 and rng.attr("sinks")
    assert rng.size("local_layers") == rng.size("global_layers") == 12
    assert f["precision.weights"].kind == "mxfp4"
    assert f["ffn.experts"].size("experts") == 32 and f["ffn.experts"].size("top_k") == 4


def test_llama4_scout() -> None:
    # config: attention_chunk_size 8192; transformers' default no_rope_layers puts NoPE on
    # every 4th layer (48 / 4 = 12); 16 experts top-1 plus a shared expert.
    f = fills("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    rng = f["attention.range"]
    assert rng.kind == "chunked" and rng.size("chunk") == 8192 and rng.size("chunked_layers") == 36
    assert f["position.encoding"].attr("nope_layers")
    ex = f["ffn.experts"]
    assert ex.kind == "moe" and ex.size("experts") == 16 and ex.size("top_k") == 1 and ex.attr("shared")
    assert f["modality.input"].kind == "vision-tokens"


def test_qwen3_next_hybrid() -> None:
    # config: full_attention_interval 4 over 48 layers → 12 attention + 36 linear layers.
    mixer = fills("Qwen/Qwen3-Next-80B-A3B-Thinking")["attention.mixer"]
    assert mixer.kind == "linear-hybrid"
    assert mixer.size("recurrent_layers") == 36 and mixer.size("attention_layers") == 12


def test_jamba_and_mamba_ssm_layers() -> None:
    # Jamba: attn_layer_period 8, offset 4 → 4 attention layers of 32, the rest Mamba.
    j = defaults("jamba.json")["attention.mixer"]
    assert j.kind == "ssm-hybrid" and j.size("attention_layers") == 4 and j.size("recurrent_layers") == 28
    m = defaults("mamba.json")
    assert m["attention.mixer"].kind == "ssm" and m["attention.kv"].kind == "none"


def test_nemotron_h_pattern() -> None:
    # hybrid_override_pattern: 23 'M' (Mamba-2), 6 '*' (attention), 23 'E' (MoE).
    f = fills("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    pattern = load(raw("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")).raw.data["hybrid_override_pattern"]
    assert f["attention.mixer"].size("recurrent_layers") == pattern.count("M") == 23
    assert f["attention.mixer"].size("attention_layers") == pattern.count("*") == 6
    assert f["ffn.experts"].size("moe_layers") == pattern.count("E") == 23


def test_vision_injection_kinds() -> None:
    # Qwen2-VL: image tokens in the sequence with M-RoPE; Llama-3.2-Vision: cross-attention
    # layers at cross_attention_layers (8 of 40).
    qvl = defaults("qwen2_vl.json")
    assert qvl["modality.input"].kind == "vision-tokens" and qvl["position.encoding"].kind == "mrope"
    mll = defaults("mllama.json")
    assert mll["modality.input"].kind == "vision-cross-attention"
    assert "8 cross-attention layers" in mll["modality.input"].detail
