"""Active parameters as the model's owner quotes them: with or without the token-embedding
table (which a token only gathers), from ``schemas/active_params.json``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..core.resources import load_schema_file
from ..schema.arch import Architecture
from .params import ParamCount


@cache
def _table() -> dict[str, Any]:
    return load_schema_file("active_params.json")


@dataclass(frozen=True)
class ActiveHeadline:
    """Both counts, and which one the owner quotes (None: unknown)."""

    with_embedding: int
    without_embedding: int
    owner: str | None
    owner_counts_embedding: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "with_embedding": self.with_embedding,
            "without_embedding": self.without_embedding,
            "owner": self.owner,
            "owner_counts_embedding": self.owner_counts_embedding,
        }


def active_headline(arch: Architecture, params: ParamCount) -> ActiveHeadline:
    t = _table()
    owner, counts = None, None
    for key, with_table in (("without_embedding", False), ("with_embedding", True)):
        entry = t[key].get(arch.model_type)
        if entry:
            owner, counts = entry["owner"], with_table
    return ActiveHeadline(params.active, params.active_without_embedding, owner, counts)
