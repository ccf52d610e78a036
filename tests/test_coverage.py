"""Every answer says how sure it is, and a part slotdiff cannot count leaves the rest standing.

The text decoder's count beside an unknown tower is checked against transformers' own
causal-LM class built from the same text config (tests/oracle): the figure that stands must
be exact, not merely present.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import slotdiff
from slotdiff.analysis import coverage as coverage_mod
from slotdiff.analysis.analyze import load
from slotdiff.cost.params import count

from conftest import raw
from oracle import hf_oracle

LLAVA = json.loads(raw("llava-hf/llava-1.5-7b-hf").read_text())
LLAMA = json.loads(raw("meta-llama/Llama-3.2-1B").read_text())


#: A type exact on its registry rows and on every published shape (tools/forms.py).
EXACT = {"status": "exact", "forms": {"minimal": "exact", "dropped": "exact", "lists": "exact"}}


def _with_table(monkeypatch: pytest.MonkeyPatch, rows: dict[str, Any]) -> None:
    table = {"transformers_version": "5.24.0", "model_types": rows}
    monkeypatch.setattr(coverage_mod, "_table", lambda: table)


def test_an_unknown_vision_tower_leaves_the_text_decoder_counted_exactly() -> None:
    cfg = copy.deepcopy(LLAVA)
    cfg["vision_config"]["model_type"] = "future_vit"  # no tower data (pixtral, once)
    counted = count(load(cfg).arch)
    text = {**cfg["text_config"], "vocab_size": cfg["text_config"].get("vocab_size", 32064)}
    text["model_type"] = "llama"
    text.pop("architectures", None)
    theirs = hf_oracle.param_count(text)["total"]  # LlamaForCausalLM from the same text config
    assert counted.total == theirs
    assert counted.part("vision") == counted.part("connector") == 0
    assert len(counted.excluded) == 1 and "vision tower (future_vit)" in counted.excluded[0]


def test_the_report_keeps_its_figures_and_says_what_they_exclude() -> None:
    cfg = copy.deepcopy(LLAVA)
    cfg["vision_config"]["model_type"] = "future_vit"
    out = slotdiff.analyze(cfg).to_dict()
    assert out["cost"] is not None
    assert out["cost"]["kv"]["bytes_per_token"] > 0 and out["cost"]["decode"]["step_ms"] > 0
    assert any("future_vit" in e for e in out["cost"]["params"]["excluded"])
    assert out["coverage"]["status"] == "unverified"
    assert any("figures exclude the vision tower (future_vit)" in r for r in out["coverage"]["reasons"])


def test_an_audio_tower_is_named_as_excluded_not_silently_dropped() -> None:
    cfg = copy.deepcopy(LLAMA)
    cfg["audio_config"] = {"model_type": "whisper", "d_model": 1280, "encoder_layers": 32}
    counted = count(load(cfg).arch)
    assert any("audio tower (whisper)" in e for e in counted.excluded)
    reasons = slotdiff.analyze(cfg).to_dict()["coverage"]["reasons"]
    assert any("audio tower (whisper)" in r for r in reasons)


def test_keys_that_may_change_the_structure_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_table(monkeypatch, {"llama": EXACT})
    cfg = {**LLAMA, "o_groups": 8, "hc_mult": 4, "initializer_range": 0.02}
    arch = load(cfg).arch
    assert set(arch.unread_keys) == {"o_groups", "hc_mult"}  # initializer_range carries no structure
    trust = slotdiff.analyze(cfg).to_dict()["coverage"]
    assert trust["status"] == "unverified"
    assert trust["reasons"] == [
        "keys slotdiff did not read, which may change the structure: o_groups, hc_mult"
    ]


def test_a_checked_family_with_every_key_read_is_verified(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_table(monkeypatch, {"llama": EXACT})
    assert load(LLAMA).arch.unread_keys == ()
    assert slotdiff.analyze(LLAMA).to_dict()["coverage"] == {"status": "verified", "reasons": []}


def test_a_family_the_table_finds_wrong_or_does_not_list_is_unverified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _with_table(monkeypatch, {"llama": {"status": "wrong", "why": "total params (2 of 9 rows)"}})
    reasons = slotdiff.analyze(LLAMA).to_dict()["coverage"]["reasons"]
    assert reasons == [
        "model_type 'llama' differs from transformers 5.24.0 in the conformance table: "
        "total params (2 of 9 rows)"
    ]
    _with_table(monkeypatch, {})
    (reason,) = slotdiff.analyze(LLAMA).to_dict()["coverage"]["reasons"]
    assert "not in the conformance table" in reason
    remote = {**LLAMA, "model_type": "inhouse_llama"}  # transformers has no such model_type
    (reason, *_) = slotdiff.analyze(remote).to_dict()["coverage"]["reasons"]
    assert "is not in transformers 5.24.0 (remote code)" in reason


def test_a_refused_cost_is_a_reason_too() -> None:
    kimi = raw("moonshotai/Kimi-K3")
    out = slotdiff.analyze(kimi).to_dict()
    assert out["cost"] is None
    assert any(r.startswith("no cost figures: ") for r in out["coverage"]["reasons"])


def test_a_key_read_only_by_one_alias_leaves_the_other_unread() -> None:
    # Gemma 2's MLP reads hidden_activation; a config's hidden_act is not what transformers uses
    cfg = json.loads(raw("google/gemma-2-2b").read_text())
    assert load(cfg).arch.unread_keys == ()
    assert load(cfg).arch.get("activation") == cfg["hidden_activation"]


def test_a_family_exact_only_as_transformers_serializes_it_is_unverified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """verified needs the published shapes too: a type whose minimal form is wrong, or whose
    shapes were never checked, is not vouched for (issue 25, point 3)."""
    wrong = {**EXACT, "forms": {**EXACT["forms"], "minimal": "3 of 7 exact"}}
    _with_table(monkeypatch, {"llama": wrong})
    (reason,) = slotdiff.analyze(LLAMA).to_dict()["coverage"]["reasons"]
    assert "differs from transformers in the shapes published files take (minimal: 3 of 7 exact" in reason
    _with_table(monkeypatch, {"llama": {"status": "exact"}})
    (reason,) = slotdiff.analyze(LLAMA).to_dict()["coverage"]["reasons"]
    assert "not checked against transformers in the shapes published files take" in reason
