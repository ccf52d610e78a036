"""Training activations against what torch really keeps for backward, on tiny real copies.

tests/oracle/saved.py runs one training forward (labels, loss) of a tiny copy of a real
config built by transformers, under ``torch.autograd.graph.saved_tensors_hooks``, and sums
the bytes of every saved tensor's storage (views and shared storage once, parameters left
out). slotdiff predicts the same figure from the tiny config alone. The families: dense GQA
(Llama-3-8B), MHA with LayerNorm, GELU and dropout 0.1 (GPT-2), MoE top-2 (Mixtral), MoE with
QK-norm (Qwen3-30B-A3B), MLA with shared experts and a dense first layer (DeepSeek-V2-Lite),
sandwich norms and soft-capping (Gemma-2).

Attention kernels on CPU: ``eager`` keeps the s × s softmax (no flash); torch's SDPA on CPU
runs a flash kernel (``_scaled_dot_product_flash_attention_for_cpu``: q, k, v, out,
logsumexp; checked below) where it applies (equal head dims, no dropout); elsewhere
(MLA's 192/128 head dims, GPT-2's attention dropout, Gemma-2) the stand-in of
tests/oracle/saved.py computes attention by the math path and saves what a flash kernel
saves. ``fused`` kernels swap transformers' Python RMSNorm and tanh-GELU for stand-ins that
save what Apex / Transformer Engine save; ``transformers`` runs the modules as written.
Dropout always runs as ``native_dropout`` (CUDA's path: a 1-byte mask).
"""

from __future__ import annotations

from functools import cache

import pytest

torch = pytest.importorskip("torch")

from slotdiff.analysis.analyze import load  # noqa: E402
from slotdiff.train.activations import activations  # noqa: E402
from slotdiff.train.dropout import dropout_of  # noqa: E402
from slotdiff.train.setup import TrainSetup  # noqa: E402

from conftest import raw  # noqa: E402
from oracle import cache as oracle_cache  # noqa: E402
from oracle import hf_oracle, saved  # noqa: E402

# The brief asks for 10 %; the accounting lands within 0.2 % on every case, so a drift of a
# few tensors fails well before that.
TOLERANCE = 0.02

GQA = {"hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64}
FAMILIES = {
    "llama": ("meta-llama/Meta-Llama-3-8B", {**GQA, "intermediate_size": 1536, "vocab_size": 2048}),
    "gpt2": ("openai-community/gpt2", {"n_inner": 3072, "vocab_size": 2048}),
    "mixtral": ("mistralai/Mixtral-8x7B-v0.1", {**GQA, "intermediate_size": 512, "vocab_size": 2048}),
    "qwen3moe": ("Qwen/Qwen3-30B-A3B", {**GQA, "moe_intermediate_size": 256, "vocab_size": 2048}),
    # MLA geometry kept whole (16 heads, kv_lora 512, nope 128 / rope 64, v 128; hidden 2048)
    "deepseek": (
        "deepseek-ai/DeepSeek-V2-Lite",
        {"intermediate_size": 1024, "moe_intermediate_size": 256, "vocab_size": 2048},
    ),
    "gemma2": (
        "google/gemma-2-2b",
        {**GQA, "intermediate_size": 1024, "vocab_size": 2048, "sliding_window": 32},
    ),
}
LLAMA_ALL = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
ALL_LINEAR = ("q", "k", "v", "o", "gate", "up", "down")
MLA_ALL = {"q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

# id: (family, attention, kernels, checkpointing, dtype, batch, lora (rank, modules, targets))
CASES = {
    "llama eager": ("llama", "eager", "transformers", "none", "bfloat16", 2, None),
    "llama flash fused": ("llama", "sdpa", "fused", "none", "bfloat16", 2, None),
    "llama flash transformers": ("llama", "sdpa", "transformers", "none", "bfloat16", 2, None),
    "llama eager fp32": ("llama", "eager", "transformers", "none", "float32", 2, None),
    "llama full recompute": ("llama", "sdpa", "fused", "full", "bfloat16", 2, None),
    "llama selective": ("llama", "selective", "transformers", "none", "bfloat16", 2, None),
    "llama lora q,v": (
        "llama",
        "sdpa",
        "fused",
        "none",
        "bfloat16",
        2,
        (8, {"q_proj", "v_proj"}, ("q", "v")),
    ),
    "llama lora all-linear eager": (
        "llama",
        "eager",
        "transformers",
        "none",
        "bfloat16",
        2,
        (8, LLAMA_ALL, ALL_LINEAR),
    ),
    "gpt2 eager (dropout 0.1)": ("gpt2", "eager", "transformers", "none", "bfloat16", 2, None),
    "gpt2 flash fused": ("gpt2", "standin", "fused", "none", "bfloat16", 2, None),
    "gpt2 full recompute": ("gpt2", "standin", "fused", "full", "bfloat16", 2, None),
    "mixtral eager": ("mixtral", "eager", "transformers", "none", "bfloat16", 2, None),
    "mixtral flash fused": ("mixtral", "sdpa", "fused", "none", "bfloat16", 2, None),
    "qwen3moe flash fused": ("qwen3moe", "sdpa", "fused", "none", "bfloat16", 2, None),
    "qwen3moe lora attention": (
        "qwen3moe",
        "sdpa",
        "fused",
        "none",
        "bfloat16",
        2,
        (8, {"q_proj", "k_proj", "v_proj", "o_proj"}, ("q", "k", "v", "o")),
    ),
    "deepseek eager": ("deepseek", "eager", "transformers", "none", "bfloat16", 2, None),
    "deepseek eager batch 1": ("deepseek", "eager", "transformers", "none", "bfloat16", 1, None),
    "deepseek flash fused": ("deepseek", "standin", "fused", "none", "bfloat16", 2, None),
    "deepseek lora all-linear": (
        "deepseek",
        "standin",
        "fused",
        "none",
        "bfloat16",
        2,
        (8, MLA_ALL, ALL_LINEAR),
    ),
    "gemma2 eager": ("gemma2", "eager", "transformers", "none", "bfloat16", 2, None),
    "gemma2 flash fused": ("gemma2", "standin", "fused", "none", "bfloat16", 2, None),
}
SEQ = 80  # not a head_dim, so an s × s tensor is told apart from the RoPE tables
LAYERS = 2  # DeepSeek: one dense and one MoE layer; Gemma-2: one sliding and one global


@cache
def tiny(family: str) -> tuple:
    repo, overrides = FAMILIES[family]
    return hf_oracle.tiny_text_config(hf_oracle.load_config(raw(repo)), LAYERS, overrides)


def _to_json(m: dict) -> dict:
    s = m["saved"]
    return {**m, "saved": {"total": s.total, "by_module": s.by_module, "tensors": s.tensors}}


def _from_json(m: dict) -> dict:
    s = m["saved"]
    tensors = [(name, tuple(shape), dtype, size) for name, shape, dtype, size in s["tensors"]]
    return {**m, "saved": saved.Saved(s["total"], s["by_module"], tensors)}


@cache
def measured(case: str) -> dict:
    """saved.measure_training on the case's tiny copy, kept by input digest (tests/oracle/cache.py)."""
    family, attention, kernels, checkpointing, dtype, batch, lora = CASES[case]
    repo, overrides = FAMILIES[family]
    backward = case == "deepseek lora all-linear"  # the saved tensors suffice (and LoRA trains)
    inputs = {
        "config": hf_oracle.load_config(raw(repo)),
        "overrides": overrides,
        "layers": LAYERS,
        "batch": batch,
        "seq": SEQ,
        "dtype": dtype,
        "attention": attention,
        "kernels": kernels,
        "checkpointing": checkpointing,
        "lora": [lora[0], sorted(lora[1])] if lora else None,
        "backward": backward,
    }
    return oracle_cache.cached(
        "measure_training",
        inputs,
        lambda: saved.measure_training(
            {},
            batch=batch,
            seq=SEQ,
            dtype=dtype,
            attention=attention,
            kernels=kernels,
            checkpointing=checkpointing,
            lora=lora[:2] if lora else None,
            tiny=tiny(family),
            backward=backward,
        ),
        _to_json,
        _from_json,
    )


def predicted(case: str) -> int:
    _, attention, kernels, checkpointing, dtype, batch, lora = CASES[case]
    model = load(measured(case)["tiny_config"])
    setup = TrainSetup(
        batch=batch,
        context=SEQ,
        dtype={"bfloat16": "bf16", "float32": "fp32"}[dtype],
        kernels=kernels,
        flash=attention in ("sdpa", "standin"),
        checkpointing="selective" if attention == "selective" else checkpointing,
        lora_rank=lora[0] if lora else None,
        lora_targets=lora[2] if lora else ALL_LINEAR,
    )
    return activations(model.arch, setup, dropout_of(model.raw.data, model.arch.text_path)).total


@pytest.mark.parametrize("case", list(CASES))
def test_activations_match_what_torch_saves(case: str) -> None:
    got = measured(case)["saved"].total
    ours = predicted(case)
    err = (ours - got) / got
    assert abs(err) < TOLERANCE, f"{case}: measured {got:,} B, predicted {ours:,} B ({err:+.2%})"


def test_cpu_sdpa_is_a_flash_kernel_and_eager_keeps_the_scores() -> None:
    """SDPA on CPU keeps no s × s tensor (q, k, v at KV heads, out, logsumexp); eager keeps it."""
    q, k = torch.randn(1, 4, 8, 16, requires_grad=True), torch.randn(1, 2, 8, 16, requires_grad=True)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
    assert type(out.grad_fn).__name__ == "ScaledDotProductFlashAttentionForCpuBackward0"
    flash = measured("llama flash transformers")["saved"].tensors
    eager = measured("llama eager")["saved"].tensors
    assert not [t for t in flash if t[1][-2:] == (SEQ, SEQ)]
    assert [t[2] for t in eager if t[1][-2:] == (SEQ, SEQ)] == ["float32", "bfloat16"] * LAYERS
    lse = [t[1] for t in flash if "self_attn" in t[0] and t[2] == "float32"]
    assert lse == [(2, 8, SEQ)] * LAYERS  # the logsumexp, [batch, heads, seq] in fp32


def test_flash_standin_gradients_match_eager_attention() -> None:
    """The stand-in is a real attention kernel: what it saves is enough for exact gradients."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 16, 32, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 2, 16, 32, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, 2, 16, 24, generator=gen, dtype=torch.float64, requires_grad=True)
    out, _ = saved.flash_attention(None, q, k, v, None, scaling=0.2)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), is_causal=True, scale=0.2
    ).transpose(1, 2)
    assert torch.allclose(out, ref)
    for g, r in zip(grads, torch.autograd.grad(ref.square().sum(), (q, k, v)), strict=True):
        assert torch.allclose(g, r)


def test_fused_rmsnorm_standin_gradients_match_transformers() -> None:
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    norm = LlamaRMSNorm(64)  # computes in fp32 whatever its input: compare in fp32
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 64, requires_grad=True)
    ref = torch.autograd.grad(norm(x).sin().sum(), (x, norm.weight))
    ours = saved._FusedRMSNorm.apply(x, norm.weight, norm.variance_epsilon, 0.0)
    for g, r in zip(torch.autograd.grad(ours.sin().sum(), (x, norm.weight)), ref, strict=True):
        assert torch.allclose(g, r, rtol=1e-4, atol=1e-5)


def test_full_checkpointing_keeps_each_layer_input() -> None:
    """transformers' gradient checkpointing (re-entrant) keeps one [batch, seq, hidden] tensor per
    decoder layer and nothing else inside the layers."""
    tensors = measured("llama full recompute")["saved"].tensors
    inside = [t for t in tensors if ".layers." in t[0] + "."]
    assert [(t[0], t[1]) for t in inside] == [(f"model.layers.{i}", (2, SEQ, 512)) for i in range(LAYERS)]
