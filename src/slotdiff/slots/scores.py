"""Two attention facets beside the KV layout: what gates the attention output (Qwen3-Next's gated
attention, Kimi K3's gated MLA) and how the scores are scaled and capped before the softmax
(Gemma 2's soft-cap and query_pre_attn_scalar, Llama 4's temperature tuning)."""

from __future__ import annotations

from ..constructs import construct
from ..schema.arch import Architecture
from .fill import Collector, Fill, attention_layers


def attention_gate(arch: Architecture) -> Fill:
    ev = Collector(arch)
    if not attention_layers(arch):
        return ev.fill("attention.gate", "none", "no attention layers")
    widened = bool(ev.use("attn_output_gate"))
    own = ev.use("attn_gate") or "none"
    mla = bool(ev.use("mla_q_gate"))
    if widened:
        return ev.fill(
            "attention.gate",
            "output-gate",
            "sigmoid gate on every attention output channel, computed by a query projection twice as wide",
            {"per": "channel", "from": "q_proj"},
        )
    if own != "none":
        per = "head" if own == "head" else "channel"
        detail = f"sigmoid gate on the attention output, one per {per}, from its own projection of the input"
        if ev.use("attn_gate_head_bias"):
            detail += ", with a bias per head"
        return ev.fill("attention.gate", "output-gate", detail, {"per": per, "from": "own"})
    if mla:
        return ev.fill(
            "attention.gate",
            "output-gate",
            "sigmoid gate on every attention output channel, fused into the MLA query up-projection",
            {"per": "channel", "from": "q_b"},
        )
    return ev.fill("attention.gate", "none", "none")


def _qk_width(arch: Architecture) -> int | None:
    """The width q·k runs over: a construct's (MLA's nope + rope dims), else head_dim."""
    for mech in dict.fromkeys(m for s, _ in arch.layer_runs if (m := construct(s.mixer))):
        width = mech.qk_width(arch)
        if width is not None:
            return width
    return arch.get("head_dim")


def attention_scores(arch: Architecture) -> Fill:
    ev = Collector(arch)
    if not attention_layers(arch):
        return ev.fill("attention.scores", "none", "no attention layers")
    width = _qk_width(arch)
    cap = ev.use("attn_softcap")
    scalar = ev.use("query_scale")
    temperature = bool(ev.use("attn_temperature"))
    learned = bool(ev.use("softmax_scaling"))
    nope = [s for s in attention_layers(arch) if not s.rope]
    temperature = temperature and bool(nope)  # Llama 4 tunes the NoPE layers only
    own_scale = scalar is not None and scalar != width
    if scalar is not None:
        detail = f"softmax of q·k / √{scalar:g} (query_pre_attn_scalar"
        detail += f"; head_dim {width})" if own_scale else f" = head_dim {width})"
    else:
        detail = f"softmax of q·k / √{width}" if width else "softmax of q·k / √head_dim"
    if cap:
        detail += f", logits soft-capped at ±{cap:g} (cap·tanh(x / cap))"
    if temperature:
        scale = ev.use("attn_temperature_scale")
        floor = ev.use("attn_temperature_floor")
        detail += (
            f", queries on the {len(nope)} NoPE layers scaled by 1 + {scale:g}·log(1 + ⌊(pos + 1) / "
            f"{floor:g}⌋)"
            if isinstance(scale, (int, float)) and isinstance(floor, (int, float))
            else f", queries on the {len(nope)} NoPE layers scaled up with position"
        )
    if learned:
        detail += ", a learned scale and bias per head"
    # the design is "q scaled by a scalar the config gives", whether or not one checkpoint's
    # value happens to equal head_dim (Gemma 2 9B: 256 = head_dim; 27B: 144 against 128)
    scaled = scalar is not None
    kind = "softcap" if cap else ("scaled" if scaled or temperature or learned else "plain")
    return ev.fill(
        "attention.scores",
        kind,
        detail,
        {
            "softcap": bool(cap),
            "query_scalar": scaled,
            "temperature": temperature,
            "learned": learned,
        },
        {"softcap": cap, "query_scale": scalar},
    )
