"""Layout rules for the FFN of each layer: which layers hold MoE (every, DeepSeek's dense-
first, Qwen's sparse step, an expression), per-layer FFN kinds and widths."""

from __future__ import annotations

from typing import Any

from ..core.errors import SlotdiffError
from .arch import LayerSpec, evolve
from .layer_rules import field_value, raw_value, rule
from .resolver import Resolver


@rule("moe")
def _moe(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Which layers hold MoE. ``style``: every | deepseek | qwen (see the docstring table).

    - every:    all layers (Mixtral, gpt-oss, OLMoE)
    - deepseek: i >= first_dense_layers and i % moe_layer_freq == 0
    - qwen:     i not in mlp_only_layers and (i + 1) % moe_layer_freq == 0

    A ``layer_when`` expression over fields, the layer index ``i`` and the layer count ``n``
    replaces the style for placements none of them covers (a first..last MoE span, or
    Llama 4's every n-th layer without mlp_only_layers).
    """
    experts = field_value(res, "n_experts") or 0
    if experts <= 0:
        return layers
    style = args.get("style", "every")
    first = field_value(res, "first_dense_layers") or 0
    freq = field_value(res, "moe_layer_freq") or 1
    dense_only = set(field_value(res, "mlp_only_layers") or [])
    when = args.get("layer_when")
    out = []
    for s in layers:
        if s.ffn is None:
            out.append(s)
            continue
        i = s.index
        if when:
            moe = bool(res.evaluate(when, {"i": i, "n": len(layers)}))
        elif style == "every":
            moe = True
        elif style == "deepseek":
            moe = i >= first and i % freq == 0
        elif style == "qwen":
            moe = i not in dense_only and (i + 1) % freq == 0
        else:
            raise ValueError(f"unknown moe style {style!r}")
        out.append(evolve(s, ffn="moe" if moe else "dense"))
    return out


@rule("ffn_types", key_type="array")
def _ffn_types(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer FFN kind from a list key, through ``map`` (Kimi Linear ``mlp_layer_types``:
    dense / sparse)."""
    types = raw_value(res, args["key"])
    if types is None:
        return layers
    key = res.cite(args["key"])
    if not isinstance(types, list) or len(types) != len(layers):
        raise SlotdiffError(res.raw.name, f"expected a list of {len(layers)} FFN types", key=key)
    out = []
    for s, kind in zip(layers, types, strict=True):
        if kind not in args["map"]:
            raise SlotdiffError(res.raw.name, f"unknown FFN type {kind!r}", key=key)
        out.append(evolve(s, ffn=args["map"][kind]))
    return out


@rule("dense_width", key_type="array")
def _dense_width(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer dense FFN width from a list key (e.g. OpenELM-style lists)."""
    widths = raw_value(res, args["key"])
    if not isinstance(widths, list) or len(widths) != len(layers):
        return layers
    cap = res.field_spec("d_ff")["maximum"]
    for w in widths:
        if not isinstance(w, int) or isinstance(w, bool) or not 0 <= w <= cap:
            raise SlotdiffError(
                res.raw.name, f"expected FFN widths 0..{cap:,}, got {w!r}", key=res.cite(args["key"])
            )
    return [evolve(s, d_ff=w) for s, w in zip(layers, widths, strict=True)]
