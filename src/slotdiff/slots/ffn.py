"""The FFN slot's facets: activation and gating, experts (MoE routing, shared experts, dense-
first layers), biases."""

from __future__ import annotations

from ..core.resources import load_schema_file
from ..schema.arch import Architecture
from .fill import Collector, Fill


def activation_name(act: str, gated: bool) -> str:
    """Display name of an FFN activation (schemas/slots.json ``activations``)."""
    names = load_schema_file("slots.json").get("activations", {}).get(act)
    if names:
        return names["gated" if gated else "plain"]
    return f"{act}-GLU" if gated else act


def ffn_activation(arch: Architecture) -> Fill:
    ev = Collector(arch)
    if not any(s.ffn or s.ffn2 or s.shared_block is not None for s in arch.layers):
        return ev.fill("ffn.activation", "none", "no FFN sublayers (mixer-only blocks)")
    act = ev.use("activation") or "unknown"
    gated = bool(ev.use("ffn_gated"))
    d = arch.get("d_model")
    widths = [s.d_ff or arch.get("d_ff") for s in arch.layers if s.ffn == "dense"]
    f = widths[0] if widths else arch.get("d_ff_expert")
    if widths:
        ev.use("d_ff")
    name = activation_name(act, gated)
    kind = name.lower() if gated else ("gelu" if act.startswith("gelu") else act)
    ratio = f / d if f and d else None
    mats = 3 if gated else 2
    clamp = ev.use("act_clamp")
    shown = f"clamped {name}" if clamp else name
    detail = f"{shown}, {mats} matrices" + (f", {ratio:.2f}×d" if ratio else "")
    if clamp:
        # gpt-oss: gate ≤ limit, up within ±limit (swiglu_limit)
        detail += f", inputs clamped at {clamp:g}" + (" (gate ≤ limit, up within ±limit)" if gated else "")
    return ev.fill(
        "ffn.activation",
        kind,
        detail,
        {"gated": gated, "clamped": bool(clamp)},
        {"d_ff": f, "ratio": round(ratio, 3) if ratio else None, "clamp": clamp},
    )


def ffn_experts(arch: Architecture) -> Fill:
    ev = Collector(arch)
    moe = [s for s in arch.layers if s.ffn == "moe" or s.ffn2 == "moe"]
    if not moe:
        ffn_layers = [s for s in arch.layers if s.ffn]
        if not ffn_layers and any(s.shared_block is not None for s in arch.layers):
            return ev.fill("ffn.experts", "dense", "one dense FFN, inside the weight-shared block")
        if not ffn_layers:
            return ev.fill("ffn.experts", "none", "no FFN sublayers (mixer-only blocks)")
        return ev.fill("ffn.experts", "dense", "one dense FFN per layer")
    e, k = ev.use("n_experts"), ev.use("top_k")
    shared = ev.use("n_shared_experts") or 0
    shared_width = arch.get("d_ff_shared")
    has_shared = bool(shared or shared_width)
    width = ev.use("d_ff_expert")
    dense_layers = [s for s in arch.layers if s.ffn == "dense"]
    first = ev.use("first_dense_layers") or 0
    dense_first = bool(first) and all(s.index < first for s in dense_layers) and bool(dense_layers)
    interleave = bool(dense_layers) and not dense_first
    detail = f"MoE {e}×top-{k}"
    if shared:
        detail += f" + {shared} shared"
    elif shared_width:
        ev.use("d_ff_shared")
        detail += " + shared expert"
    zero = arch.get("n_zero_experts") or 0
    if zero:
        ev.use("n_zero_experts")
        detail += f" + {zero} zero-compute experts"
    detail += f", expert width {width}"
    latent = ev.use("moe_latent")
    if latent:
        detail += f", routed experts in a {latent:,}-wide latent (projected down from and back up to d)"
    beside = any(s.ffn2 == "moe" and s.ffn == "dense" for s in moe)
    if beside:
        detail += ", beside the dense FFN"
        dense_layers = [s for s in arch.layers if s.ffn == "dense" and s.ffn2 != "moe"]
        interleave = bool(dense_layers)
        dense_first = False
    if dense_first:
        detail += f", first {first} layers dense"
    elif interleave:
        detail += f", MoE on {len(moe)} of {len(arch.layers)} layers"
    return ev.fill(
        "ffn.experts",
        "moe",
        detail,
        {
            "shared": has_shared,
            "dense_first": dense_first,
            "interleave": interleave,
            "beside_dense": beside,
            "latent": bool(latent),
        },
        {
            "experts": e,
            "top_k": k,
            "shared_experts": shared,
            "expert_width": width,
            "moe_layers": len(moe),
            "latent": latent,
        },
    )


def ffn_bias(arch: Architecture) -> Fill:
    ev = Collector(arch)
    if not any(s.ffn or s.shared_block is not None for s in arch.layers):
        return ev.fill("ffn.bias", "none", "no FFN sublayers")
    dense = any(s.ffn == "dense" for s in arch.layers)
    moe = any(s.ffn == "moe" for s in arch.layers)
    shared = moe and bool(arch.get("n_shared_experts") or arch.get("d_ff_shared"))
    # ffn_bias covers dense FFNs and shared experts; expert_bias the routed experts.
    plain = (dense or shared) and bool(ev.use("ffn_bias"))
    routed = moe and bool(ev.use("expert_bias"))
    if plain and (routed or not moe):
        return ev.fill("ffn.bias", "bias", "bias on the FFN matrices")
    if routed:
        only = " only" if dense or shared else ""
        return ev.fill("ffn.bias", "bias", f"bias on the routed expert matrices{only}")
    if plain:
        return ev.fill(
            "ffn.bias", "bias", "bias on the dense and shared FFN matrices, not the routed experts"
        )
    return ev.fill("ffn.bias", "none", "no bias")
