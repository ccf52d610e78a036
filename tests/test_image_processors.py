"""Image tokens of every multimodal family against transformers' own image processors.

Each case builds the family's image processor (the class ``AutoImageProcessor`` maps its
model_type to, PIL backend, class defaults: nothing is downloaded), runs it on a blank image
of the given size, and counts the image's tokens from what it returns with the processing
file's formula (written out per family below). The tower's patch and merge sizes come from
the harness's default config, as a checkpoint's preprocessor_config.json matches them to
its tower. slotdiff must give the same count from the config alone.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
import transformers

from slotdiff.cost.images import image_tokens
from slotdiff.cost.inventory.tensor import Unsupported

from conftest import arch_from

REFERENCE = Path(__file__).parent / "fixtures" / "conformance" / "reference.json"
SIZES = [(1024, 1024), (1280, 720), (300, 500), (2000, 1500)]


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


def pixtral_settings(model_type: str) -> Callable[[], dict[str, Any]]:
    """PixtralProcessor hands the image processor patch_size · spatial_merge_size; the
    published preprocessor_config.json's longest_edge is the tower's image_size."""

    def settings() -> dict[str, Any]:
        step = vision(model_type, "patch_size") * harness_config(model_type)["spatial_merge_size"]
        return {
            "patch_size": {"height": step, "width": step},
            "size": {"longest_edge": vision(model_type, "image_size")},
        }

    return settings


def pixtral_tokens(model_type: str, row_break: bool) -> Callable[[Any], int]:
    """processing_pixtral.py: rows of [IMG] × columns + [IMG_BREAK] (the last [IMG_END]);
    processing_lighton_ocr.py: rows · columns [IMG] only."""

    def count(out: Any) -> int:
        step = vision(model_type, "patch_size") * harness_config(model_type)["spatial_merge_size"]
        h, w = (int(x) for x in out["image_sizes"][0])
        return (h // step) * (w // step + (1 if row_break else 0))

    return count


def bare_processor(name: str, **attrs: Any) -> Any:
    """A transformers processor without its tokenizer (which needs the Hub): only the
    attributes its token-count methods read."""
    proc = object.__new__(getattr(transformers, name))
    proc.__dict__.update(attrs)
    return proc


def llava_next_settings(model_type: str) -> Callable[[], dict[str, Any]]:
    """The checkpoint's processor: tiles of the tower's image_size, the config's pinpoints."""

    def settings() -> dict[str, Any]:
        tile = vision(model_type, "image_size")
        size = {"shortest_edge": tile} if model_type != "llava_onevision" else {"height": tile, "width": tile}
        extra = {"crop_size": {"height": tile, "width": tile}} if model_type != "llava_onevision" else {}
        return {
            "size": size,
            "image_grid_pinpoints": harness_config(model_type)["image_grid_pinpoints"],
            **extra,
        }

    return settings


def llava_next_tokens(model_type: str) -> Callable[[Any], int]:
    """LlavaNextProcessor / LlavaOnevisionProcessor.replace_image_token, run on the image
    processor's output: _get_number_of_features, minus one for the 'default' strategy."""

    def count(out: Any) -> int:
        config = harness_config(model_type)
        ip = transformers.LlavaNextImageProcessorPil(image_grid_pinpoints=config["image_grid_pinpoints"])
        tile, patch = vision(model_type, "image_size"), vision(model_type, "patch_size")
        if model_type == "llava_onevision":
            proc = bare_processor(
                "LlavaOnevisionProcessor",
                image_processor=ip,
                num_image_tokens=(tile // patch) ** 2,
                vision_aspect_ratio="anyres_max_9",
            )
        else:  # CLIP: num_additional_image_tokens = 1 (llava-hf checkpoints)
            proc = bare_processor(
                "LlavaNextProcessor", image_processor=ip, patch_size=patch, num_additional_image_tokens=1
            )
        orig_h, orig_w = (int(x) for x in out["image_sizes"][0])
        height, width = out["pixel_values"][0][0].shape[-2:]
        n = proc._get_number_of_features(orig_h, orig_w, height, width)
        return n - (1 if config["vision_feature_select_strategy"] == "default" else 0)

    return count


# model_type → (processor class, its settings from the config, token count from its output)
CASES: dict[str, tuple[str, Callable[[], dict[str, Any]], Callable[[Any], int]]] = {
    "glm4v": ("Glm4vImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glm4v_moe": ("Glm4vImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glm46v": ("Glm46VImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glmga": ("GlmgaImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glm_ocr": ("Glm4vImageProcessorPil", lambda: {}, grid_tokens(2)),
    "glm5_next": ("Glm5NextImageProcessorPil", lambda: {}, grid_tokens(2)),
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
    "mistral3": ("PixtralImageProcessorPil", pixtral_settings("mistral3"), pixtral_tokens("mistral3", True)),
    "mistral_large4": (
        "PixtralImageProcessorPil",
        pixtral_settings("mistral_large4"),
        pixtral_tokens("mistral_large4", True),
    ),
    "llava_next": (
        "LlavaNextImageProcessorPil",
        llava_next_settings("llava_next"),
        llava_next_tokens("llava_next"),
    ),
    "llava_next_video": (
        "LlavaNextImageProcessorPil",
        llava_next_settings("llava_next_video"),
        llava_next_tokens("llava_next_video"),
    ),
    "llava_onevision": (
        "LlavaOnevisionImageProcessorPil",
        llava_next_settings("llava_onevision"),
        llava_next_tokens("llava_onevision"),
    ),
    "lighton_ocr": (
        "PixtralImageProcessorPil",
        pixtral_settings("lighton_ocr"),
        pixtral_tokens("lighton_ocr", False),
    ),
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


# --- fixed token counts: the processor fixes the resize, the count is written out

FIXED: dict[str, tuple[str, dict[str, Any], int, int]] = {
    # model_type: (processor, its settings, image tokens + markers, resized side)
    # GOT-OCR2: SAM at 1024 / 16 = 64 patches a side, two stride-2 convs → 16² = 256
    # (GotOcr2Processor num_image_tokens = 256) between <img> and </img>.
    "got_ocr2": ("GotOcr2ImageProcessorPil", {"size": {"height": 1024, "width": 1024}}, 256 + 2, 1024),
    # PP-Chart2Table: PPChart2TableImageProcessor resizes to 1024² by default; the same
    # encoder and projector give 256 features; the chat template's markers are not counted.
    "pp_chart2table": ("PPChart2TableImageProcessorPil", {}, 256, 1024),
    # Kosmos-2: CLIP's shortest edge 224 + centre crop; latent_query_num = 64 image tokens
    # between <image> and </image> (Kosmos2Processor).
    "kosmos-2": ("CLIPImageProcessorPil", {}, 64 + 2, 224),
    # Ovis2 (default config: 224 / 14 = 16 patches a side, hidden_stride 1 → 256 tokens),
    # crop_to_patches off: <IMG_START> 256 × <IMG_ATOM> <IMG_GRID> <IMG_END>.
    # DeepSeek-VL hybrid (default config): the SigLIP view 224 / 16 = 14² = 196 tokens
    # (DeepseekVLHybridProcessor num_image_tokens, 576 for the checkpoints' 384 / 16).
    "deepseek_vl_hybrid": (
        "DeepseekVLHybridImageProcessorPil",
        {"size": {"height": 224, "width": 224}},
        196,
        224,
    ),
    "ovis2": ("Ovis2ImageProcessorPil", {"size": {"height": 224, "width": 224}}, 256 + 3, 224),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("model_type", sorted(FIXED))
def test_fixed_counts(model_type: str, size: tuple[int, int]) -> None:
    name, settings, total, side = FIXED[model_type]
    out = run_processor(name, *size, **settings)
    assert out["pixel_values"].shape[-2:] == (side, side)
    img = image_tokens(arch_from(harness_config(model_type)), *size)
    assert (img.total, img.resize) == (total, (side, side))


def test_idefics2_against_its_processor() -> None:
    # Idefics2ImageProcessor resizes (longest ≤ 980, shortest ≥ 378); the tower reads
    # (h // 32) · (w // 32) patches of it; 64 resampler latents between two
    # <fake_token_around_image> (Idefics2Processor, image_seq_len = 64).
    patch = vision("idefics2", "patch_size")
    for width, height in SIZES:
        out = run_processor("Idefics2ImageProcessorPil", width, height)
        h, w = out["pixel_values"].shape[-2:]
        img = image_tokens(arch_from(harness_config("idefics2")), width, height)
        assert (img.resize, img.patches, img.total) == ((w, h), (h // patch) * (w // patch), 64 + 2)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(
    ("model_type", "processor"),
    [("idefics3", "Idefics3ImageProcessorPil"), ("smolvlm", "SmolVLMImageProcessorPil")],
)
def test_idefics3_split_against_its_processor(model_type: str, processor: str, size: tuple[int, int]) -> None:
    # Idefics3-8B's tower (364 / 14 = 26 patches a side, pixel shuffle 2 → 169 tokens a
    # tile); the processor's class defaults: tiles of 364, longest edge 1456.
    config = harness_config(model_type)
    config = {**config, "vision_config": {**config["vision_config"], "image_size": 364, "patch_size": 14}}
    out = run_processor(processor, *size, return_row_col_info=True)
    rows, cols = int(out["rows"][0][0]), int(out["cols"][0][0])
    seq = 26 * 26 // 2**2
    # Idefics3Processor._get_num_multimodal_tokens with "\n\n" one token:
    # (seq + 3) + rows · ((seq + 2) · cols + 1)
    expected = seq + 3 + rows * ((seq + 2) * cols + 1)
    img = image_tokens(arch_from(config), *size)
    assert img.tiles == out["pixel_values"].shape[1] == rows * cols + 1
    assert img.total == expected


def test_idefics3_default_config_cannot_pixel_shuffle() -> None:
    # transformers' default Idefics3Config: 224 / 32 = 7 patches a side, scale_factor 2.
    with pytest.raises(Unsupported, match="pixel-shuffled"):
        image_tokens(arch_from(harness_config("idefics3")), 1024, 1024)


@pytest.mark.parametrize("size", [*SIZES, (4000, 1000)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_fuyu_against_its_processor(size: tuple[int, int]) -> None:
    # FuyuProcessor._get_num_multimodal_tokens runs the image processor's own patch count
    # (image tokens plus one newline per row); it needs no tokenizer.
    ip = transformers.FuyuImageProcessorPil()
    proc = bare_processor("FuyuProcessor", image_processor=ip)
    expected = proc._get_num_multimodal_tokens(image_sizes=[(size[1], size[0])])["num_image_tokens"][0]
    assert image_tokens(arch_from(harness_config("fuyu")), *size).total == expected


def test_cohere2_vision_by_hand() -> None:
    # Cohere2VisionImageProcessor (torchvision only), tiles of 512, at most 12; a tile is
    # (512 / 16 / 2)² = 256 tokens + a line break; BOI and EOI (replace_image_token).
    arch = arch_from(harness_config("cohere2_vision"))
    # 1024²: grids (columns, rows) by area; scale = min(c · 512 / 1024, r · 512 / 1024);
    # (2, 2) is the first with scale ≥ 1 (exactly 1) → 4 tiles + a thumbnail = 5.
    img = image_tokens(arch, 1024, 1024)
    assert (img.tiles, img.total) == (5, 2 + 5 * (256 + 1))
    # 1280 × 720: columns need c · 512 ≥ 1280 → 3 (scale 1.2), rows r · 512 ≥ 720 → 2;
    # (3, 2) scale min(1.2, 1.42) = 1.2, the least upscaling, the first at that scale by
    # area ((3, 3) and (3, 4) tie at 1.2 with more tiles) → 6 tiles + a thumbnail = 7.
    img = image_tokens(arch, 1280, 720)
    assert (img.tiles, img.resize, img.total) == (7, (1536, 1024), 2 + 7 * (256 + 1))
    # 300 × 500: (1, 1) scales min(512 / 300, 512 / 500) = 1.024 ≥ 1: one tile, no thumbnail.
    img = image_tokens(arch, 300, 500)
    assert (img.tiles, img.total) == (1, 2 + 256 + 1)


def test_nemotron_h_omni_by_hand() -> None:
    # get_patch_grid_size with patch 16, merge round(1 / 0.5) = 2, budget
    # min(13312, (16384 − 4) · 4) = 13312 patches; tokens grid_h · grid_w // 4 between
    # <img> and </img>. Grid sides start at round(side / 16 + 0.5).
    arch = arch_from(harness_config("nemotron_h_omni"))
    # 1024²: round(64.5) = 64 (half to even) → 64 × 64 = 4096 in [1024, 13312] → 1024.
    img = image_tokens(arch, 1024, 1024)
    assert (img.resize, img.total) == ((1024, 1024), 4096 // 4 + 2)
    # 1280 × 720: round(80.5) = 80, round(45.5) = 46 → 46 · 80 = 3680 → 920 tokens.
    img = image_tokens(arch, 1280, 720)
    assert (img.resize, img.total) == ((1280, 736), 3680 // 4 + 2)
    # 300 × 500: 19 × 32 = 608 < 1024 → factor sqrt(1024 / 608) = 1.2978: ceil(24.66) =
    # 25 wide, ceil(41.53) = 42 high; 25 is odd and 42 · 26 ≤ 13312 → 26 → 1092 → 273.
    img = image_tokens(arch, 300, 500)
    assert (img.resize, img.total) == ((26 * 16, 42 * 16), 1092 // 4 + 2)


@pytest.mark.parametrize("size", [(5000, 4000), (900, 6000)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_glm5_next_binary_search_against_its_processor(size: tuple[int, int]) -> None:
    # Over max_image_tokens (8000 · 2 · 28² pixels) Glm5NextImageProcessor binary-searches
    # the height; the SIZES above all fit the budget.
    name, settings, count = CASES["glm5_next"]
    expected = count(run_processor(name, *size, **settings()))
    assert image_tokens(arch_from(harness_config("glm5_next")), *size).total == expected


def transformers_function(module: str, name: str, **names: Any) -> Callable[..., Any]:
    """A function (or ``Class.method``) of a transformers file whose module needs torchvision
    (not in the test extra): its source is compiled alone, with math, itertools and ``names``
    in scope."""
    path = Path(transformers.__file__).parent / "models" / module.replace(".", "/")
    tree = ast.parse(path.with_suffix(".py").read_text())
    body = tree.body
    if "." in name:  # a method: Class.method
        cls, name = name.split(".")
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    node.returns = None
    for arg in [*node.args.args, *node.args.kwonlyargs]:
        arg.annotation = None
    scope: dict[str, Any] = {"math": math, "itertools": itertools, **names}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(path), "exec"), scope)
    return scope[name]


@pytest.mark.parametrize("size", [*SIZES, (4000, 3000), (300, 4000)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("model_type", ["muse_glimmer", "muse_spark"])
def test_muse_glimmer_against_its_smart_resize(model_type: str, size: tuple[int, int]) -> None:
    # MuseGlimmerImageProcessor.resize: smart_resize(h, w, patch_size=14 · 2, max_tokens=4096);
    # tokens (h / 14) · (w / 14) // 2², between <|image_start|> and <|image_end|>.
    resize = transformers_function("muse_glimmer.image_processing_muse_glimmer", "smart_resize")
    h, w = resize(height=size[1], width=size[0], patch_size=28, max_tokens=4096)
    img = image_tokens(arch_from(harness_config(model_type)), *size)
    assert (img.resize, img.total) == ((w, h), (h // 14) * (w // 14) // 4 + 2)


@pytest.mark.parametrize("size", [*SIZES, (8000, 6000), (100, 9000)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_kimi_k25_against_its_navit_resize(size: tuple[int, int]) -> None:
    # Kimi_K25ImageProcessor (torchvision only): navit_resize(patch 14, merge 2,
    # max_patches 16384, max_size_per_side = size['max_height'] = 512) gives the padded size;
    # tokens (pad_h / 14) · (pad_w / 14) // 2².
    resize = transformers_function("kimi_k25.image_processing_kimi_k25", "navit_resize")
    _, (h, w) = resize(size[1], size[0], 14, 2, 16384, 512)
    img = image_tokens(arch_from(harness_config("kimi_k25")), *size)
    assert (img.resize, img.total) == ((w, h), (h // 14) * (w // 14) // 4)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("model_type", ["inkling2", "inkling2_loop"])
def test_inkling2_by_hand(model_type: str, size: tuple[int, int]) -> None:
    # Inkling2ImageProcessor (torchvision only): rows = ceil(h / 40), columns = ceil(w / 40),
    # one token a cell; 1024² → 26 · 26 = 676, 1280 × 720 → 18 · 32 = 576, 300 × 500 → 13 · 8,
    # 2000 × 1500 → 38 · 50 = 1900.
    width, height = size
    expected = {(1024, 1024): 26 * 26, (1280, 720): 18 * 32, (300, 500): 13 * 8, (2000, 1500): 38 * 50}[size]
    assert math.ceil(height / 40) * math.ceil(width / 40) == expected
    img = image_tokens(arch_from(harness_config(model_type)), width, height)
    assert (img.total, img.patches) == (expected, expected * 4)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_inkling_against_its_divide_to_patches(size: tuple[int, int]) -> None:
    # InklingImageProcessor (torchvision only) cuts the unresized image with divide_to_patches
    # (40-pixel cells); its soft tokens are the cells it returns.
    divide = transformers_function("inkling.image_processing_inkling", "divide_to_patches")
    expected = len(divide(torch.zeros(3, size[1], size[0]), 40))
    assert image_tokens(arch_from(harness_config("inkling_mm_model")), *size).total == expected


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_kosmos_2_5_against_its_processor(size: tuple[int, int]) -> None:
    # Kosmos2_5ImageProcessor returns the rows and columns of patches it kept (of at most
    # 4096, padded to 4096); the decoder sees latent_query_num = 2048 tokens + <image>, </image>.
    out = run_processor("Kosmos2_5ImageProcessorPil", *size)
    rows, cols = int(out["rows"][0]), int(out["cols"][0])
    img = image_tokens(arch_from(harness_config("kosmos-2.5")), *size)
    assert (img.patches, img.encoder_len, img.total) == (rows * cols, 4096, 2048 + 2)


def test_phi4_multimodal_by_hand() -> None:
    # Phi4MultimodalImageProcessor (torchvision only), crops of 448, patch 14 (32 a side):
    # num_img_tokens = 256 + 1 + valid merged crop states + valid merged rows + 16.
    arch = arch_from(harness_config("phi4_multimodal"))
    # 1024²: ceil(1024 / 448) = 3 a side → 1344², no padding; 96 / 2 = 48 merged a side
    # → 256 + 1 + 48 · 48 + 48 + 16 = 2625; 9 crops + the global view.
    img = image_tokens(arch, 1024, 1024)
    assert (img.tiles, img.total) == (10, 256 + 1 + 48 * 48 + 48 + 16)
    # 1280 × 720: 3 × 2 crops → 1344 × 896; width ratio 1.05 < height ratio 1.244, so the
    # image is 1344 × int(720 · 1.05) = 756 high, padded by 140 px = 10 patch rows:
    # 64 − 10 = 54 valid rows → 27 merged, 96 columns → 48 merged.
    img = image_tokens(arch, 1280, 720)
    assert (img.tiles, img.resize, img.total) == (7, (1344, 896), 256 + 1 + 27 * 48 + 27 + 16)


@pytest.mark.parametrize("size", [*SIZES, (600, 5000)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_granite_docling_against_its_tile_grid(size: tuple[int, int]) -> None:
    # GraniteDoclingImageProcessor.get_tile_grid gives (rows, columns); replace_image_token
    # writes, a tile of image_seq_len = (512 / 16)² / 4² = 64 tokens each,
    # (2 + 64) per tile + 1 per row, and when split "\\n" + 2 + 64 + 1 around the global tile
    # (the two newlines counted as one token).
    ip = transformers.GraniteDoclingImageProcessorPil()
    rows, cols = ip.get_tile_grid(size[1], size[0])
    split = rows * cols > 1
    expected = rows * (cols * (2 + 64) + 1) + ((3 + 64) if split else 0)
    img = image_tokens(arch_from(harness_config("granite_docling")), *size)
    assert (img.tiles, img.total) == (rows * cols + split, expected)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_aria_against_its_processor(size: tuple[int, int]) -> None:
    # AriaImageProcessor pads each image to 980²; its pixel_mask marks the resized image.
    # AriaProcessor: size_conversion[980] = 256 tokens, the projector's queries for
    # (980 / 14)² = 4900 patches (Aria's tower; the default config's patch 32 gives 900,
    # which patch_to_query_dict does not map, and is refused).
    config = harness_config("aria")
    config = {**config, "vision_config": {**config["vision_config"], "patch_size": 14, "image_size": 980}}
    out = run_processor("AriaImageProcessorPil", *size)
    mask = out["pixel_mask"][0]
    h, w = int(mask.any(axis=1).sum()), int(mask.any(axis=0).sum())
    img = image_tokens(arch_from(config), *size)
    assert out["pixel_values"].shape[-2:] == (980, 980)
    assert (img.resize, img.patches, img.total) == ((w, h), 4900, 256)
    with pytest.raises(Unsupported, match="patch_to_query_dict"):
        image_tokens(arch_from(harness_config("aria")), *size)


@pytest.mark.parametrize("size", [*SIZES, (700, 700), (4000, 800), (20, 400)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_step3p7_against_its_plan(size: tuple[int, int]) -> None:
    # Step3p7ImageProcessor._plan_patches (torchvision only) with its defaults (size 728,
    # local crops 504, max_image_size 3024) gives the crop grid; Step3p7Processor writes
    # per crop <patch_start> (504 // 56)² = 81 <patch_end>, <patch_newline> after each row
    # but the last, then <im_start> (728 // 56)² = 169 <im_end>.
    module = "step3p7.image_processing_step3p7"
    plan = transformers_function(module, "Step3p7ImageProcessor._plan_patches")
    extreme = transformers_function(module, "Step3p7ImageProcessor._is_extreme_aspect")
    this = SimpleNamespace(max_image_size=3024, _is_extreme_aspect=extreme)
    cols, rows = plan(this, size[0], size[1], 728, 504)[3:5]
    crops = cols * rows
    expected = crops * (2 + 81) + max(rows - 1, 0) + 2 + 169
    img = image_tokens(arch_from(harness_config("step3p7")), *size)
    assert (img.tiles, img.total) == (1 + crops, expected)


@pytest.mark.parametrize("size", [*SIZES, (700, 700), (3000, 600)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_lfm2_vl_against_its_methods(size: tuple[int, int]) -> None:
    # Lfm2VlImageProcessor.resize_and_split's decisions and Lfm2VlProcessor's token string,
    # run from transformers' own methods (the classes need torchvision) on its defaults:
    # patch 16, downsample 2, tiles of 512 (2 to 10), 64 to 256 tokens, tolerance 2.0.
    ip_module, proc_module = "lfm2_vl.image_processing_lfm2_vl", "lfm2_vl.processing_lfm2_vl"
    closest = transformers_function(ip_module, "find_closest_aspect_ratio")
    ip = SimpleNamespace(
        _target_ratios=lambda lo, hi: transformers_function(ip_module, "Lfm2VlImageProcessor._target_ratios")(
            None, lo, hi
        )
    )
    width, height = size
    large = transformers_function(
        ip_module, "Lfm2VlImageProcessor._is_image_too_large", round_by_factor=lambda n, f: round(n / f) * f
    )(ip, height, width, 256, 16, 2, 2.0)
    new_w, new_h = transformers_function(
        ip_module, "Lfm2VlImageProcessor.smart_resize", round_by_factor=lambda n, f: round(n / f) * f
    )(ip, height, width, 2, 64, 256, 16)
    cols = rows = 1
    if large:
        layout = transformers_function(
            ip_module, "Lfm2VlImageProcessor._get_grid_layout", find_closest_aspect_ratio=closest
        )
        cols, rows = layout(ip, height, width, 2, 10, 512)[:2]
    proc = SimpleNamespace(
        image_start_token="S", image_end_token="E", image_thumbnail_token="T", image_token="I"
    )
    per_tile = transformers_function(proc_module, "Lfm2VlProcessor._compute_tokens_per_tile")(
        proc, 512, 16, 2
    )
    whole = transformers_function(proc_module, "Lfm2VlProcessor._compute_tokens_for_image")(
        proc, [new_h, new_w], 16, 2
    )
    text = transformers_function(proc_module, "Lfm2VlProcessor._build_image_tokens")(
        proc, rows, cols, per_tile, whole, True, True
    )
    expected = (
        text.count("I") + text.count("S") + text.count("E") + text.count("T") + text.count("<|img_row_")
    )
    img = image_tokens(arch_from(harness_config("lfm2_vl")), width, height)
    assert (img.tokens, img.total) == (text.count("I"), expected)


@pytest.mark.parametrize("size", [*SIZES, (3000, 600)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("model_type", ["minicpmv4_6", "minicpmv4_7", "minicpm_ocr"])
def test_minicpmv_against_its_processor(model_type: str, size: tuple[int, int]) -> None:
    # MiniCPMV4_6ImageProcessor (MiniCPM-OCR's has the same slicing with its default
    # small_image_upsize 'always'; it needs torchvision, so the V4.6 one runs with '4x'):
    # target_sizes hold each view's patch grid; replace_image_token writes prod // (16 or 4)
    # tokens a view, <image></image> and <slice></slice> around them, "\\n" between slice rows.
    config = harness_config(model_type)
    mode = config["downsample_mode"]
    out = run_processor(
        "MiniCPMV4_6ImageProcessorPil",
        *size,
        patch_size=vision(model_type, "patch_size"),
        downsample_mode=mode,
    )
    div = 4 if mode == "4x" else 16
    rows, cols = out["grids"][0]
    expected = (
        sum(int(h) * int(w) // div for h, w in out["target_sizes"]) + 2 + 2 * rows * cols + max(rows - 1, 0)
    )
    img = image_tokens(arch_from(config), *size)
    assert (img.tiles, img.total) == (len(out["target_sizes"]), expected)


@pytest.mark.parametrize("size", [*SIZES, (4000, 700)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_molmo2_against_its_methods(size: tuple[int, int]) -> None:
    # Molmo2ImageProcessor.get_image_grid_and_crops and Molmo2Processor.replace_image_token
    # (torchvision only) run from their source on the class defaults; every "<...>" in the
    # returned string is one token.
    ip_module = "molmo2.image_processing_molmo2"
    select = transformers_function(ip_module, "select_tiling", torch=torch)
    geometry = transformers_function(ip_module, "compute_crop_geometry", select_tiling=select)
    grid = transformers_function(
        ip_module, "Molmo2ImageProcessor.get_image_grid_and_crops", compute_crop_geometry=geometry
    )
    ip = SimpleNamespace(
        max_crops=8,
        overlap_margins=[4, 4],
        patch_size=14,
        pooling_size=[2, 2],
        size={"height": 378, "width": 378},
    )
    image_grid, crops = grid(ip, size[1], size[0])
    replace = transformers_function("molmo2.processing_molmo2", "Molmo2Processor.replace_image_token")
    proc = SimpleNamespace(
        image_use_col_tokens=True, use_single_crop_col_tokens=None, use_single_crop_start_token=True
    )
    text = replace(proc, {"image_grids": [image_grid]}, 0)
    img = image_tokens(arch_from(harness_config("molmo2")), *size)
    assert (img.tiles, img.tokens, img.total) == (crops, text.count("<im_patch>"), text.count("<"))
