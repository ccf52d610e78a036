"""Per-layer values from config lists: ``per_layer_config`` (transformers' per-layer
override dicts), ``layer_values`` and ``layer_map`` (one config list read into one LayerSpec
attribute per layer); importing this module registers the rules."""

from __future__ import annotations

from typing import Any

from ..core.errors import SlotdiffError
from .arch import LayerSpec, evolve
from .layer_rules import raw_value, rule, set_attrs
from .resolver import Resolver

# transformers' per-layer override keys and the LayerSpec attribute each sets.
PER_LAYER_ATTRS = {
    "head_dim": "head_dim",
    "num_key_value_heads": "n_kv_heads",
    "num_attention_heads": "n_heads",
    "intermediate_size": "d_ff",
}
# Per-layer override keys held in LayerSpec.sizes, by the canonical field each overrides.
PER_LAYER_SIZES = {
    "kv_lora_rank": "kv_lora_rank",
    "q_lora_rank": "q_lora_rank",
    "qk_nope_head_dim": "qk_nope_head_dim",
    "qk_rope_head_dim": "qk_rope_head_dim",
    "v_head_dim": "v_head_dim",
}


@rule("per_layer_config")
def _per_layer_config(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """transformers' heterogeneous configs (HeterogeneousConfigMixin): ``per_layer_config``
    maps a layer index (an int, or a zero-padded string as to_dict writes it) to the config
    attributes that differ on that layer; head_dim, num_key_value_heads, num_attention_heads
    and intermediate_size set the layer's own sizes (Gemma 4 Unified's global layers), and
    the MLA widths (PER_LAYER_SIZES) its ``sizes`` (Dots3 Note's sliding layers). ``ignore`` lists override
    keys that change no tensor; any other key refuses, since it may change the structure.
    ``absent`` (``{"match": attribute, "overrides": {...}}``) is the table the config class
    builds when the file has none: those overrides on every layer whose ``match`` attribute
    is set (Dots3 Note's sliding layers take its SWA widths)."""
    key = args.get("key", "per_layer_config")
    table = raw_value(res, key)
    if table is None and "absent" in args:
        absent = args["absent"]
        table = {s.index: absent["overrides"] for s in layers if getattr(s, absent["match"])}
    if table is None:
        return layers
    cited = res.cite(key)
    if not isinstance(table, dict):
        raise SlotdiffError(res.raw.name, "expected an object of layer index → overrides", key=cited)
    ignore = set(args.get("ignore", ()))
    changes: dict[int, dict[str, Any]] = {}
    for index, overrides in table.items():
        at = f"{cited}.{index}"
        i = int(index) if isinstance(index, str) and index.isdigit() and len(index) < 7 else index
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(layers):
            raise SlotdiffError(res.raw.name, f"expected a layer index below {len(layers)}", key=at)
        if not isinstance(overrides, dict):
            raise SlotdiffError(res.raw.name, "expected an object of overrides", key=at)
        for name, value in overrides.items():
            if name in ignore:
                continue
            attr = PER_LAYER_ATTRS.get(name)
            if attr is None and name not in PER_LAYER_SIZES:
                raise SlotdiffError(res.raw.name, f"a per-layer {name} is not modelled", key=f"{at}.{name}")
            if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 2**40:
                why = f"expected a positive size, got {value!r}"
                raise SlotdiffError(res.raw.name, why, key=f"{at}.{name}")
            if attr is None:
                sizes = changes.setdefault(i, {}).setdefault("sizes", {})
                sizes[PER_LAYER_SIZES[name]] = value
            else:
                changes.setdefault(i, {})[attr] = value
    for change in changes.values():
        if "sizes" in change:
            change["sizes"] = tuple(sorted(change["sizes"].items()))
    return [evolve(s, **changes[s.index]) if s.index in changes else s for s in layers]


@rule("layer_values", key_type="array")
def _layer_values(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer integer ``attr`` from the list under config key ``key``, one entry per layer
    (Laguna ``num_attention_heads_per_layer`` → ``n_heads``). Absent or null: unchanged."""
    values = raw_value(res, args["key"])
    if values is None:
        return layers
    key = res.cite(args["key"])
    if not isinstance(values, list) or len(values) != len(layers):
        raise SlotdiffError(res.raw.name, f"expected a list of {len(layers)} per-layer values", key=key)
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 1099511627776:
            raise SlotdiffError(res.raw.name, f"expected positive integers, got {v!r}", key=key)
    return [evolve(s, **{args["attr"]: v}) for s, v in zip(layers, values, strict=True)]


@rule("layer_map", key_type="array")
def _layer_map(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """A per-layer list under config key ``key`` mapped through ``map`` (each entry, written
    as a string, to the attributes to ``set``): per-layer 0/1 switches transformers accepts
    in place of an interval (MiniMax-M3's ``moe_layer_freq`` and
    ``sparse_attention_config.sparse_attention_freq``; DeepSeek-V4's legacy ``compress_ratios``).
    ``truncate``: a longer list is cut to the layer count, as the config class does (a list
    that also covers MTP layers). ``pattern`` (``{"key", "map": {char: entry}}``): when the
    list is absent, a string of one code per layer under that key gives it, as the config
    class derives it (GLM-5's ``index_topk_pattern``). Absent or null: unchanged."""
    values, key = raw_value(res, args["key"]), res.cite(args["key"])
    pattern = args.get("pattern")
    if values is None and pattern:
        values, key = _from_pattern(res, pattern)
    elif pattern:  # the list given: the class never looks at the pattern, nor does this rule
        res.note_read(pattern["key"])
    if values is None:
        return layers
    if args.get("truncate") and isinstance(values, list):
        values = values[: len(layers)]  # the config class keeps the first n entries
    if not isinstance(values, list) or len(values) != len(layers):
        raise SlotdiffError(res.raw.name, f"expected a list of {len(layers)} per-layer entries", key=key)
    table: dict[str, dict[str, Any]] = args["map"]
    out = []
    for s, v in zip(layers, values, strict=True):
        name = str(v).lower() if isinstance(v, (bool, int, str)) else None
        if name not in table:
            raise SlotdiffError(res.raw.name, f"unknown per-layer entry {v!r}", key=key)
        out.append(set_attrs(res, s, table[name]))
    return out


def _from_pattern(res: Resolver, pattern: dict[str, Any]) -> tuple[Any, str]:
    """A per-layer list from a code string (``"FSSF..."``) under ``pattern["key"]``, mapped per
    character; a list there is taken as it is; (None, key) when the key is absent or null."""
    raw, key = raw_value(res, pattern["key"]), res.cite(pattern["key"])
    if not isinstance(raw, str):
        return raw, key
    bad = [ch for ch in raw if ch not in pattern["map"]]
    if bad:
        raise SlotdiffError(res.raw.name, f"unknown layer code {bad[0]!r}", key=key)
    return [pattern["map"][ch] for ch in raw], key
