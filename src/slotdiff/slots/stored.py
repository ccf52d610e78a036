"""Fills as JSON and back, exactly: the knowledge bundle keeps GPT-2's and Llama-3-8B's fills
(tools/bundle.py), so a run reads the baselines instead of building them.

Every value keeps its type: JSON's own scalars stand for themselves, and each container is
an object of one tag, ``t`` (tuple), ``l`` (list) or ``d`` (dict, as key-value pairs), so
``(1, 2)`` and ``[1, 2]`` come back as they went, and so does ``{"1": True}``.
"""

from __future__ import annotations

from typing import Any

from .fill import Fill, Fills

_FIELDS = ("slot", "facet", "kind", "attrs", "sizes", "detail", "evidence", "notes")


def encode(value: Any) -> Any:
    """``value`` as JSON data that :func:`decode` turns back into an equal value of the same types."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple):
        return {"t": [encode(v) for v in value]}
    if isinstance(value, list):
        return {"l": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    raise TypeError(f"cannot store a {type(value).__name__} in the bundle: {value!r}")


def decode(data: Any) -> Any:
    """The value :func:`encode` wrote."""
    if not isinstance(data, dict):
        return data
    ((tag, items),) = data.items()
    if tag == "t":
        return tuple(decode(v) for v in items)
    if tag == "l":
        return [decode(v) for v in items]
    return {decode(k): decode(v) for k, v in items}


def fills_to_data(fills: Fills) -> dict[str, Any]:
    """``fills`` as JSON data (see the module docstring)."""
    return {
        "items": [[encode(getattr(f, name)) for name in _FIELDS] for f in fills.items],
        "unplaced": encode(fills.unplaced),
    }


def fills_from_data(data: dict[str, Any]) -> Fills:
    """The Fills :func:`fills_to_data` wrote."""
    items = tuple(Fill(**{n: decode(v) for n, v in zip(_FIELDS, row, strict=True)}) for row in data["items"])
    return Fills(items, decode(data["unplaced"]))
