"""Compare two architectures slot by slot, and their raw configs key by key.

Facet status: ``same`` (same design and sizes), ``resized`` (same design, other sizes),
``changed`` (another design: kind or categorical attributes differ). Raw key changes come
from :mod:`.keydiff` (linear time) and are attributed to the slot whose canonical field the
key feeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..schema.keymap import keymap
from .fill import Fill, Fills
from .keydiff import differences, dotted


def facet_status(a: Fill, b: Fill) -> str:
    """``same`` / ``resized`` / ``changed`` for one facet of two models."""
    if a.design != b.design:
        return "changed"
    if a.sizes != b.sizes:
        return "resized"
    return "same"


@dataclass(frozen=True)
class FacetDiff:
    """One facet of model A against model B."""

    facet: str  # "attention.kv"
    status: str
    a: Fill
    b: Fill


def diff_fills(a: Fills, b: Fills) -> tuple[FacetDiff, ...]:
    """Every facet of ``a`` against ``b``, in slot-table order."""
    return tuple(FacetDiff(fa.id, facet_status(fa, fb), fa, fb) for fa, fb in zip(a, b, strict=True))


# --------------------------------------------------------------------------- raw keys


@dataclass(frozen=True)
class KeyChange:
    """One raw config key that differs, with the slot facet it feeds (or None)."""

    path: str  # dotted, e.g. "rope_scaling.factor"
    change: str  # added | removed | changed | type_changed
    old: Any
    new: Any
    facet: str | None
    free: bool = False  # a key known to carry no structure (dropout, token ids, cache flags)


@cache
def key_facets() -> Mapping[str, str]:
    """Top-level config key → facet, from the key map's ``facet`` entries."""

    out: dict[str, str] = {}
    for spec in keymap()["fields"].values():
        facet = spec.get("facet")
        if facet:
            for alias in spec["aliases"]:
                out.setdefault(alias.split(".")[0], facet)
    out.update(keymap().get("key_facets", {}))
    return out


def evidence_facets(fills: Fills, text_path: tuple[str, ...] = ()) -> dict[str, str]:
    """Top-level config key (within the text config) → the facet whose evidence shows it: the
    attribution the slot table itself makes, family aliases included."""
    out: dict[str, str] = {}
    depth = len(text_path)
    for f in fills:
        for key, _ in f.evidence:
            parts = key.split(".")
            if depth and parts[:depth] == list(text_path):
                parts = parts[depth:]
            if parts:
                out.setdefault(parts[0], f.id)
    return out


def key_changes(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    text_path: tuple[str, ...] = (),
    facets: Mapping[str, str] | None = None,
    free: frozenset[str] = frozenset(),
) -> tuple[KeyChange, ...]:
    """Key-level changes from config ``a`` to ``b`` (:mod:`.keydiff`, linear in the configs'
    size), each attributed to a facet: by ``facets`` (the models' own slot evidence,
    :func:`evidence_facets`) first, else by the key map's static table. An array's items are
    ``changed`` at their positions (items past the other array's end too), never ``added``."""
    facets = {**key_facets(), **(facets or {})}
    out: list[KeyChange] = []
    depth = len(text_path)
    for d in differences(dict(a), dict(b)):
        # Attribute list items to their list key (layer_types[3] → layer_types).
        parts = list(d.path)
        in_array = bool(parts) and not isinstance(parts[-1], str)
        while parts and not isinstance(parts[-1], str):
            parts.pop()
        rel = parts[depth:] if parts[:depth] == list(text_path) else parts
        top = str(rel[0]) if rel else ""
        facet = facets.get(top)
        change = "changed" if in_array else d.change
        out.append(KeyChange(dotted(d.path), change, d.old, d.new, facet, facet is None and top in free))
    return tuple(sorted(out, key=lambda k: k.path))
