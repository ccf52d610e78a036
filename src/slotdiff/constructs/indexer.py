"""The DSA lightning indexer (DeepSeek-V3.2, GLM-5, Mistral Large 4): the part of a sparse
attention layer that scores every cached token and picks ``index_topk`` of them. It sits on
an MLA layer (and, as MiniMax-M3's, on softmax attention); this module owns what it caches,
the FLOPs of its scores and its tensors on either."""

from __future__ import annotations

from ..schema.arch import Architecture, LayerSpec
from .tensor import Builder, need_int


def index_key_elements(arch: Architecture) -> int:
    """Elements a DSA indexer caches per token: its key, and with k-pools (``index_kpool``)
    also the token's gate score (index_head_dim) and a validity flag, packed beside it
    (GLM-5.3-Flash's indexer state)."""
    idim = arch.get("index_head_dim") or 0
    return idim + (idim + 1 if arch.get("index_kpool") else 0)


# The engines' indexer key caches quantize a key to fp8 with one float32 scale per this many
# elements (vLLM's DeepseekV32IndexerCache, SGLang's NSATokenToKVPool.quant_block_size).
INDEX_QUANT_BLOCK = 128


def engine_index_bytes(arch: Architecture) -> int:
    """Bytes per token an engine's DSA index-key cache keeps for one indexer: the key in fp8
    and a float32 scale per 128 elements, ``index_head_dim + index_head_dim // 128 · 4``
    uint8, whatever the KV cache dtype."""
    idim = arch.get("index_head_dim") or 0
    return idim + idim // INDEX_QUANT_BLOCK * 4


def vllm_index_bytes(arch: Architecture, layer: LayerSpec) -> int:
    """``engine_index_bytes`` on a layer with its own indexer (vLLM 0.11 on); none on a layer
    that reuses another's selection."""
    return engine_index_bytes(arch) if layer.sparse and not layer.index_shared else 0


def own_index_elements(arch: Architecture, layer: LayerSpec) -> int:
    """Index-key elements a layer caches per token: its own indexer's, none where it reads
    another layer's selection (``index_shared``) or has no indexer."""
    return index_key_elements(arch) if layer.sparse and not layer.index_shared else 0


def dsa_indexer(b: Builder, n: int, q_in: int) -> None:
    """``n`` DSA lightning indexers (DeepSeek-V3.2 as transformers builds it): index-head queries
    from ``q_in`` (the query LoRA bottleneck, else the hidden state), one index key per token
    with its LayerNorm, and per-head weights; ``indexer_input_norm`` adds a LayerNorm on the
    query side's input and ``softmax_scaling`` a scale and bias per index head (Mistral Large 4)."""
    a = b.arch
    d = need_int(a, "d_model")
    ih, idim = need_int(a, "index_n_heads"), need_int(a, "index_head_dim")
    mod = "model.layers.0.self_attn.indexer"
    slot = "attention"
    b.add("attention/indexer.wq_b", ih * idim, q_in, n, "linear", f"{mod}.wq_b", slot)
    b.add("attention/indexer.wk", idim, d, n, "linear", f"{mod}.wk", slot)
    b.add("attention/indexer.k_norm", 2 * idim, 1, n, "vector", f"{mod}.k_norm", slot)
    b.add("attention/indexer.weights", ih, d, n, "linear", f"{mod}.weights_proj", slot)
    kpool = a.get("index_kpool") or 0
    if kpool:  # k-pool compression: a position table per pool slot and a gate from d (GLM-5.3-Flash)
        b.add(
            "attention/indexer.kpool_ape",
            kpool * idim,
            1,
            n,
            "vector",
            f"{mod}.index_kpool_compress_ape",
            slot,
        )
        b.add("attention/indexer.kpool_gate", idim, d, n, "linear", f"{mod}.index_kpool_compress_gate", slot)
    if a.get("indexer_input_norm"):
        b.add("attention/indexer.q_input_norm", 2 * q_in, 1, n, "vector", f"{mod}.q_input_norm", slot)
    if a.get("softmax_scaling"):
        b.add("attention/indexer.softmax_scaling", 2 * ih, 1, n, "vector", f"{mod}.softmax_scaling", slot)


def softmax_indexer(b: Builder, n: int, mod: str) -> None:
    """``n`` lightning indexers on softmax-attention layers (MiniMax-M3): index-head queries
    and one index key per token from the hidden state, each RMS-normed."""
    a = b.arch
    d = need_int(a, "d_model")
    ih, idim = need_int(a, "index_n_heads"), need_int(a, "index_head_dim")
    slot = "attention"
    b.add("attention/indexer.q", ih * idim, d, n, "linear", f"{mod}.q_proj", slot)
    b.add("attention/indexer.k", idim, d, n, "linear", f"{mod}.k_proj", slot)
    b.add("attention/indexer.q_norm", idim, 1, n, "vector", f"{mod}.q_norm", slot)
    b.add("attention/indexer.k_norm", idim, 1, n, "vector", f"{mod}.k_norm", slot)


def decode_flops(arch: Architecture, layer: LayerSpec, context: int) -> int:
    """FLOPs of one decode token's index scores over ``context`` keys (none on a layer that
    reuses another layer's selection)."""
    if not (layer.sparse and not layer.index_shared):
        return 0
    return 2 * (arch.get("index_n_heads") or 0) * (arch.get("index_head_dim") or 0) * context


def prefill_flops(arch: Architecture, layer: LayerSpec, s: int, causal: bool) -> int:
    """FLOPs of an ``s``-token prompt's index scores (causal: the lower triangle)."""
    if not (layer.sparse and not layer.index_shared):
        return 0
    idx = (arch.get("index_n_heads") or 0) * (arch.get("index_head_dim") or 0)
    return 2 * idx * (s * (s + 1) // 2 if causal else s * s)
