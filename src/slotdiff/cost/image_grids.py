"""Image processors that cut or pad an image into a grid of their own (Pixtral's row breaks,
LLaVA-NeXT's any-resolution crops), transcribed from transformers 5.24 like ``image_rules``."""

from __future__ import annotations

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
