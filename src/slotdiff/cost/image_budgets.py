"""Image processors that resize to a patch or token budget of their own (native-resolution
grids, fixed cells, Phi-4's HD crops), transcribed from transformers 5.24 like ``image_rules``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .image_rules import Rule, registrar

RULES: dict[str, Rule] = {}
rule = registrar(RULES)


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


def closest_ratio(
    aspect: float, ratios: Sequence[tuple[int, int]], width: int, height: int, tile: int
) -> tuple[int, int]:
    """find_closest_aspect_ratio (Phi-4-multimodal's, InternVL's): the (columns, rows) ratio
    nearest the image's; on a tie the later one when the image covers half its area."""
    best, best_diff = (1, 1), math.inf
    for cols, rows in ratios:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and width * height > 0.5 * tile * tile * cols * rows:
            best = (cols, rows)
    return best


@rule("phi4_dynamic_hd")
def _phi4_dynamic_hd(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Phi4MultimodalImageProcessor.dynamic_preprocess: crops of the tile side covering the
    image (or, over dynamic_hd crops, the closest aspect ratio), the image resized into them
    and padded; plus a global view. Tokens (num_img_tokens): the global view's 2 × 2-merged
    (tile / patch / 2)² states and a newline per row, a separator, then the crops' merged
    states that are not padding and a newline per row of them."""
    tile, p, most = s["image_size"], s["patch_size"], s["max_crops"]
    cols, rows = math.ceil(width / tile), math.ceil(height / tile)
    if cols * rows > most:
        ratios = sorted(
            {
                (i, j)
                for n in range(1, most + 1)
                for i in range(1, n + 1)
                for j in range(1, n + 1)
                if i * j <= most
            },
            key=lambda r: r[0] * r[1],
        )
        cols, rows = closest_ratio(width / height, ratios, width, height, tile)
    tw, th = tile * cols, tile * rows
    if tw / width < th / height:
        pad_w, pad_h = 0, th - int(height * tw / width)
    else:
        pad_w, pad_h = tw - int(width * th / height), 0
    if min(th - pad_h, tw - pad_w) < 10:
        raise ValueError("the aspect ratio is very extreme")
    side = tile // p
    valid_w = side * cols - (pad_w // p if pad_w >= p else 0)
    valid_h = side * rows - (pad_h // p if pad_h >= p else 0)
    merged_w, merged_h = (valid_w + 1) // 2, (valid_h + 1) // 2  # the mask's [0::2, 0::2]
    half = (side + 1) // 2
    crops = cols * rows + 1
    return dict(
        tokens=half * half + merged_h * merged_w,
        special=half + 1 + merged_h,
        patches=crops * side * side,
        encoder_seqs=crops,
        encoder_len=side * side,
        connector_tokens=half * half + merged_h * merged_w,
        resize=(tw, th),
        tiles=crops,
    )


@rule("lfm2_vl_tiles")
def _lfm2_vl_tiles(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Lfm2VlImageProcessor.resize_and_split: an image over max_image_tokens ·
    max_pixels_tolerance is cut into tile_size tiles (the closest aspect ratio of min_tiles to
    max_tiles) plus a thumbnail at its smart_resize size; a smaller one is smart-resized
    whole. Each view's patches are padded to max_num_patches for the encoder. Tokens
    (processing_lfm2_vl.py): ceil(patches a side / downsample)² a view; markers
    <|image_start|>, <|img_row_r_col_c|> before each tile, the thumbnail token,
    <|image_end|>."""
    p, ds, tile = s["patch_size"], s["downsample_factor"], s["tile_size"]
    low, high = s["min_image_tokens"], s["max_image_tokens"]
    step = p * ds
    h_bar, w_bar = max(p, round(height / step) * step), max(p, round(width / step) * step)
    large = h_bar * w_bar > high * step * step * s["max_pixels_tolerance"]
    h_bar, w_bar = max(step, round(height / step) * step), max(step, round(width / step) * step)
    if h_bar * w_bar > high * step * step:
        beta = math.sqrt(height * width / (high * step * step))
        h_bar = max(step, math.floor(height / beta / step) * step)
        w_bar = max(step, math.floor(width / beta / step) * step)
    elif h_bar * w_bar < low * step * step:
        beta = math.sqrt(low * step * step / (height * width))
        h_bar, w_bar = math.ceil(height * beta / step) * step, math.ceil(width * beta / step) * step
    whole = math.ceil((h_bar // p) / ds) * math.ceil((w_bar // p) / ds)
    cols = rows = 1
    if large and not s["min_tiles"] == s["max_tiles"] == 1:
        ratios = sorted(
            {
                (w, h)
                for n in range(s["min_tiles"], s["max_tiles"] + 1)
                for w in range(1, n + 1)
                for h in range(1, n + 1)
                if s["min_tiles"] <= w * h <= s["max_tiles"]
            },
            key=lambda r: r[0] * r[1],
        )
        cols, rows = closest_ratio(width / height, ratios, width, height, tile)
    per_tile = math.ceil((tile // p) / ds) ** 2
    if rows > 1 or cols > 1:
        tokens, special, views = rows * cols * per_tile + whole, 2 + rows * cols + 1, rows * cols + 1
        patches = rows * cols * (tile // p) ** 2 + (h_bar // p) * (w_bar // p)
    else:
        tokens, special, views = whole, 2, 1
        patches = (h_bar // p) * (w_bar // p)
    return dict(
        tokens=tokens,
        special=special,
        patches=patches,
        encoder_seqs=views,
        encoder_len=max(high * ds * ds, (tile // p) ** 2),
        resize=(cols * tile, rows * tile) if views > 1 else (w_bar, h_bar),
        tiles=views,
    )


def least_scaling(grids: Sequence[tuple[int, int]], scales: Sequence[float]) -> tuple[int, int]:
    """The grid the tiling processors (Molmo2, Cohere2-Vision) choose: the least upscaling, else,
    when every grid shrinks the image, the least downscaling; ties go to the earlier grid."""
    if all(x < 1 for x in scales):
        return grids[scales.index(max(scales))]
    ups = [x if x >= 1 else math.inf for x in scales]
    return grids[ups.index(min(ups))]


def molmo2_tiling(height: float, width: float, window: int, most: int) -> tuple[int, int]:
    """select_tiling (image_processing_molmo2.py), returning (rows, columns): the least
    upscaling, else the least downscaling, tilings ordered by area then rows."""
    tilings = sorted(
        ((h, w) for h, w in itertools.product(range(1, most + 1), repeat=2) if h * w <= most),
        key=lambda t: (t[0] * t[1], t[0]),
    )
    return least_scaling(tilings, [min(h * window / height, w * window / width) for h, w in tilings])


@rule("molmo2_crops")
def _molmo2_crops(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """Molmo2ImageProcessor: a low-resolution view at crop_size and overlapping crops whose
    windows tile a canvas (compute_crop_geometry); each view's patches pooled pool × pool
    (get_image_grid_and_crops). Tokens (processing_molmo2.py replace_image_token): the
    low-resolution grid then the high-resolution grid, each between a start and <im_end>,
    with an <im_col> after every row."""
    crop, p, pool, margin = s["crop_size"], s["patch_size"], s["pooling"], s["margin_patches"]
    window = (crop // p - margin) * p
    rows, cols = molmo2_tiling(height - margin * p, width - margin * p, window, s["max_crops"])
    canvas_h, canvas_w = rows * window + margin * p, cols * window + margin * p
    high_h, high_w = math.ceil((canvas_h // p) / pool), math.ceil((canvas_w // p) / pool)
    low = math.ceil((crop // p) / pool)
    crops = rows * cols + 1
    return dict(
        tokens=low * low + high_h * high_w,
        special=4 + low + high_h,
        patches=crops * (crop // p) ** 2,
        encoder_seqs=crops,
        encoder_len=(crop // p) ** 2,
        resize=(canvas_w, canvas_h),
        tiles=crops,
    )
