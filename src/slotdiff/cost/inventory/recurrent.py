"""Tensors of the recurrent mixers: linear attention (gated delta rule, KDA, lightning), Mamba
1 and 2, and short convolutions."""

from __future__ import annotations

from ...schema.arch import LayerSpec
from .tensor import Builder, Unsupported, need_int


def linear_attention(b: Builder, n: int, layer: LayerSpec) -> None:
    """Linear-attention layers; ``layer.variant`` picks the tensor set."""
    a = b.arch
    variant = layer.variant or "gated_deltanet"
    d = need_int(a, "d_model")
    mod = "model.layers.0.linear_attn"
    if variant == "gated_deltanet":
        # Gated DeltaNet (Qwen3-Next, Qwen3.5): q/k/v/z projections (fused or split), a
        # depthwise conv over q/k/v, per-v-head decay (A_log, dt_bias), a gated RMSNorm.
        nk, nv = need_int(a, "linear_n_k_heads"), need_int(a, "linear_n_v_heads")
        dk, dv = need_int(a, "linear_k_head_dim"), need_int(a, "linear_v_head_dim")
        kernel = need_int(a, "linear_conv_kernel")
        key, value = nk * dk, nv * dv
        if a.get("linear_split_proj"):
            b.add("attention/linear.in_qkv", 2 * key + value, d, n, "linear", f"{mod}.in_proj_qkv")
            b.add("attention/linear.in_z", value, d, n, "linear", f"{mod}.in_proj_z")
            b.add("attention/linear.in_b", nv, d, n, "linear", f"{mod}.in_proj_b")
            b.add("attention/linear.in_a", nv, d, n, "linear", f"{mod}.in_proj_a")
        else:
            b.add(
                "attention/linear.in_qkvz",
                2 * key + 2 * value,
                d,
                n,
                "linear",
                f"{mod}.in_proj_qkvz",
            )
            b.add("attention/linear.in_ba", 2 * nv, d, n, "linear", f"{mod}.in_proj_ba")
        b.add("attention/linear.conv", 2 * key + value, kernel, n, "conv", f"{mod}.conv1d")
        b.add("attention/linear.dt_bias", nv, 1, n, "vector", f"{mod}.dt_bias")
        b.add("attention/linear.A_log", nv, 1, n, "vector", f"{mod}.A_log")
        b.add("attention/linear.norm", dv, 1, n, "vector", f"{mod}.norm")
        b.add("attention/linear.out", d, value, n, "linear", f"{mod}.out_proj")
        return
    if variant == "lightning":
        # Lightning attention (MiniMax-01): fused qkv over the softmax layers' heads, a
        # sigmoid output gate, an RMSNorm over all heads; decay rates are buffers.
        h, hd = need_int(a, "n_heads"), need_int(a, "head_dim")
        mod = "model.layers.0.self_attn"
        b.add("attention/linear.qkv", 3 * h * hd, d, n, "linear", f"{mod}.qkv_proj")
        b.add("attention/linear.gate", h * hd, d, n, "linear", f"{mod}.output_gate")
        b.add("attention/linear.norm", h * hd, 1, n, "vector", f"{mod}.norm")
        b.add("attention/linear.out", d, h * hd, n, "linear", f"{mod}.out_proj")
        return
    if variant == "kda":
        # Kimi Delta Attention (Kimi Linear): q/k/v, a depthwise conv over them, a low-rank
        # per-channel forget gate (f_a, f_b, dt_bias, per-head A_log), a beta projection, a
        # low-rank output gate (g_a, g_b) into a gated RMSNorm.
        nh, hd = need_int(a, "linear_n_v_heads"), need_int(a, "linear_v_head_dim")
        kernel = need_int(a, "linear_conv_kernel")
        proj = nh * hd
        mod = "model.layers.0.self_attn"
        for name in ("q", "k", "v"):
            b.add(f"attention/linear.{name}", proj, d, n, "linear", f"{mod}.{name}_proj")
        b.add("attention/linear.conv", 3 * proj, kernel, n, "conv", f"{mod}.conv1d")
        b.add("attention/linear.f_a", hd, d, n, "linear", f"{mod}.forget_gate.f_a_proj")
        b.add("attention/linear.f_b", proj, hd, n, "linear", f"{mod}.forget_gate.f_b_proj")
        b.add("attention/linear.dt_bias", proj, 1, n, "vector", f"{mod}.forget_gate.dt_bias")
        b.add("attention/linear.A_log", nh, 1, n, "vector", f"{mod}.forget_gate.A_log")
        b.add("attention/linear.beta", nh, d, n, "linear", f"{mod}.b_proj")
        b.add("attention/linear.g_a", hd, d, n, "linear", f"{mod}.g_a_proj")
        b.add("attention/linear.g_b", proj, hd, n, "linear", f"{mod}.g_b_proj")
        b.add("attention/linear.norm", hd, 1, n, "vector", f"{mod}.o_norm")
        b.add("attention/linear.out", d, proj, n, "linear", f"{mod}.o_proj")
        return
    if variant == "rglru":
        rglru(b, n)
        return
    if variant == "rwkv":
        rwkv_time_mix(b, n)
        return
    if variant == "mlstm":
        mlstm(b, n)
        return
    raise Unsupported(
        a.name,
        f"cannot count parameters of {variant.replace('_', ' ')} layers yet",
        key=a.key("layer_types"),
    )


def mamba(b: Builder, n: int, version: int) -> None:
    """Mamba-1 (selective scan, per-channel state) or Mamba-2 (per-head scalar decay)."""
    a = b.arch
    d = need_int(a, "d_model")
    mod = "model.layers.0.mixer"
    kernel = need_int(a, "ssm_conv_kernel")
    state = need_int(a, "ssm_state")
    inner = need_int(a, "ssm_inner")
    conv_bias = bool(a.get("ssm_conv_bias"))
    proj_bias = bool(a.get("ssm_proj_bias"))
    out_bias = bool(a.get("ssm_out_bias"))
    if version == 2:
        heads, groups = need_int(a, "ssm_n_heads"), need_int(a, "ssm_n_groups")
        conv_dim = inner + 2 * groups * state
        width = inner + conv_dim + heads  # z, x/B/C, dt
        b.add("attention/ssm.in_proj", width, d, n, "linear", f"{mod}.in_proj")
        if proj_bias:
            b.add("attention/ssm.in_proj.bias", width, 1, n, "vector", f"{mod}.in_proj")
        b.add("attention/ssm.conv", conv_dim, kernel, n, "conv", f"{mod}.conv1d")
        if conv_bias:
            b.add("attention/ssm.conv.bias", conv_dim, 1, n, "vector", f"{mod}.conv1d")
        for name in ("dt_bias", "A_log", "D"):
            b.add(f"attention/ssm.{name}", heads, 1, n, "vector", f"{mod}.{name}")
        if a.get("ssm_norm", True):
            b.add("attention/ssm.norm", inner, 1, n, "vector", f"{mod}.norm")
        b.add("attention/ssm.out_proj", d, inner, n, "linear", f"{mod}.out_proj")
        if out_bias:
            b.add("attention/ssm.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
        return
    dt_rank = a.get("ssm_dt_rank")
    if dt_rank in (None, "auto"):
        dt_rank = -(-d // 16)
    if not isinstance(dt_rank, int):
        raise Unsupported(a.name, f"cannot read Δ rank {dt_rank!r}", key=a.key("ssm_dt_rank"))
    b.add("attention/ssm.in_proj", 2 * inner, d, n, "linear", f"{mod}.in_proj")
    if proj_bias:
        b.add("attention/ssm.in_proj.bias", 2 * inner, 1, n, "vector", f"{mod}.in_proj")
    b.add("attention/ssm.conv", inner, kernel, n, "conv", f"{mod}.conv1d")
    if conv_bias:
        b.add("attention/ssm.conv.bias", inner, 1, n, "vector", f"{mod}.conv1d")
    b.add("attention/ssm.x_proj", dt_rank + 2 * state, inner, n, "linear", f"{mod}.x_proj")
    b.add("attention/ssm.dt_proj", inner, dt_rank, n, "linear", f"{mod}.dt_proj")
    b.add("attention/ssm.dt_proj.bias", inner, 1, n, "vector", f"{mod}.dt_proj")
    b.add("attention/ssm.A_log", inner, state, n, "vector", f"{mod}.A_log")
    b.add("attention/ssm.D", inner, 1, n, "vector", f"{mod}.D")
    b.add("attention/ssm.out_proj", d, inner, n, "linear", f"{mod}.out_proj")
    if out_bias:
        b.add("attention/ssm.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
    if a.get("ssm_inner_norms"):
        b.add("attention/ssm.dt_norm", dt_rank, 1, n, "vector", f"{mod}.dt_layernorm")
        b.add("attention/ssm.bc_norm", state, 1, 2 * n, "vector", f"{mod}.b_layernorm")


def short_conv(b: Builder, n: int) -> None:
    """Gated short convolution (LFM2): in_proj to B, C, x; depthwise conv; out_proj."""
    a = b.arch
    d = need_int(a, "d_model")
    kernel = need_int(a, "short_conv_kernel")
    bias = bool(a.get("short_conv_bias"))
    mod = "model.layers.0.conv"
    b.add("attention/conv.in_proj", 3 * d, d, n, "linear", f"{mod}.in_proj")
    b.add("attention/conv.conv", d, kernel, n, "conv", f"{mod}.conv")
    b.add("attention/conv.out_proj", d, d, n, "linear", f"{mod}.out_proj")
    if bias:
        b.add("attention/conv.in_proj.bias", 3 * d, 1, n, "vector", f"{mod}.in_proj")
        b.add("attention/conv.conv.bias", d, 1, n, "vector", f"{mod}.conv")
        b.add("attention/conv.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")


def rglru(b: Builder, n: int) -> None:
    """Griffin's recurrent block (RecurrentGemma): two biased input branches of ``lru_width``
    (y: the GELU gate, x: the recurrence), a biased depthwise causal conv on x, the RG-LRU
    (a per-channel recurrence ``recurrent_param`` and block-diagonal input and recurrence
    gates of n_heads blocks of lru_width / n_heads, with biases), a biased output projection."""
    a = b.arch
    d, h = need_int(a, "d_model"), need_int(a, "n_heads")
    lru, kernel = need_int(a, "recurrent_width"), need_int(a, "linear_conv_kernel")
    if lru % h:
        why = f"lru_width {lru} is not a multiple of {h} heads"
        raise Unsupported(a.name, why, key=a.key("recurrent_width"))
    block = lru // h
    mod = "model.layers.0.temporal_block"
    for name in ("y", "x"):
        b.add(f"attention/rglru.linear_{name}", lru, d, n, "linear", f"{mod}.linear_{name}")
        b.add(f"attention/rglru.linear_{name}.bias", lru, 1, n, "vector", f"{mod}.linear_{name}")
    b.add("attention/rglru.conv", lru, kernel, n, "conv", f"{mod}.conv_1d")
    b.add("attention/rglru.conv.bias", lru, 1, n, "vector", f"{mod}.conv_1d")
    b.add("attention/rglru.recurrent_param", lru, 1, n, "vector", f"{mod}.rg_lru.recurrent_param")
    for gate in ("input", "recurrent"):
        gmod = f"{mod}.rg_lru.{gate}_gate_weight"
        b.add(f"attention/rglru.{gate}_gate", block, block, n * h, "linear", gmod)
        b.add(f"attention/rglru.{gate}_gate.bias", lru, 1, n, "vector", gmod)
    b.add("attention/rglru.linear_out", d, lru, n, "linear", f"{mod}.linear_out")
    b.add("attention/rglru.linear_out.bias", d, 1, n, "vector", f"{mod}.linear_out")


def rwkv_time_mix(b: Builder, n: int) -> None:
    """RWKV-4's time mix (the attention of an RWKV block): key, value and receptance
    projections to ``recurrent_width`` and an output projection back, no biases; a learned
    per-channel decay and first-token bonus; token-shift interpolation vectors for k, v, r."""
    a = b.arch
    d, w = need_int(a, "d_model"), need_int(a, "recurrent_width")
    mod = "rwkv.blocks.0.attention"
    for name in ("key", "value", "receptance"):
        b.add(f"attention/rwkv.{name}", w, d, n, "linear", f"{mod}.{name}")
    b.add("attention/rwkv.output", d, w, n, "linear", f"{mod}.output")
    b.add("attention/rwkv.time_decay", w, 1, n, "vector", f"{mod}.time_decay")
    b.add("attention/rwkv.time_first", w, 1, n, "vector", f"{mod}.time_first")
    b.add("attention/rwkv.time_mix", d, 1, 3 * n, "vector", f"{mod}.time_mix_key")


def mlstm(b: Builder, n: int) -> None:
    """xLSTM's mLSTM layer: q/k (linear_n_k_heads × linear_k_head_dim), v and a sigmoid
    output gate (heads × linear_v_head_dim), with qkv_bias; per-head input and forget gate
    pre-activations (always biased); a per-head norm over v (biased with qkv_bias) and an
    output projection (o_bias)."""
    a = b.arch
    d = need_int(a, "d_model")
    h = need_int(a, "linear_n_v_heads")
    qk = need_int(a, "linear_n_k_heads") * need_int(a, "linear_k_head_dim")
    v = h * need_int(a, "linear_v_head_dim")
    bias = bool(a.get("qkv_bias"))
    mod = "backbone.blocks.0.mlstm_layer"
    for name, rows in (("q", qk), ("k", qk), ("v", v), ("ogate", v)):
        b.add(f"attention/mlstm.{name}", rows, d, n, "linear", f"{mod}.{name}")
        if bias:
            b.add(f"attention/mlstm.{name}.bias", rows, 1, n, "vector", f"{mod}.{name}")
    for gate in ("igate", "fgate"):
        b.add(f"attention/mlstm.{gate}", h, d, n, "linear", f"{mod}.{gate}_preact")
        b.add(f"attention/mlstm.{gate}.bias", h, 1, n, "vector", f"{mod}.{gate}_preact")
    b.add("attention/mlstm.norm", v, 1, n, "vector", f"{mod}.multihead_norm")
    if bias:
        b.add("attention/mlstm.norm.bias", v, 1, n, "vector", f"{mod}.multihead_norm")
    b.add("attention/mlstm.out", d, v, n, "linear", f"{mod}.out_proj")
    if a.get("o_bias"):
        b.add("attention/mlstm.out.bias", d, 1, n, "vector", f"{mod}.out_proj")
