"""Relations between fields (schemas/field_relations.json): sizes no model has together.

A field's own bounds live in the key map; what only a pair of fields can say (an MoE layer
routing each token to zero experts, query heads that do not split over the KV heads) is a
row in the data file, checked here on the resolved values, the key of the offending field
cited. Lint reads the same rows (:func:`broken`), so a config the analysis refuses is the
lint error the row names, never priced in one place and flagged in the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from .resolver import Resolver


class RelationError(SlotdiffError):
    """A broken relation; ``code`` is the lint rule that reports it (lint's SD103 leaves it to
    that rule, so ignoring the rule in a policy ignores it once, not under two codes)."""

    def __init__(self, source: str, reason: str, key: str | None, code: str | None) -> None:
        super().__init__(source, reason, key=key)
        self.code = code


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def relations() -> list[Mapping[str, Any]]:
    """The rows of schemas/field_relations.json."""
    return load_schema_file("field_relations.json")["relations"]


def broken(
    rel: Mapping[str, Any], value_of: Callable[[str], Any], explicit: Callable[[str], bool]
) -> str | None:
    """Why the fields ``value_of`` gives break relation ``rel`` (None when they do not, or when a
    field it names is unknown); ``explicit`` says whether a field was written in the config."""
    value = _number(value_of(rel["field"]))
    if value is None:
        return None
    names = [rel["field"]]
    if "at_least" in rel:
        gate = _number(value_of(rel["when_positive"]))
        names.append(rel["when_positive"])
        if gate is None or gate <= 0 or value >= rel["at_least"]:
            return None
        if rel.get("if_explicit") and not explicit(rel["if_explicit"]):
            return None
    else:
        of = _number(value_of(rel["multiple_of"]))
        names.append(rel["multiple_of"])
        unless = _number(value_of(rel["unless_positive"])) if rel.get("unless_positive") else None
        if of is None or of <= 0 or value <= 0 or (unless is not None and unless > 0) or value % of == 0:
            return None
    return rel["reason"].format(**{n: value_of(n) for n in names})


def check_relations(res: Resolver) -> None:
    """Raise SlotdiffError (citing the key) for the first relation ``res`` breaks."""

    def value_of(name: str) -> Any:
        val = res.resolve(name)
        return val.value if val.known else None

    def explicit(name: str) -> bool:
        return res.resolve(name).how in ("explicit", "alias")

    for rel in relations():
        why = broken(rel, value_of, explicit)
        if why is None:
            continue
        cited = rel.get("cite", rel["field"])
        raise RelationError(res.raw.name, f"{value_of(cited)!r}: {why}", res.key_of(cited), rel.get("lint"))


def lint_relations(code: str) -> Iterator[Mapping[str, Any]]:
    """The rows lint reports under ``code``."""
    return (rel for rel in relations() if rel.get("lint") == code)
