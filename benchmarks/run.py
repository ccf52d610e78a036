"""Every speed figure slotdiff promises, each next to a reference measured in the same run.

    PYTHONPATH=src python benchmarks/run.py [--quick]

One table (Markdown, ready for the README's Performance section), one row per figure:

* the parameter count and the whole cost pass (load + ``price``: every slot change priced
  through its counterfactual), per config, median over every buildable corpus config
  (tests/fixtures/corpus), against transformers 5.24 building the same config on the
  ``meta`` device and counting its parameters (tests/oracle/hf_oracle.py). Both sides must
  give the same totals, less the unread expert rows of tests/test_oracle_params.py;
* ``slotdiff lint`` on 200 configs against ``check-jsonschema`` on the same files with the
  same schema, each a fresh process (benchmarks/lint_speed.py);
* CLI start-up, process start to exit, against ``python -c pass`` (``slotdiff CONFIG``,
  ``--json``: target ≤ 4×, ``lint``, ``fit``), and a catalog id offline (``slotdiff
  Qwen/Qwen3-8B --json``, no HF cache holding it) against the same file as a local path
  (target ≤ 1.2×);
* ``slotdiff fit`` on a config at the key map's 16,384-layer cap, process start to exit
  (the fewest-GPU search must stay well under a second there);
* scan classification throughput and a 500-model scan against the fake Hub next to the
  server's raw serving time, with no added latency and with 20 ms and 100 ms per request
  (benchmarks/scan_speed.py).

Times are medians of repeated runs (the machine may be shared); ratios are slotdiff's time
over the reference's. ``--quick`` runs each measurement once on a few inputs: it proves the
benchmark works (CI), not how fast anything is. Nothing here fails on a time; it fails only
when the two sides of a comparison disagree or a command fails.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (ROOT / "src", ROOT / "tests", HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import lint_speed  # noqa: E402  (benchmarks/, on sys.path above)
import scan_speed  # noqa: E402
import slotdiff  # noqa: E402  (this checkout's: src is first on sys.path above)
from common import private_hf_home  # noqa: E402

# A few configs for --quick: a dense model, a GQA one, an MoE, a repaired transformers default.
QUICK_CONFIGS = (
    "openai-community__gpt2.json",
    "meta-llama__Meta-Llama-3-8B.json",
    "Qwen__Qwen3-30B-A3B.json",
    "dbrx.json",
)
STARTUP_CONFIG = ROOT / "tests" / "fixtures" / "corpus" / "raw" / "Qwen__Qwen3-30B-A3B.json"
CATALOG_ID = "Qwen/Qwen3-8B"
CATALOG_FILE = ROOT / "src" / "slotdiff" / "catalog" / "Qwen__Qwen3-8B.json"


@dataclass(frozen=True)
class Row:
    measure: str
    slotdiff: str
    reference: str
    ratio: str
    target: str


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}, load average {load:.2f} at the start; "
        f"slotdiff from {Path(slotdiff.__file__).parent}"  # which checkout a comparison timed
    )


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 0.01 else f"{seconds * 1e3:.0f} ms"


def _s(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds < 1 else f"{seconds:.2f} s"


def _requests(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {method}" for method, n in sorted(counts.items())) + " requests"


def _verdict(ok: bool, quick: bool) -> str:
    return "not measured (--quick)" if quick else ("met" if ok else "MISSED")


# ----------------------------------------------------------------------- cost pass vs transformers


def _median_of(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_cost(quick: bool) -> list[Row]:
    """Parameter count and whole cost pass vs transformers' meta-device build, same configs."""
    import test_oracle_params as known  # NOT_BUILDABLE, reference(), unread_expert_rows()
    from slotdiff.analysis.analyze import baseline, load
    from slotdiff.cost.params import count
    from slotdiff.cost.price import price

    from conftest import all_corpus
    from oracle import hf_oracle

    for name in ("transformers", "torch"):
        logging.getLogger(name).setLevel(logging.ERROR)  # config warnings about the defaults
    try:
        import transformers

        transformers.logging.set_verbosity_error()
    except ImportError:
        pass

    paths = [p for p in all_corpus() if p.name not in known.NOT_BUILDABLE]
    if quick:
        paths = [p for p in paths if p.name in QUICK_CONFIGS]
    configs = [(p.name, known.reference(p)) for p in paths]
    gpt2 = baseline("gpt2")

    def params_only(cfg: dict[str, Any]) -> int:
        return count(load(cfg).arch).total

    def cost_pass(cfg: dict[str, Any]) -> int:
        model = load(cfg)
        report, _ = price(model.arch, None, model.fills, gpt2.arch, gpt2.fills)
        assert report is not None
        return report.params.total

    # Same answers: every total equals transformers' own count (less the unread expert rows).
    theirs: dict[str, dict[str, Any]] = {}
    unread = 0  # configs where transformers builds expert rows no routed expert reads
    for name, cfg in configs:
        theirs[name] = hf_oracle.param_count(cfg)  # also the warm-up (imports the model classes)
        extra = known.unread_expert_rows(cfg)
        unread += bool(extra)
        for fn in (params_only, cost_pass):
            ours = fn(cfg)
            if ours != theirs[name]["total"] - extra:
                sys.exit(f"{name}: slotdiff counts {ours:,}, transformers {theirs[name]['total'] - extra:,}")

    reps_ours, reps_theirs = (1, 1) if quick else (7, 3)
    ours_params, ours_cost, ref = [], [], []
    for _, cfg in configs:
        ours_params.append(_median_of(lambda c=cfg: params_only(c), reps_ours))
        ours_cost.append(_median_of(lambda c=cfg: cost_pass(c), reps_ours))
        ref.append(_median_of(lambda c=cfg: hf_oracle.param_count(c), reps_theirs))
    n, ref_med = len(configs), statistics.median(ref)
    skipped = ", ".join(sorted(known.NOT_BUILDABLE))
    checked = f"{n} configs, totals equal (less unread expert rows: {unread})"
    med_cost = statistics.median(ours_cost)
    return [
        Row(
            f"parameter count per config, from the config dict ({checked})",
            f"{_ms(statistics.median(ours_params))} (max {_ms(max(ours_params))})",
            f"transformers meta build + count: {_ms(ref_med)} (max {_ms(max(ref))})",
            f"{statistics.median(ours_params) / ref_med:.4f}",
            "—",
        ),
        Row(
            f"whole cost pass per config: load + price with counterfactuals (same {n}; {skipped} "
            "refused by both)",
            f"{_ms(med_cost)} (max {_ms(max(ours_cost))})",
            f"transformers meta build + count: {_ms(ref_med)}",
            f"{med_cost / ref_med:.4f}",
            f"≤ 1 ms and ≥ 100× faster: {_verdict(med_cost <= 0.001 and med_cost * 100 <= ref_med, quick)}",
        ),
    ]


# -------------------------------------------------------------------------- processes: lint, CLI


def bench_lint(quick: bool, tmp: Path, env: dict[str, str]) -> list[Row]:
    n = 5 if quick else 200
    rows = []
    for distinct in (False, True):
        folder = tmp / f"lint-{distinct}"
        folder.mkdir()
        files = lint_speed.make_files(folder, n, distinct)
        got = lint_speed.measure(lint_speed.commands(files), env, runs=1 if quick else 7, warmup=not quick)
        theirs = statistics.median(got["check-jsonschema"]["wall"])
        what = "no two alike" if distinct else "the corpus round-robin: 76 distinct"
        for name, how in (("slotdiff lint", "its default processes"), ("slotdiff lint -j 1", "one process")):
            ours = statistics.median(got[name]["wall"])
            rows.append(
                Row(
                    f"`{name}` on {n} configs ({what}; {how}), process start to exit",
                    f"{_s(ours)} (CPU {_s(statistics.median(got[name]['cpu']))})",
                    f"check-jsonschema, same files and schema: {_s(theirs)}",
                    f"{ours / theirs:.2f}",
                    f"≤ 1.0×: {_verdict(ours <= theirs, quick)}" if name == "slotdiff lint" else "—",
                )
            )
    return rows


def bench_startup(quick: bool, env: dict[str, str]) -> list[Row]:
    py = sys.executable
    cfg = str(STARTUP_CONFIG)
    tools = {
        "pass": [py, "-c", "pass"],
        "json": [py, "-m", "slotdiff", cfg, "--json"],
        "table": [py, "-m", "slotdiff", cfg],
        "lint": [py, "-m", "slotdiff", "lint", "--no-config", "-q", cfg],
        "fit": [py, "-m", "slotdiff", "fit", cfg],
        # the same published file by its repo id, offline (no HF cache holds it), and as a path
        "catalog": [py, "-m", "slotdiff", CATALOG_ID, "--json"],
        "catalog_file": [py, "-m", "slotdiff", str(CATALOG_FILE), "--json"],
    }
    got = lint_speed.measure(tools, {**env, "COLUMNS": "100"}, runs=1 if quick else 15, warmup=True)
    wall = {name: statistics.median(m["wall"]) for name, m in got.items()}
    base = wall["pass"]
    rows = []
    for name, label, target in (
        ("json", "`slotdiff CONFIG --json` (local file), process start to exit", 4.0),
        ("table", "`slotdiff CONFIG` (table), process start to exit", None),
        ("lint", "`slotdiff lint CONFIG` (one file), process start to exit", None),
        ("fit", "`slotdiff fit CONFIG` (local file), process start to exit", None),
    ):
        ratio = wall[name] / base
        rows.append(
            Row(
                label,
                _s(wall[name]),
                f"`python -c pass`: {_s(base)}",
                f"{ratio:.1f}",
                "—" if target is None else f"≤ {target:g}×: {_verdict(ratio <= target, quick)}",
            )
        )
    ratio = wall["catalog"] / wall["catalog_file"]
    rows.append(
        Row(
            f"`slotdiff {CATALOG_ID} --json` offline (bundled catalog), process start to exit",
            _s(wall["catalog"]),
            f"the same file as a local path: {_s(wall['catalog_file'])}",
            f"{ratio:.2f}",
            f"≤ 1.2×: {_verdict(ratio <= 1.2, quick)}",
        )
    )
    return rows


def bench_fit_cap(quick: bool, tmp: Path, env: dict[str, str]) -> list[Row]:
    """``slotdiff fit`` on Llama-3-8B stretched to the 16,384-layer cap (its fewest-GPU search
    over every valid TP × PP), process start to exit, against the same on the 32-layer config."""
    base = ROOT / "tests" / "fixtures" / "corpus" / "raw" / "meta-llama__Meta-Llama-3-8B.json"
    data = json.loads(base.read_text(encoding="utf-8"))
    data["num_hidden_layers"] = 16384
    cap = tmp / "cap-16384.json"
    cap.write_text(json.dumps(data), encoding="utf-8")
    py = sys.executable
    tools = {
        "cap": [py, "-m", "slotdiff", "fit", str(cap), "--json"],
        "base": [py, "-m", "slotdiff", "fit", str(base), "--json"],
    }
    got = lint_speed.measure(tools, env, runs=1 if quick else 7, warmup=True)
    cap_s, base_s = (statistics.median(got[k]["wall"]) for k in ("cap", "base"))
    return [
        Row(
            "`slotdiff fit` on a 16,384-layer config (the key map's cap), process start to exit",
            _s(cap_s),
            f"the same command on the 32-layer config: {_s(base_s)}",
            f"{cap_s / base_s:.1f}",
            f"< 1 s: {_verdict(cap_s < 1, quick)}",
        )
    ]


# ----------------------------------------------------------------------------------------- scan


def bench_scan(quick: bool, tmp: Path) -> list[Row]:
    c = scan_speed.bench_classify(tmp, at_least=1 if quick else 1200, rounds=1 if quick else 5)
    rows = [
        Row(
            f"scan classification, {c['configs']:.0f} corpus configs each analyzed in full",
            f"{c['cold_wall_per_s']:,.0f} configs/s (CPU {c['cold_cpu_per_s']:,.0f}/s)",
            "—",
            "—",
            f"≥ 5,000/s: {_verdict(c['cold_wall_per_s'] >= 5000, quick)}",
        ),
        Row(
            "scan classification as a scan runs it (identical bytes analyzed once)",
            f"{c['memo_wall_per_s']:,.0f} configs/s (CPU {c['memo_cpu_per_s']:,.0f}/s)",
            "—",
            "—",
            "—",
        ),
        Row(
            "scan classification of distinct config bytes that differ only in `_name_or_path` "
            "(the Hub's copies of a model: each design analyzed once)",
            f"{c['hub_wall_per_s']:,.0f} configs/s (CPU {c['hub_cpu_per_s']:,.0f}/s)",
            "—",
            "—",
            "—",
        ),
    ]
    n, workers = (20, 4) if quick else (500, 16)
    for latency in (0.0, 0.02, 0.1):
        proc, url, ids = scan_speed.start_server(n, tmp, latency)
        try:
            raws, scans, cpus, requests = [], [], [], {}
            for rep in range(1 if quick or latency else 3):
                raws.append(scan_speed.raw_serving(url, ids, workers))
                scan_speed.served(proc)
                m = scan_speed.scan_pair(proc, url, tmp, workers, n, f"{latency}-{rep}", via_hf_cache=False)
                if m["counts"]["models"] != n or m["again_counts"]["unchanged"] != n:
                    sys.exit(f"scan of {n} models: unexpected counts {m['counts']} / {m['again_counts']}")
                scans.append(m["wall"])
                cpus.append(m["cpu"])
                requests = m["requests"]
        finally:
            scan_speed.stop_server(proc)
        raw, scan = statistics.median(raws), statistics.median(scans)
        tag = f"{latency * 1e3:.0f} ms added per request" if latency else "no added latency"
        rows.append(
            Row(
                f"first scan of {n} models, local fake Hub, {tag} ({workers} workers, {_requests(requests)})",
                f"{_s(scan)} (CPU {_s(statistics.median(cpus))})",
                f"server's raw serving of the same requests: {_s(raw)}",
                f"{scan / raw:.2f}",
                "server-bound (≈1)",
            )
        )
    return rows


def bench_scan_apart(quick: bool) -> list[Row]:
    """The scan rows, measured in a process of their own, as ``slotdiff scan`` runs.

    The cost rows leave torch, transformers and 75 meta-device models in this process; a
    scan process holds none of them, and the garbage collector's full passes over that heap
    made classification measured here ~40% slower than in a scan.
    """
    cmd = [sys.executable, str(Path(__file__).resolve()), "--scan-rows", *(["--quick"] if quick else [])]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"scan benchmark failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return [Row(**r) for r in json.loads(done.stdout.strip().splitlines()[-1])]


# ----------------------------------------------------------------------------------------- main


def table(rows: list[Row]) -> str:
    head = Row("measure", "slotdiff", "reference (same run)", "ratio", "target")
    lines = [head, Row("---", "---", "---", "---:", "---"), *rows]
    return "\n".join(
        f"| {r.measure} | {r.slotdiff} | {r.reference} | {r.ratio} | {r.target} |" for r in lines
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="each measurement once on a few inputs (CI)")
    ap.add_argument("--scan-rows", action="store_true", help=argparse.SUPPRESS)  # see bench_scan_apart
    args = ap.parse_args(argv)
    if args.scan_rows:
        private_hf_home()
        with tempfile.TemporaryDirectory() as name:
            print(json.dumps([asdict(r) for r in bench_scan(args.quick, Path(name))]))
        return 0
    os.environ.pop("HF_HUB_OFFLINE", None)  # the scan rows talk to the local fake Hub only
    private_hf_home()  # never the user's HF_HOME: a hostile answer could poison its caches
    started = time.perf_counter()
    print(f"machine: {machine()}", flush=True)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        env = lint_speed.process_env(tmp / "pycache")
        for label, fn in (
            ("cost pass", lambda: bench_cost(args.quick)),
            ("lint", lambda: bench_lint(args.quick, tmp, env)),
            ("start-up", lambda: bench_startup(args.quick, env)),
            ("fit at the layer cap", lambda: bench_fit_cap(args.quick, tmp, env)),
            ("scan", lambda: bench_scan_apart(args.quick)),
        ):
            t0 = time.perf_counter()
            rows += fn()
            print(f"  {label}: measured in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    print()
    print(table(rows))
    print(
        f"\nratio = slotdiff's time / the reference's (lower is better); "
        f"{'--quick: one run of each on a few inputs, not a measurement; ' if args.quick else ''}"
        f"whole run {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
