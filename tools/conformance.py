"""Conformance harness: slotdiff against transformers' own registry of decoder language models.

Every ``model_type`` of transformers' causal-LM and image-text-to-text auto mappings that is a
decoder language model is a *type*; its default config and the variants its config class can
express (``tests/oracle/registry.py``) are *rows*.  For each row transformers gives the
reference: total and active parameters of the meta-device build, KV bytes per token and
per-sequence state bytes of a real cache after a forward pass of a tiny copy.  slotdiff gives
the same four figures through its public API only (``slotdiff.analyze(config).to_dict()``).

    python tools/conformance.py refresh [TYPES...]   # recompute the transformers reference (slow)
    python tools/conformance.py report [--accept-regressions]   # compare, write COVERAGE.md
    python tools/conformance.py show ROW [--kv]      # print a row's exact config dict
    python tools/conformance.py published refresh|report   # real published configs (tools/published.py)
    python tools/conformance.py forms refresh|report       # published shapes of each row (tools/forms.py)

``refresh`` writes ``tests/fixtures/conformance/reference.json`` (keyed by the transformers
and torch versions) and ``excluded.json`` (the registry types that are not decoder LMs, with
the reason); ``report`` writes ``docs/COVERAGE.md`` and ``expected.json`` (each row's status:
what ``tests/test_conformance.py`` holds slotdiff to).  The expected *numbers* are always
transformers'; expected.json only records which rows match them.
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import slotdiff

os.environ["SLOTDIFF_NO_BUNDLE"] = "1"  # a generator reads the sources, never a bundle made before them

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "conformance"
REFERENCE = FIXTURES / "reference.json"
EXCLUDED = FIXTURES / "excluded.json"
EXPECTED = FIXTURES / "expected.json"
COVERAGE = ROOT / "docs" / "COVERAGE.md"
COVERAGE_JSON = ROOT / "schemas" / "coverage.json"
#: Types finished by a refresh still running (``refresh --resume`` continues from it).
PARTIAL = Path(tempfile.gettempdir()) / "slotdiff-conformance.partial.json"

#: The four figures compared, in report order: (name, label, which config slotdiff is given).
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("params.total", "total params", "config"),
    ("params.active", "active params", "config"),
    ("kv.bytes_per_token", "KV bytes/token (bf16)", "kv_config"),
    ("kv.state_bytes_per_sequence", "state bytes/sequence", "kv_config"),
)
STATUSES: tuple[str, ...] = ("exact", "wrong", "refused", "error", "no reference")


# --------------------------------------------------------------------------------------------
# Stored reference: JSON I/O and config deltas
# --------------------------------------------------------------------------------------------


def _decode(obj: Any) -> Any:
    """Turn transformers' ``{"__float__": "Infinity"}`` tags back into floats."""
    if isinstance(obj, dict):
        if set(obj) == {"__float__"}:
            return {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}[
                obj["__float__"]
            ]
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def _encode(obj: Any) -> Any:
    """Non-finite floats as ``{"__float__": ...}`` tags, so the files are strict JSON."""
    if isinstance(obj, float) and obj != obj:
        return {"__float__": "NaN"}
    if isinstance(obj, float) and obj in (float("inf"), float("-inf")):
        return {"__float__": "Infinity" if obj > 0 else "-Infinity"}
    if isinstance(obj, dict):
        return {k: _encode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_encode(v) for v in obj]
    return obj


def delta(base: Mapping[str, Any], other: Mapping[str, Any], path: tuple[str, ...] = ()) -> list[list[Any]]:
    """Edits turning ``base`` into ``other``: ``[path, value]`` sets and ``[path]`` removals."""
    edits: list[list[Any]] = []
    for key in base:
        if key not in other:
            edits.append([[*path, key]])
    for key, value in other.items():
        old = base.get(key, _MISSING) if isinstance(base, Mapping) else _MISSING
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            edits += delta(old, value, (*path, key))
        elif old is _MISSING or json.dumps(old, sort_keys=True) != json.dumps(value, sort_keys=True):
            edits.append([[*path, key], value])
    return edits


_MISSING = object()


def apply_delta(base: Mapping[str, Any], edits: Iterable[list[Any]]) -> dict[str, Any]:
    """``base`` with :func:`delta`'s edits applied (a new dict; ``base`` is not changed)."""
    out = copy.deepcopy(dict(base))
    for edit in edits:
        *parents, last = edit[0]
        node = out
        for key in parents:
            node = node[key]
        if len(edit) == 1:
            del node[last]
        else:
            node[last] = copy.deepcopy(edit[1])
    return out


def write_json(path: Path, data: Any) -> None:
    """Write strict JSON, keys in a stable order, one item per line (reviewable diffs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_encode(data), indent=1, sort_keys=True, allow_nan=False)
    path.write_text(text + "\n", encoding="utf-8")


def read_json(path: Path) -> Any:
    """Read a file written by :func:`write_json` (float tags decoded)."""
    return _decode(json.loads(path.read_text(encoding="utf-8")))


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One config compared: the default of a type or a variant, with transformers' figures."""

    id: str
    model_type: str
    variant: str
    config: dict[str, Any]
    kv_config: dict[str, Any] | None
    reference: dict[str, Any]
    kv_unsupported: str | None = None


def reference_figures(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The four figures of a stored reference (``params``, and ``kv`` where measured)."""
    ref: dict[str, Any] = {
        "params.total": stored["params"]["total"],
        "params.active": stored["params"]["active"],
    }
    if "kv" in stored:
        ref["kv.bytes_per_token"] = stored["kv"]["bytes_per_token"]
        ref["kv.state_bytes_per_sequence"] = stored["kv"]["state_bytes"]
    return ref


def rows(reference: Mapping[str, Any]) -> list[Row]:
    """Every stored row, configs rebuilt from the default + delta form, sorted by id."""
    out: list[Row] = []
    for model_type, entry in sorted(reference["types"].items()):
        if entry["status"] != "built":
            continue
        default = entry["rows"]["default"]["config"]
        for name, stored in entry["rows"].items():
            config = default if name == "default" else apply_delta(default, stored["config_delta"])
            kv_config = apply_delta(config, stored["kv_delta"]) if "kv_delta" in stored else None
            ref = reference_figures(stored)
            row_id = model_type if name == "default" else f"{model_type}:{name}"
            out.append(
                Row(
                    row_id,
                    model_type,
                    name,
                    config,
                    kv_config,
                    {**stored, "figures": ref},
                    stored.get("kv_unsupported"),
                )
            )
    return out


# --------------------------------------------------------------------------------------------
# slotdiff's side (public API only)
# --------------------------------------------------------------------------------------------


def _is_slotdiff_error(exc: BaseException) -> bool:
    """Whether ``exc`` is slotdiff's own refusal (``SlotdiffError``), found by class name.

    The class is not imported: slotdiff's module layout is not part of its public API.
    """
    return any(cls.__name__ == "SlotdiffError" for cls in type(exc).__mro__)


def slotdiff_figures(config: Mapping[str, Any]) -> dict[str, Any]:
    """The four figures from ``slotdiff.analyze(config).to_dict()``, or why there are none.

    Returns ``{"figures": {...}}`` (a figure may be None), ``{"refused": reason}`` for a
    ``SlotdiffError`` or a cost of None (``cost_note`` says why), or ``{"error": text}`` for any
    other exception (a slotdiff bug).  KV figures are checked to be in bfloat16, slotdiff's
    default ``--kv-dtype``.
    """
    try:
        report = slotdiff.analyze(copy.deepcopy(dict(config))).to_dict()
    except Exception as exc:
        if _is_slotdiff_error(exc):
            return {"refused": str(exc)}
        return {"error": f"{type(exc).__name__}: {exc}"}
    known = report.get("known_model_type")
    trust = (report.get("coverage") or {}).get("status")  # verified | unverified
    cost = report.get("cost")
    if not cost:
        return {"refused": report.get("cost_note") or "no cost in the report", "known": known, "trust": trust}
    params, kv = cost.get("params") or {}, cost.get("kv") or {}
    figures = {
        "params.total": params.get("total"),
        "params.active": params.get("active"),
        "kv.bytes_per_token": kv.get("bytes_per_token"),
        "kv.state_bytes_per_sequence": kv.get("state_bytes_per_sequence"),
    }
    return {
        "figures": figures,
        "kv_dtype": kv.get("dtype"),
        "by_part": params.get("by_part") or {},
        "known": known,
        "trust": trust,
        "excluded": list(params.get("excluded") or []),
    }


@dataclass
class Verdict:
    """One figure of one row: ours, theirs, and what the comparison says."""

    figure: str
    status: str  # exact | wrong | refused | error | no reference
    ours: Any = None
    theirs: Any = None
    note: str = ""


@dataclass
class Result:
    """A row compared: its overall status and every figure's verdict."""

    row: Row
    status: str
    verdicts: list[Verdict] = field(default_factory=list)
    reason: str = ""
    parts: dict[str, tuple[int, int]] = field(default_factory=dict)
    known: bool | None = None  # slotdiff's report: is the model_type in its key map
    trust: str | None = None  # slotdiff's report: coverage status of the config (verified | unverified)

    def wrong(self) -> list[str]:
        """Names of the figures that differ from transformers'."""
        return [v.figure for v in self.verdicts if v.status == "wrong"]


def _verdict(
    figure: str,
    theirs: Any,
    got: Mapping[str, Any],
    why_none: str | None,
    text_part: int | None = None,
    unread: int = 0,
) -> Verdict:
    """Compare one figure; ``got`` is :func:`slotdiff_figures` of the config that figure uses.

    A parameter figure from a partial count (``params.excluded`` names what slotdiff left out,
    e.g. a vision tower it has no data for) is a refusal of that part: its note says what was
    left out and how the counted part compares with ``text_part``, transformers' total less the
    oracle's ``vision``, ``connector`` and ``audio`` parts (a hint: part boundaries are a convention).
    A total that equals transformers' less ``unread`` (expert rows no routed expert can read:
    ``tests/oracle/registry.py``, ``expert_groups``) is exact, with a note that says so.
    """
    if theirs is None:
        return Verdict(figure, "no reference", note=why_none or "transformers gives none")
    if "refused" in got:
        return Verdict(figure, "refused", theirs=theirs, note=got["refused"])
    if "error" in got:
        return Verdict(figure, "error", theirs=theirs, note=got["error"])
    ours = got["figures"][figure]
    if ours is None:
        return Verdict(figure, "refused", theirs=theirs, note=f"slotdiff gives no {figure}")
    if figure.startswith("params.") and got.get("excluded"):
        note = "partial: excludes " + "; ".join(got["excluded"])
        if figure == "params.total" and text_part is not None:
            same = "equals" if ours == text_part else "differs from"
            note += (
                f" (counted part {ours:,} {same} transformers' total less vision/connector/audio,"
                f" {text_part:,})"
            )
        return Verdict(figure, "refused", ours, theirs, note=note)
    if figure.startswith("kv.") and got.get("kv_dtype") != "bfloat16":
        return Verdict(figure, "wrong", ours, theirs, note=f"KV dtype {got.get('kv_dtype')}, not bfloat16")
    if figure == "params.total" and unread and ours == theirs - unread:
        note = f"transformers' total less {unread:,} unread expert-row parameters"
        return Verdict(figure, "exact", ours, theirs, note=note)
    return Verdict(figure, "exact" if ours == theirs else "wrong", ours, theirs)


def compare(row: Row) -> Result:
    """Run slotdiff on the row's config (and its KV config) and compare the four figures."""
    main = slotdiff_figures(row.config)
    kv = slotdiff_figures(row.kv_config) if row.kv_config is not None else None
    ref = row.reference["figures"]
    verdicts = []
    parts_ref = row.reference["params"].get("parts", {})
    text_part = ref["params.total"] - sum(parts_ref.get(p, 0) for p in ("vision", "connector", "audio"))
    for figure, _label, which in FIGURES:
        if which == "config":
            note = row.reference["params"].get("active_note") if figure == "params.active" else None
            unread = row.reference["params"].get("unread_expert_params", 0)
            verdicts.append(_verdict(figure, ref.get(figure), main, note, text_part, unread))
        elif kv is not None:
            verdicts.append(_verdict(figure, ref.get(figure), kv, None))
        elif row.kv_unsupported:
            verdicts.append(Verdict(figure, "no reference", note=row.kv_unsupported))
    statuses = {v.status for v in verdicts}
    status = next((s for s in ("wrong", "error", "refused", "exact") if s in statuses), "no reference")
    reason = ""
    if status in ("refused", "error"):
        reason = next(v.note for v in verdicts if v.status == status)
    elif status == "wrong" and any(v.status == "refused" for v in verdicts):
        reason = next(v.note for v in verdicts if v.status == "refused")
    parts: dict[str, tuple[int, int]] = {}
    if "figures" in main and "params.total" in [v.figure for v in verdicts if v.status == "wrong"]:
        theirs_parts = row.reference["params"].get("parts", {})
        ours_parts = main.get("by_part", {})
        for part in sorted(set(theirs_parts) | set(ours_parts)):
            a, b = int(ours_parts.get(part, 0) or 0), int(theirs_parts.get(part, 0) or 0)
            if a != b:
                parts[part] = (a, b)
    return Result(row, status, verdicts, reason, parts, main.get("known"), main.get("trust"))


def evaluate(reference: Mapping[str, Any], progress: bool = False) -> list[Result]:
    """Compare every stored row (slotdiff only; no torch or transformers needed); ``progress``
    shows a bar on stderr when it is a terminal."""
    todo = rows(reference)
    return [compare(row) for row in (_tracked(todo, "conformance rows") if progress else todo)]


def _tracked(items: list[Row], label: str) -> Iterable[Row]:
    """``items`` with a transient rich bar on stderr if it is a terminal; nothing when piped."""
    if not sys.stderr.isatty():
        return items
    from rich.console import Console
    from rich.progress import track

    return track(items, description=label, console=Console(stderr=True), transient=True)


def expectations(results: Iterable[Result]) -> dict[str, Any]:
    """The expected.json content: each row's status, wrong figures and refusal reason."""
    out: dict[str, Any] = {}
    for r in results:
        entry: dict[str, Any] = {"status": r.status}
        if r.status == "wrong":
            entry["wrong"] = r.wrong()
        if r.reason:
            entry["reason"] = r.reason
        out[r.row.id] = entry
    return {
        "about": "Status of every conformance row, written by `python tools/conformance.py report`; "
        "tests/test_conformance.py holds slotdiff to it. Reference numbers: reference.json (transformers).",
        "rows": out,
    }


def coverage_table(reference: Mapping[str, Any], results: Iterable[Result]) -> dict[str, Any]:
    """Per model_type verdicts in the form of slotdiff's ``schemas/coverage.json``.

    ``status`` is ``exact`` when the default and every variant are exact, else the default's
    status (``wrong`` when only a variant differs); ``why`` is the first non-exact row's summary.
    ``report`` writes it with COVERAGE.md and expected.json, so the three cannot disagree.
    """
    by_type: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_type[r.row.model_type].append(r)
    table: dict[str, Any] = {}
    shapes = _forms_tool().per_type(_forms_tool().read())
    for mt, rs in sorted(by_type.items()):
        bad = [r for r in rs if r.status != "exact"]
        default = next(r for r in rs if r.row.variant == "default")
        if not bad:
            table[mt] = {"status": "exact"}
        else:
            first = default if default.status != "exact" else bad[0]
            status = default.status if default.status != "exact" else "wrong"
            table[mt] = {"status": status, "why": f"{first.row.id}: {_summary(first)}"}
        if mt in shapes:
            table[mt]["forms"] = shapes[mt]
    return {
        "about": "The conformance table at run time: each decoder model_type of transformers' registry and "
        "whether slotdiff's total and active params, KV bytes per token and state bytes per sequence "
        "equal transformers' on its default config and variants, and (forms) on the shapes published "
        "files take (tools/forms.py: minimal, one key dropped, per-layer lists as scalars). Generated by "
        "tools/conformance.py report (docs/COVERAGE.md is the readable form); do not edit by hand.",
        "transformers_version": reference["versions"]["transformers"],
        "model_types": table,
    }


def changes(expected: Mapping[str, Any], results: Iterable[Result]) -> dict[str, list[str]]:
    """How current results differ from expected.json, by kind.

    ``regressed``: rows expected exact that are not; ``now_exact``: rows expected non-exact that
    are exact; ``changed``: other status or wrong-figure changes; ``new`` / ``gone``: rows not in
    one of the two.
    """
    exp = expected.get("rows", {})
    out: dict[str, list[str]] = {"regressed": [], "now_exact": [], "changed": [], "new": [], "gone": []}
    seen = set()
    for r in results:
        seen.add(r.row.id)
        e = exp.get(r.row.id)
        if e is None:
            out["new"].append(f"{r.row.id}: {r.status}")
        elif e["status"] == "exact" and r.status != "exact":
            out["regressed"].append(f"{r.row.id}: {_summary(r)}")
        elif e["status"] != "exact" and r.status == "exact":
            out["now_exact"].append(r.row.id)
        elif e["status"] != r.status or e.get("wrong", []) != r.wrong():
            out["changed"].append(
                f"{r.row.id}: expected {e['status']} {e.get('wrong', '')}, got {_summary(r)}"
            )
    out["gone"] = sorted(set(exp) - seen)
    return out


# --------------------------------------------------------------------------------------------
# COVERAGE.md
# --------------------------------------------------------------------------------------------


def _n(value: Any) -> str:
    """Integers with thousands separators; anything else as is."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (one line, no pipes)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _summary(r: Result) -> str:
    """One line: exact / wrong figures with ours vs theirs / refused reason."""
    if r.status == "wrong":
        bits = [f"{v.figure} {_n(v.ours)} vs {_n(v.theirs)}" for v in r.verdicts if v.status == "wrong"]
        return "wrong: " + "; ".join(bits)
    if r.status in ("refused", "error"):
        return f"{r.status}: {r.reason}"
    notes = [f"{v.figure}: {v.note}" for v in r.verdicts if v.status == "exact" and v.note]
    return r.status + (f" ({'; '.join(notes)})" if notes else "")


#: Refusal and error texts grouped into classes, first match wins (pattern, class label).
REASON_CLASSES: tuple[tuple[str, str], ...] = (
    (r"vision encoder|vision|visual|audio|tower", "vision/audio tower slotdiff has no data for"),
    (r"unknown layer type", "unknown layer type"),
    (
        r"is unknown$|missing \w+ \(looked for",
        "core size (d_model, n_heads, d_ff) under keys it does not read",
    ),
    (r"expected an integer, got \[", "per-layer list where one number is expected"),
    (r"must be >= 1, got 0", "0 (meaning none) where slotdiff wants >= 1"),
    (r"sliding layers but no sliding_window", "sliding layers, but no window read"),
    (r"not in slotdiff's key map", "unknown model_type"),
    (r"cannot count parameters", "declared unsupported"),
)


def reason_class(text: str) -> str:
    """The class of a refusal/error reason (see :data:`REASON_CLASSES`)."""
    for pattern, label in REASON_CLASSES:
        if re.search(pattern, text, re.IGNORECASE):
            return label
    return "other"


def render(
    reference: Mapping[str, Any],
    excluded: Mapping[str, Any],
    results: list[Result],
    published: Iterable[str] = (),
) -> str:
    """The whole docs/COVERAGE.md text, from the stored reference and the comparison results;
    ``published`` is the published-configs section (``tools/published.py``: ``section``)."""
    by_type: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_type[r.row.model_type].append(r)
    types = reference["types"]
    unbuildable = {mt: e for mt, e in types.items() if e["status"] == "unbuildable"}
    decoder = [mt for mt, e in types.items() if e["status"] != "excluded"]
    defaults = {r.row.model_type: r for r in results if r.row.variant == "default"}
    default_status = Counter(r.status for r in defaults.values())
    row_status = Counter(r.status for r in results)
    figure_status = Counter((v.figure, v.status) for r in results for v in r.verdicts)
    v = reference["versions"]
    lines = [
        "# Conformance: slotdiff against transformers' registry",
        "",
        "<!-- Generated by `python tools/conformance.py report`; do not edit by hand. "
        "tests/test_conformance.py fails when this file is stale. -->",
        "",
        f"Reference: transformers {v['transformers']}, torch {v['torch']} "
        f"(`tests/fixtures/conformance/reference.json`, refreshed with "
        f"`python tools/conformance.py refresh` in {reference.get('seconds', 0):,.0f} s). "
        "Every `model_type` of `MODEL_FOR_CAUSAL_LM_MAPPING_NAMES` and "
        "`MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES` is a row below: its default config "
        "(`CONFIG_MAPPING[mt]().to_dict()`, multimodal sub-configs included) and the variants its "
        "config class can express (`tests/oracle/registry.py`). Figures: total parameters of the "
        "meta-device build (less the rows of an expert tensor past the smallest expert tensor's "
        "expert count, which no routed expert can read and no checkpoint holds: LongCat-Flash's "
        "`gate_up_proj` for its zero-computation experts; the row then says so); active "
        "parameters (routed-expert tensors at top_k / n_experts); KV "
        "bytes per token (bf16) and per-sequence state bytes of a real cache after a forward "
        "pass of a tiny copy (slotdiff is given the same tiny config). slotdiff is read through "
        "`slotdiff.analyze(config).to_dict()` only.",
        "",
        "## Summary",
        "",
        "| model types | count |",
        "|---|---:|",
        f"| in the two mappings | {len(types)} |",
        f"| excluded: not decoder language models | {len(types) - len(decoder)} |",
        f"| decoder language models | {len(decoder)} |",
        f"| transformers cannot build the default | {len(unbuildable)} |",
        f"| built (default, or default with a None size filled) | {len(by_type)} |",
        f"| default **exact** (all figures equal transformers') | {default_status['exact']} |",
        f"| default **wrong** (some figure differs) | {default_status['wrong']} |",
        f"| default **refused** by slotdiff | {default_status['refused']} |",
        f"| default **error** (slotdiff raised something else) | {default_status['error']} |",
        "",
        f"Rows (defaults + variants): {len(results)}; "
        + ", ".join(f"{s} {row_status[s]}" for s in STATUSES if row_status[s])
        + ". Types whose default and every variant are exact: "
        + f"{sum(all(r.status == 'exact' for r in rs) for rs in by_type.values())}.",
        "",
        "| figure | exact | wrong | refused | error | no reference |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for figure, label, _which in FIGURES:
        counts = [figure_status[(figure, s)] for s in ("exact", "wrong", "refused", "error", "no reference")]
        lines.append(f"| {label} (`{figure}`) | " + " | ".join(str(c) for c in counts) + " |")
    unknown = Counter(r.status for r in defaults.values() if r.known is False)
    lines += [
        "",
        "Defaults of types slotdiff's key map does not know (read by common key names): "
        + ", ".join(f"{s} {unknown[s]}" for s in STATUSES if unknown[s])
        + ".",
    ]
    partial = [
        v.note
        for r in defaults.values()
        for v in r.verdicts
        if v.figure == "params.total" and "partial:" in v.note
    ]
    if partial:
        same = sum(" equals " in note for note in partial)
        lines += [
            "",
            f"Defaults counted in part (`params.excluded` names a tower slotdiff has no data for): "
            f"{len(partial)}; the counted part equals transformers' total less the oracle's vision, "
            f"connector and audio parts in {same} of them (a hint: the part boundaries are a convention).",
        ]
    refusals = Counter(reason_class(r.reason) for r in defaults.values() if r.status in ("refused", "error"))
    if refusals:
        lines += ["", "Defaults refused or failing, by reason:", ""]
        lines += [f"- {label}: {count}" for label, count in refusals.most_common()]
    lines += [
        "",
        "## Decoder model types",
        "",
        "Status of the default config; known: whether slotdiff's report says `known_model_type` "
        "(the type has a file under `schemas/model_types/`); variants: how many of the type's variant "
        "rows are exact, and the ones that are not.",
        "",
        "| model_type | class | known | default | variants |",
        "|---|---|---|---|---|",
    ]
    for mt in sorted(decoder):
        entry = types[mt]
        if entry["status"] == "unbuildable":
            lines.append(
                f"| `{mt}` | {', '.join(entry.get('classes', []))} | | no reference: transformers "
                f"cannot build it ({_cell(entry['reason'])}) | |"
            )
            continue
        rs = by_type[mt]
        default = next(r for r in rs if r.row.variant == "default")
        rest = [r for r in rs if r is not default]
        repair = f" (default repaired: {'; '.join(entry['repair'])})" if entry.get("repair") else ""
        bad = [r for r in rest if r.status != "exact"]
        variant_text = f"{len(rest) - len(bad)}/{len(rest)} exact" if rest else "none"
        if bad:
            variant_text += "; " + "; ".join(f"`{r.row.variant}` {_short(r)}" for r in bad)
        status = _cell(_summary(default) + repair)
        known = {True: "yes", False: "no"}.get(default.known, "")
        lines.append(f"| `{mt}` | {entry['model_class']} | {known} | {status} | {_cell(variant_text)} |")
    wrong = [r for r in results if r.status == "wrong"]
    lines += ["", "## Wrong rows in detail", ""]
    if not wrong:
        lines.append(
            "None: every figure slotdiff gives equals transformers' "
            "(a total less unread expert rows, where the type's row says so)."
        )
    else:
        lines += [
            "Ours vs theirs for every differing figure; for a differing total, the parts that differ "
            "(slotdiff's `by_part` vs the oracle's `PART_PATTERNS` split, whose boundaries are a "
            "convention: a hint, not a verdict).",
            "",
            "| row | figure | slotdiff | transformers | differing parts (ours vs theirs) |",
            "|---|---|---:|---:|---|",
        ]
    for r in wrong:
        hint = ", ".join(f"{p} {_n(a)} vs {_n(b)}" for p, (a, b) in r.parts.items())
        for verdict in r.verdicts:
            if verdict.status == "wrong":
                lines.append(
                    f"| `{r.row.id}` | {verdict.figure} | {_n(verdict.ours)} | {_n(verdict.theirs)} | "
                    f"{_cell(hint if verdict.figure == 'params.total' else verdict.note)} |"
                )
    lines += list(published)
    lines += [
        "",
        "## Excluded model types",
        "",
        "Not decoder language models; the reason is derived from the class "
        "(`tests/fixtures/conformance/excluded.json`).",
        "",
        "| model_type | kind | reason |",
        "|---|---|---|",
    ]
    for mt, e in sorted(excluded["types"].items()):
        lines.append(f"| `{mt}` | {e['kind']} | {_cell(e['reason'])} |")
    return "\n".join(lines) + "\n"


def _short(r: Result) -> str:
    """Compact status of a variant row for the per-type table."""
    if r.status == "wrong":
        return "wrong " + ", ".join(r.wrong())
    if r.status in ("refused", "error"):
        return f"{r.status} ({reason_class(r.reason)})"
    return r.status


# --------------------------------------------------------------------------------------------
# refresh: the transformers reference
# --------------------------------------------------------------------------------------------


def _worker_init() -> None:
    """Quiet, single-threaded workers (two of them share the two cores)."""
    import warnings

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()


def _registry() -> Any:
    """The transformers-side module (imported late: it needs torch and transformers)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from oracle import registry

    return registry


def _reference_task(model_type: str, kv: bool) -> dict[str, Any]:
    """One type's reference, timed (runs in a worker process)."""
    start = time.perf_counter()
    entry = _registry().reference_for_type(model_type, kv=kv)
    entry["seconds"] = round(time.perf_counter() - start, 2)
    return entry


def compact(entry: dict[str, Any]) -> dict[str, Any]:
    """A type's reference in stored form: variant and KV configs as deltas from the default."""
    if entry.get("status") != "built":
        return entry
    out = {k: v for k, v in entry.items() if k != "rows"}
    default = entry["rows"]["default"]["config"]
    stored: dict[str, Any] = {}
    for name, row in entry["rows"].items():
        row = dict(row)
        config = row.pop("config")
        if name == "default":
            row["config"] = config
        else:
            row["config_delta"] = delta(default, config)
        if "kv_config" in row:
            row["kv_delta"] = delta(config, row.pop("kv_config"))
        stored[name] = row
    out["rows"] = stored
    return out


def refresh(types: list[str] | None, kv: bool = True, workers: int = 2, resume: bool = False) -> None:
    """Recompute the reference for ``types`` (all when None) and rewrite reference.json.

    Types finished so far are kept in :data:`PARTIAL`; ``resume`` skips them.
    """
    registry = _registry()
    start = time.perf_counter()
    all_types = registry.registry_types()
    todo = types or all_types
    old = read_json(REFERENCE) if types and REFERENCE.exists() else None
    results: dict[str, Any] = dict(old["types"]) if old else {}
    if resume and PARTIAL.exists():
        done_before = read_json(PARTIAL)
        results.update(done_before)
        todo = [mt for mt in todo if mt not in done_before]
    context = multiprocessing.get_context("spawn")  # no fork of a process that holds torch threads
    # (no max_tasks_per_child: Python 3.11's pool stops handing out work once a worker retires)
    with ProcessPoolExecutor(workers, context, _worker_init) as pool:
        futures = {pool.submit(_reference_task, mt, kv): mt for mt in todo}
        for done, future in enumerate(as_completed(futures), 1):
            mt = futures[future]
            try:
                entry = future.result()
            except Exception as exc:  # a crash of the harness itself on one type
                entry = {
                    "model_type": mt,
                    "status": "unbuildable",
                    "reason": f"harness: {type(exc).__name__}: {exc}",
                }
            results[mt] = compact(entry)
            write_json(PARTIAL, results)  # `refresh --resume` continues from here after a crash
            rows_n = len(entry.get("rows", {}))
            print(
                f"[{done}/{len(todo)}] {mt}: {entry['status']} {rows_n} rows {entry.get('seconds', 0)} s",
                flush=True,
            )
    # a partial refresh keeps the full run's time: the figure says what `refresh` costs
    seconds = float(old.get("seconds", 0)) if old else time.perf_counter() - start
    reference = {
        "about": "transformers' figures for every conformance row; written by "
        "`python tools/conformance.py refresh`. Variant configs are stored as edits of the default "
        "(config_delta), KV configs as edits of their row's config (kv_delta).",
        "versions": registry.versions(),
        "kv_seq_len": registry.KV_SEQ_LEN,
        "seconds": round(seconds),
        "types": {mt: results[mt] for mt in sorted(results)},
    }
    write_json(REFERENCE, reference)
    PARTIAL.unlink(missing_ok=True)
    excluded = {
        "about": "Registry model types that are not decoder language models, with the reason derived "
        "from the class; written by `python tools/conformance.py refresh`.",
        "versions": registry.versions(),
        "types": {
            mt: {"kind": e["kind"], "reason": e["reason"], "classes": e["classes"]}
            for mt, e in sorted(results.items())
            if e["status"] == "excluded"
        },
    }
    write_json(EXCLUDED, excluded)
    built = sum(e["status"] == "built" for e in results.values())
    n_rows = sum(len(e.get("rows", {})) for e in results.values())
    print(
        f"refresh: {len(results)} types ({built} built, {len(excluded['types'])} excluded), "
        f"{n_rows} rows in {time.perf_counter() - start:.0f} s -> {REFERENCE.relative_to(ROOT)}"
    )


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def report(accept_regressions: bool = False, coverage_json: Path | None = None) -> int:
    """Compare slotdiff with the stored reference; write COVERAGE.md, expected.json and the
    table slotdiff reads at run time (schemas/coverage.json, or ``coverage_json``)."""
    start = time.perf_counter()
    reference, excluded = read_json(REFERENCE), read_json(EXCLUDED)
    results = evaluate(reference, progress=True)
    old = read_json(EXPECTED) if EXPECTED.exists() else {"rows": {}}
    diff = changes(old, results)
    for kind, items in diff.items():
        for item in items:
            print(f"{kind}: {item}")
    if diff["regressed"] and not accept_regressions:
        print(f"{len(diff['regressed'])} rows are no longer exact; nothing written (--accept-regressions)")
        return 1
    published = _published_tool()
    section = published.section(published.current(), published.read_known())
    shapes = _forms_tool().section(_forms_tool().read(), published.current())
    COVERAGE.write_text(render(reference, excluded, results, [*section, *shapes]), encoding="utf-8")
    write_json(EXPECTED, expectations(results))
    (coverage_json or COVERAGE_JSON).write_text(
        json.dumps(coverage_table(reference, results), indent=2) + "\n", encoding="utf-8"
    )
    counts = Counter(r.status for r in results)
    print(
        f"report: {len(results)} rows, "
        + ", ".join(f"{s} {counts[s]}" for s in STATUSES if counts[s])
        + f" in {time.perf_counter() - start:.1f} s -> {COVERAGE.relative_to(ROOT)}"
    )
    return 0


def _published_tool() -> Any:
    """tools/published.py (the published-config rows; it imports this module, so it loads late)."""
    tools = str(Path(__file__).resolve().parent)
    if tools not in sys.path:
        sys.path.insert(0, tools)
    sys.modules.setdefault("conformance", sys.modules[__name__])
    import published

    return published


def _forms_tool() -> Any:
    """tools/forms.py (the published shapes of each row; it imports this module, so it loads late)."""
    tools = str(Path(__file__).resolve().parent)
    if tools not in sys.path:
        sys.path.insert(0, tools)
    sys.modules.setdefault("conformance", sys.modules[__name__])
    import forms

    return forms


def show(row_id: str, kv: bool) -> int:
    """Print one row's exact config dict (the KV row's with ``kv``)."""
    for row in rows(read_json(REFERENCE)):
        if row.id == row_id:
            config = row.kv_config if kv else row.config
            if config is None:
                print(f"{row_id} has no KV config", file=sys.stderr)
                return 2
            print(json.dumps(_encode(config), indent=2, sort_keys=True))
            return 0
    print(f"no row {row_id!r}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``refresh``, ``report`` or ``show``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("refresh", help="recompute the transformers reference (slow)")
    p.add_argument("types", nargs="*", help="only these model types (merged into the stored file)")
    p.add_argument("--no-kv", action="store_true", help="skip the real-cache KV measurements")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--resume", action="store_true", help="skip the types of an interrupted refresh")
    p = sub.add_parser("report", help="compare slotdiff with the reference; write docs/COVERAGE.md")
    p.add_argument("--accept-regressions", action="store_true", help="write even if exact rows regressed")
    p.add_argument(
        "--coverage-json", type=Path, help="write the per-type table there instead of schemas/coverage.json"
    )
    p = sub.add_parser("published", help="real published configs: refresh their reference or report")
    p.add_argument("action", choices=("refresh", "report"))
    p.add_argument("ids", nargs="*", help="refresh only these rows (Hub ids)")
    p.add_argument("--force", action="store_true", help="recompute references that are still current")
    p.add_argument("--workers", type=int, default=2)
    p = sub.add_parser("forms", help="published shapes of each row: refresh their forms or report")
    p.add_argument("action", choices=("refresh", "report"))
    p.add_argument("types", nargs="*", help="refresh only these model types")
    p.add_argument("--workers", type=int, default=2)
    p = sub.add_parser("show", help="print a row's exact config dict")
    p.add_argument("row", help="model_type or model_type:variant")
    p.add_argument("--kv", action="store_true", help="the tiny config of the KV measurement")
    args = parser.parse_args(argv)
    if args.command == "refresh":
        refresh(args.types or None, kv=not args.no_kv, workers=args.workers, resume=args.resume)
        return 0
    if args.command == "report":
        return report(args.accept_regressions, args.coverage_json)
    if args.command == "published":
        return _published_tool().main(
            [args.action, *args.ids, *(["--force"] if args.force else []), "--workers", str(args.workers)]
        )
    if args.command == "forms":
        return _forms_tool().main([args.action, *args.types, "--workers", str(args.workers)])
    return show(args.row, args.kv)


if __name__ == "__main__":
    sys.exit(main())
