"""Keys a published config repeats that its transformers class derives instead.

Vendors publish keys their own or an engine's code reads and transformers' class does not:
MiMo-V2-Flash's ``swa_num_key_value_heads`` and ``hybrid_layer_pattern`` say what the class
builds from ``num_key_value_heads`` and its layer rule. A model_type file's ``agrees`` items
name each such key and the value the built layers give it; a key that agrees counts as read
(it costs no trust), a key that disagrees stays unread and is reported, because an engine that
reads it builds another model than the one transformers builds and slotdiff prices.

An item is ``{"key", "value"}`` (an expression over canonical fields, model-wide), with
``"where"`` (an expression over one layer: the value must hold on every layer it selects), or
``{"key", "per_layer"}`` (the key is a list with one entry per layer, each the expression's
value on that layer). Layer expressions see the canonical fields and ``i``, ``window``,
``ffn``, ``mixer``, ``layer_n_heads``, ``layer_n_kv_heads``, ``layer_head_dim``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import SlotdiffError
from .arch import LayerSpec
from .keymap import MISSING, lookup
from .resolver import Resolver


@dataclass(frozen=True)
class Disagreement:
    """A key the config writes whose value differs from what its class builds."""

    key: str  # cited (with the text-config path)
    given: Any
    built: Any
    rule: str  # the expression the built value comes from


def _layer_names(res: Resolver, s: LayerSpec) -> dict[str, Any]:
    n_heads, n_kv_heads, head_dim = (res.resolve(n).value for n in ("n_heads", "n_kv_heads", "head_dim"))
    return {
        "i": s.index,
        "window": s.window,
        "ffn": s.ffn,
        "mixer": s.mixer,
        "layer_n_heads": s.n_heads or n_heads,
        "layer_n_kv_heads": s.n_kv_heads or n_kv_heads,
        "layer_head_dim": s.head_dim or head_dim,
    }


def _built(res: Resolver, item: Mapping[str, Any], layers: Sequence[LayerSpec]) -> Any:
    """The value the built model gives ``item["key"]``: one value, a per-layer list, or
    MISSING when the value differs between the layers ``where`` selects (nothing to hold)."""
    if "per_layer" in item:
        return [res.evaluate(item["per_layer"], _layer_names(res, s)) for s in layers]
    if "where" not in item:
        return res.evaluate(item["value"])
    seen = {
        res.evaluate(item["value"], names)
        for s in layers
        if res.evaluate(item["where"], names := _layer_names(res, s))
    }
    return seen.pop() if len(seen) == 1 else MISSING


def _same(given: Any, built: Any) -> bool:
    if isinstance(given, bool) or isinstance(built, bool):
        return bool(given) is bool(built) and type(given) in (bool, int) and given in (0, 1)
    if isinstance(given, list) and isinstance(built, list):
        return len(given) == len(built) and all(_same(g, b) for g, b in zip(given, built, strict=True))
    if isinstance(given, (int, float)) and isinstance(built, (int, float)):
        return float(given) == float(built)
    return bool(given == built)


def check(res: Resolver, layers: Sequence[LayerSpec]) -> tuple[frozenset[str], tuple[Disagreement, ...]]:
    """Hold each ``agrees`` key the config writes to the built layers: (the keys that agree,
    which count as read without being an input any slot shows; those that do not)."""
    agreed, out = set(), []
    for item in res.spec.get("agrees", ()):
        given = lookup(res.text, item["key"])
        if given is MISSING or given is None:
            continue
        try:
            built = _built(res, item, layers)
        except SlotdiffError:
            continue  # a value the check cannot work out: the key stays unread
        if built is MISSING:
            continue
        if _same(given, built):
            agreed.add(item["key"].partition(".")[0])
        else:
            out.append(
                _first_difference(res.cite(item["key"]), given, built, item.get("per_layer") or item["value"])
            )
    return frozenset(agreed), tuple(out)


def _first_difference(key: str, given: Any, built: Any, rule: str) -> Disagreement:
    """A per-layer list's disagreement told by its first differing layer (and how many differ)."""
    if not (isinstance(given, list) and isinstance(built, list)):
        return Disagreement(key, given, built, rule)
    if len(given) != len(built):
        return Disagreement(key, f"{len(given)} entries", f"{len(built)} layers", rule)
    differ = [j for j, (g, b) in enumerate(zip(given, built, strict=True)) if not _same(g, b)]
    more = f", {len(differ)} layers differ" if len(differ) > 1 else ""
    return Disagreement(f"{key}[{differ[0]}]", given[differ[0]], built[differ[0]], f"{rule}{more}")
