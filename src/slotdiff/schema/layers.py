"""Lay out one LayerSpec per decoder layer from the rules a model_type's key-map file names.

Hybrids, sliding patterns, NoPE interleaves and dense-first MoE all differ by layer, so the
per-layer view is what the cost pass sums over. Each rule is a small named function; the
data file picks rules and their parameters, in order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.errors import SlotdiffError
from . import layer_ffn, layer_mixers, layer_overrides  # noqa: F401  (importing them registers their rules)
from .arch import LayerSpec, numbered
from .layer_rules import RULES, holds, layer_type_list, raw_value
from .resolver import Resolver

DEFAULT_STEPS: list[dict[str, Any]] = [
    {"rule": "layer_types"},
    {"rule": "sliding_all"},
    {"rule": "moe", "style": "every"},
]


def counted_layers(res: Resolver) -> int | None:
    """The layer count a ``"count": true`` layer_types step fixes, if any.

    Some families build one layer per entry of their layer list and ignore
    num_hidden_layers (Nemotron-H, Zamba2); that step says so in the model_type file.
    """
    for step in res.spec.get("layers", DEFAULT_STEPS):
        if step.get("count") and step["rule"] == "layer_types":
            types, _ = layer_type_list(res, step)
            if types:
                return len(types)
    return None


def layout(res: Resolver) -> tuple[LayerSpec, ...]:
    """Build the per-layer specs for a resolved config.

    Any step may carry ``when`` (an expression over canonical fields: the step runs only when
    it holds) and ``unless_layer_types`` (skip the step when a layer_types step already laid
    the layers out: a default pattern that an explicit list overrides) and ``unless_key``
    (skip the step when the config has that key).
    """
    n = res.resolve("n_layers").value
    counted = counted_layers(res)
    if counted is not None and counted != n:
        if isinstance(n, int):
            res.notes.append(
                f"{res.key_of('n_layers')} says {n} but the layer list has {counted} entries; "
                f"transformers builds {counted} layers"
            )
        n = counted
        res.values["n_layers"] = replace(
            res.values["n_layers"], value=n, how="derived", note="length of the layer list"
        )
    if not isinstance(n, int) or n <= 0:
        raise SlotdiffError(res.raw.name, "missing or invalid layer count", key=res.cite("num_hidden_layers"))
    cap = res.field_spec("n_layers")["maximum"]  # also bounds a layer list's length
    if n > cap:
        raise SlotdiffError(
            res.raw.name, f"{n} layers is beyond any real model (cap {cap:,})", key=res.key_of("n_layers")
        )
    mixer = res.spec.get("mixer")
    if mixer is None:
        mixer = "mla" if res.resolve("kv_lora_rank").value else "attention"
    ffn = res.spec.get("ffn", "dense")
    layers = numbered(LayerSpec(index=0, mixer=mixer, ffn=ffn), n)  # cheaper than n __init__ calls
    res.layer_types_applied = False
    for step in res.spec.get("layers", DEFAULT_STEPS):
        name = step["rule"]
        if name not in RULES:
            raise ValueError(f"key map names unknown layer rule {name!r}")
        if not holds(res, step.get("when")):
            continue
        if step.get("unless_layer_types") and res.layer_types_applied:
            continue
        if step.get("unless_key") and raw_value(res, step["unless_key"]) is not None:
            continue  # a default the config's own key replaces (per_layer_config)
        layers = RULES[name](res, layers, step)
    return tuple(layers)
