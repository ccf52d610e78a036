"""Image processors that cut or pad an image into tiles or a grid of their own (Pixtral's row
breaks, LLaVA-NeXT's any-resolution crops, Idefics3's tiles), transcribed from transformers
5.24 like ``image_rules``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .image_budgets import closest_ratio, least_scaling
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
    return least_scaling(grids, [min(w * tile / width, h * tile / height) for w, h in grids])


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


@rule("granite_docling_tiles")
def _granite_docling_tiles(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Granite-Docling (get_page_tile_grid with the dense budget off): InternVL's closest
    aspect-ratio grid within [min_patches, max_patches] tiles, at most 16 a side, and a global
    tile when split; the coarse path's image_seq_len tokens a tile (fine_route off by
    default). Markers (replace_image_token): <fake_token_around_image><row_r_col_c> before
    each tile, a newline after each row, <fake_token_around_image><global-img> ...
    <fake_token_around_image> around the global tile."""
    tile, p, scale, most = s["image_size"], s["patch_size"], s["scale_factor"], s["max_patches"]
    side = tile // p
    if side % scale:
        raise ValueError(f"{side}×{side} patches cannot be pixel-shuffled by {scale}")
    seq = side * side // (scale * scale)
    ratios = sorted(
        (
            (c, r)
            for c in range(1, min(most, 16) + 1)
            for r in range(1, min(most, 16) + 1)
            if s["min_patches"] <= c * r <= most
        ),
        key=lambda g: g[0] * g[1],
    )
    cols, rows = closest_ratio(width / height, ratios, width, height, tile) if most > 1 else (1, 1)
    split = rows * cols > 1
    tiles = rows * cols + (1 if split else 0)
    return dict(
        tokens=tiles * seq,
        special=2 * rows * cols + rows + (3 if split else 0),
        patches=tiles * side * side,
        encoder_seqs=tiles,
        encoder_len=side * side,
        resize=(cols * tile, rows * tile),
        tiles=tiles,
    )


@rule("aria_crop")
def _aria_crop(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """AriaImageProcessor (split_image off by default): the longer side to max_image_size, the
    shorter at least min_image_size, padded to a max_image_size square; the projector's
    learned queries for that many patches (projector_patch_to_query_dict) are the tokens."""
    side, low, p = s["max_image_size"], s["min_image_size"], s["patch_size"]
    scale = side / max(height, width)
    if width >= height:
        h, w = max(int(height * scale), low), side
    else:
        h, w = side, max(int(width * scale), low)
    patches = (side // p) ** 2
    table = {int(k): v for k, v in dict(s["patch_to_query"]).items()}
    if patches not in table:
        raise ValueError(f"{patches} patches are not a key of projector_patch_to_query_dict {sorted(table)}")
    return dict(tokens=int(table[patches]), patches=patches, encoder_len=patches, resize=(w, h))


def step3p7_plan(width: int, height: int, image_size: int, crop: int, max_size: int) -> tuple[int, int, int]:
    """Step3p7ImageProcessor._plan_patches: the window side and the (columns, rows) of local
    crops (0 when the global view alone suffices)."""
    if min(width, height) < 32 and max(width / height, height / width) > 4:
        width = height = max(width, height)  # square-padded first
    if max(height, width) > max_size:
        scale = max_size / max(height, width)
        width, height = int(width * scale), int(height * scale)
    short, long = min(height, width), max(height, width)
    if long <= image_size:
        window = short if long / short > 1.5 else 0
    elif long / short > 4:
        window = min(short, crop)
    else:
        window = crop
    if window == 0:
        return 0, 0, 0
    snapped = [
        window * (d // window + (d % window > 0.2 * window)) if d >= window else d for d in (width, height)
    ]
    return window, max(1, snapped[0] // window), max(1, snapped[1] // window)


@rule("step3p7_crops")
def _step3p7_crops(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Step-3.7: a global view resized to image_size and sliding-window local crops resized to
    the processor's patch_size; each view's features after the tower's stride-4 downsampling.
    Tokens (Step3p7Processor.replace_image_token): per crop <patch_start> features
    <patch_end>, <patch_newline> after each row but the last, then <im_start> the global
    view's features <im_end>."""
    size, crop, p, stride = s["image_size"], s["crop_size"], s["patch_size"], s["downsample"]
    _, cols, rows = step3p7_plan(width, height, size, crop, s["max_image_size"])
    crops = cols * rows
    per_global, per_crop = (size // (p * stride)) ** 2, (crop // (p * stride)) ** 2
    return dict(
        tokens=per_global + crops * per_crop,
        special=2 + 2 * crops + max(rows - 1, 0),
        patches=(size // p) ** 2 + crops * (crop // p) ** 2,
        encoder_seqs=1 + crops,
        encoder_len=(size // p) ** 2,
        sequences=((1, (size // p) ** 2), (crops, (crop // p) ** 2)),
        resize=(size, size),
        tiles=1 + crops,
    )


def _minicpm_best_resize(height: float, width: float, res: int, step: int, upscale: bool) -> tuple[int, int]:
    """find_best_resize (image_processing_minicpmv4_6.py): area scale_resolution² at the same
    aspect ratio when larger (or when upscaling is allowed), sides rounded to ``step``."""
    if height * width > res * res or upscale:
        aspect = width / height
        height = int(res / math.sqrt(aspect))
        width = int(height * aspect)
    return max(round(height / step) * step, step), max(round(width / step) * step, step)


def minicpm_grid(height: int, width: int, most: int, res: int) -> tuple[int, int] | None:
    """get_sliced_grid: (rows, columns) of slices nearest the image's log aspect ratio."""
    log_ratio = math.log(width / height)
    multiple = min(math.ceil(width * height / (res * res)), most)
    if multiple <= 1:
        return None
    best, least = (1, 1), math.inf
    for n in (multiple - 1, multiple, multiple + 1):
        if n == 1 or n > most:
            continue
        for rows in range(1, n + 1):
            if n % rows == 0:
                error = abs(log_ratio - math.log((n // rows) / rows))
                if error < least or (error == least and rows > best[0]):
                    best, least = (rows, n // rows), error
    return best


@rule("minicpmv_slices")
def _minicpmv_slices(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """MiniCPM-V 4.6 / 4.7 / MiniCPM-OCR: an overview resized to about scale_resolution² and,
    for a larger image, a grid of slices (get_sliced_grid, get_refine_size); each view's
    patches // (4 or 16, downsample_mode) tokens between <image>/</image> or <slice>/</slice>,
    a newline between rows of slices (replace_image_token)."""
    p, res = s["patch_size"], s["scale_resolution"]
    div = 4 if s["downsample_mode"] == "4x" else 16
    step = p * (2 if s["downsample_mode"] == "4x" else 4)
    grid = minicpm_grid(height, width, s["max_slice_nums"], res) if s["slice_mode"] else None
    sh, sw = _minicpm_best_resize(height, width, res, step, grid is None)
    views = [(sh // p) * (sw // p)]
    rows = cols = 0
    if grid is not None:
        rows, cols = grid
        rw, rh = max(round(width / cols) * cols, cols), max(round(height / rows) * rows, rows)
        bh, bw = _minicpm_best_resize(rh / rows, rw / cols, res, step, True)
        views += [bh // p * (bw // p)] * (rows * cols)
    return dict(
        tokens=sum(v // div for v in views),
        special=2 + 2 * rows * cols + max(rows - 1, 0),
        patches=sum(views),
        encoder_seqs=len(views),
        encoder_len=views[0],
        sequences=((1, views[0]), (rows * cols, views[-1] if rows else 0)),
        resize=(sw, sh),
        tiles=len(views),
    )
