"""The longest context a model declares, and the warning for a workload beyond it.

``max_position_embeddings`` is the trained (or declared) limit; a RoPE scaling entry may
declare a longer one: YaRN, linear and dynamic NTK scaling stretch
``original_max_position_embeddings`` (else the table's length) by ``factor``; Llama-3 and
LongRoPE scaling already count in ``max_position_embeddings``. The larger of the two is
the limit (vLLM derives ``max_model_len`` the same way).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core.errors import SlotdiffError
from ..schema.arch import Architecture

STRETCHING = ("yarn", "linear", "dynamic")


@dataclass(frozen=True)
class ContextLimit:
    """The model's longest context and where the number comes from."""

    tokens: int | None
    source: str

    def beyond(self, context: int) -> bool:
        return self.tokens is not None and context > self.tokens

    def warning(self, context: int) -> str | None:
        if not self.beyond(context):
            return None
        assert self.tokens is not None
        return (
            f"context {context:,} is beyond the model's {self.tokens:,}-token limit ({self.source}): "
            "positions past it were never trained and the figures there are extrapolation"
        )

    def to_dict(self) -> dict[str, object]:
        return {"tokens": self.tokens, "source": self.source}


MAX_CONTEXT = 2**40  # as --context (cost.workload)


def context_limit(arch: Architecture) -> ContextLimit:
    """The longest context ``arch``'s config declares (None: it states none)."""
    table = arch.get("max_positions")
    rope = arch.get("rope_scaling")
    stretched = None
    if isinstance(rope, Mapping):
        kind = str(rope.get("rope_type") or rope.get("type") or "")
        factor = rope.get("factor")
        base = rope.get("original_max_position_embeddings") or table
        if kind in STRETCHING and isinstance(factor, (int, float)) and isinstance(base, int) and factor > 1:
            if not base * factor <= MAX_CONTEXT:  # also NaN and infinity
                raise SlotdiffError(
                    arch.name,
                    f"{factor!r} stretches {base:,} positions past 2^40, beyond any real model",
                    key=arch.fields["rope_scaling"].keys[0]
                    if arch.fields["rope_scaling"].keys
                    else "rope_scaling",
                )
            stretched = (int(base * factor), f"rope_scaling {kind} ×{factor:g} of {base:,}")
    if isinstance(table, int) and (stretched is None or stretched[0] <= table):
        return ContextLimit(table, "max_position_embeddings")
    if stretched is not None:
        return ContextLimit(*stretched)
    return ContextLimit(None, "the config states no limit")
