"""A model's sizes: the numbers of each fingerprint facet plus its depth (what two checkpoints
of one design differ in), and how they compare with the sizes on record."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from ..slots.classify import in_fingerprint

DEPTH = "layers"  # the pseudo-facet holding the layer count (no fill carries depth)


def sizes_of(fills: Sequence[Any], n_layers: int | None = None) -> dict[str, dict[str, Any]]:
    """The numbers of each fingerprint facet (what two checkpoints of one design differ in),
    and the depth: a depth-upscaled model has new sizes."""
    # Facet ids are built per call ("slot.facet"): interned, every record shares one copy.
    sizes = {sys.intern(f.id): dict(f.sizes) for f in fills if in_fingerprint(f.id) and f.sizes}
    if n_layers is not None:
        sizes[DEPTH] = {"n_layers": n_layers}
    # As JSON has them (tuples become lists), so sizes read back from the state compare equal.
    # Sizes are plain numbers, strings and tuples of them: converted directly; anything
    # else takes the JSON round trip itself.
    try:
        return {facet: {k: _plain(v) for k, v in numbers.items()} for facet, numbers in sizes.items()}
    except TypeError:
        return json.loads(json.dumps(sizes, default=str))


_SCALARS = (str, int, float, type(None))


def _plain(value: Any) -> Any:
    """``value`` as a JSON round trip returns it, for scalars and lists/tuples of scalars."""
    if type(value) in _SCALARS or type(value) is bool:
        return value
    if type(value) in (tuple, list) and all(type(v) in _SCALARS or type(v) is bool for v in value):
        return list(value)
    raise TypeError(value)


def comparable(now: Mapping[str, Any], was: Mapping[str, Any]) -> Mapping[str, Any]:
    """``now`` as ``was`` can be compared with: sizes on record from before the depth was kept
    (earlier scans, older proposals) are compared without it."""
    return now if DEPTH in was else {k: v for k, v in now.items() if k != DEPTH}


def size_changes(now: Mapping[str, Any], known: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The numbers that differ from the closest sizes on record (fewest differences)."""
    best: list[dict[str, Any]] | None = None
    for was in known:
        mine = comparable(now, was)
        changes = []
        for facet in sorted(set(mine) | set(was)):
            a, b = dict(was.get(facet, {})), dict(mine.get(facet, {}))
            for size in sorted(set(a) | set(b)):
                if a.get(size) != b.get(size):
                    changes.append({"facet": facet, "size": size, "was": a.get(size), "now": b.get(size)})
        if best is None or len(changes) < len(best):
            best = changes
    return best or []
