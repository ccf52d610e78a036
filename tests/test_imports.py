"""Each command imports only what it needs: the heavy libraries stay out of local-file runs.

Start-up time is measured by benchmarks/run.py; this only checks which modules load
(``python -X importtime`` lists every one), so it holds on any machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slotdiff.read.offline import hf_cache_may_hold

from conftest import raw

HEAVY = frozenset(
    {"huggingface_hub", "httpx", "httpx2", "jsonschema", "deepdiff", "rich", "matplotlib", "torch"}
)
CONFIG = str(raw("Qwen/Qwen3-30B-A3B"))


def imported(*args: str, **extra: str) -> set[str]:
    """Top-level packages a ``slotdiff`` run imports."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "100", **extra}
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
        (("Qwen/Qwen3-8B", "--json"), set()),  # a catalog id offline, no HF cache holding it
        (("fit", CONFIG, "--json"), set()),  # GPU presets and the rest of the data: the bundle
        (("train", CONFIG, "--json"), set()),
        (("gpus", "--json"), set()),
        (("lint", "--no-config", CONFIG), set()),  # a valid file: lint/schemacheck, no jsonschema
    ],
    ids=["json", "markdown", "table", "catalog-offline", "fit", "train", "gpus", "lint"],
)
def test_local_runs_import_no_heavy_library_they_do_not_use(args: tuple[str, ...], allowed: set[str]) -> None:
    assert "slotdiff" in (names := imported(*args))
    assert names & HEAVY <= allowed, sorted(names & HEAVY - allowed)


def test_offline_catalog_id_with_an_hf_cache_copy_still_reads_the_cache(tmp_path: Path) -> None:
    """The fast path never hides the HF cache: offline, a cached copy (here a different
    config) wins over the bundled catalog, as huggingface_hub answers."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-8B"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit, encoding="utf-8")
    (repo / "snapshots" / commit).mkdir(parents=True)
    gpt2 = raw("openai-community/gpt2").read_text(encoding="utf-8")
    (repo / "snapshots" / commit / "config.json").write_text(gpt2, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hub")}
    args = [sys.executable, "-m", "slotdiff", "Qwen/Qwen3-8B", "--json"]
    out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["source"]["origin"] == "hf-cache" and data["model_type"] == "gpt2", data["source"]


def test_cache_check_is_case_insensitive_and_follows_hf_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert not hf_cache_may_hold("Qwen/Qwen3-8B")  # no hub folder at all
    (tmp_path / "hub" / "models--qwen--QWEN3-8b").mkdir(parents=True)
    assert hf_cache_may_hold("Qwen/Qwen3-8B")
    assert not hf_cache_may_hold("Qwen/Qwen3-0.6B")


def test_offline_catalog_id_without_a_cache_is_the_catalog_copy() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "slotdiff", "Qwen/Qwen3-8B", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    source = json.loads(out.stdout)["source"]
    assert source["origin"] == "catalog"
    assert source["note"].startswith("HF_HUB_OFFLINE is set and config.json is not in the HF cache; served")


def test_a_local_json_run_loads_no_stdlib_it_does_not_use() -> None:
    """Start-up (issue 28): the shard-header threads need no concurrent.futures (and with it
    logging), the style mark no secrets (hmac)."""
    names = imported(CONFIG, "--json")
    assert not names & {"concurrent", "logging", "secrets", "hmac"}, sorted(names)
