"""How sure an answer is: ``verified`` only when transformers' own classes agree with slotdiff
on this model_type and its towers (the conformance table, ``schemas/coverage.json``) in the
shapes published files take (minimal, one key dropped, per-layer lists: ``forms``), and every
config key was read or is known to carry no structure; ``unverified`` with the reasons otherwise.

The conformance table is written by ``tools/conformance.py report`` from transformers'
registry (docs/COVERAGE.md is its readable form); this module only looks rows up.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..core.resources import load_schema_file
from ..cost.inventory.tensor import Unsupported
from ..cost.inventory.towers import vision_model
from ..cost.params import ParamCount
from ..schema.arch import Architecture

VERIFIED, UNVERIFIED = "verified", "unverified"
BY_CHECKPOINT = "verified by the checkpoint"  # beats VERIFIED: measured on this model's own weights
UNREAD_REASON = "keys slotdiff did not read, which may change the structure"
UNPLACED_REASON = "keys slotdiff read that no slot facet shows"
MAX_KEYS_NAMED = 8  # a reason names this many unread keys, then says how many more


@dataclass(frozen=True)
class Coverage:
    """The trust level of one answer and why."""

    status: str  # BY_CHECKPOINT, VERIFIED or UNVERIFIED
    reasons: tuple[str, ...] = ()
    basis: str = ""  # what a verified answer rests on, for people reading it

    @property
    def verified(self) -> bool:
        return self.status in (VERIFIED, BY_CHECKPOINT)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reasons": list(self.reasons)}

    def line(self) -> str:
        """One line for a terminal: ``verified`` or ``unverified: reason; reason``."""
        if self.verified:
            line = f"{self.status}: {self.basis}" if self.basis else self.status
            return line + ("; still unchecked: " + "; ".join(self.reasons) if self.reasons else "")
        return f"{self.status}: " + "; ".join(self.reasons)


@cache
def _table() -> dict[str, Any]:
    return load_schema_file("coverage.json")


@cache
def transformers_types() -> frozenset[str]:
    """Every model_type in transformers' registry (schemas/config_keys.json)."""
    return frozenset(load_schema_file("config_keys.json")["model_types"])


def model_type_reason(model_type: str, donor: str | None = None) -> str | None:
    """Why the conformance table does not vouch for ``model_type`` (None when it is exact);
    ``donor``: the known model_type an unknown one was read as."""
    table = _table()
    version = table.get("transformers_version", "")
    row = table.get("model_types", {}).get(model_type)
    how = (
        f"read as {donor}, whose keys and design it matches, with {donor}'s structure facts assumed"
        if donor
        else "its structure is read by common key names"
    )
    if row is None:
        if model_type not in transformers_types():
            return (
                f"model_type {model_type or '(none)'!r} is not in transformers {version} (remote code): "
                f"{how} and is not checked"
            )
        return f"model_type {model_type!r} is not in the conformance table (not checked against transformers)"
    if row.get("status") != "exact":
        why = row.get("why") or row.get("status", "")
        return (
            f"model_type {model_type!r} differs from transformers {version} in the conformance table: {why}"
        )
    return _forms_reason(model_type, row.get("forms"))


#: The published shapes a type must be exact on to be vouched for (tools/forms.py's families).
FORMS_NEEDED = ("minimal", "dropped")


def _forms_reason(model_type: str, forms: dict[str, str] | None) -> str | None:
    """Why the type's published shapes do not vouch for it: a form family not checked (minimal,
    one key dropped) or any family (per-layer lists too) not exact; None when they do."""
    forms = forms or {}
    unchecked = [f for f in FORMS_NEEDED if f not in forms]
    if unchecked:
        return (
            f"model_type {model_type!r} is not checked against transformers in the shapes published "
            f"files take ({', '.join(unchecked)} form)"
        )
    bad = [f"{family}: {status}" for family, status in forms.items() if status != "exact"]
    if bad:
        return (
            f"model_type {model_type!r} differs from transformers in the shapes published files take "
            f"({'; '.join(bad)}; docs/COVERAGE.md)"
        )
    return None


def _keys_reason(keys: tuple[str, ...]) -> str:
    shown = ", ".join(keys[:MAX_KEYS_NAMED])
    more = f" and {len(keys) - MAX_KEYS_NAMED} more" if len(keys) > MAX_KEYS_NAMED else ""
    return f"{UNREAD_REASON}: {shown}{more}"


def coverage(
    arch: Architecture,
    params: ParamCount | None = None,
    refused: str | None = None,
    unplaced: tuple[str, ...] = (),
) -> Coverage:
    """The trust level of what slotdiff says about ``arch`` (with its parameter count, if any);
    ``unplaced``: keys it read that no slot facet shows (``Fills.unplaced``)."""
    reasons: list[str] = []
    model_type = arch.config_model_type or arch.model_type
    why = model_type_reason(model_type, arch.donor)
    if why:
        reasons.append(why)
    if refused:
        reasons.append(f"no cost figures: {refused}")
    if params is not None:
        reasons.extend(f"figures exclude {part}" for part in params.excluded)
        if arch.vision and not any("vision tower" in part for part in params.excluded):
            try:
                tower = vision_model(arch)
            except Unsupported:
                tower = None
            if tower is not None and not tower.verified:
                reasons.append(f"the vision tower ({tower.tower}) is not checked against transformers")
    if arch.unread_keys:
        reasons.append(_keys_reason(arch.unread_keys))
    if unplaced:
        reasons.append(f"{UNPLACED_REASON}: " + ", ".join(unplaced[:MAX_KEYS_NAMED]))
    if reasons:
        return Coverage(UNVERIFIED, tuple(reasons))
    version = _table().get("transformers_version", "")
    return Coverage(
        VERIFIED,
        basis=(
            f"{model_type} matches transformers {version} (docs/COVERAGE.md) and every config key "
            "was read and is shown in its slot"
        ),
    )


def with_checkpoint(trust: Coverage, checkpoint: Any) -> Coverage:
    """The trust level once the checkpoint was compared. A match raises a harness-verified answer
    to ``verified by the checkpoint`` (the count measured on this model's own weights); it never
    raises an unverified one, because weights show the count, not the KV cache or FLOPs of a
    shape the harness never exercised (the report's ``checkpoint`` still says the count matched).
    A difference makes it unverified, saying where."""
    if checkpoint.status == "match":
        return Coverage(BY_CHECKPOINT, trust.reasons, checkpoint.sentence()) if trust.verified else trust
    if checkpoint.status == "differs":
        return Coverage(UNVERIFIED, (checkpoint.sentence(), *trust.reasons))
    return trust
