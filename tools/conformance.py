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
import json
import multiprocessing
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import forms
import published
from harness import (
    FIGURES,
    FIXTURES,
    REFERENCE,
    ROOT,
    STATUSES,
    Result,
    Row,
    _cell,
    _encode,
    _n,
    _registry,
    _summary,
    _worker_init,
    compare,
    delta,
    read_json,
    rows,
    write_json,
)

EXCLUDED = FIXTURES / "excluded.json"
EXPECTED = FIXTURES / "expected.json"
COVERAGE = ROOT / "docs" / "COVERAGE.md"
COVERAGE_JSON = ROOT / "schemas" / "coverage.json"
#: Types finished by a refresh still running (``refresh --resume`` continues from it).
PARTIAL = Path(tempfile.gettempdir()) / "slotdiff-conformance.partial.json"


# --------------------------------------------------------------------------------------------
# Stored reference: JSON I/O and config deltas
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# slotdiff's side (public API only)
# --------------------------------------------------------------------------------------------


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
    shapes = forms.per_type(forms.read())
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
    section = published.section(published.current(), published.read_known())
    shapes = forms.section(forms.read(), published.current())
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
        return published.main(
            [args.action, *args.ids, *(["--force"] if args.force else []), "--workers", str(args.workers)]
        )
    if args.command == "forms":
        return forms.main([args.action, *args.types, "--workers", str(args.workers)])
    return show(args.row, args.kv)


if __name__ == "__main__":
    sys.exit(main())
