"""The norm slot (GPT-2's "residual + LayerNorm"): LayerNorm or RMSNorm and where the norms sit
(pre, post, sandwich, parallel); the residual stream they sit on (width, depth, hyper-connections,
attention residuals)."""

from __future__ import annotations

from ..schema.arch import Architecture
from .fill import Collector, Fill

PLACEMENT = {
    "pre": "pre-norm",
    "sandwich": "pre and post (sandwich)",
    "post": "post-norm after each sublayer",
    "parallel": "one norm feeding parallel attention and FFN",
    "parallel2": "two norms feeding parallel attention and FFN",
}


def norm_kind(arch: Architecture) -> Fill:
    ev = Collector(arch)
    kind, placement, bias = ev.use("norm"), ev.use("norm_placement"), bool(ev.use("norm_bias"))
    eps = ev.use("norm_eps")
    name = "RMSNorm" if kind == "rmsnorm" else "LayerNorm"
    detail = f"{name}{' with bias' if bias else ''}, {PLACEMENT[placement]}"
    if eps is not None:
        detail += f", eps {eps:g}"
    return ev.fill("norm.kind", kind, detail, {"placement": placement, "bias": bias}, {"eps": eps})


def norm_residual(arch: Architecture) -> Fill:
    """The residual stream the blocks add into: its width and depth, and whether it is one
    stream (GPT-2), several (hyper-connections), or a mix over earlier blocks (attention
    residuals)."""
    ev = Collector(arch)
    d = ev.use("d_model")
    ev.use("n_layers")
    depth = len(arch.layers)
    streams = ev.use("hc_mult") or 1
    block = ev.use("attn_res_block")
    block_mix = bool(block) or bool(ev.use("full_qkv_inputs"))
    altup = ev.use("altup_inputs") or 1
    laurel = ev.use("laurel_rank")
    width = f"{d:,} wide" if isinstance(d, int) else "width not stated"
    if streams > 1:
        kind = "hyper-connections"
        detail = f"{streams} residual streams (hyper-connections), each {width}, through {depth} blocks"
    elif block_mix:
        kind = "attention-residuals"
        per = f"blocks of {block} layers" if block else "each block"
        detail = (
            f"attention residuals: {per} read a learned mix of the earlier blocks' outputs instead of "
            f"one running sum; {width}, {depth} blocks"
        )
    elif altup > 1:
        kind = "altup"
        detail = f"AltUp: {altup} copies of the stream, one {width} computed per block; {depth} blocks"
    else:
        kind = "single"
        detail = f"one residual stream, {width}, through {depth} blocks"
    if laurel:
        detail += f"; LAuReL rank-{laurel} learned residual"
    return ev.fill(
        "norm.residual",
        kind,
        detail,
        {"laurel": bool(laurel)},
        {"d_model": d, "blocks": depth, "streams": streams if streams > 1 else None, "attn_res_block": block},
    )
