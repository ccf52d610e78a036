"""Tower and connector constructs on hand-made configs, every expected number by hand.

The constructs: a multimodal file that ``extends`` another (LLaVA-NeXT on LLaVA), several
copies of one tower (Video-LLaVA's ``tower_modules``), a second tower read from its own
config node (DeepSeek-VL hybrid's SAM tower, ``extra_towers``), the SAM/GOT-OCR2 ViT with
windowed and global relative position tables, the BLIP-2 Q-Former, Idefics2's perceiver
resampler, Granite-Docling's optional density router, and the ``fixed_queries`` image rule.
The defaults of the real families are held to transformers' own counts by
tests/test_conformance.py; here each term is written out so a wrong construct cannot hide.
"""

from __future__ import annotations

import copy
from typing import Any

from slotdiff.cost.images import image_tokens, vision_flops
from slotdiff.cost.inventory.towers import vision_model, vision_tensors
from slotdiff.schema.arch import Architecture

from conftest import arch_from

D = 16  # text width of every tiny config below
TEXT = {
    "model_type": "llama",
    "hidden_size": D,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 32,
    "vocab_size": 64,
}
# A CLIP ViT: hidden 8, one layer, d_ff 16, 2×2 patches of a 4×4 image (4 patches + class).
CLIP = {
    "model_type": "clip_vision_model",
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 16,
    "patch_size": 2,
    "image_size": 4,
    "num_channels": 3,
}
CLIP_TOWER = (
    8  # class_embedding
    + 8 * 3 * 2 * 2  # patch conv, no bias
    + 5 * 8  # position table: (4 // 2)² + 1 rows
    + 2 * 8  # pre_layrnorm
    + 4 * (8 * 8 + 8)  # q, k, v, out_proj with bias
    + 2 * 2 * 8  # layer_norm1, layer_norm2
    + (8 * 16 + 16)  # fc1
    + (16 * 8 + 8)  # fc2
    + 2 * 8  # post_layernorm
)


def total(arch: Architecture, prefix: str = "") -> int:
    return sum(t.params for t in vision_tensors(arch) if t.part.startswith(prefix))


def test_clip_tower_by_hand() -> None:
    cfg = {"model_type": "llava", "text_config": TEXT, "vision_config": CLIP, "vision_feature_layer": -2}
    assert total(arch_from(cfg), "vision/") == CLIP_TOWER == 776


def test_llava_next_extends_llava_and_adds_the_newline_vector() -> None:
    cfg = {"model_type": "llava_next", "text_config": TEXT, "vision_config": CLIP, "vision_feature_layer": -2}
    connector = (8 * D + D) + (D * D + D) + D  # linear_1, linear_2 (LlavaNextConfig bias default), newline
    assert total(arch_from(cfg), "connector/") == connector
    assert total(arch_from(cfg)) == CLIP_TOWER + connector


def test_vipllava_projector_reads_every_feature_layer() -> None:
    cfg = {
        "model_type": "vipllava",
        "text_config": TEXT,
        "vision_config": CLIP,
        "vision_feature_layer": [-2, -5, 1],
    }
    width = 8 * 3  # three feature layers concatenated
    assert total(arch_from(cfg), "connector/") == 2 * width + (width * D + D) + (D * D + D)


def test_video_llava_builds_two_towers_and_an_image_runs_through_one() -> None:
    cfg = {
        "model_type": "video_llava",
        "text_config": TEXT,
        "vision_config": CLIP,
        "vision_feature_layer": -2,
    }
    arch = arch_from(cfg)
    assert total(arch, "vision/image_tower.") == total(arch, "vision/video_tower.") == CLIP_TOWER
    assert total(arch) == 2 * CLIP_TOWER + (8 * D + D) + (D * D + D)
    cost = vision_flops(arch, 640, 480)
    assert cost.image.encoder_len == 5 and cost.image.tokens == 4  # class token dropped
    # matmuls of one tower only: every weight of q/k/v/out, fc1, fc2 (2·params·positions) and
    # the patch conv; the video tower's copy carries no FLOPs
    one_tower = 4 * 8 * 8 + 8 * 16 + 16 * 8 + 8 * 12
    assert cost.tower_matmul_flops == 2 * one_tower * 5
    model = vision_model(arch)
    assert model is not None and len(model.attention) == 1


SAM = {
    "model_type": "sam_vision_model",
    "hidden_size": 8,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "mlp_dim": 16,
    "patch_size": 2,
    "image_size": 8,
    "num_channels": 3,
    "window_size": 2,
    "global_attn_indexes": [1],
    "output_channels": 4,
    "qkv_bias": True,
    "use_abs_pos": True,
    "use_rel_pos": True,
}
SAM_TOWER = (
    (8 * 3 * 2 * 2 + 8)  # patch conv with bias
    + (8 // 2) ** 2 * 8  # absolute position table, 4×4 grid
    + 2 * (2 * 2 * 8 + (8 * 24 + 24) + (8 * 8 + 8) + (8 * 16 + 16) + (16 * 8 + 8))  # two layers
    + 2 * (2 * 2 - 1) * 4  # windowed layer: rel_pos_h, rel_pos_w of 2·window−1 rows × head_dim
    + 2 * (2 * 4 - 1) * 4  # global layer: 2·grid−1 rows
    + 8 * 4
    + 2 * 4
    + 4 * 4 * 9
    + 2 * 4  # neck: 1×1 conv, LayerNorm, 3×3 conv, LayerNorm
)


def test_a_second_tower_from_its_own_config_node() -> None:
    siglip = {
        "model_type": "siglip_vision_model",
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "patch_size": 2,
        "image_size": 4,
        "num_channels": 3,
        "vision_use_head": False,
    }
    cfg = {
        "model_type": "deepseek_vl_hybrid",
        "text_config": TEXT,
        "vision_config": siglip,
        "high_res_vision_config": SAM,
    }
    arch = arch_from(cfg)
    assert total(arch, "vision/vision_encoder.") == SAM_TOWER == 1704
    connector = (
        8 * 4
        + 2 * 4
        + 4 * 4 * 9
        + 2 * 4  # the second neck
        + 4 * 9 * 8
        + 8 * 9 * 16  # two stride-2 3×3 convs: 4 → 8 → 16 channels
        + 1  # high_res_vision_alpha
        + (8 * (D // 2) + D // 2)  # aligner.vision_proj from the SigLIP width
        + (16 * (D // 2) + D // 2)  # aligner.high_res_vision_proj from 4·output_channels
        + (D * D + D)  # aligner.proj
    )
    assert total(arch, "connector/") == connector
    # the image's tokens are the SigLIP view's (4 / 2)² = 4 patches; the SAM view (the second
    # tower) joins the same tokens and its FLOPs are not priced
    img = image_tokens(arch, 640, 480)
    assert (img.rule, img.tokens, img.resize) == ("fixed_square", 4, (4, 4))


def test_sam_tower_without_windows_gives_every_layer_the_global_table() -> None:
    cfg = {
        "model_type": "got_ocr2",
        "text_config": TEXT,
        "vision_config": {**SAM, "model_type": "got_ocr2_vision", "window_size": 0},
    }
    rel = sum(t.params for t in vision_tensors(arch_from(cfg)) if "rel_pos" in t.part)
    assert rel == 2 * 2 * (2 * 4 - 1) * 4  # two layers × (h, w) × (2·grid − 1) × head_dim


QFORMER = {"hidden_size": 8, "num_hidden_layers": 3, "intermediate_size": 16, "cross_attention_frequency": 2}
BLIP2_VISION = {
    "model_type": "blip_2_vision_model",
    "hidden_size": 6,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 12,
    "patch_size": 2,
    "image_size": 4,
    "qkv_bias": False,
}


def _blip2(**qformer: Any) -> dict[str, Any]:
    return {
        "model_type": "blip-2",
        "num_query_tokens": 4,
        "text_config": TEXT,
        "vision_config": BLIP2_VISION,
        "qformer_config": {**QFORMER, "encoder_hidden_size": 6, **qformer},
    }


SELF = 4 * (8 * 8 + 8) + 2 * 8  # q, k, v, output.dense with bias, output LayerNorm
QUERY_FFN = (8 * 16 + 16) + (16 * 8 + 8) + 2 * 8
CROSS = (8 * 8 + 8) + 2 * (6 * 8 + 8) + (8 * 8 + 8) + 2 * 8  # k, v read the 6-wide patches


def test_qformer_by_hand() -> None:
    connector = (
        4 * 8  # query tokens
        + 2 * 8  # qformer.layernorm
        + 3 * (SELF + QUERY_FFN)
        + 2 * CROSS  # layers 0 and 2 (layer_idx % 2 == 0)
        + (8 * D + D)  # language_projection
    )
    assert total(arch_from(_blip2()), "connector/") == connector == 2536
    with_text = total(arch_from(_blip2(use_qformer_text_input=True)), "connector/")
    assert with_text == connector + 3 * QUERY_FFN  # the text FFN in every layer
    tower = (
        6
        + (6 * 3 * 4 + 6)
        + 5 * 6  # class token, patch conv with bias, (4/2)²+1 positions
        + (2 * 2 * 6 + 6 * 18 + (6 * 6 + 6) + (6 * 12 + 12) + (12 * 6 + 6))  # qkv without bias
        + 2 * 6  # post_layernorm
    )
    assert total(arch_from(_blip2()), "vision/") == tower


def test_instructblip_qformer_reads_the_instruction() -> None:
    cfg = _blip2(vocab_size=10, max_position_embeddings=6)
    cfg["model_type"] = "instructblip"
    cfg["vision_config"] = {**BLIP2_VISION, "model_type": "instructblip_vision_model"}
    connector = (
        4 * 8
        + 10 * 8
        + 6 * 8
        + 2 * 8  # queries, word and position embeddings, their LayerNorm
        + 3 * (SELF + 2 * QUERY_FFN)  # the text FFN always
        + 2 * CROSS
        + (8 * D + D)
    )
    assert total(arch_from(cfg), "connector/") == connector


def test_fixed_queries_image_rule() -> None:
    img = image_tokens(arch_from(_blip2()), 1920, 1080)
    assert (img.tokens, img.patches, img.encoder_len, img.resize) == (4, 4, 5, (4, 4))


def test_perceiver_resampler_by_hand() -> None:
    cfg = {
        "model_type": "idefics2",
        "text_config": {**TEXT, "model_type": "mistral"},
        "vision_config": {
            "model_type": "idefics2_vision",
            "hidden_size": 8,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "intermediate_size": 16,
            "patch_size": 2,
            "image_size": 4,
        },
        "perceiver_config": {
            "hidden_size": D,
            "resampler_n_latents": 3,
            "resampler_depth": 2,
            "resampler_n_heads": 2,
            "resampler_head_dim": 4,
            "num_key_value_heads": 1,
        },
    }
    layer = (
        2 * D  # latents and context RMSNorms
        + D * 8
        + 2 * (D * 4)
        + 8 * D  # q (2 heads × 4), k and v (1 head × 4), o
        + D  # post_attention_layernorm
        + 3 * D * 4 * D  # gated MLP 4× wide
    )
    # modality MLP (vision 8 → text intermediate 32 → text 16), 3 latents, 2 layers, final norm
    connector = (8 * 32 + 8 * 32 + 32 * D) + 3 * D + 2 * layer + D
    assert total(arch_from(cfg), "connector/") == connector


def test_granite_docling_density_router_is_optional() -> None:
    vision = {
        "model_type": "granite_docling_vision",
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "patch_size": 2,
        "image_size": 8,
        "out_hidden_size": 12,
        "scale_factor": 2,
        "use_fine_route": False,
        "deepstack_visual_indexes": [0],
    }
    cfg = {"model_type": "granite_docling", "text_config": TEXT, "vision_config": vision}
    without = total(arch_from(cfg), "connector/")
    path = 32 * 12 + (2 * 32 + (32 * 12 + 12) + (12 * 12 + 12))  # projection, one DeepStack merger
    assert without == 2 * 8 + path + 2 * 12 + 12 * 12 + 2 * 12  # ln_in, coarse path, ln_mid, fc2, ln_out
    fine = copy.deepcopy(cfg)
    fine["vision_config"]["use_fine_route"] = True  # scale_factor // 2 = 1: 8-wide features
    assert total(arch_from(fine), "connector/") == without + 8 * 12 + (2 * 8 + (8 * 12 + 12) + (12 * 12 + 12))
    routed = {**cfg, "density_router_hidden_size": 4}
    router = (8 + 1) + 2 * 8 + (8 * 4 + 4) + (4 + 1)  # att, norm, fc1, fc2 (all with bias)
    assert total(arch_from(routed), "connector/") == without + router


def _resnet(cin: int, cout: int) -> int:
    """A VQ-GAN ResNet block: GroupNorm (weight, bias), 3×3 conv, GroupNorm, 3×3 conv (all
    with bias) and a 1×1 shortcut conv when the width changes."""
    return (
        2 * cin
        + (cin * 9 * cout + cout)
        + 2 * cout
        + (cout * 9 * cout + cout)
        + (cin * cout + cout if cin != cout else 0)
    )


def _attn(ch: int) -> int:
    return 2 * ch + 4 * (ch * ch + ch)  # GroupNorm and the 1×1 q, k, v, proj_out convs


def test_indexed_groups_build_each_resolution_level_of_a_vq_gan() -> None:
    vq = {
        "model_type": "janus_vqgan",
        "base_channels": 4,
        "channel_multiplier": [1, 2],
        "num_res_blocks": 1,
        "in_channels": 3,
        "out_channels": 3,
        "latent_channels": 5,
        "double_latent": False,
        "embed_dim": 2,
        "num_embeddings": 7,
        "projection_dim": 6,
        "num_hidden_layers": 2,
        "image_token_embed_dim": 6,
    }
    cfg = {
        "model_type": "janus",
        "text_config": TEXT,
        "vision_config": {
            "model_type": "janus_vision_model",
            "hidden_size": 8,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "mlp_ratio": 2.0,
            "patch_size": 2,
            "image_size": 4,
            "projection_dim": 6,
            "depth": 2,
        },
        "vq_config": vq,
    }
    mid = _resnet(8, 8) + _attn(8) + _resnet(8, 8)
    encoder = (
        (3 * 9 * 4 + 4)  # conv_in
        + _resnet(4, 4)
        + (4 * 9 * 4 + 4)  # level 0: one block, downsample conv
        + _resnet(4, 8)
        + _attn(8)  # level 1 (last): one block widening 4 → 8, attention
        + mid
        + 2 * 8
        + (8 * 9 * 5 + 5)  # norm_out, conv_out to latent_channels
    )
    codebook = 7 * 2 + (5 * 2 + 2) + (2 * 5 + 5)  # embedding, quant_conv, post_quant_conv
    decoder = (
        (5 * 9 * 8 + 8)  # conv_in
        + mid
        + 2 * _resnet(8, 8)
        + 2 * _attn(8)
        + (8 * 9 * 8 + 8)  # level 1: 2 blocks, 2 attns, upsample
        + _resnet(8, 4)
        + _resnet(4, 4)  # level 0: narrowing 8 → 4, no upsample
        + 2 * 4
        + (4 * 9 * 3 + 3)  # norm_out, conv_out
    )
    assert total(arch_from(cfg), "vision/vqmodel.") == encoder + codebook + decoder
    generation = 7 * 2 + (2 * 6 + 6) + (6 * 6 + 6) + (6 * 6 + 6) + (6 * 7 + 7)  # embeddings, aligner, head
    aligner = (8 * 6 + 6) + (6 * 6 + 6)  # fc1 to projection_dim, depth − 1 = 1 hidden layer
    assert total(arch_from(cfg), "connector/") == aligner + generation


def test_decoder_side_blocks_of_a_composite_are_priced_per_text_token() -> None:
    from slotdiff.cost.flops import weight_flops_per_token
    from slotdiff.cost.params import count

    text = {k: v for k, v in TEXT.items() if k != "model_type"} | {"num_hidden_layers": 2}
    vision = {**CLIP, "model_type": "idefics_vision", "embed_dim": 8}
    del vision["hidden_size"]
    cfg = {"model_type": "idefics", **text, "cross_layer_interval": 2, "vision_config": vision}
    arch = arch_from(cfg)
    c = count(arch)
    # one gated block (2 layers // interval 2): q, o over the text width, k, v from the 8-wide
    # vision states, two RMSNorms, a gated MLP, two one-value tanh gates (alpha_type float)
    matmuls = (D * D) + 2 * (8 * D) + (D * D) + 3 * (D * 32)
    block = matmuls + 2 * D + 2
    gated = [t for t in c.tensors if "gated_cross_attn_layers" in t.part]
    assert sum(t.params for t in gated) == block
    assert {t.slot for t in gated} == {"attention", "ffn", "norms"}
    assert total(arch, "vision/") == CLIP_TOWER
    plain = arch_from({"model_type": "llama", **text})
    assert weight_flops_per_token(arch, c) - weight_flops_per_token(plain, count(plain)) == 2 * matmuls
    vector = arch_from({**cfg, "alpha_type": "vector", "qk_layer_norms": True})
    extra = 2 * (D - 1) + 2 * (D // 2)  # gates as text-width vectors, q/k RMSNorm over head_dim
    assert sum(t.params for t in count(vector).tensors if "gated_cross" in t.part) == block + extra


def test_blip_cross_attention_in_every_text_layer_and_the_untied_second_bias() -> None:
    from slotdiff.cost.params import count

    text = {
        "model_type": "blip_text_model",
        "hidden_size": D,
        "num_hidden_layers": 3,
        "num_attention_heads": 2,
        "intermediate_size": 32,
        "vocab_size": 50,
        "max_position_embeddings": 10,
    }
    vision = {**CLIP, "model_type": "blip_vision_model"}
    cfg = {"model_type": "blip", "text_config": text, "vision_config": vision, "tie_word_embeddings": True}
    tied = count(arch_from(cfg))
    cross = 3 * ((D * D + D) + 2 * (8 * D + D) + (D * D + D) + 2 * D)  # q, k/v from width 8, dense, LN
    assert sum(t.params for t in tied.tensors if "crossattention" in t.part) == cross
    untied = count(arch_from({**cfg, "tie_word_embeddings": False}))
    assert untied.total - tied.total == 50 * D + 50  # the projection's weight and its own bias


def _wn(cin: int, cout: int, k: int) -> int:
    return cout * cin * k + cout + cout  # weight_norm's v and g, and the bias


def test_an_audio_tower_the_composite_describes_is_counted_not_excluded() -> None:
    from slotdiff.cost.params import count

    audio = {
        "model_type": "wavtokenizer_encoder",
        "audio_channels": 1,
        "num_filters": 2,
        "upsampling_ratios": [3, 2],
        "num_residual_layers": 1,
        "compress": 2,
        "use_conv_shortcut": True,
        "norm_type": "weight_norm",
        "kernel_size": 5,
        "last_kernel_size": 3,
        "residual_kernel_size": 3,
        "num_lstm_layers": 1,
        "hidden_size": 6,
    }
    vision = {
        "model_type": "apertus1p5_vision_tokenizer",
        "base_channels": 4,
        "channel_multiplier": [1],
        "num_res_blocks": 1,
        "latent_channels": 4,
        "embed_dim": 4,
        "codebook_size": 8,
        "resolution": 8,
        "attn_resolutions": [],
    }
    text = {**TEXT, "model_type": "apertus1p5_text"}
    cfg = {"model_type": "apertus1p5", "text_config": text, "vision_config": vision, "audio_config": audio}
    c = count(arch_from(cfg))
    assert c.excluded == ()
    expected = (
        _wn(1, 2, 5)  # input conv
        + _wn(2, 1, 3)
        + _wn(1, 2, 1)
        + _wn(2, 2, 1)
        + _wn(2, 4, 2 * 2)  # ratio 2 first (reversed)
        + _wn(4, 2, 3)
        + _wn(2, 4, 1)
        + _wn(4, 4, 1)
        + _wn(4, 8, 2 * 3)  # then ratio 3
        + (2 * 32 * 8 + 2 * 32)  # one LSTM layer over 8 channels: w_ih, w_hh, b_ih, b_hh
        + _wn(8, 6, 3)  # last conv to hidden_size
    )
    # the composite's audio encoder: slot audio, named by its module
    audio_tensors = [t for t in c.tensors if t.slot == "audio"]
    assert {t.module.partition(".audio_tokenizer.")[0] for t in audio_tensors} == {"model"}
    assert c.part("audio") == sum(t.params for t in audio_tensors) == expected
    group_norm = copy.deepcopy(cfg)
    group_norm["audio_config"]["norm_type"] = "time_group_norm"
    refused = count(arch_from(group_norm))
    assert any("time_group_norm" in e for e in refused.excluded)
    assert any("audio tower" in e for e in refused.excluded)  # not silently counted either


def test_conformer_audio_tower_by_hand() -> None:
    from slotdiff.cost.params import count

    audio = {
        "model_type": "phi4_multimodal_audio",
        "hidden_size": 4,
        "num_attention_heads": 2,
        "num_blocks": 1,
        "intermediate_size": 6,
        "kernel_size": 3,
        "depthwise_multiplier": 1,
        "depthwise_separable_out_channel": 4,
        "ext_pw_out_channel": 4,
        "nemo_conv_channels": 2,
        "nemo_final_size": 3,
        "time_reduction": 4,
        "bias_max_distance": 5,
        "bias_symmetric": False,
        "downsample_rate": 1,
    }
    vision = {
        "model_type": "phi4_multimodal_vision",
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "patch_size": 2,
        "image_size": 4,
        "num_channels": 3,
    }
    text = {k: v for k, v in TEXT.items() if k != "model_type"}
    cfg = {"model_type": "phi4_multimodal", **text, "vision_config": vision, "audio_config": audio}
    c = count(arch_from(cfg))
    assert c.excluded == ()
    subsampling = (2 * 9 + 2) + (2 * 9 + 2) + (2 * 2 + 2) + (2 * 3 * 4 + 4)  # conv, dw/pw pair, out
    rel_bias = 2 * 5 * 2  # 2 × bias_max_distance buckets (not symmetric) × heads
    ffn = 2 * 4 + (4 * 12 + 12) + (6 * 4 + 4)  # LayerNorm, gate_up to 2·6, down
    conv = (
        2 * 4 + (4 * 8 + 8) + 2 * 4 + (3 * 4 + 4) + (4 * 4 + 4) + (4 * 4 + 4)
    )  # LN, GLU, b1 b2, dw, pw, out
    block = 2 * ffn + 2 * 4 + 4 * (4 * 4 + 4) + conv + 2 * 4  # two FFNs, LN, q/k/v/o, conv module, LN
    audio_module = "model.embed_tokens_extend.audio_embed.encoder."
    encoder = sum(t.params for t in c.tensors if t.module.startswith(audio_module))
    assert encoder == sum(t.params for t in c.tensors if t.slot == "audio" and "proj_for_" not in t.part)
    assert encoder == subsampling + rel_bias + block == 494
    projections = 2 * ((4 * D + D) + (D * D + D))  # speech and vision-speech: up, down
    assert sum(t.params for t in c.tensors if "proj_for_" in t.part and t.slot == "audio") == projections
    assert c.part("audio") == encoder + projections  # the audio encoder and its projections, one part
