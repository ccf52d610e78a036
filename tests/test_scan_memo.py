"""scan/examine: configs that differ only in values no stage reads are analyzed once.

The Hub's copies of one model (fine-tunes, re-uploads, quantized mirrors) often differ only
in ``_name_or_path`` and ``transformers_version``; the scan reuses the first copy's analysis
for the others (``design_key``). That is right only if those values change nothing in an
analysis, which the first test checks on every corpus and published config, and if a copy
is still read under the same caps and refusals as any config, which the others check.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slotdiff.core.errors import SlotdiffError
from slotdiff.read.retry import Retrier
from slotdiff.scan import examine
from slotdiff.scan.examine import INERT_KEYS, Examiner, design_key
from slotdiff.scan.listing import Listed
from slotdiff.scan.options import ScanOptions
from slotdiff.scan.verdict import Knowledge, NotALanguageModel, analyze_config
from slotdiff.schema.keymap import keymap

from conftest import CORPUS, FIXTURES

VALUES: tuple[Any, ...] = ("someone/else-7b", None, 7, ["a"], {"b": 1})


def _configs() -> list[tuple[str, dict[str, Any]]]:
    out = [(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in sorted(CORPUS.glob("*/*.json"))]
    for p in sorted((FIXTURES / "conformance" / "published").glob("*.json")):
        out.append((p.name, json.loads(p.read_text(encoding="utf-8"))["config"]))
    return out


def test_inert_keys_are_keys_the_key_map_ignores() -> None:
    assert set(INERT_KEYS) <= set(keymap()["ignored"])


@pytest.mark.parametrize("name,config", _configs(), ids=lambda v: v if isinstance(v, str) else "")
def test_inert_values_change_no_analysis(name: str, config: dict[str, Any]) -> None:
    """Each inert key the config writes, set to values of every JSON type: the same analysis."""

    def outcome(data: dict[str, Any]) -> Any:
        try:
            return analyze_config(json.dumps(data).encode(), "org/model")
        except (SlotdiffError, NotALanguageModel) as err:  # never shared, but refused alike
            return type(err), str(err)

    first = outcome(config)
    for key in [k for k in INERT_KEYS if k in config]:
        for value in VALUES:
            assert outcome({**config, key: value}) == first, (key, value)
            assert design_key({**config, key: value}) == design_key(config)


def _examiner(tmp_path: Path) -> Examiner:
    (tmp_path / "fp").mkdir()
    return Examiner(ScanOptions(), Knowledge.build(tmp_path / "fp"), Retrier(), {})


def _classify(ex: Examiner, repo: str, config: dict[str, Any] | bytes) -> Any:
    data = config if isinstance(config, bytes) else json.dumps(config).encode()
    return ex.classify(Listed(repo), data, examine.hashlib.sha256(data).hexdigest(), {}, None)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = examine.analyze_parsed

    def counting(parsed: Any, name: str) -> Any:
        calls.append(name)
        return real(parsed, name)

    monkeypatch.setattr(examine, "analyze_parsed", counting)
    return calls


LLAMA = json.loads((CORPUS / "raw" / "meta-llama__Meta-Llama-3-8B.json").read_text(encoding="utf-8"))


def test_copies_share_one_analysis(tmp_path: Path, counted: list[str]) -> None:
    ex = _examiner(tmp_path)
    first = _classify(ex, "a/llama", {**LLAMA, "_name_or_path": "a/llama"})
    copy = _classify(ex, "b/llama-ft", {**LLAMA, "_name_or_path": "b/ft", "transformers_version": "5.0.0"})
    wider = _classify(ex, "c/llama-wide", {**LLAMA, "_name_or_path": "c/w", "hidden_size": 5120})
    assert counted == ["a/llama", "c/llama-wide"]  # the copy was not analyzed again
    assert replace(copy, listed=first.listed) == first
    assert wider.sizes != first.sizes


def test_a_copy_is_read_under_the_same_caps(tmp_path: Path, counted: list[str]) -> None:
    """A copy whose inert value the reader refuses (a 200-digit integer) is refused, not shared."""
    ex = _examiner(tmp_path)
    _classify(ex, "a/llama", LLAMA)
    text = json.dumps({**LLAMA, "_name_or_path": "x"}).replace('"x"', "1" * 200)
    rec = _classify(ex, "b/llama", text.encode())
    assert (rec.verdict, rec.reason) == ("skipped", "invalid_json"), rec  # as any config with one
    assert counted == ["a/llama"]


def test_an_analysis_that_quotes_its_repo_is_not_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[str]
) -> None:
    real = examine.analyze_parsed

    def quoting(parsed: Any, name: str) -> Any:
        return replace(real(parsed, name), label=f"read from {name}")

    monkeypatch.setattr(examine, "analyze_parsed", quoting)
    ex = _examiner(tmp_path)
    first = _classify(ex, "a/llama", {**LLAMA, "_name_or_path": "a"})
    second = _classify(ex, "b/llama", {**LLAMA, "_name_or_path": "b"})
    assert (first.label, second.label) == ("read from a/llama", "read from b/llama")


def test_copies_are_assessed_once_and_each_record_keeps_its_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every copy of a design shares one analysis and so one assessment (verdict, nearest
    family, figures); what depends on the listing (here the Hub's stored count against the
    config's) is still each copy's own, and each record equals a scan's that met it first."""
    calls: list[str] = []
    real = examine.assess

    def counting(a: Any, know: Any) -> Any:
        calls.append(a.model_type)
        return real(a, know)

    monkeypatch.setattr(examine, "assess", counting)
    for sub in ("one", "alone0", "alone1"):
        (tmp_path / sub).mkdir()
    ex = _examiner(tmp_path / "one")
    # Llama-3-8B has 8,030,261,248 parameters (Meta's checkpoint, as the Hub lists it).
    right = Listed("a/llama", safetensors=(("BF16", 8_030_261_248),))
    wrong = Listed("b/llama-ft", safetensors=(("BF16", 8_030_261_249),))
    copies = [(right, {**LLAMA, "_name_or_path": "a"}), (wrong, {**LLAMA, "_name_or_path": "b"})]
    recs = []
    for listed, cfg in copies:
        data = json.dumps(cfg).encode()
        recs.append(ex.classify(listed, data, examine.hashlib.sha256(data).hexdigest(), {}, None))
    assert len(calls) == 1
    assert [r.checkpoint["status"] for r in recs] == ["match", "differs"]
    for n, ((listed, cfg), rec) in enumerate(zip(copies, recs, strict=True)):
        alone = _examiner(tmp_path / f"alone{n}")
        data = json.dumps(cfg).encode()
        assert alone.classify(listed, data, examine.hashlib.sha256(data).hexdigest(), {}, None) == rec
