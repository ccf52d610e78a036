"""What was known when a scan started: the family files, the sizes on record for each design,
and the state of finished scans (its designs act as provisional families).

Bundled catalog exemplars of a family give its sizes on record, its fills in words (for the
values of a difference) and keys that are no news.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ..analysis.analyze import load
from ..core.errors import SlotdiffError
from ..core.resources import data_dir
from ..read.source import catalog, from_catalog
from ..schema.keymap import known_keys, known_model_types, transformers_defaults
from ..slots.classify import (
    Family,
    families,
    fingerprint,
    fingerprint_from_dict,
    in_fingerprint,
    read_family,
)
from .sizes import sizes_of


@cache
def _exemplar(repo_id: str) -> tuple[str, dict[str, Any], tuple[str, ...]] | None:
    """(fingerprint id, sizes, unknown keys) of a bundled catalog config; None if not bundled."""

    if repo_id.lower() not in catalog():
        return None
    try:
        model = load(from_catalog(repo_id))
    except SlotdiffError:
        return None
    keys = tuple(k.rsplit(".", 1)[-1] for k in model.arch.unknown_keys)
    return fingerprint(model.fills).id, sizes_of(model.fills, model.arch.n_layers), keys


@cache
def exemplar_details(repo_id: str) -> dict[str, str]:
    """Each fingerprint facet of a bundled exemplar, in words ({} when not bundled)."""
    if repo_id.lower() not in catalog():
        return {}
    try:
        model = load(from_catalog(repo_id))
    except SlotdiffError:
        return {}
    return {f.id: f.detail for f in model.fills if in_fingerprint(f.id)}


@dataclass
class Knowledge:
    """What was known when the scan started: family files plus the state of finished scans."""

    families: tuple[Family, ...]
    seen: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # state fingerprints
    model_types: frozenset[str] = frozenset()
    readable_types: frozenset[str] = frozenset()  # model_types slotdiff or transformers define
    keys: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        self.by_id = {fam.fingerprint.id: fam for fam in self.families}
        # Designs first seen by earlier scans act as provisional families.
        self.provisional = tuple(
            Family(
                fp_id,
                f"{fp_id} (first seen in {entry.get('first_seen')})",
                tuple(entry.get("model_types", ())),
                fingerprint_from_dict(entry["fills"]),
                tuple(entry.get("exemplars", ())),
                entry.get("label", ""),
            )
            for fp_id, entry in sorted(self.seen.items())
            if fp_id not in self.by_id and entry.get("fills")
        )
        self.everything = self.families + self.provisional
        self.provisional_by_id = {fam.slug: fam for fam in self.provisional}
        self._sizes: dict[str, list[dict[str, Any]]] = {}
        exemplar_keys: set[str] = set()
        # Exemplars bundled in the catalog give the sizes already on record for their
        # family, and their keys are no news either.
        for fam in self.families:
            bucket = self._sizes.setdefault(fam.fingerprint.id, [])
            for repo in fam.exemplars:
                got = _exemplar(repo)
                if got and got[0] == fam.fingerprint.id:
                    bucket.append(got[1])
                    exemplar_keys.update(got[2])
        self.keys = self.keys | exemplar_keys
        for fp_id, entry in self.seen.items():
            self._sizes.setdefault(fp_id, []).extend(entry.get("sizes", ()))

    @classmethod
    def build(
        cls,
        folder: str | Path | None,
        state: Any = None,
    ) -> Knowledge:
        fams = families(folder)
        types = set(known_model_types()) | {k for k in transformers_defaults() if not k.startswith("_")}
        for fam in fams:
            types.update(fam.model_types)
        seen: Mapping[str, Any] = {}
        keys = set(known_keys())
        static = set(types)
        if state is not None:
            seen = state.fingerprints
            types.update(state.model_types)
            keys.update(state.keys)
        know = cls(fams, seen, frozenset(types), keys=frozenset(keys), readable_types=frozenset(static))
        # Sizes recorded in a family file (the proposals a scan writes carry them).

        for path in sorted(Path(folder or data_dir("fingerprints")).glob("*.json")):
            data = read_family(path, folder is not None)
            if data.get("sizes"):
                know.add_family_sizes(fingerprint_from_dict(data["fills"]).id, data["sizes"])
        return know

    def add_family_sizes(self, fp_id: str, sizes: Sequence[Mapping[str, Any]]) -> None:
        self._sizes.setdefault(fp_id, []).extend(dict(s) for s in sizes)

    def sizes_for(self, fp_id: str) -> list[dict[str, Any]]:
        return self._sizes.get(fp_id, [])


def family_details(fam: Family) -> dict[str, str]:
    """The family's fills in words, from its first bundled exemplar of that design."""
    for repo in fam.exemplars:
        got = _exemplar(repo)
        if got and got[0] == fam.fingerprint.id:
            return exemplar_details(repo)
    return {}
