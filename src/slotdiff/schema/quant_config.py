"""A config's ``quantization_config`` read safely: values slotdiff does arithmetic with held to
what a real scheme writes, exclusion patterns checked before any use, and every refusal one
line naming the key (never an int() or a division failing deep in the cost pass)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.errors import SlotdiffError
from ..read.hf_quant import MAX_BITS, MAX_GROUP, pattern_problem
from .arch import Architecture

__all__ = ["MAX_BITS", "MAX_GROUP", "QuantConfig"]


def _list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(str(v) for v in value)
    return ()


class QuantConfig:
    """Reads ``quantization_config`` values, refusing (one line, key named) what no real
    scheme writes instead of letting int() or a division fail deep in the cost pass."""

    def __init__(self, arch: Architecture, q: Mapping[str, Any]) -> None:
        self.arch, self.q = arch, q
        self.key = arch.key("quantization_config")

    def fail(self, key: str, why: str) -> SlotdiffError:
        return SlotdiffError(self.arch.name, why, key=f"{self.key}.{key}")

    def int(
        self,
        node: Mapping[str, Any],
        names: Sequence[str],
        default: int | None,
        low: int,
        high: int,
        at: str = "",
    ) -> int | None:
        """The first of ``names`` present in ``node`` as an integer in ``low..high``."""
        for name in names:
            if name in node and node[name] is not None:
                value = node[name]
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                    raise self.fail(at + name, f"expected an integer {low}..{high:,}, got {value!r}")
                return value
        return default

    def block(self, node: Mapping[str, Any], name: str, at: str = "") -> tuple[int, int] | None:
        """A 2-D scale tile ``[rows, cols]``, or None when the key is absent or not a pair."""
        block = node.get(name)
        if not isinstance(block, Sequence) or isinstance(block, str) or len(block) != 2:
            return None
        out = []
        for i, side in enumerate(block):
            if isinstance(side, float) and side.is_integer():
                side = int(side)
            if not isinstance(side, int) or isinstance(side, bool) or not 1 <= side <= MAX_GROUP:
                raise self.fail(f"{at}{name}[{i}]", f"expected an integer 1..{MAX_GROUP:,}, got {side!r}")
            out.append(side)
        return out[0], out[1]

    def patterns(self, key: str) -> tuple[str, ...]:
        """The exclusion patterns under ``key``, each ``re:`` one checked before any use."""
        exclude = _list(self.q.get(key))
        for pattern in exclude:
            why = pattern_problem(pattern)
            if why:
                shown = pattern if len(pattern) <= 60 else pattern[:57] + "..."
                raise self.fail(key, f"exclusion pattern {shown!r} {why}")
        return exclude
