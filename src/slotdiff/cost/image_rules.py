"""The image processors' resize rules, transcribed from transformers 5.24: each maps (settings,
width, height) to the resized canvas, tiles and token counts of one image."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

Rule = Callable[[Mapping[str, Any], int, int], dict[str, Any]]


def registrar(table: dict[str, Rule]) -> Callable[[str], Callable[[Rule], Rule]]:
    """A decorator factory that files a rule function in ``table`` under its name."""

    def rule(name: str) -> Callable[[Rule], Rule]:
        def register(fn: Rule) -> Rule:
            table[name] = fn
            return fn

        return register

    return rule


RULES: dict[str, Rule] = {}
rule = registrar(RULES)


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's smart_resize (image_processing_qwen2_vl.py), returning (height, width)."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def _merged_grid(s: Mapping[str, Any], h: int, w: int) -> dict[str, Any]:
    """Tokens of a resized h × w image cut into patches merged merge × merge; with
    ``row_newline`` one more token ends every merged row (HunYuan-VL, HY-V4-VL)."""
    p, merge = s["patch_size"], s["merge_size"]
    patches = (h // p) * (w // p)
    tokens = patches // (merge * merge)
    if s.get("row_newline"):
        tokens += h // p // merge
    return dict(tokens=tokens, patches=patches, encoder_len=patches, resize=(w, h))


@rule("smart_resize")
def _smart_resize(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    h, w = smart_resize(height, width, s["patch_size"] * s["merge_size"], s["min_pixels"], s["max_pixels"])
    return _merged_grid(s, h, w)


def glm4v_smart_resize(
    frames: int, height: int, width: int, temporal: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """GLM-4V's smart_resize (image_processing_glm4v.py), returning (height, width): a side
    under ``factor`` is first scaled up, and the pixel budget counts ``frames`` frames."""
    if frames < temporal:
        raise ValueError(f"{frames} frames are fewer than the temporal patch {temporal}")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    if max(height, width) / min(height, width) > 200:
        raise ValueError("absolute aspect ratio must be smaller than 200")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    t_bar = round(frames / temporal) * temporal
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@rule("glm4v_smart_resize")
def _glm4v_smart_resize(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """A still image is temporal_patch_size copies of itself: the budget counts them all."""
    t = s["temporal_patch_size"]
    h, w = glm4v_smart_resize(
        t, height, width, t, s["patch_size"] * s["merge_size"], s["min_pixels"], s["max_pixels"]
    )
    return _merged_grid(s, h, w)


@rule("fixed_square")
def _fixed_square(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    size, p = s["image_size"], s["patch_size"]
    patches = (size // p) ** 2
    cls = s["class_tokens"]
    tokens = patches + cls - (cls if s["drop_class_token"] else 0)
    return dict(tokens=tokens, patches=patches, encoder_len=patches + cls, resize=(size, size))


@rule("fixed_queries")
def _fixed_queries(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    """BLIP-2 / InstructBLIP: resize to the tower's square input; a Q-Former's learned queries
    (``tokens_per_image``) read every patch state and become the image's decoder tokens."""
    size, p, tokens = s["image_size"], s["patch_size"], s["tokens_per_image"]
    patches = (size // p) ** 2
    return dict(tokens=tokens, patches=patches, encoder_len=patches + s["class_tokens"], resize=(size, size))


@rule("fixed_pool")
def _fixed_pool(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    size, p, tokens = s["image_size"], s["patch_size"], s["tokens_per_image"]
    side = size // p
    per_side = math.isqrt(tokens)
    if per_side * per_side != tokens or per_side == 0 or side % per_side:
        raise ValueError(
            f"{side}×{side} patches cannot be average-pooled to {tokens} tokens "
            f"(the projector's kernel is {side} // {per_side})"
        )
    return dict(tokens=tokens, patches=side * side, encoder_len=side * side, resize=(size, size))


def gemma4_resize(
    height: int, width: int, patch_size: int, max_patches: int, pooling: int
) -> tuple[int, int]:
    """get_aspect_ratio_preserving_size (image_processing_gemma4.py), returning (height, width)."""
    target_px = max_patches * patch_size**2
    factor = math.sqrt(target_px / (height * width))
    side = pooling * patch_size
    th = math.floor(factor * height / side) * side
    tw = math.floor(factor * width / side) * side
    if th == 0 and tw == 0:
        raise ValueError("the image resizes to 0 × 0")
    longest = (max_patches // pooling**2) * side
    if th == 0:
        th, tw = side, min(math.floor(width / height) * side, longest)
    elif tw == 0:
        tw, th = side, min(math.floor(height / width) * side, longest)
    return th, tw


@rule("soft_token_budget")
def _soft_token_budget(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    p, k = s["patch_size"], s["pooling_kernel_size"]
    max_patches = s["max_soft_tokens"] * k * k
    h, w = gemma4_resize(height, width, p, max_patches, k)
    patches = (h // p) * (w // p)
    return dict(tokens=patches // (k * k), patches=patches, encoder_len=max_patches, resize=(w, h))


def _fit_to_canvas(height: int, width: int, canvas_h: int, canvas_w: int) -> tuple[int, int]:
    """Largest aspect-preserving size inside the canvas (mllama / llama4 processors)."""
    scale_w, scale_h = canvas_w / width, canvas_h / height
    if scale_w < scale_h:
        return min(math.floor(height * scale_w) or 1, canvas_h), canvas_w
    return canvas_h, min(math.floor(width * scale_h) or 1, canvas_w)


def _best_scale(height: int, width: int, canvases: list[tuple[int, int]]) -> tuple[int, int]:
    """Smallest upscale, else least downscale; ties → smallest area (get_best_fit)."""
    scales = [min(ch / height, cw / width) for ch, cw in canvases]
    up = [x for x in scales if x >= 1]
    chosen = min(up) if up else max(scales)
    fits = [c for c, x in zip(canvases, scales, strict=True) if x == chosen]
    return min(fits, key=lambda c: c[0] * c[1])


@rule("tiled_canvas")
def _tiled_canvas(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    tile, n, p = s["image_size"], s["max_num_tiles"], s["patch_size"]
    arrangements = [(a, b) for a in range(1, n + 1) for b in range(1, n + 1) if a * b <= n]
    canvas_h, canvas_w = _best_scale(height, width, [(a * tile, b * tile) for a, b in arrangements])
    th = min(max(height, tile), canvas_h)
    tw = min(max(width, tile), canvas_w)
    new_h, new_w = _fit_to_canvas(height, width, th, tw)
    tiles = (canvas_h // tile) * (canvas_w // tile)
    per_tile = (tile // p) ** 2 + s["class_tokens"]
    padded = per_tile + (8 - per_tile % 8) % 8  # MllamaVisionModel pads each tile to ×8
    return dict(
        tokens=s["placeholder_tokens"],
        patches=tiles * (tile // p) ** 2,
        encoder_len=n * padded,  # every image is padded to max_num_tiles tiles
        connector_tokens=n * per_tile,
        cross_tokens=n * per_tile,
        resize=(new_w, new_h),
        canvas=(canvas_w, canvas_h),
        tiles=tiles,
    )


def _llama4_resolutions(max_chunks: int, tile: int) -> list[tuple[int, int]]:
    """find_supported_resolutions (image_processing_llama4.py): every h×w ≤ max_chunks.

    Same order as transformers (grouped by aspect ratio in order of first appearance), so
    ties in get_best_fit resolve to the same canvas.
    """
    by_ratio: dict[float, list[tuple[int, int]]] = {}
    for chunks in range(max_chunks, 0, -1):
        for f in sorted(d for d in range(1, chunks + 1) if chunks % d == 0):
            by_ratio.setdefault(f / (chunks // f), []).append((f * tile, (chunks // f) * tile))
    return [res for group in by_ratio.values() for res in group]


@rule("tiled_best_fit")
def _tiled_best_fit(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    tile, p, ratio = s["image_size"], s["patch_size"], s["pixel_shuffle_ratio"]
    canvas_h, canvas_w = _best_scale(height, width, _llama4_resolutions(s["max_patches"], tile))
    if s["resize_to_max_canvas"]:
        raise ValueError("resize_to_max_canvas=True is not transcribed")
    th = min(max(height, tile), canvas_h)
    tw = min(max(width, tile), canvas_w)
    new_h, new_w = _fit_to_canvas(height, width, th, tw)
    rows, cols = canvas_h // tile, canvas_w // tile
    tiles = rows * cols + (1 if rows * cols > 1 else 0)  # a global tile when split
    per_tile = int((tile // p) ** 2 * ratio * ratio)
    separators = rows * (cols - 1) + rows if rows * cols > 1 else 0
    return dict(
        tokens=tiles * per_tile,
        special=s["marker_tokens"] + separators,
        patches=tiles * (tile // p) ** 2,
        encoder_seqs=tiles,
        encoder_len=(tile // p) ** 2 + s["class_tokens"],
        resize=(new_w, new_h),
        canvas=(canvas_w, canvas_h),
        tiles=tiles,
    )


def _internvl_grid(height: int, width: int, tile: int, min_tiles: int, max_tiles: int) -> tuple[int, int]:
    """get_optimal_tiled_canvas (image_processing_got_ocr2.py), returning (columns, rows)."""
    grids = sorted(
        (
            (c, r)
            for c in range(1, max_tiles + 1)
            for r in range(1, max_tiles + 1)
            if min_tiles <= c * r <= max_tiles
        ),
        key=lambda g: g[0] * g[1],
    )
    aspect, area = width / height, width * height
    best, best_diff = (1, 1), float("inf")
    for grid in grids:
        diff = abs(aspect - grid[0] / grid[1])
        if diff < best_diff:
            best, best_diff = grid, diff
        elif diff == best_diff and area > 0.5 * tile * tile * grid[0] * grid[1]:
            best = grid
    return best


@rule("tiled_aspect")
def _tiled_aspect(s: Mapping[str, Any], width: int, height: int) -> dict[str, Any]:
    tile, p = s["image_size"], s["patch_size"]
    cols, rows = 1, 1
    if s["crop_to_patches"] and s["max_patches"] > 1:
        cols, rows = _internvl_grid(height, width, tile, s["min_patches"], s["max_patches"])
    tiles = cols * rows + (1 if cols * rows > 1 else 0)  # a thumbnail when split
    return dict(
        tokens=tiles * s["tokens_per_tile"],
        patches=tiles * (tile // p) ** 2,
        encoder_seqs=tiles,
        encoder_len=(tile // p) ** 2 + s["class_tokens"],
        resize=(cols * tile, rows * tile),
        tiles=tiles,
    )
