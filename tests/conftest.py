"""Shared test helpers: fixture paths and a loader for the corpus configs."""

from __future__ import annotations

import importlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

from slotdiff.analysis.analyze import BASELINES, baseline, stored_baseline_fills
from slotdiff.core.bundle import BUNDLE, SOURCES, bundle, sources_digest
from slotdiff.core.resources import data_dir

if TYPE_CHECKING:
    from slotdiff.schema.arch import Architecture

# Property tests: "ci" (the default) is a fixed budget with derandomized, reproducible
# examples (the seed comes from each test's source, not the clock) and no example database,
# so every run of the suite tries exactly the same inputs. "long" is for local runs: 20x the
# examples, a fresh random seed each run and the .hypothesis/ database that replays any
# failure found. docs/TESTING.md has the commands. Tests size their budgets with
# test_fuzz.budget(n): n examples under "ci", 20 n under "long".
_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
settings.register_profile(
    "ci", max_examples=100, derandomize=True, database=None, deadline=None, suppress_health_check=_QUIET
)
settings.register_profile("long", max_examples=2000, deadline=None, suppress_health_check=_QUIET)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def budget(n: int) -> settings:
    """``n`` examples under the "ci" profile, scaled with the loaded profile ("long": 20 n)."""
    return settings(max_examples=max(1, round(n * settings.default.max_examples / 100)))


def _subprocesses_keep_bytecode() -> None:
    """``python -m slotdiff`` in a test's subprocess loads compiled bytecode, as an installed
    package does: under PYTHONDONTWRITEBYTECODE every one of the suite's hundreds of
    subprocesses would recompile slotdiff's modules (about 0.15 s of CPU each). The bytecode
    goes to a folder of its own under the temp directory, never into the source tree."""
    dropped = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    if dropped and "PYTHONPYCACHEPREFIX" not in os.environ:
        user = os.getuid() if hasattr(os, "getuid") else 0
        folder = os.path.join(tempfile.gettempdir(), f"slotdiff-tests-pycache-{user}")
        os.environ["PYTHONPYCACHEPREFIX"] = folder


_subprocesses_keep_bytecode()


def _stale_bundle_off() -> None:
    """A knowledge bundle stale against schemas/ or fingerprints/ (a data file edited, the
    bundle not yet rebuilt), or whose GPT-2 or Llama-3-8B fills are not what the code now
    builds (a slot rule changed), is switched off for the whole run, subprocesses included:
    the suite then tests the sources and the code, and tests/test_bundle.py alone fails,
    naming the fix."""
    with open(BUNDLE, "rb") as fh:
        made_from = json.loads(fh.readline()).get("sources_sha256")
    stale = made_from != sources_digest({name: data_dir(name) for name in SOURCES})
    if not stale and os.environ.get("SLOTDIFF_NO_BUNDLE", "") in ("", "0"):
        stale = any(repr(stored_baseline_fills(w)) != repr(baseline(w).fills) for w in BASELINES)
    if stale:
        os.environ["SLOTDIFF_NO_BUNDLE"] = "1"
        bundle.cache_clear()  # this process too (the files it decoded are the sources' own)


_stale_bundle_off()

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"
RAW = CORPUS / "raw"
DEFAULTS = CORPUS / "transformers-defaults"
EXAMPLES = Path(__file__).parent / "example-files"


def tool(name: str) -> ModuleType:
    """A module of tools/ (a folder of scripts, not a package), imported once per process with
    tools/ on the path, so the tools import one another as their scripts do."""
    folder = str(Path(__file__).resolve().parents[1] / "tools")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def raw(repo_id: str) -> Path:
    """Path of a published corpus config by its Hub id."""
    return RAW / (repo_id.replace("/", "__") + ".json")


def all_corpus() -> list[Path]:
    return sorted(RAW.glob("*.json")) + sorted(DEFAULTS.glob("*.json"))


def arch_of(name: str) -> Architecture:
    """The Architecture of a multimodal fixture under tests/fixtures/vision/."""
    from slotdiff.read.source import from_file
    from slotdiff.schema.build import build

    return build(from_file(FIXTURES / "vision" / name))


def arch_from(data: dict, name: str = "inline") -> Architecture:
    """The Architecture of an in-memory config dict."""
    from slotdiff.analysis.analyze import from_mapping
    from slotdiff.schema.build import build

    return build(from_mapping(data, name))


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach the internet: the Hub is offline unless a test points it at 127.0.0.1."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(autouse=True)
def _no_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Layout never depends on the shell that started pytest: COLUMNS and LINES (set by an
    interactive shell, absent in xdist workers and CI) are unset; a test wanting a width sets one."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(scope="session")
def _hf_home_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf-home")


@pytest.fixture(autouse=True)
def _private_hf_home(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, _hf_home_root: Path
) -> None:
    """Tests never read or write the user's HF_HOME: a hostile fake Hub could poison its
    caches (huggingface_hub keeps a day-long cache of a side request there). Each test gets
    its own HF_HOME under a temporary folder, also as XDG_CACHE_HOME, which a subprocess
    whose environment was stripped of HF_* variables falls back to; huggingface_hub's
    constants, computed from HF_HOME at its import, are moved there as well."""
    home = _hf_home_root / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)[-150:]
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "xdg"))
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        old = str(constants.HF_HOME)
        for name, value in vars(constants).items():
            if name.isupper() and isinstance(value, str) and value.startswith(old):
                monkeypatch.setattr(constants, name, str(home) + value[len(old) :])
