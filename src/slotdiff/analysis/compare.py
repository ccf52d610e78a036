"""Model-to-model diff: slot by slot, cost deltas, and raw key changes attributed to slots."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import SlotdiffError
from ..cost.deltas import deltas as cost_deltas
from ..cost.price import cost_of
from ..read.jsonpos import strict
from ..schema.keymap import structure_free_keys
from ..slots.classify import Classification, classify
from ..slots.differ import FacetDiff, KeyChange, diff_fills, evidence_facets, key_changes
from ..slots.fill import slot_table
from .analyze import Model, load

Source = str | Path | Mapping[str, Any] | Model


@dataclass(frozen=True)
class Comparison:
    """What changed from model ``a`` to model ``b``."""

    a: Model
    b: Model
    facets: tuple[FacetDiff, ...]
    keys: tuple[KeyChange, ...]
    class_a: Classification
    class_b: Classification
    cost_a: Any = None
    cost_b: Any = None

    def changed(self) -> tuple[FacetDiff, ...]:
        """Facets whose design differs."""
        return tuple(f for f in self.facets if f.status == "changed")

    def deltas(self) -> dict[str, float | int] | None:
        if self.cost_a is None or self.cost_b is None:
            return None

        return cost_deltas(self.cost_b, self.cost_a)

    def to_dict(self) -> dict[str, Any]:
        """The comparison as strict JSON data (raw values NaN/Infinity as strings)."""

        art = {i.id: i.article for i in slot_table()}
        return strict(
            {
                "a": {
                    "model": self.a.raw.name,
                    "model_type": self.a.arch.model_type,
                    "class": self.class_a.to_dict(),
                },
                "b": {
                    "model": self.b.raw.name,
                    "model_type": self.b.arch.model_type,
                    "class": self.class_b.to_dict(),
                },
                "slots": [
                    {
                        "facet": f.facet,
                        "status": f.status,
                        "article": art[f.facet],
                        "a": {"kind": f.a.kind, "detail": f.a.detail},
                        "b": {"kind": f.b.kind, "detail": f.b.detail},
                    }
                    for f in self.facets
                ],
                "cost_deltas": self.deltas(),
                "keys": [
                    {
                        "path": k.path,
                        "change": k.change,
                        "old": k.old,
                        "new": k.new,
                        "facet": k.facet,
                        "structural": not k.free,
                    }
                    for k in self.keys
                ],
            }
        )


def diff(a: Source, b: Source, workload: Any = None, cost: bool = True) -> Comparison:
    """Compare two models (paths, repo ids, dicts or loaded Models)."""
    ma = a if isinstance(a, Model) else load(a)
    mb = b if isinstance(b, Model) else load(b)
    cost_a = cost_b = None
    if cost:
        try:
            cost_a, cost_b = cost_of(ma.arch, workload), cost_of(mb.arch, workload)
        except SlotdiffError:
            cost_a = cost_b = None
    text_path = ma.arch.text_path if ma.arch.text_path == mb.arch.text_path else ()
    owners = {**evidence_facets(ma.fills, text_path), **evidence_facets(mb.fills, text_path)}
    free = structure_free_keys(ma.arch.model_type) | structure_free_keys(mb.arch.model_type)
    keys = key_changes(ma.raw.data, mb.raw.data, text_path, owners, free)
    return Comparison(
        ma,
        mb,
        diff_fills(ma.fills, mb.fills),
        keys,
        classify(ma.arch, ma.fills),
        classify(mb.arch, mb.fills),
        cost_a,
        cost_b,
    )
