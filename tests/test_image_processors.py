"""Image tokens of every multimodal family against transformers' own image processors.

Each case builds the family's image processor (the class ``AutoImageProcessor`` maps its
model_type to, PIL backend, class defaults: nothing is downloaded), runs it on a blank image
of the given size, and counts the image's tokens from what it returns with the processing
file's formula (written out per family below). The tower's patch and merge sizes come from
the harness's default config, as a checkpoint's preprocessor_config.json matches them to
its tower. slotdiff must give the same count from the config alone.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import transformers

from slotdiff.cost.images import image_tokens

from conftest import arch_from

REFERENCE = Path(__file__).parent / "fixtures" / "conformance" / "reference.json"
SIZES = [(1024, 1024), (1280, 720), (300, 500)]


@cache
def _configs() -> dict[str, Any]:
    return json.loads(REFERENCE.read_text())["types"]


def harness_config(model_type: str) -> dict[str, Any]:
    """transformers' default config of ``model_type`` as the conformance harness stores it."""
    return _configs()[model_type]["rows"]["default"]["config"]


def run_processor(name: str, width: int, height: int, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proc = getattr(transformers, name)(**kwargs)
        return proc(images=[np.zeros((height, width, 3), dtype=np.uint8)], return_tensors="np")


def grid_tokens(merge: int, newline: bool = False, extra: int = 0) -> Callable[[Any], int]:
    """processing_*.py replace_image_token: image_grid_thw.prod() // merge² (Qwen2-VL style);
    HunYuan-VL / HY-V4-VL: (grid_h // merge) · (grid_w // merge + 1) (+ 2 extra tokens)."""

    def count(out: Any) -> int:
        t, h, w = (int(x) for x in out["image_grid_thw"][0])
        if newline:
            return t * (h // merge) * (w // merge + 1) + extra
        return t * h * w // merge**2 + extra

    return count


def vision(model_type: str, key: str) -> Any:
    return harness_config(model_type)["vision_config"][key]


# model_type → (processor class, its settings from the config, token count from its output)
CASES: dict[str, tuple[str, Callable[[], dict[str, Any]], Callable[[Any], int]]] = {
    "glm4v": ("Glm4vImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glm4v_moe": ("Glm4vImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glm46v": ("Glm46VImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glmga": ("GlmgaImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glm_ocr": ("Glm4vImageProcessorPil", lambda: {}, grid_tokens(2)),
    "cosmos3_edge": ("Cosmos3EdgeImageProcessorPil", lambda: {}, grid_tokens(2)),
    "ernie4_5_vl_moe": ("Ernie4_5_VLMoeImageProcessorPil", lambda: {}, grid_tokens(2)),
    "paddleocr_vl": ("PaddleOCRVLImageProcessorPil", lambda: {}, grid_tokens(2)),
    # VideoLLaMA3's default vision config has patch 16 against the processor's 14
    "video_llama_3": (
        "VideoLlama3ImageProcessorPil",
        lambda: {"patch_size": vision("video_llama_3", "patch_size")},
        grid_tokens(1),
    ),
    "dots3_note": ("Qwen2VLImageProcessorPil", lambda: {}, grid_tokens(2)),
    "lfm3_vl": (
        "Qwen2VLImageProcessorPil",
        lambda: {"patch_size": vision("lfm3_vl", "patch_size")},
        grid_tokens(2),
    ),
    "hunyuan_vl": ("HunYuanVLImageProcessorPil", lambda: {}, grid_tokens(2, newline=True, extra=2)),
    "hy_v4_vl": ("HYV4VLImageProcessorPil", lambda: {}, grid_tokens(2, newline=True)),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("model_type", sorted(CASES))
def test_tokens_match_the_processor(model_type: str, size: tuple[int, int]) -> None:
    name, settings, count = CASES[model_type]
    width, height = size
    expected = count(run_processor(name, width, height, **settings()))
    got = image_tokens(arch_from(harness_config(model_type)), width, height)
    assert got.total - EXTERNAL_MARKERS.get(model_type, 0) == expected


# markers slotdiff counts that the processor does not write (the chat template does)
EXTERNAL_MARKERS: dict[str, int] = {}


# --- families without a torchvision-free processor: the arithmetic written out


def test_minimax_m3_vl_by_hand() -> None:
    # MiniMaxM3VLImageProcessor: Qwen2-VL's smart_resize, factor 14 · 2 = 28, min 3136,
    # max 451,584 = 28² · 576. 1024²: round(1024 / 28) · 28 = 1036, 1036² > max →
    # beta = sqrt(1024² / 451,584) = 1.52381; floor(1024 / 1.52381 / 28) · 28 = 24 · 28 = 672
    # → 48² = 2304 patches → 576 tokens, + VISION_START and VISION_END = 578.
    img = image_tokens(arch_from(harness_config("minimax_m3_vl")), 1024, 1024)
    assert (img.resize, img.patches, img.tokens, img.total) == ((672, 672), 2304, 576, 578)
    # 640 × 480: 644 × 476 = 306,544 ≤ max → 46 · 34 = 1564 patches → 391 tokens.
    img = image_tokens(arch_from(harness_config("minimax_m3_vl")), 640, 480)
    assert (img.resize, img.tokens) == ((644, 476), 391)
