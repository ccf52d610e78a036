"""Image tokens against hand-worked cases of each processor's published rule.

Each case writes out the arithmetic of the transformers 5.24 image processor it follows
(file named in the test), so the expected numbers do not come from slotdiff.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from slotdiff.cost.images import image_tokens, vision_flops
from slotdiff.cost.inventory.tensor import Unsupported

from conftest import arch_from, arch_of

FIXTURES = Path(__file__).parent / "fixtures" / "vision"


# --- Qwen2-VL: image_processing_qwen2_vl.py smart_resize, factor = patch · merge = 14 · 2 = 28,
# min_pixels = 56·56 = 3136, max_pixels = 28·28·1280 = 1,003,520 (Qwen2VLImageProcessor defaults)


def test_qwen2_vl_1024_square_with_processor_defaults() -> None:
    # h_bar = w_bar = round(1024 / 28) · 28 = 37 · 28 = 1036; 1036² = 1,073,296 > max_pixels,
    # so beta = sqrt(1024² / 1,003,520) = 1.02220 and each side is
    # max(28, floor(1024 / 1.02220 / 28) · 28) = floor(35.78) · 28 = 980.
    # 980 / 14 = 70 patches a side → 4900 patches → 4900 / 2² = 1225 tokens.
    beta = math.sqrt(1024 * 1024 / 1_003_520)
    side = math.floor(1024 / beta / 28) * 28
    assert side == 980
    img = image_tokens(arch_of("defaults__qwen2_vl.json"), 1024, 1024)
    assert img.resize == (980, 980)
    assert (img.patches, img.tokens) == (4900, 1225)
    assert img.special == 2  # <|vision_start|>, <|vision_end|>
    assert img.rule == "smart_resize"
    settings = {name: (value, where) for name, value, where in img.settings}
    assert settings["max_pixels"][0] == 1_003_520
    assert "default" in settings["max_pixels"][1]


def test_qwen2_vl_1024_square_with_a_larger_pixel_budget() -> None:
    # With max_pixels ≥ 1036² the rounding alone decides: 1036 / 14 = 74 → 74² = 5476
    # patches → 5476 / 4 = 1369 tokens (what a checkpoint raising max_pixels gets).
    img = image_tokens(arch_of("defaults__qwen2_vl.json"), 1024, 1024, max_pixels=28 * 28 * 16384)
    assert img.resize == (1036, 1036)
    assert (img.patches, img.tokens) == (5476, 1369)


def test_qwen2_vl_640x480() -> None:
    # round(480 / 28) = 17 → 476; round(640 / 28) = 23 → 644; 476 · 644 = 306,544 lies in
    # [3136, 1,003,520] → 34 × 46 = 1564 patches → 391 tokens.
    img = image_tokens(arch_of("defaults__qwen2_vl.json"), 640, 480)
    assert img.resize == (644, 476)
    assert (img.patches, img.tokens) == (1564, 391)


def test_qwen3_vl_uses_its_own_patch_size_and_pixel_bounds() -> None:
    # Qwen3-VL's preprocessor_config.json: patch 16, merge 2 → factor 32; size
    # shortest_edge 65,536 (256²), longest_edge 16,777,216 (4096²), not Qwen2-VL's class
    # defaults (3136, 1,003,520). round(1024 / 32) · 32 = 1024, and 1024² = 1,048,576 lies in
    # [65,536, 16,777,216] → 64² = 4096 patches → 1024 tokens (Qwen2-VL's max_pixels would
    # have shrunk it to 992² → 961).
    img = image_tokens(arch_of("Qwen__Qwen3-VL-30B-A3B-Instruct.json"), 1024, 1024)
    assert img.resize == (1024, 1024)
    assert (img.patches, img.tokens) == (4096, 1024)
    settings = {name: value for name, value, _ in img.settings}
    assert (settings["min_pixels"], settings["max_pixels"]) == (256 * 256, 4096 * 4096)


def test_qwen3_vl_small_image_is_raised_to_its_minimum() -> None:
    # 100² rounds to 96² = 9216 < 65,536: beta = sqrt(65,536 / 10,000) = 2.56, each side
    # ceil(100 · 2.56 / 32) · 32 = ceil(8) · 32 = 256 → 16² = 256 patches → 64 tokens.
    img = image_tokens(arch_of("Qwen__Qwen3-VL-30B-A3B-Instruct.json"), 100, 100)
    assert img.resize == (256, 256)
    assert (img.patches, img.tokens) == (256, 64)


@pytest.mark.parametrize("size", [(1920, 1080), (1024, 1024), (100, 100), (6000, 8000), (333, 4000)])
def test_qwen3_vl_matches_transformers_processor_with_its_published_fields(size: tuple[int, int]) -> None:
    """transformers' own processor, built with the fields Qwen3-VL's preprocessor_config.json
    publishes (patch 16, merge 2, temporal 2, size 65,536 … 16,777,216)."""
    from transformers import Qwen2VLImageProcessorPil

    proc = Qwen2VLImageProcessorPil(
        patch_size=16,
        merge_size=2,
        temporal_patch_size=2,
        size={"shortest_edge": 65536, "longest_edge": 16777216},
    )
    w, h = size
    want = proc.get_number_of_image_patches(h, w, {}) // 2**2
    assert image_tokens(arch_of("Qwen__Qwen3-VL-30B-A3B-Instruct.json"), w, h).tokens == want


# --- LLaVA-1.5: CLIPImageProcessor resize shortest edge to 336 + centre crop 336²;
# processing_llava.py: (336 // 14)² + 1 (class token) - 1 ('default' strategy) = 576


@pytest.mark.parametrize("size", [(1024, 1024), (640, 480), (50, 2000)])
def test_llava_fixed_576(size: tuple[int, int]) -> None:
    img = image_tokens(arch_of("llava-hf__llava-1.5-7b-hf.json"), *size)
    assert img.tokens == (336 // 14) ** 2 + 1 - 1 == 576
    assert img.encoder_len == 577  # the tower also sees the class token
    assert img.resize == (336, 336)


# --- Gemma 3: resize to the SigLIP input, avg-pool to mm_tokens_per_image (256)


def test_gemma3_fixed_256_soft_tokens() -> None:
    # gemma-3 style vision input: 896 / 14 = 64 patches a side = 4096 patches; the
    # projector pools with kernel 64 // sqrt(256) = 4 → 16 × 16 = 256 tokens, plus
    # <start_of_image> and <end_of_image> (processing_gemma3.py full_image_sequence).
    data = json.loads((FIXTURES / "defaults__gemma3.json").read_text())
    data["vision_config"].update(image_size=896, patch_size=14)
    img = image_tokens(arch_from(data), 1024, 768)
    assert (img.patches, img.tokens, img.special) == (4096, 256, 2)
    assert img.resize == (896, 896)


def test_gemma3_default_config_cannot_pool() -> None:
    # transformers' default Gemma3Config: 224 / 16 = 14 patches a side cannot pool to
    # sqrt(256) = 16 a side (kernel 14 // 16 = 0).
    with pytest.raises(Unsupported, match="cannot be average-pooled"):
        image_tokens(arch_of("defaults__gemma3.json"), 1024, 1024)


# --- Gemma 4: image_processing_gemma4.py get_aspect_ratio_preserving_size,
# max_patches = max_soft_tokens (280) · k² (3² = 9) = 2520, side multiple = k · patch = 48


def test_gemma4_1024_square() -> None:
    # factor = sqrt(2520 · 16² / 1024²) = sqrt(645,120 / 1,048,576) = 0.78438;
    # 1024 · 0.78438 = 803.2 → floor(803.2 / 48) · 48 = 16 · 48 = 768.
    # 768 / 16 = 48 → 2304 patches → 2304 / 9 = 256 soft tokens (+ boi, eoi).
    img = image_tokens(arch_of("google__gemma-4-26B-A4B.json"), 1024, 1024)
    assert img.resize == (768, 768)
    assert (img.patches, img.tokens, img.special) == (2304, 256, 2)
    assert img.encoder_len == 2520  # patches are padded to max_patches


def test_gemma4_1920x1080() -> None:
    # factor = sqrt(645,120 / (1920 · 1080)) = 0.55777; h: 1080 · 0.55777 = 602.4 → 12 · 48
    # = 576; w: 1920 · 0.55777 = 1070.9 → 22 · 48 = 1056. 36 · 66 = 2376 patches → 264.
    img = image_tokens(arch_of("google__gemma-4-26B-A4B.json"), 1920, 1080)
    assert img.resize == (1056, 576)
    assert (img.patches, img.tokens) == (2376, 264)


# --- Llama-3.2-Vision: image_processing_mllama.py get_optimal_tiled_canvas with
# tile = vision image_size (448 in the defaults), max 4 tiles; modeling_mllama.py pads each
# tile's 32² + 1 = 1025 positions to 1032 and every image to max_num_tiles tiles


def test_mllama_1024_square_four_tiles() -> None:
    # canvases (h, w) ∈ {448·(a, b) : a·b ≤ 4}; scale = min(h / 1024, w / 1024); none ≥ 1,
    # the largest is 896 / 1024 = 0.875 for the 2 × 2 canvas → 4 tiles, image 896 × 896.
    img = image_tokens(arch_of("defaults__mllama.json"), 1024, 1024)
    assert (img.tiles, img.resize) == (4, (896, 896))
    assert img.tokens == 1  # one <|image|> token; features arrive by cross-attention
    assert img.cross_tokens == 4 * 1025
    assert img.encoder_len == 4 * 1032


def test_mllama_500x300_upscales_to_two_tiles() -> None:
    # scales ≥ 1: (448, 896), (448, 1344), (448, 1792) all give min(448/300, w/500) = 1.493,
    # (896, 896) gives 1.792; the smallest upscale 1.493 → smallest area (448, 896) → 1 × 2.
    # fit: target = (clip(300, 448, 448), clip(500, 448, 896)) = (448, 500); scale_w = 1 <
    # scale_h → width 500, height floor(300 · 1) = 300 (no resize, padded to 448 × 896).
    img = image_tokens(arch_of("defaults__mllama.json"), 500, 300)
    assert (img.tiles, img.resize) == (2, (500, 300))
    assert img.cross_tokens == 4 * 1025  # padded to max_num_tiles all the same


# --- Llama 4: image_processing_llama4.py (336² tiles, ≤ 16, global tile when split),
# processing_llama4.py: (336 // 14)² // 4 = 144 <|patch|> per tile after pixel shuffle 0.5


def test_llama4_1024_square() -> None:
    # Both sides need ≥ 1024 px to upscale: 3 · 336 = 1008 < 1024, so only 4 × 4 tiles
    # (1344², scale 1.3125) qualify → 16 tiles + 1 global = 17 → 17 · 144 = 2448 tokens.
    # Markers: <|image_start|>, <|image|>, <|image_end|>, 4 · 3 x-separators, 4 y-separators.
    img = image_tokens(arch_of("meta-llama__Llama-4-Scout-17B-16E-Instruct.json"), 1024, 1024)
    assert (img.tiles, img.tokens) == (17, 2448)
    assert img.special == 3 + 4 * 3 + 4 == 19
    assert img.total == 2467
    assert (img.encoder_seqs, img.encoder_len) == (17, 577)


def test_llama4_single_tile() -> None:
    # 336 × 336: the 1 × 1 canvas has scale 1 (the smallest upscale, smallest area) → one
    # tile, no global tile, no separators: 144 tokens + 3 markers.
    img = image_tokens(arch_of("meta-llama__Llama-4-Scout-17B-16E-Instruct.json"), 336, 336)
    assert (img.tiles, img.tokens, img.special) == (1, 144, 3)


# --- InternVL: got_ocr2 get_optimal_tiled_canvas (1..12 tiles of 448², closest aspect ratio,
# ties go to more tiles while the image area exceeds half their area) + a thumbnail;
# processing_internvl.py: 256 tokens per tile + start and end tokens


def test_internvl_1024_square() -> None:
    # aspect 1: grids (1,1), (2,2), (3,3) tie at difference 0. (2,2): 1024² = 1,048,576 >
    # 0.5 · 448² · 4 = 401,408 → take it; (3,3): > 0.5 · 448² · 9 = 903,168 → take it.
    # 9 tiles + thumbnail = 10 → 2560 tokens + 2.
    img = image_tokens(arch_of("defaults__internvl.json"), 1024, 1024)
    assert (img.tiles, img.tokens, img.special) == (10, 2560, 2)
    assert (img.encoder_seqs, img.encoder_len) == (10, 32 * 32 + 1)


def test_internvl_800x400() -> None:
    # aspect 2: (2,1) matches exactly first; (4,2) ties but 320,000 ≤ 0.5 · 448² · 8 → keep
    # (2,1): 2 tiles + thumbnail = 3 → 768 tokens.
    img = image_tokens(arch_of("defaults__internvl.json"), 800, 400)
    assert (img.tiles, img.tokens) == (3, 768)


# --- unsupported and cost


def test_kimi_k3_image_tokens_unsupported() -> None:
    with pytest.raises(Unsupported, match="not in transformers"):
        image_tokens(arch_of("moonshotai__Kimi-K3.json"), 1024, 1024)


def test_llava_vision_flops_by_hand() -> None:
    # Tower matmuls run over 577 positions: per layer q, k, v, o (1024²) and fc1, fc2
    # (1024 · 4096), 24 layers, plus the patch conv (3 · 14² → 1024).
    tower = 2 * 577 * (24 * (4 * 1024 * 1024 + 2 * 1024 * 4096) + 3 * 14 * 14 * 1024)
    # Projector over the 576 image tokens: 1024 → 4096 → 4096.
    connector = 2 * 576 * (1024 * 4096 + 4096 * 4096)
    # Attention: 4 · L · s² · width, L = 24, s = 577, width = 1024.
    attention = 4 * 24 * 577**2 * 1024
    cost = vision_flops(arch_of("llava-hf__llava-1.5-7b-hf.json"), 640, 480, kv_bytes_per_token=1000)
    assert (cost.tower_matmul_flops, cost.connector_flops, cost.attention_flops) == (
        tower,
        connector,
        attention,
    )
    assert cost.flops == tower + connector + attention
    assert cost.kv_bytes == 576 * 1000


def test_mllama_cross_attention_kv() -> None:
    # 32 self-attention layers × 2 (k, v) × 8 kv heads × 128 × 2 bytes = 131,072 bytes per
    # position; one layer's share is 4096. The image holds 1 decoder position, and each of
    # the 8 cross-attention layers caches 4 tiles · 1025 image states.
    cost = vision_flops(arch_of("defaults__mllama.json"), 1024, 1024, kv_bytes_per_token=131_072)
    assert cost.kv_bytes == 131_072
    assert cost.cross_kv_bytes == 4 * 1025 * 8 * 4096
