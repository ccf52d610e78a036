"""The conformance harness's shared pieces: stored references, rows, slotdiff's four figures and
their comparison with transformers'. tools/conformance.py, tools/forms.py and tools/published.py
import them from here, so no tool imports another's command-line module."""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import slotdiff

os.environ["SLOTDIFF_NO_BUNDLE"] = "1"  # a generator reads the sources, never a bundle made before them

ROOT = Path(__file__).resolve().parents[1]


FIXTURES = ROOT / "tests" / "fixtures" / "conformance"


REFERENCE = FIXTURES / "reference.json"


#: The four figures compared, in report order: (name, label, which config slotdiff is given).
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("params.total", "total params", "config"),
    ("params.active", "active params", "config"),
    ("kv.bytes_per_token", "KV bytes/token (bf16)", "kv_config"),
    ("kv.state_bytes_per_sequence", "state bytes/sequence", "kv_config"),
)


STATUSES: tuple[str, ...] = ("exact", "wrong", "refused", "error", "no reference")


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
