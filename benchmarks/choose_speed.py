"""How long ``slotdiff choose`` over the whole bundled catalog takes, process start to exit,
next to ``slotdiff CONFIG --json`` on one config measured in the same run.

Each command runs as a fresh process (bytecode cached, Hub offline, as benchmarks/lint_speed.py
runs them), interleaved, after one warm-up each. The script prints every run's wall time, the
median and the minimum, the CPU time, and each median's ratio to the reference's. Target:
``choose`` over the catalog under one second. Nothing here fails on a time.

    python benchmarks/choose_speed.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from lint_speed import ROOT, measure, process_env  # noqa: E402  (benchmarks/, on sys.path above)

REFERENCE = "slotdiff CONFIG --json"
CONFIG = ROOT / "src" / "slotdiff" / "catalog" / "meta-llama__Llama-3.1-70B.json"


def commands() -> dict[str, list[str]]:
    """The reference, then ``choose`` as a user would type it: table, JSON, a big target."""
    py = [sys.executable, "-m", "slotdiff"]
    return {
        REFERENCE: [*py, str(CONFIG), "--json"],
        "choose (table)": [*py, "choose"],
        "choose --json": [*py, "choose", "--json"],
        "choose 8×H200 128K": [*py, "choose", "--gpu", "h200", "--gpus", "8", "--context", "128K",
                               "--batch", "16", "--max-decode-ms", "40"],
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        got = measure(commands(), process_env(Path(tmp) / "pycache"), args.runs)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.runs} runs each, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"load average {load:.2f} (other work inflates wall times)"
    )
    ref = statistics.median(got[REFERENCE]["wall"])
    for name, m in got.items():
        ts = m["wall"]
        med = statistics.median(ts)
        runs = " ".join(f"{t:.3f}" for t in ts)
        print(
            f"{name:<22} wall median {med:.3f} s, min {min(ts):.3f} s; CPU median "
            f"{statistics.median(m['cpu']):.3f} s; ×{med / ref:.2f} the reference  (wall: {runs})"
        )
    worst = max(statistics.median(m["wall"]) for name, m in got.items() if name != REFERENCE)
    print("target: choose over the whole catalog under 1 s:", "met" if worst < 1 else "MISSED")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
