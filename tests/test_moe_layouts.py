"""Family layouts the conformance rows do not exercise, checked against numbers transformers
5.24 gives for the same configs (meta builds, counted with tests/oracle/registry.py's
measure_params when these tests were written): per-layer query heads (Laguna), sparse
indexer layers and per-layer 0/1 lists (MiniMax-M3), legacy compress_ratios and the default
layout (DeepSeek-V4), NoPE from a per-layer RoPE base (Granite-MoE SWA), and the refusal of
a bad size a family's untyped local field feeds into the layout.

Configs are the stored default rows of tests/fixtures/conformance/reference.json, edited.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import slotdiff
from slotdiff.core.errors import SlotdiffError

from conftest import tool

ROOT = Path(__file__).resolve().parents[1]


@cache
def _defaults() -> dict[str, dict[str, Any]]:
    module = tool("conformance")
    reference = module.read_json(module.REFERENCE)
    return {r.model_type: r.config for r in module.rows(reference) if r.variant == "default"}


def default(model_type: str) -> dict[str, Any]:
    return copy.deepcopy(_defaults()[model_type])


def params(cfg: dict[str, Any]) -> tuple[int, int]:
    p = slotdiff.analyze(cfg).to_dict()["cost"]["params"]
    return p["total"], p["active"]


def test_laguna_query_heads_per_layer_and_per_channel_gate() -> None:
    cfg = default("laguna")
    cfg["num_attention_heads_per_layer"] = [48 if i % 2 else 32 for i in range(cfg["num_hidden_layers"])]
    cfg["gating"] = "per-channel"
    assert params(cfg) == (33_437_701_888, 3_012_220_672)


def test_minimax_m3_sparse_layers_and_dense_layers_from_either_form() -> None:
    cfg = default("minimax_m3_vl_text")
    n = cfg["num_hidden_layers"]
    cfg["layer_types"] = ["minimax_m3_sparse" if i % 3 == 1 else "full_attention" for i in range(n)]
    cfg["mlp_layer_types"] = ["dense" if i < 2 else "sparse" for i in range(n)]
    assert params(cfg) == (433_107_740_672, 25_874_376_704)
    legacy = copy.deepcopy(cfg)
    del legacy["layer_types"], legacy["mlp_layer_types"]
    legacy["moe_layer_freq"] = [0 if i < 2 else 1 for i in range(n)]
    legacy["sparse_attention_config"] = {"sparse_attention_freq": [1 if i % 3 == 1 else 0 for i in range(n)]}
    assert params(legacy) == (433_107_740_672, 25_874_376_704)


def test_deepseek_v4_legacy_compress_ratios_and_default_layout() -> None:
    cfg = default("deepseek_v4")
    n = cfg["num_hidden_layers"]
    del cfg["layer_types"]
    # One more entry than layers (an MTP layer's): the config class keeps the first n.
    cfg["compress_ratios"] = [0, 0] + [4 if i % 3 == 0 else 128 for i in range(n - 2)] + [0]
    assert params(cfg) == (284_228_056_791, 13_695_448_791)
    # Ratio 0 is a plain sliding layer without a compressor: transformers caches it in its
    # generic sliding-window layer, which keeps the K=V head as separate keys and values.
    kv = slotdiff.analyze(cfg).to_dict()["cost"]["kv"]
    assert kv["bytes_per_token"] == 2 * (2 * 2 * 512 + (n - 2) * 512)
    del cfg["compress_ratios"]
    assert params(cfg) == (284_325_869_015, 13_793_261_015)
    kv = slotdiff.analyze(cfg).to_dict()["cost"]["kv"]
    # 43 sliding K=V heads of 512 (window 128) + compressed entries: 23 layers every 128
    # tokens, 20 layers every 4 tokens with a 128-wide indexer key, bf16, at 8,192 tokens.
    assert kv["bytes_per_token"] == 43 * 512 * 2
    assert kv["bytes_at_context"] == 2 * (43 * 128 * 512 + 23 * 64 * 512 + 20 * 2048 * (512 + 128))


def test_granitemoe_swa_rope_base_zero_is_nope() -> None:
    cfg = default("granitemoe_swa")
    cfg["layer_rope_theta"] = [0, 10000.0] * (cfg["num_hidden_layers"] // 2)
    layers = slotdiff.analyze(cfg).arch.layers
    assert [s.rope for s in layers[:4]] == [False, True, False, True]


@pytest.mark.parametrize(
    ("model_type", "edit", "key"),
    [
        ("cohere2_moe", {"prefix_dense_intermediate_size": "wide"}, "prefix_dense_intermediate_size"),
        ("deepseek_v4", {"compress_rates": {"heavily_compressed_attention": -4}}, "compress_rates"),
    ],
)
def test_a_bad_size_from_a_local_field_is_refused_citing_its_key(
    model_type: str, edit: dict[str, Any], key: str
) -> None:
    cfg = default(model_type)
    cfg.update(edit)
    if model_type == "cohere2_moe":
        cfg["mlp_layer_types"][0] = "dense"
    with pytest.raises(SlotdiffError, match=key):
        slotdiff.analyze(cfg)
