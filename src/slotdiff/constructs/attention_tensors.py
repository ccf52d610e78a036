"""Tensors of plain softmax attention (MHA / GQA / MQA) with its family options: fused or
split q/k/v, biases, q/k norms, sinks, output gates, ZAYA's CCA convolutions, Inkling's
short convolutions and relative logits, a lightning indexer (MiniMax-M3), JetMoE's mixture of
attention heads, and DeepSeek-V4's shared-KV attention with its compressor. Split from
attention.py (the construct) only to keep modules short."""

from __future__ import annotations

from ..schema.arch import LayerSpec
from . import indexer
from .tensor import Builder, need_int


def attention(b: Builder, n: int, layer: LayerSpec) -> None:
    a = b.arch
    d, h = need_int(a, "d_model"), layer.n_heads or need_int(a, "n_heads")
    g = layer.n_kv_heads or need_int(a, "n_kv_heads")
    hd = layer.head_dim or need_int(a, "head_dim")
    hv = a.get("v_head_dim") or hd
    mod = "model.layers.0.self_attn"
    q_out = h * hd * (2 if a.get("attn_output_gate") else 1)
    slot = "attention"
    if a.get("attn_experts"):
        attention_experts(b, n, d, g, hd)
        return
    if a.get("attn_shared_kv"):
        shared_kv_attention(b, n, layer)
        return
    if a.get("fused_qkv"):
        b.add(
            "attention/qkv",
            q_out + g * hd + g * hv,
            d,
            n,
            "linear",
            f"{mod}.qkv_proj",
            slot,
        )
    elif layer.kv_shared:
        # K/V come from an earlier layer: only the query side has weights here.
        b.add("attention/q", q_out, d, n, "linear", f"{mod}.q_proj", slot)
    else:
        b.add("attention/q", q_out, d, n, "linear", f"{mod}.q_proj", slot)
        b.add("attention/k", g * hd, d, n, "linear", f"{mod}.k_proj", slot)
        if not a.get("k_eq_v") or layer.window is not None:
            b.add("attention/v", g * hv, d, n, "linear", f"{mod}.v_proj", slot)
    b.add("attention/o", d, h * hv, n, "linear", f"{mod}.o_proj", slot)
    if a.get("qkv_bias"):
        has_v = not a.get("k_eq_v") or layer.window is not None
        kv_bias = 0 if layer.kv_shared else g * hd + (g * hv if has_v else 0)
        b.add(
            "attention/qkv.bias",
            q_out + kv_bias,
            1,
            n,
            "vector",
            f"{mod}.q_proj",
            slot,
        )
    if a.get("o_bias"):
        b.add("attention/o.bias", d, 1, n, "vector", f"{mod}.o_proj", slot)
    if a.get("attn_out_norm"):  # normed attention output before o_proj (BitNet attn_sub_norm)
        b.norm("attention/out_norm", d, n, f"{mod}.attn_sub_norm", slot)
    kind = a.get("qk_norm_kind")
    if a.get("qk_norm") and kind != "l2":  # an L2 QK-norm has no weights
        # One weight per head (each head its own, or one over all heads) or one shared.
        q_w, k_w = (h * hd, g * hd) if kind in ("full", "head_separate", "q_heads") else (hd, hd)
        for suffix in ("", ".bias") if a.get("qk_norm_bias") else ("",):
            b.add(f"attention/q_norm{suffix}", q_w, 1, n, "vector", f"{mod}.q_norm", slot)
            if not layer.kv_shared and kind != "q_heads":  # no k norm: K/V reused, or q only
                b.add(f"attention/k_norm{suffix}", k_w, 1, n, "vector", f"{mod}.k_norm", slot)
    if a.get("sinks") and (layer.window is not None or not a.get("sinks_sliding_only")):
        b.add("attention/sinks", h, 1, n, "vector", f"{mod}.sinks", slot)
    if a.get("attn_cca"):
        cca(b, n, h, g, hd)
    rel = a.get("rel_logit_dim") or 0
    if rel:  # relative-position logits: per-head rel features and a table over the extent (Inkling)
        extent = layer.window or need_int(a, "rel_extent")
        b.add("attention/rel.r", h * rel, d, n, "linear", f"{mod}.r_proj", slot)
        b.add("attention/rel.table", rel, extent, n, "vector", f"{mod}.rel_logits_proj.proj", slot)
        if a.get("rel_logit_norm"):  # an RMSNorm scale per head and rel feature (Inkling 2)
            b.add("attention/rel.norm", h * rel, 1, n, "vector", f"{mod}.relative_position_bias.norm", slot)
    if a.get("sinks_proj"):  # sink logits projected from the input, one per head (Inkling 2)
        b.add("attention/sinks_proj", h, d, n, "linear", f"{mod}.sink_proj", slot)
    if a.get("kv_short_conv"):  # depthwise causal convolutions on the keys and the values (Inkling)
        kernel = need_int(a, "short_conv_kernel")
        b.add("attention/kv_conv", g * hd, kernel, 2 * n, "conv", f"{mod}.k_sconv.conv1d", slot)
        if a.get("full_qkv_inputs") and layer.window is None:
            # Full layers' taps also get a per-token part projected from the input, per KV head.
            b.add("attention/kv_conv.dynamic", g * kernel, d, 2 * n, "linear", f"{mod}.k_proj.sconv", slot)
    scales = a.get("attn_channel_scales") or 0
    if scales:  # learned per-channel scales on the queries / the output gate (Dory sqk, s_gate)
        b.add("attention/channel_scales", h * hd, 1, scales * n, "vector", f"{mod}.sqk", slot)
    vectors = a.get("attn_head_vectors") or 0
    if vectors:  # DiffLlama's differential-attention lambdas (q1, k1, q2, k2), head_dim each
        b.add("attention/head_vectors", hd, 1, vectors * n, "vector", f"{mod}.lambda_q1", slot)
    if a.get("attn_dynamic_mask"):
        # Doge: A per KV head and dt_proj from the values to one mask logit per KV head.
        b.add("attention/dyn_mask.A", g, 1, n, "vector", f"{mod}.A", slot)
        b.add("attention/dyn_mask.dt", g, g * hv, n, "linear", f"{mod}.dt_proj", slot)
        if a.get("qkv_bias"):
            b.add("attention/dyn_mask.dt.bias", g, 1, n, "vector", f"{mod}.dt_proj", slot)
    if layer.sparse and not layer.index_shared:
        indexer.softmax_indexer(b, n, f"{mod}.indexer")
    gate = a.get("attn_gate")
    if gate in ("channel", "head"):
        # A separate output-gate projection without bias (AFMoE, Laguna).
        rows = h * hd if gate == "channel" else h
        b.add("attention/gate", rows, d, n, "linear", f"{mod}.gate_proj", slot)
        if a.get("attn_gate_head_bias"):
            b.add("attention/gate.head_bias", h, 1, n, "vector", f"{mod}.gate_bias", slot)


def cca(b: Builder, n: int, h: int, g: int, hd: int) -> None:
    """Compressed convolutional attention's extras (ZAYA): q and k mixed by a depthwise conv of
    cca_time0 taps then a conv grouped per head of cca_time1 taps, both with biases, and a
    learned key scale per KV head (its q/k norm is an L2 norm). The value projection is split
    into a current and a delayed half: as many weights as one v projection."""
    a = b.arch
    ch = (h + g) * hd
    t0, t1 = need_int(a, "cca_time0"), need_int(a, "cca_time1")
    mod = "model.layers.0.self_attn.qkv_proj"
    slot = "attention"
    b.add("attention/cca.depthwise", ch, t0, n, "conv", f"{mod}.conv_qk_depthwise", slot)
    b.add("attention/cca.grouped", ch, hd * t1, n, "conv", f"{mod}.conv_qk_grouped", slot)
    b.add("attention/cca.conv_bias", 2 * ch, 1, n, "vector", f"{mod}.conv_qk_depthwise", slot)
    b.add("attention/cca.key_scale", g, 1, n, "vector", "model.layers.0.self_attn.qk_norm.temp", slot)


def attention_experts(b: Builder, n: int, d: int, g: int, hd: int) -> None:
    """Mixture of attention heads (JetMoE MoA): per expert a query projection to g heads and
    an output projection back (routed: top_k of n_experts per token), one fused k/v projection
    shared by the experts, a router and a d-wide output bias."""
    e = need_int(b.arch, "n_experts")
    mod = "model.layers.0.self_attention"
    slot = "attention"
    b.add("attention/kv", 2 * g * hd, d, n, "linear", f"{mod}.kv_proj", slot)
    b.add("attention/moa.q", g * hd, d, n * e, "linear", f"{mod}.experts.input_linear", slot, True)
    b.add("attention/moa.o", d, g * hd, n * e, "linear", f"{mod}.experts.output_linear", slot, True)
    b.add("attention/moa.router", e, d, n, "linear", f"{mod}.experts.router.layer", "router")
    b.add("attention/moa.bias", d, 1, n, "vector", f"{mod}.experts.bias", slot)


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
