"""The ends of the network: the embedding table (vocabulary, scaling) and the head (tied or
not, soft-capping)."""

from __future__ import annotations

from ..schema.arch import Architecture
from .fill import Collector, Fill


def embedding_table(arch: Architecture) -> Fill:
    ev = Collector(arch)
    vocab, d = ev.use("vocab"), ev.use("d_model")
    scaled = bool(ev.use("embed_scale"))
    detail = f"vocab {vocab:,} × {d:,}" + (", scaled by √d" if scaled else "")
    per_layer = arch.get("per_layer_input", 0)
    if per_layer:
        detail += f", per-layer inputs {per_layer}"
    return ev.fill(
        "embedding.table",
        "table",
        detail,
        {"scaled": scaled, "per_layer_inputs": bool(per_layer)},
        {"vocab": vocab, "d_model": d},
    )


def head_tying(arch: Architecture) -> Fill:
    ev = Collector(arch)
    tied = bool(ev.use("tie_embeddings"))
    cap = ev.use("final_softcap")
    detail = "tied to the embedding" if tied else "untied"
    if ev.use("head_bias"):
        detail += ", with a bias"
    if cap:
        detail += f", logits soft-capped at {cap:g}"
    return ev.fill(
        "head.tying", "tied" if tied else "untied", detail, {"softcap": bool(cap)}, {"softcap": cap}
    )
