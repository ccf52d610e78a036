"""Layout constructs the dense families use, on hand-made configs: run-length layer-type
groups (GPT-Neo), per_layer_config overrides (Gemma 4 Unified), weight-tied layers (HRM)
and their hostile inputs. transformers' own counts for these families are held by
tests/test_conformance.py; these check the edges no registry row reaches."""

from __future__ import annotations

import pytest

from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.flops import weight_flops_per_token
from slotdiff.cost.kv import kv_cost
from slotdiff.cost.params import count

from conftest import arch_from

GPT_NEO = {
    "model_type": "gpt_neo",
    "hidden_size": 64,
    "num_layers": 6,
    "num_heads": 4,
    "vocab_size": 100,
    "max_position_embeddings": 32,
    "window_size": 8,
}


def test_attention_types_expand_as_the_config_class_does() -> None:
    arch = arch_from({**GPT_NEO, "attention_types": [[["global"], 2], [["local", "global"], 2]]})
    assert [s.window for s in arch.layers] == [None, None, 8, None, 8, None]


@pytest.mark.parametrize(
    "groups",
    [[["global", 3]], [[["global"], -1]], [[["global"], True]], "global", [[["global"], 10**15]]],
)
def test_attention_types_refuse_malformed_or_huge_groups(groups: object) -> None:
    with pytest.raises(SlotdiffError, match="attention_types"):
        arch_from({**GPT_NEO, "attention_types": groups})


GEMMA4U = {
    "model_type": "gemma4_unified_text",
    "hidden_size": 64,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "vocab_size": 100,
    "sliding_window": 8,
}


def test_per_layer_config_sets_sizes_and_replaces_the_computed_default() -> None:
    arch = arch_from({**GEMMA4U, "per_layer_config": {"02": {"head_dim": 32, "num_key_value_heads": 1}}})
    assert [(s.head_dim, s.n_kv_heads) for s in arch.layers][1:4] == [(None, None), (32, 1), (None, None)]
    # without it, the global layers (every 6th and the last) take global_head_dim
    assert arch_from(GEMMA4U).layers[-1].head_dim == 512


@pytest.mark.parametrize(
    "table",
    [
        {"9": {"head_dim": 32}},
        {"x": {"head_dim": 32}},
        {"1": {"head_dim": 0}},
        {"1": {"rope_theta": 1.0}},
        [1],
    ],
)
def test_per_layer_config_refuses_what_it_cannot_model(table: object) -> None:
    with pytest.raises(SlotdiffError, match="per_layer_config"):
        arch_from({**GEMMA4U, "per_layer_config": table})


def test_tied_layers_keep_kv_and_compute_but_no_parameters() -> None:
    hrm = {
        "model_type": "hrm_text",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "head_dim": 16,
        "intermediate_size": 128,
        "vocab_size": 100,
        "H_cycles": 2,
        "L_cycles": 3,
    }
    arch = arch_from(hrm)
    assert len(arch.layers) == 16 and sum(s.tied for s in arch.layers) == 12
    params = count(arch)
    small = arch_from({**hrm, "H_cycles": 1, "L_cycles": 1})  # 4 layers, all 4 stored
    one = count(small)
    assert params.total == one.total  # the same two stacks of two layers
    layer_flops = (weight_flops_per_token(arch, params) - weight_flops_per_token(small, one)) // 12
    assert layer_flops == 2 * (5 * 64 * 64 + 3 * 64 * 128)  # q, gate, k, v, o and the SwiGLU MLP
    assert kv_cost(arch, 8).bytes_per_token == 16 * 2 * 64 * 2  # every pass its own K/V (bf16)
