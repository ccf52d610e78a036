"""SD202 (deprecated key): said where it matters, not on every published config (issue 30, 11).

transformers still reads ``torch_dtype`` and ``rope_scaling``, and nearly every published
config carries them: flagged on every file, SD202 was 51 of the 68 warnings slotdiff lint gave
the corpus folder. A spelling transformers still reads is now reported only in diff mode, on
the change that adds it; a spelling it no longer reads is reported always. Which keys it
still reads is checked against transformers itself, both ways.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slotdiff.lint import engine
from slotdiff.lint.policy import Policy
from slotdiff.lint.registry import params
from slotdiff.lint.rules import keys

from conftest import RAW, raw

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"HF_HUB_OFFLINE": "1"}

# One value per SD202 entry: the deprecated spelling's value, and the same meaning written the
# new way (a test fails when an entry is added without one).
SAMPLES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "torch_dtype": ({"torch_dtype": "float16"}, {"dtype": "float16"}),
    "rope_scaling": (
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}},
    ),
    "rope_scaling.type": (
        {"rope_scaling": {"type": "linear", "factor": 2.0}},
        {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    ),
    "rope_parameters.type": (
        {"rope_parameters": {"type": "linear", "factor": 2.0, "rope_theta": 500000.0}},
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500000.0}},
    ),
}


def lint(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", "lint", "--no-config", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _without(value: Any, key: str) -> Any:
    return {k: v for k, v in value.items() if k != key} if isinstance(value, dict) else value


def test_still_read_flags_agree_with_transformers() -> None:
    """Each entry's ``still_read`` is what transformers does: the old spelling builds the same
    config as the new one (read), or the default one (ignored)."""
    from transformers import LlamaConfig

    table = params("SD202")["keys"]
    assert set(SAMPLES) == set(table)
    base = {k: v for k, v in json.loads(raw("meta-llama/Llama-3.2-1B").read_text()).items()}
    base.pop("rope_scaling")
    base.pop("torch_dtype")
    base["rope_theta"] = 500000.0
    plain = LlamaConfig(**base).to_dict()
    for name, (old, new) in SAMPLES.items():
        got, want = LlamaConfig(**base, **old).to_dict(), LlamaConfig(**base, **new).to_dict()
        for d in (got, want, plain):
            d.pop("transformers_version", None)
        if "." in name:  # a nested spelling may be kept beside the one it was read into
            leaf = name.rpartition(".")[2]
            got = {k: _without(v, leaf) for k, v in got.items()}
        assert want != plain, name  # the sample means something
        assert (got == want) is bool(table[name].get("still_read")), (name, got, want)


def test_published_corpus_folder_has_no_sd202(tmp_path: Path) -> None:
    res = lint("--format", "json", str(RAW))
    data = json.loads(res.stdout)
    assert res.returncode == 0 and data["files"] >= 30, res.stderr
    codes = [d["code"] for d in data["diagnostics"]]
    assert "SD202" not in codes, [d for d in data["diagnostics"] if d["code"] == "SD202"][:3]
    # the corpus does carry the spellings: the rule is quiet by design, not for want of input
    texts = [p.read_text() for p in RAW.glob("*.json")]
    assert sum('"torch_dtype"' in t for t in texts) >= 20 and sum('"rope_scaling"' in t for t in texts) >= 10


def test_diff_mode_reports_only_the_change_that_adds_a_deprecated_spelling(tmp_path: Path) -> None:
    git("init", "-q", cwd=tmp_path)
    git("config", "user.email", "t@slotdiff.invalid", cwd=tmp_path)
    git("config", "user.name", "t", cwd=tmp_path)
    published = raw("meta-llama/Llama-3.2-1B").read_text()  # has torch_dtype and rope_scaling
    modern = published.replace('"torch_dtype"', '"dtype"')
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "config.json").write_text(published)
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "config.json").write_text(modern)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "base", cwd=tmp_path)
    # a change to each: kept keeps its torch_dtype, new gains one
    (tmp_path / "kept" / "config.json").write_text(
        published.replace('"vocab_size": 128256', '"vocab_size": 128320')
    )
    (tmp_path / "new" / "config.json").write_text(published)
    res = lint(
        "--diff-base", "HEAD", "--select", "SD202", "kept/config.json", "new/config.json", cwd=tmp_path
    )
    lines = res.stdout.splitlines()
    assert res.returncode == 0, res.stderr
    line = published[: published.index('"torch_dtype"')].count("\n") + 1
    want = "SD202 torch_dtype is deprecated: write dtype (transformers 4.56); added since HEAD"
    assert lines == [f"new/config.json:{line}:3: {want}"], res.stdout
    # outside diff mode, neither file is flagged
    assert lint("--select", "SD202", "kept/config.json", "new/config.json", cwd=tmp_path).stdout == ""


def test_a_spelling_transformers_no_longer_reads_is_reported_always(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The other half of the rule, with an entry marked unread (the table has none today:
    transformers 5 still reads every spelling it lists)."""
    table = {"old_key": {"use": "new_key", "since": "transformers 9"}}
    monkeypatch.setattr(keys, "params", lambda code: {"keys": table})
    cfg = tmp_path / "config.json"
    cfg.write_text(raw("meta-llama/Llama-3.2-1B").read_text().replace('"use_cache"', '"old_key"'))
    run = engine.lint([str(cfg)], Policy(root=tmp_path, select=("SD202",)))
    assert [(d.code, d.message) for d in run.diagnostics] == [
        ("SD202", "old_key is deprecated: write new_key (transformers 9)")
    ]
