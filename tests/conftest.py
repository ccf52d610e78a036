"""Shared test helpers: fixture paths and a loader for the corpus configs."""

from __future__ import annotations

from pathlib import Path

import pytest

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


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach the internet: the Hub is offline unless a test points it at 127.0.0.1."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
