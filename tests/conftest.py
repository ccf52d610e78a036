"""Shared test helpers: fixture paths and a loader for the corpus configs."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

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


FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus"
RAW = CORPUS / "raw"
DEFAULTS = CORPUS / "transformers-defaults"
EXAMPLES = Path(__file__).parent / "example-files"


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
def _no_terminal_geometry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output widths come from --width or the piped default, never from the shell that ran
    pytest: COLUMNS and LINES set there would change every text layout a test checks."""
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
