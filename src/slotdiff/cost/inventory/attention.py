"""Tensors of the softmax-attention mixers: grouped-query attention with its family options,
cross-attention layers, and MLA's low-rank projections."""

from __future__ import annotations

from ...schema.arch import Architecture, LayerSpec, layer_size
from .compressed import shared_kv_attention
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
        # A lightning indexer on a softmax-attention layer (MiniMax-M3): index-head queries
        # and one index key per token, each RMS-normed.
        ih, idim = need_int(a, "index_n_heads"), need_int(a, "index_head_dim")
        b.add("attention/indexer.q", ih * idim, d, n, "linear", f"{mod}.indexer.q_proj", slot)
        b.add("attention/indexer.k", idim, d, n, "linear", f"{mod}.indexer.k_proj", slot)
        b.add("attention/indexer.q_norm", idim, 1, n, "vector", f"{mod}.indexer.q_norm", slot)
        b.add("attention/indexer.k_norm", idim, 1, n, "vector", f"{mod}.indexer.k_norm", slot)
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


def cross_attention(b: Builder, n: int, layer: LayerSpec) -> None:
    """Decoder cross-attention to image states already projected to the text width (Mllama).

    q reads text tokens; k and v read the image states, so they run per image state, not per
    text token, and the layer caches no text-token KV.
    """
    a = b.arch
    d, h = need_int(a, "d_model"), need_int(a, "n_heads")
    g = layer.n_kv_heads or need_int(a, "n_kv_heads")
    hd = layer.head_dim or need_int(a, "head_dim")
    mod = "model.layers.0.cross_attn"
    b.add("attention/cross.q", h * hd, d, n, "linear", f"{mod}.q_proj")
    b.add("attention/cross.k", g * hd, d, n, "linear", f"{mod}.k_proj")
    b.add("attention/cross.v", g * hd, d, n, "linear", f"{mod}.v_proj")
    b.add("attention/cross.o", d, h * hd, n, "linear", f"{mod}.o_proj")
    if a.get("cross_attn_qk_norm"):
        b.add("attention/cross.q_norm", hd, 1, n, "vector", f"{mod}.q_norm")
        b.add("attention/cross.k_norm", hd, 1, n, "vector", f"{mod}.k_norm")
    gates = a.get("cross_attn_gates") or 0
    b.add("attention/cross.gates", 1, 1, gates * n, "vector", "model.layers.0.cross_attn_attn_gate")


def _size(a: Architecture, layer: LayerSpec, name: str) -> int:
    """A size field on ``layer`` (its own, else the model's), which must be known."""
    value = layer_size(a, layer, name)
    return value if isinstance(value, int) and not isinstance(value, bool) else need_int(a, name)


def mla(b: Builder, n: int, layer: LayerSpec) -> None:
    a = b.arch
    d, h = need_int(a, "d_model"), layer.n_heads or need_int(a, "n_heads")
    kv_rank, rope, nope = (
        _size(a, layer, "kv_lora_rank"),
        _size(a, layer, "qk_rope_head_dim"),
        _size(a, layer, "qk_nope_head_dim"),
    )
    hv = _size(a, layer, "v_head_dim")
    qk = (a.get("qk_head_dim") if not layer.sizes else None) or nope + rope
    q_rank = layer_size(a, layer, "q_lora_rank")
    mod = "model.layers.0.self_attn"
    slot = "attention"
    bias = bool(a.get("qkv_bias"))
    if q_rank and a.get("mla_q_gate"):
        # One fused projection from [q_a, its norm] to the queries and a per-channel output
        # gate (A.X-K2's q_gate_proj), in place of q_b.
        b.add("attention/q_a", q_rank, d, n, "linear", f"{mod}.q_a_proj", slot)
        b.add("attention/q_a_norm", q_rank, 1, n, "vector", f"{mod}.q_a_layernorm", slot)
        b.add("attention/q_gate", h * (qk + hv), 2 * q_rank, n, "linear", f"{mod}.q_gate_proj", slot)
        if bias:
            b.add("attention/q_a.bias", q_rank, 1, n, "vector", f"{mod}.q_a_proj", slot)
    elif q_rank:
        b.add("attention/q_a", q_rank, d, n, "linear", f"{mod}.q_a_proj", slot)
        b.add("attention/q_a_norm", q_rank, 1, n, "vector", f"{mod}.q_a_layernorm", slot)
        b.add(
            "attention/q_b",
            h * qk,
            q_rank,
            n,
            "linear",
            f"{mod}.q_b_proj",
            slot,
        )
        if bias:
            b.add("attention/q_a.bias", q_rank, 1, n, "vector", f"{mod}.q_a_proj", slot)
    else:
        b.add("attention/q", h * qk, d, n, "linear", f"{mod}.q_proj", slot)
    if not layer.rope:
        nope, rope = nope + rope, 0  # a NoPE layer: no decoupled RoPE key, its width joins nope
    if not layer.kv_shared:  # a layer reading an earlier layer's latent has no kv_a of its own
        b.add("attention/kv_a", kv_rank + rope, d, n, "linear", f"{mod}.kv_a_proj_with_mqa", slot)
        b.add("attention/kv_a_norm", kv_rank, 1, n, "vector", f"{mod}.kv_a_layernorm", slot)
        if bias:
            b.add("attention/kv_a.bias", kv_rank + rope, 1, n, "vector", f"{mod}.kv_a_proj_with_mqa", slot)
    b.add("attention/kv_b", h * (nope + hv), kv_rank, n, "linear", f"{mod}.kv_b_proj", slot)
    b.add("attention/o", d, h * hv, n, "linear", f"{mod}.o_proj", slot)
    if bias:
        b.add("attention/o.bias", d, 1, n, "vector", f"{mod}.o_proj", slot)
    gate = a.get("attn_gate")
    if gate in ("channel", "head"):  # an output gate from the input: per channel (HY-V4), per head (Dots3)
        b.add("attention/gate", h * hv if gate == "channel" else h, d, n, "linear", f"{mod}.gate_proj", slot)
    if a.get("mla_rope_k_norm"):  # an RMSNorm on the decoupled RoPE key (Dots3 k_rope_only_layernorm)
        b.add("attention/k_rope_norm", rope, 1, n, "vector", f"{mod}.k_rope_only_layernorm", slot)
    if a.get("sinks"):
        b.add("attention/sinks", h, 1, n, "vector", f"{mod}.sinks", slot)
    if a.get("softmax_scaling"):  # a learned scale and bias per head on the scores (Mistral Large 4)
        b.add("attention/softmax_scaling", 2 * h, 1, n, "vector", f"{mod}.softmax_scaling", slot)
    if layer.sparse and not layer.index_shared:
        dsa_indexer(b, n, q_rank or d)


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
