"""The position slot: learned table, RoPE with its theta and scaling type, partial rotary, NoPE
interleaves, ALiBi, M-RoPE."""

from __future__ import annotations

from collections.abc import Mapping

from ..constructs import softmax
from ..schema.arch import Architecture
from .fill import Collector, Fill, attention_layers, num

ROPE_TYPE_KEYS = ("rope_type", "type")


def rope_scaling_type(arch: Architecture) -> str | None:
    """The RoPE scaling kind (linear, dynamic, yarn, llama3, longrope, ...) or None."""
    scaling = arch.get("rope_scaling")
    if not isinstance(scaling, Mapping):
        return None
    if "full_attention" in scaling and isinstance(scaling["full_attention"], Mapping):
        scaling = scaling["full_attention"]
    for key in ROPE_TYPE_KEYS:
        kind = scaling.get(key)
        if isinstance(kind, str) and kind not in ("default", "none"):
            return kind
    return None


def position_encoding(arch: Architecture) -> Fill:
    ev = Collector(arch)
    pos = ev.use("position")
    if pos == "learned":
        rows = ev.use("max_positions")
        shown = f"{rows:,} rows" if isinstance(rows, int) else "rows not stated"
        return ev.fill("position.encoding", "learned", f"learned table, {shown}", {}, {"rows": rows})
    if pos == "alibi":
        return ev.fill("position.encoding", "alibi", "ALiBi: linear distance bias, no table")
    if pos == "relative":
        return ev.fill("position.encoding", "relative", "learned relative-position bias per head")
    if pos == "sinusoidal":
        return ev.fill("position.encoding", "sinusoidal", "fixed sinusoidal table added to the embeddings")
    if pos == "none" or not attention_layers(arch):
        detail = "none: recurrent layers carry order" if not attention_layers(arch) else "none (NoPE)"
        return ev.fill("position.encoding", "none", detail)
    theta = ev.use("rope_theta")
    rotary = ev.use("rotary_dim")
    frac = ev.use("partial_rotary_factor") or 1.0
    scaling = rope_scaling_type(arch)
    if scaling:
        ev.use("rope_scaling")
    mrope = pos == "mrope" or (
        isinstance(arch.get("rope_scaling"), Mapping) and "mrope_section" in arch.get("rope_scaling")
    )
    partial = frac < 1.0 or bool(rotary and rotary < (arch.get("head_dim") or rotary + 1))
    nope = sum(n for s, n in arch.layer_runs if softmax(s.mixer) and not s.rope)
    detail = ("M-RoPE" if mrope else "RoPE") + f" θ={num(theta)}"
    if partial:
        detail += f", rotary {rotary} dims" if rotary else f", partial {frac:g}"
    if scaling:
        factor = (arch.get("rope_scaling") or {}).get("factor")
        detail += f", {scaling} scaling" + (f" ×{factor:g}" if isinstance(factor, (int, float)) else "")
    if nope:
        detail += f", NoPE on {nope} of {len(attention_layers(arch))} attention layers"
    return ev.fill(
        "position.encoding",
        "mrope" if mrope else "rope",
        detail,
        {"partial": partial, "scaling": scaling, "nope_layers": bool(nope)},
        {"theta": theta, "rotary_fraction": frac, "rotary_dim": rotary},
    )
