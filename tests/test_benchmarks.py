"""benchmarks/run.py --quick runs end to end and prints its table (no timing is checked)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The first words of each row's measure, in table order.
ROWS = (
    "parameter count per config",
    "whole cost pass per config",
    "`slotdiff lint` on 5 configs (the corpus round-robin",
    "`slotdiff lint -j 1` on 5 configs (the corpus round-robin",
    "`slotdiff lint` on 5 configs (no two alike",
    "`slotdiff lint -j 1` on 5 configs (no two alike",
    "`slotdiff CONFIG --json`",
    "`slotdiff CONFIG` (table)",
    "`slotdiff lint CONFIG`",
    "`slotdiff fit CONFIG`",
    "`slotdiff Qwen/Qwen3-8B --json` offline",
    "`slotdiff fit` on a 16,384-layer config",
    "scan classification, ",
    "scan classification as a scan runs it",
    "scan classification of distinct config bytes",
    "first scan of 20 models, local fake Hub, no added latency",
    "first scan of 20 models, local fake Hub, 20 ms added",
    "first scan of 20 models, local fake Hub, 100 ms added",
)


def test_quick_benchmark_prints_every_row() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| measure | slotdiff | reference")
    body = rows[2:]
    assert len(body) == len(ROWS), out.stdout
    for line, start in zip(body, ROWS, strict=True):
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert cells[0].startswith(start), line
        assert len(cells) == 5 and all(cells), line
    assert "totals equal" in body[0]
