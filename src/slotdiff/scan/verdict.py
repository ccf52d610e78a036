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

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..analysis.analyze import analyze, load
from ..core.errors import SlotdiffError
from ..read.hf_quant import FILENAME as QUANT_FILE
from ..read.hub_errors import HubFailure
from ..read.jsonpos import JSONInputError, Parsed, parse
from ..read.source import RawConfig, with_sidecar
from ..slots.classify import (
    Family,
    Fingerprint,
    fingerprint,
    in_fingerprint,
)
from ..slots.classify import label as class_label
from ..slots.classify import nearest as nearest_family
from .figures import Figures, figures_of
from .knowledge import Knowledge
from .listing import Listed
from .nearest import facet_changes
from .sizes import comparable, sizes_of
from .sizes import size_changes as changes_from
from .stored import stored_check
from .unread import config_keys, looks_like_lm, nearest_by_keys, parse_object, unread_keys

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
# Skips that depend on who asks (a gated or private repo): remembered, but fetched again on a
# later scan even at the same commit, since a token or a granted request may open it.
ACCESS = frozenset({"gated", "not_found"})

# Fields the build step needs to call a config a (text) model at all.
_LM_FIELDS = ("d_model", "n_layers", "vocab")


@dataclass(frozen=True, slots=True)  # one per listed model: no per-instance dict
class Record:
    """One model's outcome: listing facts, verdict, and what supports it (JSON-ready)."""

    listed: Listed
    verdict: str
    reason: str | None = None  # skip reason code
    detail: str | None = None  # one line: why skipped, or a note
    commit: str | None = None
    etag: str | None = None
    config_sha256: str | None = None
    quant_file: str | None = None  # hf_quant_config.json as read beside it: examine.quant_mark
    quant_reason: str | None = None  # why it could not be read (a SKIP_REASONS code)
    model_type: str | None = None  # the text model's (what novelty and the families are about)
    repo_model_type: str | None = None  # config.json's own, where it wraps the text model (a VL repo)
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
    figures: Mapping[str, Any] | None = None  # figures.Figures as a dict (params, KV, fit, trust)
    details: Mapping[str, str] | None = None  # facet → this model's fill, in words (new designs)
    unreadable: Mapping[str, Any] | None = None  # a new model_type the schema layer cannot read
    lineage: Mapping[str, Any] | None = None  # lineage.Lineage as a dict (the model card's base)
    checkpoint: Mapping[str, Any] | None = None  # stored.stored_check: the count against the listing's

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
    figures: Figures | None = None  # the analysis pipeline's numbers
    details: Mapping[str, str] = field(default_factory=dict)  # fingerprint facet → fill in words
    repo_model_type: str | None = None  # config.json's top-level model_type, when not the text model's


class NotALanguageModel(Exception):
    pass


def parse_config(data: bytes) -> Parsed:
    """Config bytes as a JSON object, under the reader's caps; raises JSONInputError."""
    parsed = parse(data, with_positions=False)  # positions are for diagnostics; a scan has none
    if not isinstance(parsed.value, dict):
        raise JSONInputError(f"top level is a {type(parsed.value).__name__}, not a JSON object", 1, 1)
    return parsed


def analyze_config(data: bytes, name: str) -> Analysis:
    """Parse and classify config bytes; raises JSONInputError, NotALanguageModel or SlotdiffError."""
    return analyze_parsed(parse_config(data), name)


def analyze_parsed(
    parsed: Parsed, name: str, side: tuple[bytes | None, str | None] | None = None
) -> Analysis:
    """Classify a parsed config (``parse_config``), with ``side``, what the repo's
    hf_quant_config.json gave (its bytes, or why they could not be read) when it was asked
    for; raises NotALanguageModel or SlotdiffError."""
    raw = RawConfig(name=name, data=parsed.value, parsed=parsed, origin="hub", location=name)
    if side is not None:
        raw = with_sidecar(raw, side[0], f"{name}/{QUANT_FILE}", side[1])
    try:
        model = load(raw)
    except SlotdiffError as err:
        if err.reason.startswith("missing ") and any(f in err.reason for f in _LM_FIELDS):
            raise NotALanguageModel(f"no text model in config.json ({err.reason})") from err
        raise
    fills = model.fills
    fp = fingerprint(fills)
    keys = tuple(dict.fromkeys(k.rsplit(".", 1)[-1] for k in model.arch.unknown_keys))
    try:
        report = analyze(model, counterfactuals=False, classification=False, weights=False, bounds=False)
        figs = figures_of(report)
    except Exception as err:  # the design is still news when the cost pass fails on it
        figs = Figures(note=f"not priced: {type(err).__name__}: {' '.join(str(err).split())[:200]}")
    details = {f.id: f.detail for f in fills if in_fingerprint(f.id)}
    top = model.arch.config_model_type
    return Analysis(
        model.arch.model_type,
        fp,
        class_label(fills),
        sizes_of(fills, model.arch.n_layers),
        keys,
        figs,
        details,
        top if top and top != model.arch.model_type else None,
    )


@dataclass(frozen=True)
class Assessment:
    """What an analysis is judged to be against what is known, whoever lists it: the verdict
    and its evidence. A scan meets one analysis in every copy of a design (the memo by bytes
    and by design), so it assesses it once (``Examiner``); the dicts it holds are JSON-ready
    and shared by the records made from it, which never change them."""

    verdict: str
    family: Family | None
    fingerprint_new: bool
    model_type_new: bool
    new_keys: tuple[str, ...]
    nearest: dict[str, Any] | None
    size_changes: tuple[dict[str, Any], ...]
    fills: dict[str, Any] | None
    figures: dict[str, Any] | None
    details: dict[str, str] | None


def assess(a: Analysis, know: Knowledge) -> Assessment:
    """The verdict of an analyzed config (see the module docstring for the order)."""
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
            nearest = {
                "family": near.name,
                "slug": near.slug,
                "distance": dist,
                "differs": facet_changes(differs, near, a.details),
            }
        sizes_new = False
    else:
        assert fam is not None
        known_sizes = know.sizes_for(fp_id)
        sizes_new = bool(known_sizes) and not any(dict(comparable(a.sizes, k)) == k for k in known_sizes)
        if sizes_new:
            size_changes = changes_from(a.sizes, known_sizes)
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
    return Assessment(
        verdict,
        fam,
        fingerprint_new,
        model_type_new,
        new_keys,
        nearest,
        tuple(size_changes),
        None if fp_id in know.by_id else a.fingerprint.as_dict(),
        a.figures.to_dict() if a.figures else None,
        dict(a.details) if fingerprint_new else None,
    )


def judge(
    listed: Listed, a: Analysis, know: Knowledge, assessed: Assessment | None = None, **facts: Any
) -> Record:
    """The record of ``listed`` with its analyzed config (``assessed``: ``assess(a, know)``,
    when the caller already has it)."""
    v = assessed or assess(a, know)
    fam = v.family
    return Record(
        listed,
        v.verdict,
        model_type=a.model_type,
        repo_model_type=a.repo_model_type,
        fingerprint=a.fingerprint.id,
        label=a.label,
        family=None if fam is None else fam.name,
        family_slug=None if fam is None else fam.slug,
        nearest=v.nearest,
        model_type_new=v.model_type_new,
        fingerprint_new=v.fingerprint_new,
        new_keys=v.new_keys,
        sizes=dict(a.sizes),
        size_changes=v.size_changes,
        fills=v.fills,
        figures=v.figures,
        details=v.details,
        checkpoint=stored_check(listed, a.figures),
        **facts,
    )


def judge_unreadable(listed: Listed, data: bytes, why: str, know: Knowledge, **facts: Any) -> Record | None:
    """A config the schema layer rejected whose model_type neither slotdiff nor transformers
    defines, and which looks like a language model: ``new_model_type`` (with the keys slotdiff
    could not read and the nearest model_type by key overlap), or, when an earlier scan already
    reported that model_type, an ``unreadable`` skip with the same details. None otherwise
    (an ordinary skip)."""
    config = parse_object(data)
    if config is None:
        return None
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type or model_type in know.readable_types:
        return None
    if not looks_like_lm(config, listed.pipeline_tag):
        return None
    why = " ".join(why.split())[:300]
    unreadable = {
        "why": why,
        "unread_keys": unread_keys(config),
        "nearest_by_keys": nearest_by_keys(config_keys(config)),
    }
    if model_type in know.model_types:  # first seen by an earlier scan: news then, not now
        return skipped(
            listed,
            "unreadable",
            f"model_type {model_type[:80]!r}, first seen by an earlier scan, cannot be read yet: {why}",
            model_type=model_type[:200],
            unreadable=unreadable,
            **facts,
        )
    return Record(
        listed,
        "new_model_type",
        detail=why,
        model_type=model_type[:200],
        model_type_new=True,
        new_keys=tuple(k for k in unread_keys(config) if k not in know.keys),
        unreadable=unreadable,
        **facts,
    )


def failure_reason(fail: HubFailure) -> str:
    """A failed fetch's skip reason code (SKIP_REASONS): its kind, finer where it is transient."""
    if fail.kind == "network":
        return "timeout" if fail.detail == "timeout" else "network"
    if fail.kind == "http":
        return {"rate_limited": "rate_limited", "server": "server_error"}.get(fail.detail, "http")
    if fail.kind == "revision":
        return "not_found"
    if fail.kind == "offline":
        return "network"
    return fail.kind


def failure_record(listed: Listed, fail: HubFailure) -> Record:
    """The skip record of a failed fetch (its kind mapped to a skip reason)."""
    return skipped(listed, failure_reason(fail), fail.reason)
