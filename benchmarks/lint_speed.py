"""How long ``slotdiff lint`` takes on 200 configs, process start to exit, next to check-jsonschema.

The 200 files are the corpus configs (tests/fixtures/corpus: published configs and
transformers' defaults) copied round-robin into a temporary folder as ``NNN_config.json``:
76 distinct files, each about three times, and slotdiff lint reads a copy's bytes once (a
training run's checkpoint folders hold one config.json many times). ``--distinct`` gives
each file its own ``_name_or_path``, so that no two are alike.
Both tools (and slotdiff lint in one process, ``-j 1``) run on the same files with the
same schema (schemas/config.schema.json), each as a fresh process. The script prints
every run's wall time, the median and the minimum, the CPU time, and the ratios of the
medians. Target: slotdiff lint under one second.
benchmarks/run.py uses the same functions for its lint row.

    python benchmarks/lint_speed.py [--runs 7] [--files 200] [--distinct]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"


def make_files(folder: Path, n: int, distinct: bool = False) -> list[str]:
    """``n`` copies of the corpus configs, round-robin (76 distinct files: slotdiff lint reads
    a copy's bytes once); ``distinct``: each given its own ``_name_or_path``, so no two match."""
    sources = sorted((CORPUS / "raw").glob("*.json")) + sorted(
        (CORPUS / "transformers-defaults").glob("*.json")
    )
    out = []
    for i in range(n):
        dest = folder / f"{i:03d}_config.json"
        source = sources[i % len(sources)]
        if distinct:
            data = json.loads(source.read_text(encoding="utf-8"))
            data["_name_or_path"] = f"bench/m{i:03d}"
            dest.write_text(json.dumps(data, indent=2), encoding="utf-8")
        else:
            shutil.copyfile(source, dest)
        out.append(str(dest))
    return out


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and its workers) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        sys.exit(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr.decode()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


def process_env(pycache: Path) -> dict[str, str]:
    """The environment both tools run in: bytecode cached in ``pycache`` (as an installed
    package has its .pyc files; PYTHONDONTWRITEBYTECODE would recompile slotdiff every run)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def commands(files: list[str]) -> dict[str, list[str]]:
    """Each tool's command line over ``files``, with the same schema."""
    check = shutil.which("check-jsonschema") or str(Path(sys.executable).parent / "check-jsonschema")
    schema = str(ROOT / "schemas" / "config.schema.json")
    return {
        "slotdiff lint": [sys.executable, "-m", "slotdiff", "lint", "--no-config", "-q", *files],
        # one process (no fork, lint/spread.py): the per-file work and start-up alone
        "slotdiff lint -j 1": [sys.executable, "-m", "slotdiff", "lint", "--no-config", "-q", "-j1", *files],
        "check-jsonschema": [check, "--schemafile", schema, *files],
    }


def measure(
    tools: dict[str, list[str]], env: dict[str, str], runs: int, warmup: bool = True
) -> dict[str, dict[str, list[float]]]:
    """Wall and CPU seconds of ``runs`` runs of each command, interleaved (after one warm-up
    each: page cache, .pyc files)."""
    if warmup:
        for cmd in tools.values():
            timed(cmd, env)
    out: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in tools}
    for _ in range(runs):
        for name, cmd in tools.items():
            took, cpu = timed(cmd, env)
            out[name]["wall"].append(took)
            out[name]["cpu"].append(cpu)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument(
        "--distinct", action="store_true", help="no two files alike (each its own _name_or_path)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = make_files(Path(tmp), args.files, args.distinct)
        got = measure(commands(files), process_env(Path(tmp) / "pycache"), args.runs)
    times = {name: m["wall"] for name, m in got.items()}
    cpus = {name: m["cpu"] for name, m in got.items()}
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.files} configs, {args.runs} runs each, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, load average {load:.2f} (other work inflates wall times)"
    )
    for name, ts in times.items():
        runs = " ".join(f"{t:.3f}" for t in ts)
        print(
            f"{name:<18} wall median {statistics.median(ts):.3f} s, min {min(ts):.3f} s; "
            f"CPU median {statistics.median(cpus[name]):.3f} s  (wall: {runs})"
        )
    for name in ("slotdiff lint", "slotdiff lint -j 1"):
        ratio = statistics.median(times[name]) / statistics.median(times["check-jsonschema"])
        print(f"ratio {name} / check-jsonschema (medians): {ratio:.2f}")
    print(
        "target: slotdiff lint under 1 s:",
        "met" if statistics.median(times["slotdiff lint"]) < 1 else "MISSED",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
