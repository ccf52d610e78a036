"""Real published configs as conformance rows: slotdiff against transformers on configs as people
publish them (keys left to their class default, derived fields left out, per-layer lists,
hand-written files), not as transformers serialises its defaults.

Each row is ``tests/fixtures/conformance/published/<hf_id with __>.json``:

    {"hf_id": ..., "source": {"repo", "commit", "path", "complete", "notes"},
     "config": {...verbatim...}, "reference": {...transformers' figures...}}

``config`` is the file as the source repository holds it (a Python dict literal converted
faithfully where the source keeps one; non-finite floats as ``{"__float__": "Infinity"}`` tags).
``reference`` is computed by ``tests/oracle/published.py`` with the registry harness's own code
(meta-device totals and active params; a real cache of a tiny copy for KV bytes per token and
state bytes per sequence, the tiny copy kept in the published shape), stamped with the
transformers and torch versions and the config's digest.

    python tools/published.py refresh [HF_ID...] [--force]   # compute missing or stale references
    python tools/published.py report                         # every row's verdict

(also ``python tools/conformance.py published refresh|report``).  A row is *exact*, *refused*
(documented when slotdiff names the part it cannot count), *wrong*, *error*, or has *no
reference* (transformers cannot build it: remote code, or a bug; no failure of slotdiff).
``tests/fixtures/conformance/published_known.json`` lists, in one place, the rows that fail only
for a reason another piece of work owns, with that reason; ``tests/test_published.py`` holds
slotdiff to everything else.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

os.environ["SLOTDIFF_NO_BUNDLE"] = "1"  # a generator reads the sources, never a bundle made before them

ROOT = harness.ROOT
PUBLISHED = harness.FIXTURES / "published"
KNOWN = harness.FIXTURES / "published_known.json"
#: Refusal texts that name the part slotdiff cannot count (a structure it declares unsupported,
#: a tower it has no data for): a documented refusal. Any other refusal of a config transformers
#: builds is a failure.
DOCUMENTED_REFUSALS: tuple[str, ...] = ("cannot count", "partial: excludes")


# --------------------------------------------------------------------------------------------
# Rows on disk
# --------------------------------------------------------------------------------------------


def file_name(hf_id: str) -> str:
    """The row file's name for a Hub id (``org/name`` -> ``org__name.json``)."""
    return hf_id.replace("/", "__") + ".json"


def config_digest(config: Mapping[str, Any]) -> str:
    """SHA-256 of the config's canonical JSON (sorted keys): the reference holds while it matches."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_rows(folder: Path = PUBLISHED) -> list[dict[str, Any]]:
    """Every published row, sorted by Hub id (configs as stored: float tags not decoded)."""
    rows = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
    return sorted(rows, key=lambda r: r["hf_id"])


def write_row(row: Mapping[str, Any], folder: Path = PUBLISHED) -> None:
    """Write one row: its config in the order the source gives it, one item per line."""
    text = json.dumps(row, indent=1, ensure_ascii=False, allow_nan=False)
    (folder / file_name(row["hf_id"])).write_text(text + "\n", encoding="utf-8")


def read_known(path: Path = KNOWN) -> dict[str, Any]:
    """The known failures (``rows``) and their classes (``classes``)."""
    return harness.read_json(path)


def is_current(row: Mapping[str, Any], versions: Mapping[str, str] | None = None) -> bool:
    """Whether the row's reference was computed for this config (and these versions, if given)."""
    ref = row.get("reference") or {}
    if ref.get("config_sha256") != config_digest(row["config"]):
        return False
    return versions is None or ref.get("versions") == dict(versions)


# --------------------------------------------------------------------------------------------
# slotdiff's side
# --------------------------------------------------------------------------------------------


def as_row(row: Mapping[str, Any]) -> harness.Row | None:
    """The published row as a harness :class:`harness.Row` (None when transformers could not
    build the config: there is nothing to compare with)."""
    ref = row.get("reference") or {}
    if ref.get("status") != "built":
        return None
    figures = harness.reference_figures(ref)
    config = harness._decode(row["config"])
    kv_config = harness._decode(ref["kv_config"]) if "kv_config" in ref else None
    model_type = str(row["config"].get("model_type"))
    return harness.Row(
        row["hf_id"],
        model_type,
        "published",
        config,
        kv_config,
        {**ref, "figures": figures},
        ref.get("kv_unsupported"),
    )


@dataclass
class Verdict:
    """One published row compared: its status, slotdiff's trust level, and the harness result."""

    hf_id: str
    model_type: str
    status: str  # exact | wrong | refused | error | no reference
    trust: str | None = None  # slotdiff's coverage status of the config: verified | unverified
    documented: bool = False  # a refusal that names the part slotdiff cannot count
    reason: str = ""
    wrong: list[str] = field(default_factory=list)
    result: harness.Result | None = None

    def summary(self) -> str:
        """One line: the status with figures or reason, and the trust level."""
        text = harness._summary(self.result) if self.result is not None else f"{self.status}: {self.reason}"
        return f"{text} [{self.trust or 'no report'}]"


def _trust(config: Mapping[str, Any]) -> str | None:
    """slotdiff's coverage status for ``config`` (None when it refuses the config)."""
    got = harness.slotdiff_figures(config)
    return got.get("trust")


def verdict(row: Mapping[str, Any]) -> Verdict:
    """Compare one published row (slotdiff only: no torch or transformers needed)."""
    model_type = str(row["config"].get("model_type"))
    as_harness = as_row(row)
    if as_harness is None:
        reason = (row.get("reference") or {}).get("reason", "no reference computed yet")
        return Verdict(
            row["hf_id"],
            model_type,
            "no reference",
            _trust(harness._decode(row["config"])),
            reason=reason,
        )
    result = harness.compare(as_harness)
    trust = result.trust
    refused = [v.note for v in result.verdicts if v.status == "refused"]
    documented = bool(refused) and all(any(p in note for p in DOCUMENTED_REFUSALS) for note in refused)
    return Verdict(
        row["hf_id"], model_type, result.status, trust, documented, result.reason, result.wrong(), result
    )


def evaluate(rows: Iterable[Mapping[str, Any]]) -> list[Verdict]:
    """Every row's verdict, in row order."""
    return [verdict(row) for row in rows]


@cache
def current() -> tuple[Verdict, ...]:
    """Every stored row's verdict, once per process (the tests and COVERAGE.md share it)."""
    return tuple(evaluate(load_rows()))


def failure(v: Verdict) -> str | None:
    """Why a verdict fails the suite, or None: exact, no reference, and documented refusals pass."""
    if v.status in ("exact", "no reference"):
        return None
    if v.status == "refused" and v.documented:
        return None
    return v.summary()


def known_state(v: Verdict) -> dict[str, Any]:
    """The part of a verdict a known-failure entry pins: status, wrong figures, trust level."""
    return {"status": v.status, "wrong": v.wrong, "trust": v.trust}


# --------------------------------------------------------------------------------------------
# COVERAGE.md section
# --------------------------------------------------------------------------------------------


def section(verdicts: Iterable[Verdict], known: Mapping[str, Any]) -> list[str]:
    """The "Published configs" section of docs/COVERAGE.md."""
    verdicts = list(verdicts)
    rows = known.get("rows", {})
    classes = known.get("classes", {})
    counts = Counter(v.status for v in verdicts)
    types = {v.model_type for v in verdicts}
    built_types = {v.model_type for v in verdicts if v.status != "no reference"}
    documented = sum(v.status == "refused" and v.documented for v in verdicts)
    wrong_verified = [v for v in verdicts if v.status == "wrong" and v.trust == "verified"]
    lines = [
        "",
        "## Published configs",
        "",
        f"Real `config.json` files as their owners published them, copied verbatim from public "
        f"repositories with repository, commit and path (`tests/fixtures/conformance/published/`, "
        f"references by `python tools/conformance.py published refresh`): {len(verdicts)} configs "
        f"of {len(types)} model types; transformers builds {len(verdicts) - counts['no reference']} "
        f"of them ({len(built_types)} types). Figures as above, on the config as published (the KV "
        f"figures on a tiny copy that keeps the published shape).",
        "",
        "| verdict | configs |",
        "|---|---:|",
        f"| exact | {counts['exact']} |",
        f"| refused, naming the part slotdiff cannot count | {documented} |",
        f"| refused otherwise | {counts['refused'] - documented} |",
        f"| wrong | {counts['wrong']} (marked verified: {len(wrong_verified)}) |",
        f"| error | {counts['error']} |",
        f"| no reference (transformers cannot build it) | {counts['no reference']} |",
        "",
    ]
    waiting = Counter(entry["class"] for entry in rows.values())
    if waiting:
        lines += ["Known failures, by class (`tests/fixtures/conformance/published_known.json`):", ""]
        for name, count in sorted(waiting.items()):
            lines.append(f"- {name} ({count}): {_cell(classes.get(name, ''))}")
        lines.append("")
    lines += ["| config | model_type | verdict |", "|---|---|---|"]
    for v in verdicts:
        note = f" (known: {rows[v.hf_id]['class']})" if v.hf_id in rows else ""
        lines.append(f"| `{v.hf_id}` | `{v.model_type}` | {_cell(v.summary() + note)} |")
    return lines


def _cell(text: str) -> str:
    return harness._cell(text)


# --------------------------------------------------------------------------------------------
# refresh: transformers' side
# --------------------------------------------------------------------------------------------


def _task(config: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """One reference, timed (in a worker process)."""
    start = time.perf_counter()
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from oracle import published

    return published.reference(config), time.perf_counter() - start


def refresh(ids: list[str] | None = None, force: bool = False, workers: int = 2) -> int:
    """Compute the reference of every row whose reference is missing or stale (all of ``ids``
    with ``force``) and write it into the row file."""
    registry = harness._registry()
    versions = registry.versions()
    rows = {r["hf_id"]: r for r in load_rows()}
    unknown = sorted(set(ids or ()) - set(rows))
    if unknown:
        print(f"no published row {', '.join(unknown)}", file=sys.stderr)
        return 2
    todo = [
        r for hf_id, r in rows.items() if (not ids or hf_id in ids) and (force or not is_current(r, versions))
    ]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, context, harness._worker_init) as pool:
        futures = {pool.submit(_task, r["config"]): r for r in todo}
        for done, future in enumerate(as_completed(futures), 1):
            row = futures[future]
            try:
                ref, seconds = future.result()
            except Exception as exc:  # a crash of the harness itself on one config
                ref = {
                    "versions": versions,
                    "status": "unbuildable",
                    "reason": f"harness: {type(exc).__name__}: {exc}",
                }
                seconds = 0.0
            ref["config_sha256"] = config_digest(row["config"])
            row["reference"] = ref
            write_row(row)
            print(f"[{done}/{len(todo)}] {row['hf_id']}: {ref['status']} {seconds:.1f} s", flush=True)
    print(f"refresh: {len(todo)} of {len(rows)} published rows recomputed")
    return 0


def report() -> int:
    """Print every row's verdict and the counts."""
    verdicts = evaluate(load_rows())
    known = read_known()["rows"]
    for v in verdicts:
        mark = "known" if v.hf_id in known else ("FAIL" if failure(v) else "ok")
        print(f"{mark:5} {v.hf_id} ({v.model_type}): {v.summary()}")
    counts = Counter(v.status for v in verdicts)
    print("published: " + ", ".join(f"{s} {counts[s]}" for s in harness.STATUSES if counts[s]))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``refresh`` or ``report``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("refresh", "report"))
    parser.add_argument("ids", nargs="*", help="refresh only these rows (Hub ids)")
    parser.add_argument("--force", action="store_true", help="recompute references that are still current")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if args.action == "refresh":
        return refresh(args.ids or None, args.force, args.workers)
    return report()


if __name__ == "__main__":
    sys.exit(main())
