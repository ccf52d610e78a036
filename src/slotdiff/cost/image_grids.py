"""Image processors that cut or pad an image into a grid of their own (Pixtral's row breaks,
LLaVA-NeXT's any-resolution crops), transcribed from transformers 5.24 like ``image_rules``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .image_rules import Rule, registrar

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


@rule("pixtral")
def _pixtral(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """PixtralImageProcessor: scale down (floor) to fit longest_edge, then round each side up
    to a multiple of patch · merge (get_resize_output_image_size with the processor's patch
    size times spatial_merge_size); one token per merged patch, and with ``row_break`` an
    [IMG_BREAK] after each row, the last replaced by [IMG_END] (processing_pixtral.py)."""
    p, merge, longest = s["patch_size"], s["merge_size"], s["longest_edge"]
    ratio = max(height / longest, width / longest)
    if ratio > 1:
        height, width = math.floor(height / ratio), math.floor(width / ratio)
    step = p * merge
    rows, cols = (height - 1) // step + 1, (width - 1) // step + 1
    patches = rows * cols * merge * merge
    return dict(
        tokens=rows * cols,
        special=rows if s["row_break"] else 0,
        patches=patches,
        encoder_len=patches,
        resize=(cols * step, rows * step),
    )


def select_best_resolution(height: int, width: int, resolutions: Sequence[Sequence[int]]) -> tuple[int, int]:
    """select_best_resolution (image_processing_utils.py): the (height, width) keeping the most
    of the image's pixels, then wasting the fewest."""
    best, most, waste = (0, 0), 0, math.inf
    for h, w in resolutions:
        scale = min(w / width, h / height)
        effective = min(int(width * scale) * int(height * scale), width * height)
        wasted = w * h - effective
        if effective > most or (effective == most and wasted < waste):
            best, most, waste = (int(h), int(w)), effective, wasted
    return best


@rule("llava_next_anyres")
def _llava_next_anyres(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """LLaVA-NeXT / -OneVision: the image is resized into the best of image_grid_pinpoints and
    cut into tiles of the tower's input, plus the whole image as a base tile. Features
    (processing_llava_next.py _get_number_of_features): the base tile's patches (+ class
    token), the tiles' patch grid with the padding rows or columns removed, one newline per
    remaining row; OneVision (``vision_aspect_ratio`` anyres_max_N) shrinks a grid over 1.1 × N
    tiles' worth of patches back to N. The 'default' feature strategy drops one token."""
    tile, p, cls = s["image_size"], s["patch_size"], s["class_tokens"]
    best_h, best_w = select_best_resolution(height, width, s["grid_pinpoints"])
    side = tile // p
    cur_h, cur_w = side * (best_h // tile), side * (best_w // tile)
    if width / height > cur_w / cur_h:
        cur_h -= (cur_h - int(round(height * (cur_w / width), 7))) // 2 * 2
    else:
        cur_w -= (cur_w - int(round(width * (cur_h / height), 7))) // 2 * 2
    unpadded, newlines = cur_h * cur_w, cur_h
    aspect = s.get("vision_aspect_ratio")
    if aspect is not None:
        max_tiles = int(str(aspect).removeprefix("anyres_max_"))  # LlavaOnevisionProcessor strips it
        ratio = math.sqrt(cur_h * cur_w / (max_tiles * side**2))
        if ratio > 1.1:
            unpadded, newlines = int(cur_h // ratio) * int(cur_w // ratio), int(cur_h // ratio)
    tiles = (best_h // tile) * (best_w // tile) + 1
    tokens = unpadded + newlines + side * side + cls - (1 if s["drop_class_token"] else 0)
    return dict(
        tokens=tokens,
        patches=tiles * side * side,
        encoder_seqs=tiles,
        encoder_len=side * side + cls,
        connector_tokens=unpadded + side * side,
        resize=(best_w, best_h),
        tiles=tiles,
    )


@rule("idefics2_resize")
def _idefics2_resize(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Idefics2ImageProcessor (get_resize_output_image_size): the longer side capped at
    longest_edge keeping the aspect ratio, each side at least shortest_edge; the tower reads
    the patches of that size, and the perceiver resampler's latents are the image's tokens."""
    low, high, p = s["shortest_edge"], s["longest_edge"], s["patch_size"]
    aspect = width / height
    if width >= height and width > high:
        width, height = high, int(high / aspect)
    elif height > width and height > high:
        height, width = high, int(high * aspect)
    height, width = max(height, low), max(width, low)
    patches = (height // p) * (width // p)
    return dict(tokens=s["tokens_per_image"], patches=patches, encoder_len=patches, resize=(width, height))


def _idefics3_resize(height: int, width: int, longest: int) -> tuple[int, int]:
    """get_resize_output_image_size (image_processing_idefics3.py): the longer side to
    ``longest`` (the other rounded up to even), then both under the 4096 cap."""
    aspect = width / height
    if width >= height:
        width, height = longest, int(longest / aspect)
        height += height % 2
    else:
        height, width = longest, int(longest * aspect)
        width += width % 2
    height, width = max(height, 1), max(width, 1)
    cap = 4096
    if width >= height and width > cap:
        width, height = cap, int(cap / aspect)
    elif height > width and height > cap:
        height, width = cap, int(cap * aspect)
    return max(height, 1), max(width, 1)


@rule("idefics3_split")
def _idefics3_split(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Idefics3 / SmolVLM: resize the longer side to longest_edge, round both sides up to
    tiles of the tower's input (resize_for_vision_encoder), cut them out (split_images) and
    add the whole image as a global tile; each tile is pixel-shuffled to image_seq_len
    tokens. Markers (processing_idefics3.py): <fake_token_around_image> and <row_r_col_c>
    before each tile, a newline after each row, <fake_token_around_image><global-img> ...
    <fake_token_around_image> around the global tile."""
    tile, p, scale = s["image_size"], s["patch_size"], s["scale_factor"]
    side = tile // p
    if side % scale:
        raise ValueError(f"{side}×{side} patches cannot be pixel-shuffled by {scale}")
    seq = side * side // (scale * scale)
    h, w = _idefics3_resize(height, width, s["longest_edge"])
    aspect = w / h
    if w >= h:
        w = math.ceil(w / tile) * tile
        h = math.ceil(int(w / aspect) / tile) * tile
    else:
        h = math.ceil(h / tile) * tile
        w = math.ceil(int(h * aspect) / tile) * tile
    rows = cols = 0
    if h > tile or w > tile:
        rows, cols = (h - tile) // tile + 1, (w - tile) // tile + 1
    tiles = rows * cols + 1
    return dict(
        tokens=tiles * seq,
        special=3 + rows * (2 * cols + 1),
        patches=tiles * side * side,
        encoder_seqs=tiles,
        encoder_len=side * side,
        resize=(w, h),
        tiles=tiles,
    )


@rule("fuyu_patches")
def _fuyu_patches(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """FuyuImageProcessor: scale down (never up) to fit the canvas, pad to it; the processor
    keeps only the patches over the image (preprocess_with_tokenizer_info, variable_sized),
    one token each, with a newline token after each row of patches (processing_fuyu.py)."""
    p, ch, cw = s["patch_size"], s["canvas_height"], s["canvas_width"]
    scale = min(ch / height, cw / width)
    h, w = min(int(height * scale), height), min(int(width * scale), width)
    rows, cols = math.ceil(h / p), math.ceil(w / p)
    return dict(
        tokens=rows * cols,
        special=rows,
        patches=rows * cols,
        encoder_len=rows * cols,
        resize=(w, h),
    )


def cohere2_canvas(height: int, width: int, tile: int, max_tiles: int) -> tuple[int, int]:
    """get_optimal_tiled_canvas (image_processing_cohere2_vision.py), returning (columns,
    rows): the least upscaling, else the least downscaling; ties to the fewest tiles."""
    grids = sorted(
        ((w, h) for w in range(1, max_tiles + 1) for h in range(1, max_tiles + 1) if w * h <= max_tiles),
        key=lambda g: g[0] * g[1],
    )
    scales = [min(w * tile / width, h * tile / height) for w, h in grids]
    if all(x < 1 for x in scales):
        return grids[scales.index(max(scales))]
    ups = [x if x >= 1 else math.inf for x in scales]
    return grids[ups.index(min(ups))]


@rule("cohere2_vision_tiles")
def _cohere2_vision_tiles(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Command A Vision: the image resized to a canvas of tiles (crop_image_to_patches) plus a
    thumbnail when there are several; each tile's tokens, then a line-break token, all
    between BOI and EOI (processing_cohere2_vision.py replace_image_token)."""
    tile, p = s["image_size"], s["patch_size"]
    cols, rows = cohere2_canvas(height, width, tile, s["max_patches"])
    tiles = cols * rows + (1 if cols * rows > 1 else 0)
    return dict(
        tokens=tiles * s["tokens_per_tile"],
        special=2 + tiles,
        patches=tiles * (tile // p) ** 2,
        encoder_seqs=tiles,
        encoder_len=(tile // p) ** 2,
        resize=(cols * tile, rows * tile),
        tiles=tiles,
    )


def nemotron_patch_grid(height: int, width: int, p: int, merge: int, low: int, high: int) -> tuple[int, int]:
    """get_patch_grid_size (image_processing_nemotron_h_omni.py): the image's own patch grid
    scaled into [low, high] patches, each side rounded to a multiple of ``merge``."""
    gh = round(height / p + 0.5)  # transformers' own expression, banker's rounding included
    gw = round(width / p + 0.5)
    factor = min(math.sqrt(high / (gh * gw)), 1.0)
    gh, gw = math.floor(factor * gh), math.floor(factor * gw)
    if high > low and gh * gw < low:
        factor = math.sqrt(low / (gh * gw))
        gh, gw = math.ceil(factor * gh), math.ceil(factor * gw)
    if rem := gh % merge:
        gh = gh + merge - rem if (gh + merge - rem) * gw <= high else max(merge, gh - rem)
    if rem := gw % merge:
        gw = gw + merge - rem if gh * (gw + merge - rem) <= high else max(merge, gw - rem)
    return gh, gw


@rule("nemotron_patch_grid")
def _nemotron_patch_grid(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Nemotron-3 Nano Omni: one native-resolution view, resized to the patch grid of
    get_patch_grid_size within a budget of min(max_num_patches, (max_model_len − 4) ·
    merge²) patches; a token per merge × merge patches (pixel shuffle) between <img> and
    </img> (processing_nemotron_h_omni.py replace_image_token)."""
    p, merge = s["patch_size"], s["merge_size"]
    budget = max((s["max_model_len"] - 4) * merge * merge, s["min_num_patches"])
    budget = max(min(budget, s["max_num_patches"]), s["min_num_patches"])
    gh, gw = nemotron_patch_grid(height, width, p, merge, s["min_num_patches"], budget)
    patches = gh * gw
    return dict(
        tokens=patches // (merge * merge),
        patches=patches,
        encoder_len=patches + s["class_tokens"],
        resize=(gw * p, gh * p),
    )


def glm5_next_resize(
    frames: int, height: int, width: int, temporal: int, factor: int, min_tokens: int, max_tokens: int
) -> tuple[int, int]:
    """smart_resize (image_processing_glm5_next.py), returning (height, width): sides rounded
    up to ``factor``; an image under the budget of min_tokens is scaled up, one over
    max_tokens shrunk by a binary search over its height. A token is temporal · factor²
    pixels."""
    per_token = temporal * factor**2
    low, high = min_tokens * per_token, max_tokens * per_token

    def align(value: float) -> int:
        return math.ceil(value / factor) * factor

    t = max(temporal, round(frames / temporal) * temporal)
    if high < t * factor**2:
        raise ValueError(f"max_pixels={high} is under one aligned patch ({t * factor**2})")
    h, w = align(height), align(width)
    if t * h * w < low:
        scale = math.sqrt(low / (frames * height * width))
        h, w = align(max(1, math.ceil(height * scale))), align(max(1, math.ceil(width * scale)))
    if t * h * w > high:
        lo, hi, h, w = 1, height, factor, factor
        while lo <= hi:
            mid = (lo + hi) // 2
            ch, cw = align(mid), align(max(1, math.floor(width * mid / height)))
            if t * ch * cw <= high:
                h, w, lo = ch, cw, mid + 1
            else:
                hi = mid - 1
    return h, w


@rule("glm5_next_resize")
def _glm5_next_resize(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """GLM-5.3-Flash: the still image counts temporal_patch_size frames in the budget."""
    p, merge, t = s["patch_size"], s["merge_size"], s["temporal_patch_size"]
    h, w = glm5_next_resize(t, height, width, t, p * merge, s["min_image_tokens"], s["max_image_tokens"])
    patches = (h // p) * (w // p)
    return dict(tokens=patches // (merge * merge), patches=patches, encoder_len=patches, resize=(w, h))


def muse_glimmer_resize(height: int, width: int, step: int, max_tokens: int) -> tuple[int, int]:
    """smart_resize (image_processing_muse_glimmer.py), returning (height, width): the grid of
    step-pixel cells nearest the image's aspect ratio, at most max_tokens cells. Ties go as
    transformers' own set of candidates iterates (the same expression, so the same order)."""
    ideal_h, ideal_w = height / step, width / step
    ratio = ideal_w / ideal_h if ideal_h > 0 else 1.0
    if ideal_h * ideal_w > max_tokens:
        ideal_h = (max_tokens / ratio) ** 0.5
        ideal_w = ideal_h * ratio
    candidates = list(
        set(
            itertools.product(
                [math.floor(ideal_h), math.ceil(ideal_h)], [math.floor(ideal_w), math.ceil(ideal_w)]
            )
        )
    )
    candidates = [(a, b) for a, b in candidates if a >= 1 and b >= 1 and a * b <= max_tokens]
    if not candidates:
        candidates = [(max(1, round(ideal_h)), max(1, round(ideal_w)))]
    rows, cols = min(candidates, key=lambda g: abs(g[0] / g[1] - height / width))
    return rows * step, cols * step


@rule("muse_glimmer_resize")
def _muse_glimmer_resize(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Muse Glimmer / Muse Spark: at most max_image_tokens merged cells of patch · merge
    pixels, one token each (processing_muse_glimmer.py replace_image_token)."""
    p, merge = s["patch_size"], s["merge_size"]
    h, w = muse_glimmer_resize(height, width, p * merge, s["max_image_tokens"])
    patches = (h // p) * (w // p)
    return dict(tokens=patches // (merge * merge), patches=patches, encoder_len=patches, resize=(w, h))


@rule("kimi_navit_resize")
def _kimi_navit_resize(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Kimi-K2.5's navit_resize (image_processing_kimi_k25.py): scale down (never up) to at
    most max_patches patches and max_side patches a side, then pad each side to a multiple
    of merge · patch; one token per merge² patches (replace_image_token)."""
    p, merge, side = s["patch_size"], s["merge_size"], s["max_side_patches"]
    count = max(1.0, height // p) * max(1.0, width // p)
    scale = min(1.0, math.sqrt(s["max_patches"] / count), side * p / height, side * p / width)
    h = min(max(1, int(height * scale)), side * p)
    w = min(max(1, int(width * scale)), side * p)
    step = merge * p
    h, w = h + (step - h % step) % step, w + (step - w % step) % step
    patches = (h // p) * (w // p)
    return dict(tokens=patches // (merge * merge), patches=patches, encoder_len=patches, resize=(w, h))


@rule("inkling2_cells")
def _inkling2_cells(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Inkling2ImageProcessor: no resize; the image padded to whole cells of the processor's
    size, one token per cell (replace_image_token: image_grid_thw.prod()); the tower cuts
    each cell into merge² patches and adds its class tokens per image."""
    cell, p = s["cell_size"], s["patch_size"]
    rows, cols = math.ceil(height / cell), math.ceil(width / cell)
    patches = rows * cols * (cell // p) ** 2
    return dict(
        tokens=rows * cols,
        patches=patches,
        encoder_len=patches + s["class_tokens"],
        resize=(cols * cell, rows * cell),
    )


@rule("inkling_patches")
def _inkling_patches(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """InklingImageProcessor (rescale_image_frac None by default: no resize): divide_to_patches
    takes ceil(h / size) rows and w // size + 1 columns (one more column even when the width
    divides), each cell padded; one soft token a cell (replace_image_token: num_patches)."""
    cell = s["cell_size"]
    rows, cols = math.ceil(height / cell), width // cell + 1
    return dict(
        tokens=rows * cols, patches=rows * cols, encoder_len=rows * cols, resize=(cols * cell, rows * cell)
    )


@rule("pix2struct_patches")
def _pix2struct_patches(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Kosmos-2.5 (extract_flattened_patches, Pix2Struct's): rescale so that the rows ×
    columns of patches fill max_patches, padded to max_patches flattened patches (the
    encoder's sequence); the resampler's latent queries are the image's tokens."""
    p, most = s["patch_size"], s["max_patches"]
    scale = math.sqrt(most * (p / height) * (p / width))
    rows = max(min(math.floor(scale * height / p), most), 1)
    cols = max(min(math.floor(scale * width / p), most), 1)
    return dict(
        tokens=s["tokens_per_image"],
        patches=rows * cols,
        encoder_len=most,
        resize=(cols * p, rows * p),
    )
