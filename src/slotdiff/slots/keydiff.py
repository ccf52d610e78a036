"""Key-level differences between two JSON values, in time linear in their size.

Objects are compared key by key; arrays position by position (a config's arrays are per-layer
or per-expert tables, where index i means layer i, so an edit is a change at its positions,
never an alignment to search for); a run of neighbouring positions that changed is one
change over the run (``layer_types[4:16384]``), and so are the items one array has past the
other's end. Each value is visited once: a 16,384-entry ``layer_types`` or 64,000 zeros
cost a pass over the lists, where an aligning diff (difflib, as deepdiff used) grows with
the square of their length.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

Path = tuple[str | int | slice, ...]


@dataclass(frozen=True)
class Difference:
    """One place where ``b`` differs from ``a``: added, removed or changed (old/new None
    where a side has nothing there)."""

    path: Path
    change: str  # added | removed | changed
    old: Any
    new: Any


def _same(x: Any, y: Any) -> bool:
    """Equal as JSON values: same type (1 is not 1.0 or true), NaN equal to NaN."""
    if type(x) is not type(y):
        return False
    if isinstance(x, float) and math.isnan(x) and math.isnan(y):
        return True
    return x == y


def _container(x: Any) -> bool:
    return isinstance(x, (Mapping, list))


def differences(a: Any, b: Any, path: Path = ()) -> Iterator[Difference]:
    """Every difference from ``a`` to ``b``, objects key by key (``a``'s order, then keys only
    ``b`` has), arrays position by position with runs of changed positions as one."""
    stack: list[tuple[Any, Any, Path]] = [(a, b, path)]
    while stack:  # explicit stack: nesting is capped at 64, but recursion costs frames
        x, y, at = stack.pop()
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            nested: list[tuple[Any, Any, Path]] = []
            for key, value in x.items():
                if key not in y:
                    yield Difference((*at, key), "removed", value, None)
                elif _container(value) and _container(y[key]):
                    nested.append((value, y[key], (*at, key)))
                elif not _same(value, y[key]):
                    yield Difference((*at, key), "changed", value, y[key])
            for key, value in y.items():
                if key not in x:
                    yield Difference((*at, key), "added", None, value)
            stack.extend(reversed(nested))
        elif isinstance(x, list) and isinstance(y, list):
            yield from _arrays(x, y, at, stack)
        elif not _same(x, y):
            yield Difference(at, "changed", x, y)


def _arrays(x: list[Any], y: list[Any], at: Path, stack: list[tuple[Any, Any, Path]]) -> Iterator[Difference]:
    """Positions ``0..min`` one by one (runs of changed scalars as one), then the tail."""
    common = min(len(x), len(y))
    start: int | None = None
    nested: list[tuple[Any, Any, Path]] = []
    for i in range(common + 1):
        changed = False
        if i < common:
            u, v = x[i], y[i]
            if _container(u) and _container(v) and type(u) is type(v):
                nested.append((u, v, (*at, i)))
            else:
                changed = not _same(u, v)
        if changed and start is None:
            start = i
        elif not changed and start is not None:
            yield _run(x, y, at, start, i)
            start = None
    if len(x) != len(y):
        end = max(len(x), len(y))
        where = (*at, common) if end - common == 1 else (*at, slice(common, end))
        if len(x) > len(y):
            yield Difference(where, "removed", x[common] if end - common == 1 else x[common:], None)
        else:
            yield Difference(where, "added", None, y[common] if end - common == 1 else y[common:])
    stack.extend(reversed(nested))


def _run(x: list[Any], y: list[Any], at: Path, start: int, stop: int) -> Difference:
    if stop - start == 1:
        return Difference((*at, start), "changed", x[start], y[start])
    return Difference((*at, slice(start, stop)), "changed", x[start:stop], y[start:stop])


def dotted(path: Path) -> str:
    """``("rope_scaling", "factor")`` → ``rope_scaling.factor``; ``("layer_types", 3)`` →
    ``layer_types[3]``; a run of positions ``layer_types[4:16384]``."""
    out = ""
    for part in path:
        if isinstance(part, slice):
            out += f"[{part.start}:{part.stop}]"
        elif isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
