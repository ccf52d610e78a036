"""Towers and connectors of the Qwen-VL / patch-merger families on hand-made configs.

Expected numbers are hand arithmetic written out below; each was also checked once against
transformers 5.24 building the same sub-model on the meta device (a throwaway script outside
the repository: Qwen2_5OmniAudioEncoder, Qwen3OmniMoeAudioEncoder and GotOcr2VisionEncoder
and Lfm3VlVisionModel from these dims gave 1,636, 1,828, 8,248, 8,280, 3,488 and 3,232 parameters);
the Step-3.5 sliding-layer head count was checked on a 4-layer Step3p7ForConditionalGeneration.
"""

from __future__ import annotations

import pytest

from slotdiff.cost.flops import weight_flops_per_token
from slotdiff.cost.inventory.tensor import Unsupported
from slotdiff.cost.inventory.towers import vision_tensors
from slotdiff.cost.params import count

from conftest import arch_from

TEXT = {
    "model_type": "qwen2_5_omni_text",
    "hidden_size": 12,
    "intermediate_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 50,
}
TINY_VIT = {"hidden_size": 8, "depth": 1, "num_heads": 2, "intermediate_size": 16, "out_hidden_size": 12}


def _slot(arch, slot: str) -> int:
    return sum(t.params for t in vision_tensors(arch) if t.slot == slot)


def test_whisper_style_audio_encoder_is_counted() -> None:
    arch = arch_from(
        {
            "model_type": "qwen2_5_omni_thinker",
            "text_config": TEXT,
            "vision_config": TINY_VIT,
            "audio_config": {
                "d_model": 8,
                "encoder_layers": 2,
                "encoder_attention_heads": 2,
                "encoder_ffn_dim": 16,
                "num_mel_bins": 4,
                "output_dim": 12,
            },
        }
    )
    conv1 = 8 * 4 * 3 + 8  # Conv1d(mel → d, k=3) with bias
    conv2 = 8 * 8 * 3 + 8
    bos_eos = 2 * 12  # nn.Embedding(2, output_dim)
    layer = 2 * 8 + (8 * 8 + 8) * 3 + 8 * 8 + 2 * 8 + (8 * 16 + 16) + (16 * 8 + 8)  # k_proj has no bias
    post = 2 * 8 + (8 * 12 + 12)  # ln_post, proj
    assert _slot(arch, "audio") == conv1 + conv2 + bos_eos + 2 * layer + post == 1636
    params = count(arch)
    assert params.excluded == ()
    assert params.part("audio") == 1636
    # The encoders run once per input, not per decoded token.
    text_only = [t for t in params.tensors if t.slot not in ("vision", "connector", "audio")]
    assert weight_flops_per_token(arch, params) == weight_flops_per_token(
        arch, type(params)(0, 0, (), None, tuple(text_only))
    )


def test_conv2d_front_end_audio_encoder_is_counted() -> None:
    arch = arch_from(
        {
            "model_type": "qwen3_omni_moe_thinker",
            "text_config": {
                **TEXT,
                "model_type": "qwen3_omni_moe_text",
                "num_experts": 4,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 8,
            },
            "vision_config": {**TINY_VIT, "deepstack_visual_indexes": []},
            "audio_config": {
                "d_model": 8,
                "encoder_layers": 2,
                "encoder_attention_heads": 2,
                "encoder_ffn_dim": 16,
                "num_mel_bins": 20,
                "output_dim": 12,
                "downsample_hidden_size": 4,
            },
        }
    )
    convs = (4 * 1 * 9 + 4) + 2 * (4 * 4 * 9 + 4)  # three 3×3 stride-2 Conv2d with bias
    conv_out = 4 * 3 * 8  # 20 mel bins halved three times (ceil) = 3; bias-free linear
    layer = 2 * 8 + (8 * 8 + 8) * 4 + 2 * 8 + (8 * 16 + 16) + (16 * 8 + 8)
    post = 2 * 8 + (8 * 8 + 8) + (8 * 12 + 12)  # ln_post, proj1, proj2
    assert _slot(arch, "audio") == convs + conv_out + 2 * layer + post == 1828
    assert count(arch).excluded == ()


def test_audio_config_without_audio_data_stays_excluded() -> None:
    params = count(
        arch_from({**TEXT, "model_type": "qwen2", "audio_config": {"model_type": "whisper", "d_model": 8}})
    )
    assert any("audio tower" in why for why in params.excluded)
    assert params.part("audio") == 0


@pytest.mark.parametrize(
    ("window", "global_layers", "rel_pos", "tower"), [(0, [], 72, 8248), (3, [1], 104, 8280)]
)
def test_sam_encoder_relative_position_tables(
    window: int, global_layers: list[int], rel_pos: int, tower: int
) -> None:
    arch = arch_from(
        {
            "model_type": "pp_chart2table",
            "text_config": {**TEXT, "model_type": "qwen2"},
            "vision_config": {
                "hidden_size": 8,
                "num_attention_heads": 2,
                "num_hidden_layers": 3,
                "image_size": 32,
                "patch_size": 16,
                "window_size": window,
                "global_attn_indexes": global_layers,
                "mlp_dim": 16,
                "output_channels": 4,
            },
        }
    )
    # 2·s−1 rows of head_dim 4, for height and width: s = the 2×2 patch grid on global layers
    # (every layer when window_size is 0), the window on the others.
    assert rel_pos == (
        3 * 2 * (2 * 2 - 1) * 4 if not window else 2 * 2 * (2 * 3 - 1) * 4 + 1 * 2 * (2 * 2 - 1) * 4
    )
    got = sum(t.params for t in vision_tensors(arch) if ".rel_pos_" in t.part)
    assert got == rel_pos
    assert _slot(arch, "vision") == tower


def test_sam_encoder_refuses_global_layers_beyond_the_encoder() -> None:
    arch = arch_from(
        {
            "model_type": "pp_chart2table",
            "text_config": {**TEXT, "model_type": "qwen2"},
            "vision_config": {"num_hidden_layers": 3, "global_attn_indexes": [5]},
        }
    )
    with pytest.raises(Unsupported, match="global_attn_indexes"):
        vision_tensors(arch)
    assert any("vision tower" in why for why in count(arch).excluded)


def test_minicpm_merger_times_adds_downsample_mlps() -> None:
    arch = arch_from(
        {
            "model_type": "minicpmv4_6",
            "merger_times": 2,
            "text_config": {**TEXT, "model_type": "qwen3_5_text", "hidden_size": 16},
            "vision_config": {
                "hidden_size": 8,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 16,
            },
        }
    )
    w = 4 * 8  # 2×2 patches of the vision width (the factor 4 is fixed in MiniCPMV4_6DownsampleMLP)
    inner = 2 * w + (w * w + w) + (w * 8 + 8)  # LayerNorm, linear_1, linear_2 back to the vision width
    last = 2 * w + (w * w + w) + (w * 16 + 16)  # the last one ends at the text width
    assert _slot(arch, "connector") == inner + last == 3032


def test_hyperclovax_refuses_a_tower_it_has_no_merger_for() -> None:
    arch = arch_from(
        {
            "model_type": "hyperclovax_vision_v2",
            "text_config": {**TEXT, "model_type": "hyperclovax"},
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 8},
        }
    )
    with pytest.raises(Unsupported, match=r"Qwen2\.5-VL vision tower"):
        vision_tensors(arch)


@pytest.mark.parametrize(
    ("architectures", "excluded"),
    [(["MoshiForCausalLM"], False), (["MoshiForConditionalGeneration"], True), (None, True)],
)
def test_moshi_codec_is_outside_the_causal_lm_only(architectures: list[str] | None, excluded: bool) -> None:
    # MoshiForCausalLM builds the temporal transformer alone; the Mimi codec (audio_encoder_config)
    # is a separate MimiModel that only MoshiForConditionalGeneration holds.
    data = {
        "model_type": "moshi",
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "ffn_dim": 32,
        "vocab_size": 20,
        "audio_encoder_config": {"model_type": "mimi", "hidden_size": 8},
    }
    if architectures is not None:
        data["architectures"] = architectures
    params = count(arch_from(data))
    assert any("audio tower (mimi)" in why for why in params.excluded) is excluded


@pytest.mark.parametrize(
    ("layer_types", "expected"), [(None, 3488), (["full_attention"] * 4 + ["conv"], 3232)]
)
def test_hybrid_conv_attention_tower_by_layer_types(layer_types: list[str] | None, expected: int) -> None:
    vision = {
        "hidden_size": 8,
        "num_hidden_layers": 5,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 16,
        "patch_size": 2,
        "temporal_patch_size": 1,
        "in_channels": 3,
    }
    if layer_types is not None:
        vision["layer_types"] = layer_types
    arch = arch_from(
        {"model_type": "lfm3_vl", "text_config": {**TEXT, "model_type": "llama"}, "vision_config": vision}
    )
    common = 3 * 1 * 2 * 2 * 8 + 8  # bias-free linear patch embedding, embedding RMSNorm
    layer = 2 * 8 + 3 * (8 * 16)  # operator/FFN RMSNorms, SwiGLU w1/w3/w2
    conv = 8 * 24 + 8 * 3 * 3 + 8 * 8  # in_proj to 3×, depthwise 3×3 conv, out_proj
    attn = 8 * 8 + 2 * (8 * 4) + 8 * 8 + 2 * 4  # GQA with one KV head of 4, per-head q/k norms
    # default layer_types: conv for layers 0, 1 and odd layers (0, 1, 3), attention on 2 and 4
    convs = 3 if layer_types is None else 1
    assert common + 5 * layer + convs * conv + (5 - convs) * attn == expected
    assert _slot(arch, "vision") == expected


def test_step3p5_sliding_layers_take_their_own_head_count() -> None:
    text = {
        "model_type": "step3p5",
        "hidden_size": 16,
        "num_attention_heads": 4,
        "num_sliding_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 4,
        "num_hidden_layers": 2,
        "layer_types": ["sliding_attention", "full_attention"],
        "sliding_window": 8,
        "mlp_layer_types": ["dense", "dense"],
        "intermediate_size": 8,
        "vocab_size": 50,
    }
    arch = arch_from({"model_type": "step3p7", "text_config": text})

    def attention(heads: int) -> int:  # q, k, v, o, per-head q/k norms, one gate per head (g_proj)
        return 16 * 4 * heads + 2 * 16 * 4 + 4 * heads * 16 + 2 * 4 + 16 * heads

    assert count(arch).part("attention") == attention(2) + attention(4) == 1136
