"""Every structural key a config declares is shown in a slot facet with its value, or listed
as unread: "every config key was read" is true whenever it is printed (issue 29).

Two sources decide which keys change the model, both outside slotdiff's own figures:

- transformers, through the conformance harness (tests/fixtures/conformance/reference.json):
  a variant row that edits one text-config key and whose stored transformers figures (total
  or active parameters, KV bytes per token) differ from the default row's proves that key
  changes tensors or KV; such a key must never be one slotdiff calls structure-free, and it
  must be in the variant's slot evidence, or listed as unread (then the report is unverified
  and says so);
- the data files: every key the key map or a model_type file reads (a canonical field's
  alias, a layer rule's key, a family's ``reads``) feeds the cost pass, and must be shown.

The configs are the harness's (the default and every variant of every model_type) and the
corpus's (tests/fixtures/corpus/raw).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import Model, analyze, load
from slotdiff.core.errors import SlotdiffError
from slotdiff.schema.keymap import model_type_spec, structure_free_keys
from slotdiff.slots.evidence import top_key

from conftest import tool

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "raw"


conformance = tool("conformance")
harness = tool("harness")


@cache
def reference() -> dict[str, Any]:
    return conformance.read_json(conformance.REFERENCE)


def harness_configs() -> list[tuple[str, dict[str, Any]]]:
    return [(row.id, row.config) for row in conformance.rows(reference())]


def shown(model: Model) -> set[str]:
    """Top-level keys (cited with the text path) some facet's evidence shows, or the
    ``unsupported`` refusal cites (recognised: the refusal says what they build)."""
    return {top_key(model.arch, key) for fill in model.fills for key, _ in fill.evidence} | set(
        model.fills.refused
    )


def text_of(model: Model, config: dict[str, Any]) -> dict[str, Any]:
    node = config
    for part in model.arch.text_path:
        node = node[part]
    return node


def missing(model: Model, config: dict[str, Any]) -> list[str]:
    """Declared text-config keys that are neither structure-free, shown, nor listed unread."""
    prefix = ".".join(model.arch.text_path) + "." if model.arch.text_path else ""
    free = structure_free_keys(model.arch.model_type)
    # keys held to the build (a family's ``agrees``): accounted for when they agree, else unread
    free |= {item["key"] for item in (model_type_spec(model.arch.model_type) or {}).get("agrees", ())}
    seen, unread = shown(model), set(model.arch.unread_keys)
    return [k for k in text_of(model, config) if k not in free and prefix + k not in seen | unread]


def loaded(config: dict[str, Any]) -> Model | None:
    try:
        return load(config)
    except SlotdiffError:
        return None  # refused with one line: nothing is claimed about its keys


def test_every_declared_key_of_the_harness_and_corpus_is_shown_or_unread() -> None:
    configs = harness_configs() + [(p.stem, json.loads(p.read_text())) for p in sorted(CORPUS.glob("*.json"))]
    gaps: dict[str, list[str]] = {}
    checked = 0
    for name, config in configs:
        model = loaded(config)
        if model is None:
            continue
        checked += 1
        keys = missing(model, config) + [f"(read, in no slot) {k}" for k in model.fills.unplaced]
        if keys:
            gaps[name] = keys
    assert checked > 1000  # the harness holds ~1,500 rows
    assert not gaps, f"keys in no slot facet: {dict(list(gaps.items())[:12])}"


def _changed(row: dict[str, Any], default: dict[str, Any]) -> bool:
    """transformers' own figures differ between a variant and its default row."""
    p, d = row["params"], default["params"]
    if p["total"] != d["total"] or p["active"] != d["active"]:
        return True
    return (
        "kv" in row and "kv" in default and row["kv"]["bytes_per_token"] != default["kv"]["bytes_per_token"]
    )


def structural_edits() -> list[tuple[str, str, list[Any]]]:
    """(model_type, variant, the edited key path) for every one-key variant whose transformers
    figures differ from the default's: the key changes tensors or KV, by transformers' count."""
    out = []
    for model_type, entry in sorted(reference()["types"].items()):
        if entry.get("status") != "built":
            continue
        rows = entry["rows"]
        for name, row in sorted(rows.items()):
            edits = row.get("config_delta") or []
            if name == "default" or len(edits) != 1 or not _changed(row, rows["default"]):
                continue
            out.append((model_type, name, edits[0][0]))
    return out


def test_keys_that_change_transformers_build_are_shown_in_their_slot() -> None:
    edits = structural_edits()
    assert len(edits) > 300
    wrong = []
    for model_type, name, path in edits:
        entry = reference()["types"][model_type]
        config = harness.apply_delta(entry["rows"]["default"]["config"], entry["rows"][name]["config_delta"])
        model = loaded(config)
        if model is None:
            continue
        depth = len(model.arch.text_path)
        if list(path[:depth]) != list(model.arch.text_path):
            continue  # a vision or audio tower's key: the modality facet's tower, not a text slot
        key = path[depth]
        cited = ".".join([*model.arch.text_path, key])
        if key in structure_free_keys(model.arch.model_type):
            wrong.append(
                f"{model_type}:{name}: {key} changes transformers' build but is called structure-free"
            )
        elif cited not in shown(model) and cited not in model.arch.unread_keys:
            wrong.append(f"{model_type}:{name}: {key} changes transformers' build but no slot shows it")
    assert not wrong, wrong[:20]


def test_the_verified_line_is_only_printed_when_every_key_is_shown() -> None:
    for path in sorted(CORPUS.glob("*.json")):
        report = analyze(path, counterfactuals=False)
        if report.coverage is not None and report.coverage.verified:
            assert "every config key was read and is shown in its slot" in report.coverage.line()
            assert not report.arch.unread_keys and not load(path).fills.unplaced


@pytest.mark.parametrize(
    ("key", "value", "facet"),
    [
        ("attn_logit_softcapping", 50.0, "attention.scores"),
        ("final_logit_softcapping", 30.0, "head.tying"),
        ("query_pre_attn_scalar", 256, "attention.scores"),
    ],
)
def test_gemma2_keys_the_issue_found_missing_are_shown(key: str, value: Any, facet: str) -> None:
    # the values are google/gemma-2-9b's config.json, read here without slotdiff
    config = json.loads((CORPUS / "google__gemma-2-9b.json").read_text())
    assert config[key] == value
    fills = load(config).fills
    assert dict(fills[facet].evidence)[key] == value


@pytest.mark.parametrize("model_type", ["blt", "xlnet"])
def test_keys_an_unsupported_refusal_cites_are_recognised_not_unplaced(model_type: str) -> None:
    """A declared refusal (the model_type file's ``unsupported``) names its keys: BLT's three
    sub-stacks (no facet claims them) are recognised by the refusal, never unplaced, and the
    report says why it gives no figures, whether or not the file writes them (the class builds
    them by default)."""
    entry = reference()["types"][model_type]
    config = entry["rows"]["default"]["config"]
    cited = {"blt": {"encoder_config", "decoder_config", "patcher_config"}, "xlnet": {"d_head"}}[model_type]
    assert cited <= set(config)  # transformers' serialized default writes them
    model = load(config)
    assert not model.fills.unplaced
    assert set(model.arch.v("unsupported").keys) == cited
    assert cited <= shown(model)
    if model_type == "blt":
        assert set(model.fills.refused) == cited  # in no facet: the refusal alone places them
    bare = {k: config[k] for k in ("model_type", "architectures")}
    for form in (config, bare):
        report = analyze(form, counterfactuals=False)
        assert report.cost is None and not load(form).fills.unplaced
        assert not report.coverage.verified
        assert any("cannot count parameters" in r for r in report.coverage.reasons)
