"""Constructs of the hybrid and indexed-attention families, on small hand-made configs with
the counts worked out by hand in each test: DSA indexers named by layer_types
(indexed_attention) and shared by indexer_types, per-layer MLA widths, NoPE MLA layers and
layers reading an earlier layer's latent, looped spans (weights once, a cache per pass),
short-convolution state beside softmax attention (Inkling) and CCA state (ZAYA).
transformers' own counts for the families are held by tests/test_conformance.py."""

from __future__ import annotations

import pytest

from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.flops import attention_flops
from slotdiff.cost.kv import kv_cost
from slotdiff.cost.params import count

from conftest import arch_from

# A GLM-MoE-DSA (GLM-5) shaped model, small: MLA with q LoRA and a DSA indexer.
D, H, Q_RANK, KV_RANK, NOPE, ROPE, HV = 64, 4, 32, 16, 8, 4, 8
IH, IDIM = 2, 8
GLM = {
    "model_type": "glm_moe_dsa",
    "hidden_size": D,
    "num_hidden_layers": 2,
    "num_attention_heads": H,
    "num_key_value_heads": H,
    "q_lora_rank": Q_RANK,
    "kv_lora_rank": KV_RANK,
    "qk_nope_head_dim": NOPE,
    "qk_rope_head_dim": ROPE,
    "v_head_dim": HV,
    "intermediate_size": 96,
    "vocab_size": 100,
    "index_n_heads": IH,
    "index_head_dim": IDIM,
    "index_topk": 16,
    "mlp_layer_types": ["dense", "dense"],
    "layer_types": ["indexed_attention", "indexed_attention"],
}
# One layer's tensors, from GlmMoeDsaAttention / DeepseekV32Indexer:
MLA = (
    Q_RANK * D  # q_a_proj
    + Q_RANK  # q_a_layernorm
    + H * (NOPE + ROPE) * Q_RANK  # q_b_proj
    + (KV_RANK + ROPE) * D  # kv_a_proj_with_mqa
    + KV_RANK  # kv_a_layernorm
    + H * (NOPE + HV) * KV_RANK  # kv_b_proj
    + D * H * HV  # o_proj
)
INDEXER = IH * IDIM * Q_RANK + IDIM * D + 2 * IDIM + IH * D  # wq_b, wk, k_norm (LayerNorm), weights_proj
REST = 2 * 3 * D * 96 + 2 * 2 * D + D + 2 * 100 * D  # SwiGLU MLPs, layer norms, final norm, embed + head


def test_indexed_attention_layers_get_an_indexer_and_its_key_cache() -> None:
    arch = arch_from(GLM)
    assert [s.mixer for s in arch.layers] == ["mla", "mla"] and all(s.sparse for s in arch.layers)
    assert count(arch).total == 2 * (MLA + INDEXER) + REST
    # per layer: the latent, the RoPE key and the indexer's key, bf16
    assert kv_cost(arch, 8).bytes_per_token == 2 * (KV_RANK + ROPE + IDIM) * 2


def test_a_shared_indexer_layer_has_no_indexer_and_no_indexer_keys() -> None:
    arch = arch_from({**GLM, "indexer_types": ["full", "shared"]})
    assert [(s.sparse, s.index_shared) for s in arch.layers] == [(True, False), (True, True)]
    assert count(arch).total == 2 * MLA + INDEXER + REST
    assert kv_cost(arch, 8).bytes_per_token == (2 * (KV_RANK + ROPE) + IDIM) * 2
    # at 100 tokens both layers attend to the 16 selected keys (absorbed MLA: q.k over r_kv + rope,
    # mix over r_kv); only the full layer scores all 100 with its indexer heads
    mla_step = 2 * H * ((KV_RANK + ROPE) + KV_RANK) * 16
    assert attention_flops(arch, 100) == 2 * mla_step + 2 * IH * IDIM * 100


def test_per_layer_config_sets_an_mla_layers_own_widths() -> None:
    dots = {
        **GLM,
        "model_type": "dots3_note_text",
        "layer_types": ["indexed_attention", "sliding_attention"],
        "sliding_window": 8,
        "head_dim": 12,
        "n_shared_experts": 1,
        "per_layer_config": {"01": {"kv_lora_rank": 24, "num_attention_heads": 2, "qk_nope_head_dim": 12}},
    }
    arch = arch_from(dots)
    assert arch.layers[1].n_heads == 2 and dict(arch.layers[1].sizes)["kv_lora_rank"] == 24
    # the sliding layer's latent is 24 wide; both keep the 4-wide RoPE key; only layer 0 has an indexer
    assert kv_cost(arch, 8).bytes_per_token == ((KV_RANK + ROPE + IDIM) + (24 + ROPE)) * 2
    q_side = Q_RANK * D + Q_RANK + 2 * (12 + ROPE) * Q_RANK  # q_a, its norm, q_b with 2 heads
    kv_side = (24 + ROPE) * D + 24 + 2 * (12 + HV) * 24  # kv_a, its norm, kv_b
    extras = 2 * D + ROPE  # the per-head output gate (g_proj) and the RoPE-key norm
    sliding = q_side + kv_side + D * 2 * HV + extras  # ... and o_proj
    assert count(arch).total == (MLA + INDEXER + H * D + ROPE) + sliding + REST


@pytest.mark.parametrize("table", [{"01": {"kv_lora_rank": 0}}, {"01": {"rope_theta": 1.0}}])
def test_per_layer_mla_widths_refuse_what_they_cannot_model(table: object) -> None:
    with pytest.raises(SlotdiffError, match="per_layer_config"):
        arch_from({**GLM, "model_type": "dots3_note_text", "per_layer_config": table})


LARGE4 = {
    **GLM,
    "model_type": "mistral_large4_text",
    "q_lora_rank": None,
    "layer_types": ["indexed_attention"] * 4,
    "mlp_layer_types": ["dense"] * 4,
    "num_hidden_layers": 4,
    "no_rope_layers": [1, 1, 1, 0],
}


def test_a_nope_mla_layer_caches_the_latent_only() -> None:
    arch = arch_from(LARGE4)
    assert [s.rope for s in arch.layers] == [True, True, True, False]
    assert kv_cost(arch, 8).bytes_per_token == (3 * (KV_RANK + ROPE + IDIM) + (KV_RANK + IDIM)) * 2


def test_a_layer_reading_an_earlier_latent_keeps_only_its_indexer_keys() -> None:
    arch = arch_from({**LARGE4, "kv_source_layers": [0, 0, 2, 3]})
    assert [s.kv_shared for s in arch.layers] == [False, True, False, False]
    with_source = count(arch).total
    assert count(arch_from(LARGE4)).total - with_source == (KV_RANK + ROPE) * D + KV_RANK  # no kv_a, no norm
    assert kv_cost(arch, 8).bytes_per_token == (2 * (KV_RANK + ROPE + IDIM) + IDIM + (KV_RANK + IDIM)) * 2


@pytest.mark.parametrize("sources", [[0, 2, 2, 3], [0, 1, 2], [0, -1, 2, 3]])
def test_kv_source_layers_refuse_a_later_or_missing_source(sources: object) -> None:
    with pytest.raises(SlotdiffError, match="kv_source_layers"):
        arch_from({**LARGE4, "kv_source_layers": sources})


DORY = {
    "model_type": "dory",
    "hidden_size": 16,
    "num_hidden_layers": 8,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "intermediate_size": 32,
    "vocab_size": 50,
    "sliding_window": 4,
    "layer_types": ["sliding_attention", "mlp", "full_attention", "mlp"] * 2,
    "n_input_layers": 2,
    "n_recurrent_layers": 4,
    "n_output_layers": 2,
    "n_recurrent_loops": 3,
}


def test_a_looped_span_counts_weights_once_and_a_cache_per_pass() -> None:
    arch = arch_from(DORY)
    assert len(arch.layers) == 8 + 2 * 4 and sum(s.tied for s in arch.layers) == 8
    # blocks 2..5 run three times: attention blocks 0, 2, 4 (x3), 6 -> 2 + 2*3 ... = 6 caches
    attention = sum(1 for s in arch.layers if s.mixer == "attention")
    assert attention == 4 + 2 * 2
    assert kv_cost(arch, 2).bytes_per_token == attention * 2 * 1 * 8 * 2
    once = arch_from({**DORY, "n_recurrent_loops": 1})
    assert count(arch).total == count(once).total
    shared = arch_from({**DORY, "recurrent_kv_cache_mode": "last_loop"})
    assert kv_cost(shared, 2).bytes_per_token == 4 * 2 * 1 * 8 * 2  # earlier passes write nothing


def test_dory_refuses_the_paired_layer_list() -> None:
    with pytest.raises(SlotdiffError, match="layer_types"):
        arch_from({**DORY, "layer_types": ["sliding_attention", "full_attention"] * 2})


def test_an_inkling_layer_keeps_its_short_convolutions_inputs_as_float32_state() -> None:
    inkling = {
        "model_type": "inkling_text",
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 8,
        "swa_num_attention_heads": 4,
        "swa_num_key_value_heads": 2,
        "swa_head_dim": 8,
        "sliding_window_size": 16,
        "rel_extent": 32,
        "d_rel": 2,
        "conv_kernel_size": 4,
        "layer_types": ["hybrid_sliding", "hybrid"],
        "mlp_layer_types": ["sparse", "sparse"],
        "n_routed_experts": 4,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "moe_intermediate_size": 8,
        "vocab_size": 50,
    }
    kv = kv_cost(arch_from(inkling), 4)
    assert kv.bytes_per_token == (2 * 2 * 8 + 2 * 1 * 8) * 2
    # kernel x (k and v conv channels + two d-wide residual convs), per layer, 4 bytes each
    assert kv.state_bytes_per_sequence == 4 * ((2 * 16 + 2 * 32) + (2 * 8 + 2 * 32)) * 4


def test_zaya_cca_keeps_its_conv_inputs_and_the_delayed_value() -> None:
    zaya = {
        "model_type": "zaya",
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "num_experts": 2,
        "num_experts_per_tok": 1,
        "moe_intermediate_size": 16,
        "router_hidden_size": 8,
        "cca_time0": 2,
        "cca_time1": 3,
        "vocab_size": 50,
        "layer_types": ["hybrid"],
    }
    kv = kv_cost(arch_from(zaya), 4)
    # (q + k channels) x (2 - 1 + 3 - 1) conv positions + half the value heads, bf16
    assert kv.state_bytes_per_sequence == ((4 + 2) * 8 * 3 + 2 * 8 // 2) * 2


def test_axk2_query_gate_and_gated_norms_by_hand() -> None:
    axk2 = {
        **GLM,
        "model_type": "axk2",
        "layer_types": ["indexed_attention", "indexed_attention"],
        "mlp_layer_types": ["dense", "sparse"],
        "n_routed_experts": 2,
        "num_experts_per_tok": 1,
        "n_shared_experts": 1,
        "moe_intermediate_size": 8,
        "gated_norm_rank": 3,
    }
    plain = {**axk2, "model_type": "glm_moe_dsa"}
    # q_b (h·(nope+rope) × q_rank) becomes q_gate_proj (h·(nope+rope+hv) × 2·q_rank), per layer;
    # gates d→3→d after both input norms and the MoE layer's pre-FFN norm (3 gates)
    q_gate = H * (NOPE + ROPE + HV) * 2 * Q_RANK - H * (NOPE + ROPE) * Q_RANK
    assert count(arch_from(axk2)).total - count(arch_from(plain)).total == 2 * q_gate + 3 * 2 * 3 * D


def test_hyper_connections_without_the_comb_matrix_by_hand() -> None:
    hy = {**GLM, "model_type": "hy_v4", "hc_mult": 2, "indexer_types": ["full", "full"]}
    plain = {**hy, "model_type": "glm_moe_dsa"}
    per_mixer = 2 * 2 * (2 * D) + 2 * 2 + 2  # fn (2N × N·d), base (2N), scale (2), N = 2
    head = 2 * 2 * D + 2 + 1
    extras = H * HV * D + H  # HY-V4's output gate and sinks on each layer
    assert count(arch_from(hy)).total - count(arch_from(plain)).total == 2 * 2 * per_mixer + head + 2 * extras
