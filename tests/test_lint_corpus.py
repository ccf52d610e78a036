"""Every corpus config lints clean of errors, except the findings documented in docs/LINT.md.

A published config that genuinely breaks a rule is a finding: it is listed here and in the
Findings table of docs/LINT.md, and the rule stays as it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slotdiff.lint import engine
from slotdiff.lint.policy import Policy

from conftest import CORPUS, all_corpus

ROOT = Path(__file__).resolve().parent.parent

# (path under tests/fixtures/corpus, code) of every error-level diagnostic the corpus has.
FINDINGS = {
    ("transformers-defaults/glm4_moe.json", "SD111"),
}


@pytest.fixture(scope="module")
def corpus_run() -> engine.Run:
    return engine.lint([str(p) for p in all_corpus()], Policy())


def test_corpus_has_no_errors_but_the_findings(corpus_run: engine.Run) -> None:
    errors = {
        (Path(d.path).relative_to(CORPUS).as_posix(), d.code)
        for d in corpus_run.diagnostics
        if d.severity == "error"
    }
    assert errors == FINDINGS


def test_findings_are_documented() -> None:
    doc = (ROOT / "docs" / "LINT.md").read_text()
    findings = doc.split("## Findings", 1)[1]
    for path, code in FINDINGS:
        assert f"`{path}`" in findings and code in findings


def test_every_published_config_is_read(corpus_run: engine.Run) -> None:
    """No SD101/SD103 on the corpus: the linter reads every real config slotdiff can."""
    assert not [d for d in corpus_run.diagnostics if d.code in ("SD101", "SD103")]
