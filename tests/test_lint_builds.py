"""lint/document.Builds: a file identical to one linted before is not built again, and its
diagnostics are the ones it gets when linted alone.

A copy reuses the first file's architecture under its own name, so every diagnostic (and
every message that quotes the file's name, as a build error or a rule's "could not be
checked" does) must read as if the copy had been built on its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotdiff.core.errors import SlotdiffError
from slotdiff.lint import engine
from slotdiff.lint.document import Builds, Document
from slotdiff.lint.policy import Policy
from slotdiff.schema.build import build

from conftest import CORPUS, EXAMPLES


def _files() -> list[Path]:
    examples = [p for p in sorted(EXAMPLES.rglob("*.json")) if not p.name.endswith(".base.json")]
    return sorted(CORPUS.glob("*/*.json")) + examples


# Configs the schema layer refuses, each under a name its error quotes.
BROKEN = {
    "zero-layers": {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 0, "vocab_size": 10},
    "bad-dtype": {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "torch_dtype": "bf17"},
    "float-heads": {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4.5},
    "negative-layers": {"model_type": "llama", "num_hidden_layers": -1},
}


def _alone(name: str, text: bytes) -> tuple[engine.Diagnostic, ...]:
    return engine.lint([name], Policy(), texts={name: text}).diagnostics


@pytest.mark.parametrize("path", _files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_copy_gets_what_it_gets_alone(path: Path) -> None:
    text = path.read_bytes()
    names = ["a/config.json", "b/other_config.json", "c/config.json"]
    together = engine.lint(names, Policy(), texts=dict.fromkeys(names, text))
    for name, result in zip(names, together.files, strict=True):
        assert result.diagnostics == _alone(name, text), name


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_copy_of_a_refused_config_names_itself(case: str) -> None:
    text = json.dumps(BROKEN[case]).encode()
    names = [f"first/{case}.json", f"second/{case}.json"]
    together = engine.lint(names, Policy(), texts=dict.fromkeys(names, text))
    assert together.files[1].diagnostics == _alone(names[1], text)
    assert together.files[1].diagnostics, "each broken config has a diagnostic"


def test_the_copy_is_the_first_build_under_its_own_name() -> None:
    builds = Builds()
    for path in sorted(CORPUS.glob("*/*.json")):
        text = path.read_bytes()
        first = Document("one.json", text, builds=builds)
        copy = Document("two.json", text, builds=builds)
        assert first.build_error is None and copy.build_error is None
        assert copy.arch is not first.arch  # a copy, renamed
        assert copy.arch == build(copy.raw), path.name  # what building it alone gives
        assert copy.fills == first.fills
    for case, config in BROKEN.items():
        text = json.dumps(config).encode()
        first = Document(f"one-{case}", text, builds=builds)
        copy = Document(f"two-{case}", text, builds=builds)
        assert isinstance(first.build_error, SlotdiffError) and isinstance(copy.build_error, SlotdiffError)
        alone = Document(f"two-{case}", text).build_error
        assert alone is not None
        assert (type(copy.build_error), vars(copy.build_error), str(copy.build_error)) == (
            type(alone),
            vars(alone),
            str(alone),
        )


@pytest.mark.parametrize("stage", ["_load", "_parse", "_build"])
def test_identical_bytes_are_read_once(monkeypatch: pytest.MonkeyPatch, stage: str) -> None:
    calls: list[str] = []
    real = getattr(Document, stage)

    def counted(self: Document):  # type: ignore[no-untyped-def]
        calls.append(self.name)
        return real(self)

    monkeypatch.setattr(Document, stage, counted)
    text = (EXAMPLES / "negative" / "SD105" / "kv-heads-typo.json").read_bytes()  # positions needed
    other = (EXAMPLES / "negative" / "SD110" / "uneven-gqa.json").read_bytes()
    texts = {"a.json": text, "b.json": other, "c.json": text, "d.json": text}
    run = engine.lint(list(texts), Policy(), texts=texts)
    assert calls == ["a.json", "b.json"]
    assert all(f.diagnostics for f in run.files)


def test_the_memo_is_bounded() -> None:
    builds = Builds()
    for i in range(Builds.SIZE + 10):
        doc = Document(f"{i}.json", json.dumps({"model_type": "llama", "i": i}).encode(), builds=builds)
        assert doc.arch is not None  # built: llama's defaults fill in the rest
    assert len(builds._by_digest) == Builds.SIZE
    assert Document("new.json", b"{}", builds=builds)._copies == {"name": "new.json"}
    assert len(builds._by_digest) == Builds.SIZE
