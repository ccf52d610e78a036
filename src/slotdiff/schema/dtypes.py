"""Number formats by name (``schemas/formats.json``): canonical dtype names, their bits, how
they are written for people, and the bits an element takes with its share of a block scale."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from ..core.resources import load_schema_file


@cache
def formats() -> Mapping[str, Any]:
    return load_schema_file("formats.json")


def canonical_dtype(name: str | None) -> str | None:
    """``bf16`` / ``torch.bfloat16`` / ``bfloat16`` → ``bfloat16``; None when unknown."""
    if not isinstance(name, str):
        return None
    key = name.lower().removeprefix("torch.")
    table = formats()
    key = table["dtype_aliases"].get(key, key)
    return key if key in table["dtypes"] else None


def dtype_bits(name: str) -> int:
    return formats()["dtypes"][name]["bits"]


def dtype_label(name: str) -> str:
    """``float8_e4m3fn`` → ``fp8 E4M3``: how a canonical dtype is written for people."""
    return formats()["dtypes"][name]["label"]


def storage_bits(name: str) -> float:
    """Bits one element takes with its share of a block scale: MXFP4 4 + 8/32 = 4.25."""
    entry = formats()["dtypes"][name]
    group = entry.get("group")
    return entry["bits"] + (entry["scale_bits"] / group if group else 0.0)
