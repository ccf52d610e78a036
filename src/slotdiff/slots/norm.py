"""The norm slot: LayerNorm or RMSNorm, and where the norms sit (pre, post, sandwich,
parallel)."""

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
