"""A canonical field's JSON type and bounds from the key map, as the resolver holds a value to
them: the message for a value of the wrong type, and the fast path for a plain int."""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from .keymap import field_spec

_TYPES: dict[str, tuple[type, ...]] = {
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "string": (str,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


_TYPE_NAMES = {"integer": "an integer", "number": "a number", "boolean": "true/false", "string": "a string"}
_TYPE_NAMES.update(array="an array", object="an object", null="null")


def type_error(value: Any, types: list[str]) -> str | None:
    """Why ``value`` does not match the JSON types ``types`` (None when it does)."""
    for t in types:
        allowed = _TYPES[t]
        if isinstance(value, bool) and t in ("integer", "number"):
            continue
        if isinstance(value, allowed):
            return None
    shown = repr(value) if not isinstance(value, str) else f'the string "{value}"'
    if len(shown) > 40:
        shown = shown[:37] + "..."
    want = " or ".join(_TYPE_NAMES[t] for t in types)
    if "integer" in types and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        # transformers' config classes and torch's layers refuse 4096.0 where a size goes
        return f"expected {want}, got {shown} (a float: transformers and torch refuse a float size)"
    return f"expected {want}, got {shown}"


@cache
def int_bounds(name: str) -> tuple[float, float, bool] | None:
    """(low, high, low excluded) when a plain int is acceptable for ``name`` by type, else None."""
    spec = field_spec(name)
    types = spec.get("type")
    types = [types] if isinstance(types, str) else list(types or ())
    if not ({"integer", "number"} & set(types)) or "enum" in spec:
        return None
    low, high = spec.get("minimum"), spec.get("maximum")
    return (
        -math.inf if low is None else low,
        math.inf if high is None else high,
        bool(spec.get("exclusiveMinimum")),
    )


def plain_int_ok(name: str, value: int) -> bool:
    """True when ``value`` (an int) passes every check of field ``name`` (the resolver's fast path)."""
    bounds = int_bounds(name)
    if bounds is None:
        return False
    low, high, excluded = bounds
    return (low < value or (value == low and not excluded)) and value <= high
