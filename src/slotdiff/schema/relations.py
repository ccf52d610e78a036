"""Relations between fields (schemas/field_relations.json): sizes no model has together.

A field's own bounds live in the key map; what only a pair of fields can say (an MoE layer
routing each token to zero experts, more experts per token than there are) is a row in the
data file, checked here on the resolved values, the key of the offending field cited.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from .resolver import Resolver


def _number(res: Resolver, name: str) -> Any:
    val = res.resolve(name)
    if not val.known or isinstance(val.value, bool):
        return None
    return val.value if isinstance(val.value, (int, float)) else None


def check_relations(res: Resolver) -> None:
    """Raise SlotdiffError (citing the key) for the first relation ``res`` breaks."""
    for rel in load_schema_file("field_relations.json")["relations"]:
        value = _number(res, rel["field"])
        gate = _number(res, rel["when_positive"])
        if value is None or gate is None or gate <= 0:
            continue
        explicit = rel.get("if_explicit")
        if explicit and res.resolve(explicit).how not in ("explicit", "alias"):
            continue
        if value >= rel["at_least"]:
            continue
        reason = rel["reason"].format(**{n: _number(res, n) for n in (rel["field"], rel["when_positive"])})
        raise SlotdiffError(res.raw.name, f"{value!r}: {reason}", key=res.key_of(rel["field"]))
