"""Each command imports only what it needs: the heavy libraries stay out of local-file runs.

Start-up time is measured by benchmarks/run.py; this only checks which modules load
(``python -X importtime`` lists every one), so it holds on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import raw

HEAVY = frozenset(
    {"huggingface_hub", "httpx", "httpx2", "jsonschema", "deepdiff", "rich", "matplotlib", "torch"}
)
CONFIG = str(raw("Qwen/Qwen3-30B-A3B"))


def imported(*args: str) -> set[str]:
    """Top-level packages a ``slotdiff`` run imports."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "100"}
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "slotdiff", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode in (0, 1), out.stderr[-2000:]
    names = set()
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        ((CONFIG, "--json"), set()),
        ((CONFIG, "--markdown"), set()),
        ((CONFIG,), {"rich"}),
        (("lint", "--no-config", CONFIG), {"jsonschema"}),
    ],
    ids=["json", "markdown", "table", "lint"],
)
def test_local_runs_import_no_heavy_library_they_do_not_use(args: tuple[str, ...], allowed: set[str]) -> None:
    assert "slotdiff" in (names := imported(*args))
    assert names & HEAVY <= allowed, sorted(names & HEAVY - allowed)
