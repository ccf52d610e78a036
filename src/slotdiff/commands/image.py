"""What one image costs a multimodal MODEL (seed 09): decoder tokens, encoder FLOPs, the
encoder's output bytes, how the image enters the decoder and what it costs there (prefill
FLOPs, KV).

The image goes through the model's own processor rules (resize, tiles, patch merge or
pixel shuffle, as transformers' image processor does it), then the vision tower and
connector; its tokens then hold KV in the decoder like text tokens (or in the
cross-attention layers for Llama-3.2-Vision-style models). Processor settings that
config.json does not hold (min/max pixels) take the processor's defaults and say so.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from ..analysis.analyze import load
from ..core.errors import SlotdiffError
from ..cost.images import injection, injection_unit, vision_flops
from ..cost.inventory.tensor import Unsupported
from ..cost.kv import kv_cost
from ..cost.params import count
from ..deploy.serving import deployment
from ..render.listings import image_page
from .argtypes import COUNT
from .options import (
    add_layout_arguments,
    add_style_arguments,
    add_workload_arguments,
    workload_from,
    write_json,
)

EPILOG = """\
examples:
  slotdiff image Qwen/Qwen3-VL-30B-A3B-Instruct --image 1024x1024
  slotdiff image llava-hf/llava-1.5-7b-hf --image 336x336 --image 1920x1080 --json
  slotdiff image config.json --image 1024x1024 --max-pixels 1003520
"""

_SIZE = re.compile(r"([0-9]{1,6})[x×]([0-9]{1,6})\Z")


def parse_size(text: str) -> tuple[int, int]:
    """``1024x768`` → (1024, 768)."""
    m = _SIZE.fullmatch(text.strip().lower())
    if not m or not int(m.group(1)) or not int(m.group(2)):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 1024x1024, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument(
        "--image",
        dest="images",
        type=parse_size,
        action="append",
        help="image size WIDTHxHEIGHT (repeatable; default 1024x1024)",
    )
    parser.add_argument("--min-pixels", type=COUNT, help="processor setting (Qwen-VL families)")
    parser.add_argument("--max-pixels", type=COUNT, help="processor setting (Qwen-VL families)")
    add_style_arguments(parser, "image.schema.json")
    add_workload_arguments(parser)
    add_layout_arguments(parser)


def _encoder_ms(dep: Any, flops: float) -> float:
    """One image through the tower and connector on the layout's TP group, at --mbu/--mfu:
    the slower of its FLOPs over the peak and the tower's weights read once over bandwidth."""
    by = dict(dep.weights.by_part)
    tower = by.get("vision", 0) + by.get("connector", 0)
    tp = dep.layout.tp
    return max(flops / tp / dep.peak, tower / tp / dep.bandwidth) * 1e3


def _figures(
    arch: Any,
    width: int,
    height: int,
    kv_per_token: int,
    overrides: dict[str, Any],
    dep: Any,
    params: Any,
    unit: Any,
) -> dict[str, Any]:
    cost = vision_flops(arch, width, height, kv_bytes_per_token=kv_per_token, **overrides)
    img = cost.image
    inj = injection(arch, cost, unit, params)
    return {
        "encoder_ms": _encoder_ms(dep, cost.flops),
        "image": f"{width}x{height}",
        "resized_to": f"{img.resize[0]}x{img.resize[1]}",
        "tiles": img.tiles,
        "patches": img.patches,
        "encoder_sequences": img.encoder_seqs,
        "encoder_positions_per_sequence": img.encoder_len,
        "decoder_tokens": img.tokens,
        "marker_tokens": img.special,
        "decoder_positions": img.total,
        "cross_attention_states": img.cross_tokens,
        "encoder_flops": cost.flops,
        "encoder_matmul_flops": cost.tower_matmul_flops,
        "connector_flops": cost.connector_flops,
        "encoder_attention_flops": cost.attention_flops,
        "kv_bytes": cost.kv_bytes,
        "cross_kv_bytes": cost.cross_kv_bytes,
        "injection": inj.method,
        "injection_text": inj.text,
        "encoder_output_bytes": inj.tower_output_bytes,
        "decoder_input_bytes": inj.decoder_input_bytes,
        "decoder_prefill_flops": inj.prefill_flops,
        "decoder_flops_per_text_token": inj.per_token_flops,
        "activation_bytes": inj.act_bytes,
        "rule": img.rule,
        "source": img.source,
        "settings": [{"name": n, "value": v, "from": w} for n, v, w in img.settings],
        "notes": list(img.notes) + list(cost.notes),
    }


def run(args: argparse.Namespace) -> int:
    model = load(args.model)
    arch = model.arch
    if arch.vision is None:
        raise SlotdiffError(model.raw.name, "has no vision encoder (no vision_config): text only")
    kind = model.fills["modality.input"].kind
    if not kind.startswith("vision"):  # a tower for another input (Evolla: protein sequences)
        raise SlotdiffError(model.raw.name, f"reads {kind.split('-')[0]} input through its tower, not images")
    wl = workload_from(args)
    kv_dtype = wl.kv_dtype
    dep = deployment(arch, wl)
    overrides = {k: v for k, v in (("min_pixels", args.min_pixels), ("max_pixels", args.max_pixels)) if v}
    kv_per_token = kv_cost(arch, 1, kv_dtype).bytes_per_token
    params = count(arch)
    unit = injection_unit(arch, params, kv_per_token)
    try:
        rows = [
            _figures(arch, w, h, kv_per_token, overrides, dep, params, unit)
            for w, h in (args.images or [(1024, 1024)])
        ]
        unsupported = None
    except Unsupported as err:
        if overrides:  # a processor setting given to a model whose processor is not described
            raise
        # the injection path and its per-state costs still hold; the states per image do not
        rows, unsupported = [], err.reason
    out = {
        "model": model.raw.name,
        "vision_params": params.part("vision"),
        "connector_params": params.part("connector"),
        "kv_dtype": kv_dtype,
        "kv_bytes_per_token": kv_per_token,
        "layout": dep.layout.to_dict(),
        "gpu": dep.device.id,
        "efficiency": wl.efficiency_note,
        "injection": unit.to_dict(),
        "images": rows,
        "images_unsupported": unsupported,
    }
    if args.style == "json":
        write_json(out)
    else:
        sys.stdout.write(image_page(out, args.style, args.width))
    return 0
