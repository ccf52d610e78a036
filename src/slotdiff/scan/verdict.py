"""Read one fetched config and say what it is: known family, new sizes, or something new.

The verdict is judged against what was known when the scan started (the family files and
the state of finished scans), never against models seen earlier in the same scan, so it
does not depend on the order in which concurrent fetches finish. Verdicts, most new first:

``new_model_type``   model_type unknown to the key map, to transformers' registry, to every
                     family file and to every earlier scan.
``new_fingerprint``  the design (categorical fills) matches no family file and no
                     fingerprint an earlier scan saw; reports the nearest family and
                     the facets that differ, with their articles.
``new_keys``         known design, but the config has keys the key map does not know and no
                     earlier scan saw: the raw signal that a new mechanism has arrived.
``new_sizes``        known design whose sizes (the fills' numbers: widths, heads, experts,
                     vocab, theta, ...) differ from every exemplar on record.
``known``            known design at sizes already on record.
``unchanged``        same config as the previous scan saw (not reported).
``skipped``          with a reason code (``SKIP_REASONS``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

from ..analysis.analyze import load
from ..core.errors import SlotdiffError
from ..core.resources import data_dir
from ..read.jsonpos import JSONInputError, parse
from ..read.source import RawConfig, catalog, from_catalog
from ..schema.keymap import known_keys, known_model_types, transformers_defaults
from ..slots.classify import (
    Family,
    Fingerprint,
    families,
    fingerprint,
    fingerprint_from_dict,
    in_fingerprint,
)
from ..slots.classify import label as class_label
from ..slots.classify import nearest as nearest_family
from ..slots.fill import articles, slot_table
from .listing import Listed

VERDICTS = (
    "new_model_type",
    "new_fingerprint",
    "new_keys",
    "new_sizes",
    "known",
    "skipped",
    "unchanged",
)
NEW = frozenset({"new_model_type", "new_fingerprint", "new_keys"})  # what --fail-on-new means
TITLES = {
    "new_model_type": "New model_type",
    "new_fingerprint": "New fingerprint",
    "new_keys": "New config keys",
    "new_sizes": "Known family, new sizes",
    "known": "Known family",
    "skipped": "Skipped",
    "unchanged": "Unchanged",
}

# Skip reasons: stable codes. Transient ones are retried by the next scan (never recorded
# as seen); the others are remembered with the repo's commit, so they are not re-fetched.
SKIP_REASONS = {
    "no_config": "no config.json",
    "gated": "gated or needs a token",
    "not_found": "repo not found or invalid",
    "not_lm": "not a language model",
    "invalid_json": "config.json is not valid JSON",
    "too_large": "config.json too large",
    "unreadable": "config.json could not be read as a model",
    "http": "HTTP error",
    "error": "slotdiff failed on it",
    "timeout": "timed out",
    "rate_limited": "rate limited",
    "server_error": "server error",
    "network": "network error",
}
TRANSIENT = frozenset({"timeout", "rate_limited", "server_error", "network"})

# Fields the build step needs to call a config a (text) model at all.
_LM_FIELDS = ("d_model", "n_layers", "vocab")


@dataclass(frozen=True)
class Record:
    """One model's outcome: listing facts, verdict, and what supports it (JSON-ready)."""

    listed: Listed
    verdict: str
    reason: str | None = None  # skip reason code
    detail: str | None = None  # one line: why skipped, or a note
    commit: str | None = None
    etag: str | None = None
    config_sha256: str | None = None
    model_type: str | None = None
    fingerprint: str | None = None
    label: str | None = None
    family: str | None = None  # the matched family's name (known designs)
    family_slug: str | None = None
    nearest: Mapping[str, Any] | None = None  # {family, slug, distance, differs: [...]}
    model_type_new: bool = False
    fingerprint_new: bool = False
    new_keys: tuple[str, ...] = ()
    sizes: Mapping[str, Any] | None = None
    size_changes: tuple[Mapping[str, Any], ...] = ()
    fills: Mapping[str, Any] | None = None  # kept when no family file holds the design
    previous: Mapping[str, Any] | None = None  # what the last scan recorded, if it differed

    @property
    def repo_id(self) -> str:
        return self.listed.repo_id

    @property
    def transient(self) -> bool:
        return self.verdict == "skipped" and self.reason in TRANSIENT

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"repo_id": self.repo_id}
        for name in self.__dataclass_fields__:  # declaration order, as fields() gives
            value = getattr(self, name)
            if name == "listed":
                out["listed"] = value.to_dict()
            elif isinstance(value, tuple):
                out[name] = list(value)
            else:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        kw = {f.name: data.get(f.name) for f in fields(cls) if f.name in data}
        kw["listed"] = Listed.from_dict(data["listed"])
        for name in ("new_keys", "size_changes"):
            kw[name] = tuple(kw.get(name) or ())
        return cls(**kw)


def skipped(listed: Listed, reason: str, detail: str, **kw: Any) -> Record:
    return Record(listed, "skipped", reason=reason, detail=" ".join(str(detail).split())[:300], **kw)


# ------------------------------------------------------------------------------ analysis


@dataclass(frozen=True)
class Analysis:
    """What the classifier says about one config."""

    model_type: str
    fingerprint: Fingerprint
    label: str
    sizes: Mapping[str, Mapping[str, Any]]  # facet → its numbers
    unknown_keys: tuple[str, ...]  # bare key names the key map does not know


def sizes_of(fills: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """The numbers of each fingerprint facet (what two checkpoints of one design differ in)."""
    sizes = {f.id: dict(f.sizes) for f in fills if in_fingerprint(f.id) and f.sizes}
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


class NotALanguageModel(Exception):
    pass


def analyze_config(data: bytes, name: str) -> Analysis:
    """Parse and classify config bytes; raises JSONInputError, NotALanguageModel or SlotdiffError."""

    parsed = parse(data, with_positions=False)  # positions are for diagnostics; a scan has none
    if not isinstance(parsed.value, dict):
        raise JSONInputError(f"top level is a {type(parsed.value).__name__}, not a JSON object", 1, 1)
    raw = RawConfig(name=name, data=parsed.value, parsed=parsed, origin="hub", location=name)
    try:
        model = load(raw)
    except SlotdiffError as err:
        if err.reason.startswith("missing ") and any(f in err.reason for f in _LM_FIELDS):
            raise NotALanguageModel(f"no text model in config.json ({err.reason})") from err
        raise
    fills = model.fills
    fp = fingerprint(fills)
    keys = tuple(dict.fromkeys(k.rsplit(".", 1)[-1] for k in model.arch.unknown_keys))
    return Analysis(model.arch.model_type, fp, class_label(fills), sizes_of(fills), keys)


# ----------------------------------------------------------------------------- knowledge


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
    return fingerprint(model.fills).id, sizes_of(model.fills), keys


@dataclass
class Knowledge:
    """What was known when the scan started: family files plus the state of finished scans."""

    families: tuple[Family, ...]
    seen: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # state fingerprints
    model_types: frozenset[str] = frozenset()
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
        if state is not None:
            seen = state.fingerprints
            types.update(state.model_types)
            keys.update(state.keys)
        know = cls(fams, seen, frozenset(types), frozenset(keys))
        # Sizes recorded in a family file (the proposals a scan writes carry them).

        for path in sorted(Path(folder or data_dir("fingerprints")).glob("*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("sizes"):
                know.add_family_sizes(fingerprint_from_dict(data["fills"]).id, data["sizes"])
        return know

    def add_family_sizes(self, fp_id: str, sizes: Sequence[Mapping[str, Any]]) -> None:
        self._sizes.setdefault(fp_id, []).extend(dict(s) for s in sizes)

    def sizes_for(self, fp_id: str) -> list[dict[str, Any]]:
        return self._sizes.get(fp_id, [])


@cache
def _facet_articles() -> dict[str, str]:
    return {i.id: i.article for i in slot_table()}


def _differs(differs: Sequence[str]) -> list[dict[str, str]]:
    article = _facet_articles()
    titles = articles()
    return [
        {
            "facet": f,
            "article": article.get(f, ""),
            "title": titles.get(article.get(f, ""), {}).get("title", ""),
        }
        for f in differs
    ]


def _size_changes(now: Mapping[str, Any], known: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The numbers that differ from the closest sizes on record (fewest differences)."""
    best: list[dict[str, Any]] | None = None
    for was in known:
        changes = []
        for facet in sorted(set(now) | set(was)):
            a, b = dict(was.get(facet, {})), dict(now.get(facet, {}))
            for size in sorted(set(a) | set(b)):
                if a.get(size) != b.get(size):
                    changes.append({"facet": facet, "size": size, "was": a.get(size), "now": b.get(size)})
        if best is None or len(changes) < len(best):
            best = changes
    return best or []


def judge(listed: Listed, a: Analysis, know: Knowledge, **facts: Any) -> Record:
    """The verdict for an analyzed config (see the module docstring for the order)."""
    fp_id = a.fingerprint.id
    fam = know.by_id.get(fp_id) or know.provisional_by_id.get(fp_id)
    fingerprint_new = fam is None
    model_type_new = bool(a.model_type) and a.model_type not in know.model_types
    new_keys = tuple(k for k in a.unknown_keys if k not in know.keys)
    nearest = None
    size_changes: list[dict[str, Any]] = []
    if fingerprint_new:
        near, dist, differs = nearest_family(a.fingerprint, a.model_type, know.everything)
        if near is not None:
            nearest = {"family": near.name, "slug": near.slug, "distance": dist, "differs": _differs(differs)}
        sizes_new = False
    else:
        assert fam is not None
        known_sizes = know.sizes_for(fp_id)
        sizes_new = bool(known_sizes) and dict(a.sizes) not in known_sizes
        if sizes_new:
            size_changes = _size_changes(a.sizes, known_sizes)
    if model_type_new:
        verdict = "new_model_type"
    elif fingerprint_new:
        verdict = "new_fingerprint"
    elif new_keys:
        verdict = "new_keys"
    elif sizes_new:
        verdict = "new_sizes"
    else:
        verdict = "known"
    return Record(
        listed,
        verdict,
        model_type=a.model_type,
        fingerprint=fp_id,
        label=a.label,
        family=None if fam is None else fam.name,
        family_slug=None if fam is None else fam.slug,
        nearest=nearest,
        model_type_new=model_type_new,
        fingerprint_new=fingerprint_new,
        new_keys=new_keys,
        sizes=dict(a.sizes),
        size_changes=tuple(size_changes),
        fills=None if fp_id in know.by_id else a.fingerprint.as_dict(),
        **facts,
    )
