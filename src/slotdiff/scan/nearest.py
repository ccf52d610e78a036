"""How a new design differs from its nearest family, facet by facet, in words a report shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from ..slots.classify import Family
from ..slots.fill import articles, slot_table
from .knowledge import family_details


@cache
def _facet_articles() -> dict[str, str]:
    return {i.id: i.article for i in slot_table()}


def _design_words(fam: Family, facet: str) -> str:
    """A facet of a family with no bundled exemplar: its kind and attributes."""
    try:
        kind, attrs = fam.fingerprint[facet]
    except KeyError:
        return "(none)"
    shown = ", ".join(f"{k}={v}" for k, v in attrs if v not in (None, False, (), ""))
    return f"{kind} ({shown})" if shown else kind


def facet_changes(differs: Sequence[str], fam: Family, now: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each differing facet with its article and both values: the family's, then this model's."""
    article = _facet_articles()
    titles = articles()
    theirs = family_details(fam)
    return [
        {
            "facet": f,
            "article": article.get(f, ""),
            "title": titles.get(article.get(f, ""), {}).get("title", ""),
            "was": theirs.get(f) or _design_words(fam, f),
            "now": now.get(f, ""),
        }
        for f in differs
    ]
