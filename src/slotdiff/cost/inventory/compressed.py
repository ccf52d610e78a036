"""Tensors of shared-KV attention with compressed KV (DeepSeek-V4's sliding, HCA and CSA
layers): a low-rank query path, one projection read as both key and value, a grouped
low-rank output projection and per-head sinks; on a layer with ``compress`` a compressor
that pools every ``compress`` tokens into one KV entry, and with ``sparse`` also overlapping
windows and a lightning indexer over the compressed keys."""

from __future__ import annotations

from ...schema.arch import LayerSpec
from .tensor import Builder, need_int


def shared_kv_attention(b: Builder, n: int, layer: LayerSpec) -> None:
    """``n`` shared-KV attention layers shaped like ``layer`` (structure ``attn_shared_kv``)."""
    a = b.arch
    d, h = need_int(a, "d_model"), layer.n_heads or need_int(a, "n_heads")
    hd = layer.head_dim or need_int(a, "head_dim")
    q_rank = need_int(a, "q_lora_rank")
    groups, o_rank = need_int(a, "o_groups"), need_int(a, "o_lora_rank")
    mod = "model.layers.0.self_attn"
    slot = "attention"
    b.add("attention/q_a", q_rank, d, n, "linear", f"{mod}.q_a_proj", slot)
    b.add("attention/q_a_norm", q_rank, 1, n, "vector", f"{mod}.q_a_norm", slot)
    b.add("attention/q_b", h * hd, q_rank, n, "linear", f"{mod}.q_b_proj", slot)
    b.add("attention/kv", hd, d, n, "linear", f"{mod}.kv_proj", slot)
    b.add("attention/kv_norm", hd, 1, n, "vector", f"{mod}.kv_norm", slot)
    # Grouped output: each of `groups` head groups to o_rank, then all groups to d.
    b.add("attention/o_a", groups * o_rank, h * hd // groups, n, "linear", f"{mod}.o_a_proj", slot)
    b.add("attention/o_b", d, groups * o_rank, n, "linear", f"{mod}.o_b_proj", slot)
    if a.get("sinks"):
        b.add("attention/sinks", h, 1, n, "vector", f"{mod}.sinks", slot)
    rate = layer.compress
    if not rate:
        return
    cmod = f"{mod}.compressor"
    series = 2 if layer.sparse else 1  # overlapping windows keep two series per token
    b.add("attention/compressor.kv", series * hd, d, n, "linear", f"{cmod}.kv_proj", slot)
    b.add("attention/compressor.gate", series * hd, d, n, "linear", f"{cmod}.gate_proj", slot)
    b.add("attention/compressor.position_bias", rate * series * hd, 1, n, "vector", cmod, slot)
    b.add("attention/compressor.kv_norm", hd, 1, n, "vector", f"{cmod}.kv_norm", slot)
    if not layer.sparse:
        return
    ih, idim = need_int(a, "index_n_heads"), need_int(a, "index_head_dim")
    imod = f"{cmod}.indexer"
    b.add("attention/indexer.kv", 2 * idim, d, n, "linear", f"{imod}.kv_proj", slot)
    b.add("attention/indexer.gate", 2 * idim, d, n, "linear", f"{imod}.gate_proj", slot)
    b.add("attention/indexer.position_bias", rate * 2 * idim, 1, n, "vector", imod, slot)
    b.add("attention/indexer.kv_norm", idim, 1, n, "vector", f"{imod}.kv_norm", slot)
    b.add("attention/indexer.q_b", ih * idim, q_rank, n, "linear", f"{imod}.q_b_proj", slot)
    b.add("attention/indexer.weights", ih, d, n, "linear", f"{imod}.scorer.weights_proj", slot)


def hyper_connections(b: Builder, n_layers: int) -> None:
    """Hyper-connections over ``hc_mult`` residual streams: per layer two mixers (before
    attention and before the FFN), each a projection of the flattened streams to the
    pre/post/comb weights ((2 + N)·N), their bias and three scales (with ``hc_no_comb``:
    pre/post only, 2·N, and two scales); one head mixer (N) unless ``hc_no_head``."""
    streams = b.arch.get("hc_mult") or 0
    if streams <= 1:
        return
    d = need_int(b.arch, "d_model")
    # Without the stream-mixing matrix (hc_no_comb: HY-V4's iHC) only pre and post weights.
    comb = not b.arch.get("hc_no_comb")
    width = (2 + streams) * streams if comb else 2 * streams
    mod = "model.layers.0.attn_hc"
    b.add("norms/hyper.fn", width, streams * d, 2 * n_layers, "linear", f"{mod}.fn")
    b.add("norms/hyper.base", width, 1, 2 * n_layers, "vector", f"{mod}.base")
    b.add("norms/hyper.scale", 3 if comb else 2, 1, 2 * n_layers, "vector", f"{mod}.scale")
    if b.arch.get("hc_no_head"):  # the streams' final collapse is a plain mean (GLM-5.3-Flash)
        return
    b.add("norms/hyper_head.fn", streams, streams * d, 1, "linear", "model.hc_head.hc_fn")
    b.add("norms/hyper_head.base", streams, 1, 1, "vector", "model.hc_head.hc_base")
    b.add("norms/hyper_head.scale", 1, 1, 1, "vector", "model.hc_head.hc_scale")
