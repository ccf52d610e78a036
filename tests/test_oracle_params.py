"""Parameter totals equal transformers' own count, for every corpus config it can build.

The reference is transformers 5.24 building the model class on the ``meta`` device
(tests/oracle/hf_oracle.py): exact equality, no tolerance. Where transformers cannot build a
config, the test says why and checks what slotdiff does instead.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import slotdiff
from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.cost.inventory.tensor import Unsupported
from slotdiff.cost.params import count
from slotdiff.scan.figures import figures_of
from slotdiff.scan.text import figures

from conftest import DEFAULTS, RAW, all_corpus
from oracle import cache as oracle_cache
from oracle import hf_oracle, registry

# transformers 5.24 cannot build these defaults as they are (its own bugs); the same model
# with the one missing value filled in is what its class documents.
REPAIRS = {
    # DbrxAttention reads attn_config.rope_theta, which DbrxAttentionConfig does not default.
    "dbrx.json": lambda c: c["attn_config"].update(rope_theta=10000.0),
    # HunYuanMoEV1Config leaves head_dim None; the attention needs hidden/heads = 128.
    "hunyuan_v1_moe.json": lambda c: c.update(head_dim=c["hidden_size"] // c["num_attention_heads"]),
}


def unread_expert_rows(cfg: dict) -> int:
    """Expert-tensor rows of transformers' build that no routed expert can read (the
    registry harness's rule, ``registry.expert_groups``: LongCat-Flash's ``gate_up_proj`` rows
    for its zero-compute experts, which no checkpoint stores; 0 for every other family)."""
    model, _ = hf_oracle.build_meta(cfg)
    return sum(g.unread for g in registry.expert_groups(model))


def measured_params(cfg: dict) -> dict:
    """transformers' total, parts and unread expert rows for ``cfg`` (meta device), kept by
    input digest (tests/oracle/cache.py)."""

    def measure() -> dict:
        theirs = hf_oracle.param_count(cfg)
        return {"total": theirs["total"], "parts": theirs["parts"], "unread": unread_expert_rows(cfg)}

    modules = ("hf_oracle.py", "registry.py")
    return oracle_cache.cached("param_count", {"config": cfg}, measure, modules=modules)


# transformers has no model class for these: slotdiff must refuse rather than guess.
NOT_BUILDABLE = {"moonshotai__Kimi-K3.json"}


def reference(path: Path) -> dict:
    cfg = hf_oracle.load_config(path)
    if path.name in REPAIRS:
        cfg = copy.deepcopy(cfg)
        REPAIRS[path.name](cfg)
    return cfg


@pytest.mark.parametrize(
    "path", [p for p in all_corpus() if p.name not in NOT_BUILDABLE], ids=lambda p: p.name
)
def test_total_equals_transformers(path: Path) -> None:
    cfg = reference(path)
    ours = count(load(cfg).arch)
    theirs = measured_params(cfg)
    extra = theirs["unread"]
    assert ours.total == theirs["total"] - extra
    # The parts transformers' names identify unambiguously must agree too.
    for part in ("embedding", "head"):
        assert ours.part(part) == theirs["parts"].get(part, 0), part
    assert ours.part("vision") + ours.part("connector") == (
        theirs["parts"].get("vision", 0) + theirs["parts"].get("connector", 0)
    )
    assert ours.part("audio") == theirs["parts"].get("audio", 0)  # an audio encoder and its projections
    routed = sum(t.params for t in ours.tensors if t.routed)
    assert routed == theirs["parts"].get("experts", 0) - extra


def test_longcat_flash_is_the_published_560b() -> None:
    # LongCat-Flash model card: 560B total parameters (the defaults file is that config).
    total = count(load(DEFAULTS / "longcat_flash.json").arch).total
    assert round(total / 1e9) in (560, 561)


def test_zero_compute_experts_make_active_a_maximum(capsys: pytest.CaptureFixture[str]) -> None:
    # LongCat-Flash model card: a token activates 18.6B to 31.3B parameters (about 27B on
    # average), as its router may pick zero-compute experts. A count of every top_k pick as
    # a computing expert is the top of that range, and must say it is a maximum.
    report = slotdiff.analyze(json.loads((DEFAULTS / "longcat_flash.json").read_text())).to_dict()
    params = report["cost"]["params"]
    assert params["active_is"] == "maximum"
    assert 31.2e9 < params["active_without_embedding"] < 31.45e9
    assert any("zero-compute" in a for a in report["cost"]["assumptions"])
    assert main([str(DEFAULTS / "longcat_flash.json")]) == 0
    assert "active at most " in capsys.readouterr().out
    scanned = figures_of(slotdiff.analyze(json.loads((DEFAULTS / "longcat_flash.json").read_text())))
    assert scanned.active_is == "maximum" and "(at most 32.18B active)" in figures(scanned.to_dict())
    moe = slotdiff.analyze(json.loads((DEFAULTS / "granitemoe.json").read_text())).to_dict()
    assert moe["cost"]["params"]["active_is"] == "exact"
    assert not any("zero-compute" in a for a in moe["cost"]["assumptions"])


@pytest.mark.parametrize("name", sorted(NOT_BUILDABLE))
def test_unbuildable_configs_are_refused_with_a_reason(name: str) -> None:
    with pytest.raises(hf_oracle.OracleUnsupported):
        hf_oracle.build_meta(hf_oracle.load_config(RAW / name))
    with pytest.raises(Unsupported, match="cannot count"):
        count(load(RAW / name).arch)


def test_repaired_defaults_fail_in_transformers_as_they_are() -> None:
    # Keeps REPAIRS honest: drop an entry once transformers builds the file unchanged.
    for name in REPAIRS:
        with pytest.raises(hf_oracle.OracleUnsupported):
            hf_oracle.build_meta(hf_oracle.load_config(DEFAULTS / name))


def test_experts_beside_a_dense_ffn_counterfactual_is_what_transformers_builds() -> None:
    """The ffn.experts counterfactual of Gemma 4 (MoE beside a dense MLP) is one dense MLP of
    the dense width plus top_k expert widths: transformers' own model of that config."""
    path = RAW / "google__gemma-4-26B-A4B.json"
    cfg = json.loads(path.read_text())
    text = cfg["text_config"]
    wide = copy.deepcopy(cfg)
    wide["text_config"].update(
        enable_moe_block=False,
        intermediate_size=text["intermediate_size"] + text["top_k_experts"] * text["moe_intermediate_size"],
    )
    report = slotdiff.analyze(path).to_dict()
    change = next(c for c in report["changes"] if c["facet"] == "ffn.experts")
    ours = report["cost"]["params"]["total"] - change["deltas"]["params"]
    assert ours == hf_oracle.param_count(wide)["total"]
