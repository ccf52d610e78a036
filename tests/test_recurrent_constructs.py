"""Constructs for attention-free and hybrid recurrent LMs and the families counted with them,
on hand-made configs with every parameter added up by hand in the test: Griffin's RG-LRU block
and tiled block_types (RecurrentGemma), RWKV-4's time and channel mix, xLSTM's mLSTM block,
Zamba's shared block tied only with the head, ERNIE-4.5-VL's modality-isolated expert banks,
and an optional vision sub-config. transformers' own counts for the real defaults and variants
of these families are held by tests/test_conformance.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.kv import kv_cost, layer_state_elements
from slotdiff.cost.params import count
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.kvspec import kv_layout, mamba_page
from slotdiff.schema.keymap import evaluate
from slotdiff.schema.tower_spec import spec_fields

from conftest import arch_from

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus" / "raw"

RECURRENT_GEMMA = {
    "model_type": "recurrent_gemma",
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 4,
    "num_hidden_layers": 3,
    "block_types": ["recurrent", "attention"],
    "lru_width": 8,
    "conv1d_width": 3,
    "intermediate_size": 12,
    "vocab_size": 10,
    "attention_window_size": 4,
    "attention_bias": False,
    "tie_word_embeddings": True,
}


def test_block_types_repeat_over_the_layers() -> None:
    arch = arch_from(RECURRENT_GEMMA)
    assert [(s.mixer, s.variant, s.window) for s in arch.layers] == [
        ("linear_attention", "rglru", None),
        ("attention", None, 4),
        ("linear_attention", "rglru", None),
    ]


def test_rglru_block_counted_by_hand() -> None:
    embed, norms = 10 * 8, 3 * 2 * 8 + 8  # two pre-norms per layer and the final norm
    mlp = 3 * (2 * (8 * 6 + 6) + 6 * 8 + 8)  # GeGLU of intermediate_size // 2, biased
    # y and x branches, the conv (kernel 3) with bias, recurrent_param, two block-diagonal
    # gates of 2 blocks of 4 × 4 with biases, the output projection with bias
    rglru = (8 * 8 + 8) * 2 + (8 * 3 + 8) + 8 + 2 * (2 * 4 * 4 + 8) + (8 * 8 + 8)
    attention = 2 * 4 * 8 + 2 * (1 * 4 * 8) + 8 * 8 + 8  # q, k, v; o always has a bias
    assert count(arch_from(RECURRENT_GEMMA)).total == embed + norms + mlp + 2 * rglru + attention


def test_rglru_state_is_the_recurrence_and_the_conv_window() -> None:
    arch = arch_from(RECURRENT_GEMMA)
    assert layer_state_elements(arch, arch.layers[0]) == (8, 8 * 2)  # lru_width; width × (kernel - 1)


RWKV = {
    "model_type": "rwkv",
    "hidden_size": 8,
    "attention_hidden_size": 6,
    "intermediate_size": 12,
    "num_hidden_layers": 2,
    "vocab_size": 10,
    "tie_word_embeddings": False,
}


def test_rwkv_counted_by_hand() -> None:
    time_mix = 3 * 6 * 8 + 8 * 6 + 6 + 6 + 3 * 8  # k, v, r; output; decay, first; 3 shift mixes
    channel_mix = 12 * 8 + 8 * 12 + 8 * 8 + 2 * 8  # key, value, receptance; 2 shift mixes
    layer = 2 * 2 * 8 + time_mix + channel_mix  # ln1 and ln2 with bias
    total = 10 * 8 + 2 * 8 + 2 * layer + 2 * 8 + 10 * 8  # embeddings, pre_ln, layers, ln_out, head
    arch = arch_from(RWKV)
    assert count(arch).total == total
    assert count(arch_from({**RWKV, "tie_word_embeddings": True})).total == total - 10 * 8
    assert layer_state_elements(arch, arch.layers[0]) == (3 * 6, 2 * 8)
    assert kv_cost(arch, 16).bytes_per_token == 0  # no attention: nothing grows with the context


XLSTM = {
    "model_type": "xlstm",
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_heads": 2,
    "qk_dim_factor": 0.5,
    "v_dim_factor": 1.0,
    "ffn_proj_factor": 2.667,
    "ffn_round_up_to_multiple_of": 4,
    "vocab_size": 10,
    "use_bias": True,
    "tie_word_embeddings": False,
}


def test_xlstm_counted_by_hand() -> None:
    # q and k of 4, v and the output gate of 8 (with bias), per-head input/forget gates (always
    # biased), the per-head norm over v (bias too), the output projection (bias)
    mlstm = (32 + 4) * 2 + (64 + 8) * 2 + 2 * (2 * 8 + 2) + (8 + 8) + (64 + 8)
    ffn = 3 * 24 * 8 + 24 + 24 + 8  # 8 × 2.667 rounded up to 24; biased SwiGLU
    block = 16 + mlstm + 16 + ffn  # two biased RMSNorms
    total = 10 * 8 + block + 8 + 10 * 8  # the final norm has no bias; the head is never tied
    assert count(arch_from(XLSTM)).total == total
    assert count(arch_from({**XLSTM, "tie_word_embeddings": True})).total == total
    arch = arch_from(XLSTM)
    assert layer_state_elements(arch, arch.layers[0]) == (2 * (2 * 4 + 2 + 1), 0)  # C, n, m per head


ZAMBA = {
    "model_type": "zamba",
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "attention_hidden_size": 16,
    "attention_head_dim": 8,
    "intermediate_size": 12,
    "layers_block_type": ["mamba", "hybrid", "hybrid"],
    "mamba_d_state": 2,
    "mamba_d_conv": 2,
    "mamba_expand": 2,
    "mamba_dt_rank": 2,
    "n_mamba_heads": 1,
    "vocab_size": 10,
    "tie_word_embeddings": True,
}


def test_zamba_shared_block_is_tied_only_with_the_head() -> None:
    tied = arch_from(ZAMBA)
    untied = arch_from({**ZAMBA, "tie_word_embeddings": False})
    assert {s.shared_block for s in tied.layers} == {None, 0}
    assert [s.shared_block for s in untied.layers] == [None, 0, 1]
    # q, k, v of 2 heads × 8 over the 16-wide input, o back to 8, a SwiGLU MLP of 12, the
    # 16-wide input norm and the pre-FFN norm: one more block, and the untied head
    block = 3 * 16 * 16 + 8 * 16 + 3 * 8 * 12 + 16 + 8
    assert count(untied).total - count(tied).total == block + 10 * 8


ERNIE_VL_TEXT = {
    "model_type": "ernie4_5_vl_moe_text",
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "num_hidden_layers": 2,
    "mlp_layer_types": ["dense", "sparse"],
    "intermediate_size": 12,
    "moe_intermediate_size": [6, 4],
    "moe_num_experts": 2,
    "moe_k": 1,
    "moe_num_shared_experts": 1,
    "vocab_size": 10,
    "use_bias": False,
    "tie_word_embeddings": True,
}


def test_modality_isolated_expert_banks_counted_by_hand() -> None:
    attention = 2 * (8 * 8 + 2 * 4 * 8 + 8 * 8)
    dense = 3 * 8 * 12
    text_bank, vision_bank = 2 * 3 * 8 * 6, 2 * 3 * 8 * 4
    routers = 2 * (2 * 8 + 2)  # one router and one score-correction bias per bank
    shared = 3 * 8 * 6
    total = 10 * 8 + 2 * 2 * 8 + 8 + attention + dense + text_bank + vision_bank + routers + shared
    params = count(arch_from(ERNIE_VL_TEXT))
    assert params.total == total
    assert params.active == total - (text_bank + vision_bank) // 2  # top-1 of 2 in each bank


@pytest.mark.parametrize(("expr", "value"), [("first(x)", 6), ("last(x)", 4), ("first(y)", 5)])
def test_first_and_last_read_a_per_modality_list(expr: str, value: int) -> None:
    assert evaluate(expr, {"x": [6, 4], "y": 5}) == value


def test_an_optional_vision_sub_config_absent_builds_no_tower() -> None:
    assert spec_fields({"model_type": "gemma4"}, None) == {}  # Gemma4Config: vision_config optional
    assert spec_fields({"model_type": "gemma3"}, None)  # Gemma3Config builds its default tower


def test_oracle_counts_embedding_row_experts_at_top_k() -> None:
    """Doge's CDMoE experts are rows of two nn.Embedding tables: a token reads top_k of each."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from oracle import registry

    d, experts, k, layers = 16, 16, 4, 2
    cfg = {
        "model_type": "doge",
        "hidden_size": d,
        "intermediate_size": 32,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "vocab_size": 64,
        "is_moe": True,
        "num_experts": experts,
        "num_experts_per_tok": k,
    }
    out = registry.measure_params(cfg)
    rows = layers * 2 * experts * d  # down_embed and up_embed per layer
    assert out["active"] == out["total"] - rows + rows * k // experts


def test_zamba_default_layout_follows_the_config_class() -> None:
    # ZambaConfig: [mamba, mamba, hybrid] + hybrid where i % attn_layer_period == offset
    plain = {k: v for k, v in ZAMBA.items() if k != "layers_block_type"}
    arch = arch_from({**plain, "num_hidden_layers": 10, "attn_layer_period": 3, "attn_layer_offset": 1})
    assert [s.index for s in arch.layers if s.shared_block is not None] == [2, 4, 7]


@pytest.mark.parametrize("blocks", ["recurrent", [], 3])
def test_block_types_that_are_not_a_list_are_refused(blocks: object) -> None:
    with pytest.raises(SlotdiffError, match="block_types"):
        arch_from({**RECURRENT_GEMMA, "block_types": blocks})


# vLLM's Mamba-2 state page on a TP rank (MambaStateShapeCalculator.mamba2_state_shape): the
# convolution keeps kernel − 1 inputs of (inner + 2 · groups · state) / TP channels, a group
# count TP does not divide raised to TP first; the temporal state is heads / TP × head_dim ×
# state. Nemotron-3-Nano-30B-A3B: 64 heads × 64 = 4,096 inner, 8 groups, state 128, kernel 4;
# conv in bf16 (2 B), temporal state at 4 B. Worked by hand from that formula:
#   TP 1:  3 × 6,144 × 2 = 36,864  + 64 × 64 × 128 × 4 = 2,097,152 → 2,134,016
#   TP 2:  3 × 3,072 × 2 = 18,432  + 1,048,576                     → 1,067,008
#   TP 8:  3 ×   768 × 2 =  4,608  +   262,144                     →   266,752
#   TP 16: 8 groups → 16: 3 × (4,096 + 4,096) / 16 × 2 = 3,072 + 131,072 → 134,144
@pytest.mark.parametrize(("tp", "page"), [(1, 2_134_016), (2, 1_067_008), (8, 266_752), (16, 134_144)])
def test_vllm_mamba2_page_splits_the_groups_over_tp(tp: int, page: int) -> None:
    config = json.loads((CORPUS / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json").read_text())
    arch = load(config).arch
    layer = next(s for s in arch.layers if s.mixer == "mamba2")
    assert mamba_page(arch, layer, tp, 2, 4) == page


# vLLM's KDA page (Kimi Linear: kda_state_shape, kda_state_dtype): the q, k and v short
# convolutions keep kernel − 1 inputs of 3 · heads · head_dim / TP channels in the model dtype,
# and the recurrent state heads / TP × head_dim × head_dim in float32 whatever the model dtype.
# transformers' kimi_linear defaults: 32 heads × 128, kernel 4, bf16:
#   TP 1: 3 × 12,288 × 2 = 73,728 + 32 × 128 × 128 × 4 = 2,097,152 → 2,170,880
#   TP 2: 36,864 + 1,048,576 → 1,085,440
@pytest.mark.parametrize(("tp", "page"), [(1, 2_170_880), (2, 1_085_440)])
def test_vllm_kda_page_keeps_the_recurrent_state_in_float32(tp: int, page: int) -> None:
    defaults = CORPUS.parent / "transformers-defaults" / "kimi_linear.json"
    arch = load(json.loads(defaults.read_text())).arch
    layer = next(s for s in arch.layers if s.variant == "kda")
    assert mamba_page(arch, layer, tp, 2, 2) == page  # the model's bf16 passed for both


# LFM2's conv layers in vLLM (Lfm2ForCausalLM: short_conv_state_shape over hidden_size and
# conv_L_cache): one mamba page each of L_cache − 1 inputs of hidden / TP channels in the cache
# dtype. transformers' lfm2 defaults (hidden 2,560, 32 heads of 80, 8 KV heads, L_cache 3) with
# LFM2-1.2B's pattern over 16 layers (6 attention, 10 conv), bf16, vLLM 0.19:
#   conv page 2 × 2,560 × 2 = 10,240 B; an attention token 2 × 8 × 80 × 2 = 2,560 B, so the
#   block stays 16 · ceil(10,240 / (16 · 2,560)) = 16 tokens and the conv page is padded to
#   the attention page, 16 × 2,560 = 40,960 B. Groups of min(6, 10) = 6 layers: one attention
#   group, ceil(10 / 6) = 2 conv groups with 2 padding layers.
LFM2_PATTERN = "CCACCACCACACACAC"


def test_vllm_lfm2_conv_layers_take_mamba_pages() -> None:
    config = json.loads((CORPUS.parent / "transformers-defaults" / "lfm2.json").read_text())
    config.pop("full_attn_idxs")
    kinds = {"A": "full_attention", "C": "conv"}
    config |= {"num_hidden_layers": 16, "layer_types": [kinds[c] for c in LFM2_PATTERN], "dtype": "bfloat16"}
    arch = load(config).arch
    conv = next(s for s in arch.layers if s.mixer == "conv")
    assert mamba_page(arch, conv, 1, 2, 2) == 10_240
    assert mamba_page(arch, conv, 2, 2, 2) == 5_120
    layout = kv_layout(arch, arch.layers, 1, "bfloat16", parse_version("0.19.0"), None, 16)
    assert (layout.block_size, layout.group_size, layout.num_groups, layout.padded_layers) == (16, 6, 3, 2)
    assert sorted({s.page_bytes for s in layout.specs}) == [40_960]
    assert sum(1 for s in layout.specs if s.kind == "mamba") == 10
