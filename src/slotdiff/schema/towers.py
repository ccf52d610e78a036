"""Read the vision (and audio) side of a multimodal config: encoder dims and injection kind.

Vision configs vary as much as text ones; their aliases live in the key map under
``vision_fields``. Only what the modality slot and the image cost lines need is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from ..read.source import AUDIO_CONFIG_KEYS, VISION_CONFIG_KEYS, RawConfig
from .arch import Value
from .tower_spec import FieldError, spec_fields


def vision_config_key(data: Mapping[str, Any]) -> str | None:
    """The top-level key holding the vision encoder config, if any."""
    for key in VISION_CONFIG_KEYS:
        if isinstance(data.get(key), Mapping) and data[key]:
            return key
    return None


def audio_config_key(data: Mapping[str, Any]) -> str | None:
    """The top-level key holding an audio encoder config, if any."""
    for key in AUDIO_CONFIG_KEYS:
        if isinstance(data.get(key), Mapping) and data[key]:
            return key
    return None


def read_vision(raw: RawConfig) -> dict[str, Value] | None:
    """Vision encoder fields with provenance, or None for a text-only config.

    Where a multimodal data file describes the model (``vision_spec``), the fields its
    tower, connector and image rule read are added, and win over the generic aliases.
    """

    key = vision_config_key(raw.data)
    try:
        if key is None:
            return _checked(raw, spec_fields(raw.data, None)) or None
        out = _generic(raw, key)
        out.update(spec_fields(raw.data, key))
    except FieldError as err:
        raise SlotdiffError(raw.name, err.reason, err.key) from err
    return _checked(raw, out)


def _generic(raw: RawConfig, key: str) -> dict[str, Value]:
    """The key map's vision_fields, read from the vision config (and the top level)."""
    node = raw.data[key]
    table = load_schema_file("keymap.json").get("vision_fields", {})
    out: dict[str, Value] = {"config_key": Value(key, "explicit", (key,))}
    mt = node.get("model_type")
    out["model_type"] = Value(mt, "explicit", (f"{key}.model_type",)) if mt else Value(None, "unknown")
    for name, spec in table.items():
        for scope_key, scope in ((key, node), ("", raw.data)):
            if scope is raw.data and not spec.get("top_level"):
                continue
            for alias in spec["aliases"]:
                if alias in scope and scope[alias] is not None:
                    cited = f"{scope_key}.{alias}" if scope_key else alias
                    out[name] = Value(scope[alias], "explicit", (cited,))
                    break
            if name in out:
                break
    return out


def _checked(raw: RawConfig, fields: dict[str, Value]) -> dict[str, Value]:
    """``fields``, each inside its bounds in schemas/tower_bounds.json, or exit 2 citing the key."""
    for name, value in fields.items():
        bound = _bounds().get(name)
        if bound is None or value.value is None:
            continue
        items = value.value if isinstance(value.value, (list, tuple)) else [value.value]
        for item in items:
            why = _outside(item, bound)
            if why:
                key = value.keys[0] if value.keys else f"{name} (a default)"
                raise SlotdiffError(raw.name, f"{value.value!r}: {why}", key)
    return fields


def _outside(item: Any, bound: Mapping[str, Any]) -> str | None:
    # Not a number at all ("wide"): the tower is then not counted, and the report says why.
    if isinstance(item, bool) or not isinstance(item, (int, float)):
        return None
    if item != item:
        return "not a number"
    if bound["kind"] == "sizes" and not float(item).is_integer():
        return "not a whole number"
    if "minimum" in bound and item < bound["minimum"]:
        return f"below {bound['minimum']}: no encoder has such a size"
    if "exclusiveMinimum" in bound and item <= bound["exclusiveMinimum"]:
        return f"must be above {bound['exclusiveMinimum']}"
    if item > bound["maximum"]:
        return f"above {bound['maximum']:,}, beyond any real model"
    return None


@cache
def _bounds() -> dict[str, dict[str, Any]]:
    data = load_schema_file("tower_bounds.json")
    out: dict[str, dict[str, Any]] = {}
    for kind in ("sizes", "ratios"):
        rule = {k: v for k, v in data[kind].items() if k != "names"}
        out.update({name: {**rule, "kind": kind} for name in data[kind]["names"]})
    return out
