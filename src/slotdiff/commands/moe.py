"""MoE traffic of MODEL at decode (seed 06): experts a batch touches per layer, the weights a
step actually reads (against total and activated parameters), and the expert-parallel
all-to-all bytes per layer (dispatch + combine) for an EP degree.
"""

from __future__ import annotations

import argparse
import sys

from ..analysis.analyze import load
from ..core.errors import UsageError
from ..cost.layout import Layout
from ..deploy.moe import moe_traffic
from ..deploy.serving import deployment
from ..render.deploy import render_moe
from ..schema.precision import canonical_dtype
from .argtypes import WHOLE
from .options import (
    add_layout_arguments,
    add_style_arguments,
    add_workload_arguments,
    layout_from,
    layout_given,
    workload_from,
    write_json,
)

EPILOG = """\
examples:
  slotdiff moe deepseek-ai/DeepSeek-V3 --batch 32 --ep 8
  slotdiff moe mistralai/Mixtral-8x7B-v0.1 --batch 128 --ep 8 --dispatch-dtype fp8 --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument("--ep", type=WHOLE, default=8, help="expert-parallel degree (default 8)")
    parser.add_argument(
        "--dispatch-dtype", default="bf16", help="dtype tokens are dispatched in (default bf16)"
    )
    parser.add_argument("--combine-dtype", default="bf16", help="dtype results come back in (default bf16)")
    add_style_arguments(parser, "moe.schema.json")
    add_workload_arguments(parser)
    add_layout_arguments(parser)


def _dtype(name: str, flag: str) -> str:
    value = canonical_dtype(name)
    if value is None:
        raise UsageError(f"unknown dtype {name!r} for {flag}")
    return value


def run(args: argparse.Namespace) -> int:
    arch = load(args.model).arch
    e = arch.get("n_experts") or 0
    if args.ep < 1:
        raise UsageError(f"--ep must be at least 1, got {args.ep}")
    # The EP group: attention data-parallel over the EP GPUs, experts spread over them, unless
    # the layout flags name another layout (then its EP group, or --ep for the table).
    if layout_given(args):
        layout = layout_from(args)
    else:
        layout = Layout(tp=1, pp=1, dp=args.ep, ep=args.ep > 1) if e and e % args.ep == 0 else Layout(tp=1)
    wl = workload_from(args, layout=layout)
    dep = deployment(arch, wl, layout=layout)
    result = moe_traffic(
        dep,
        wl.batch,
        layout.ep_size if layout.ep else args.ep,
        _dtype(args.dispatch_dtype, "--dispatch-dtype"),
        _dtype(args.combine_dtype, "--combine-dtype"),
    )
    if args.style == "json":
        write_json(result.to_dict())
    else:
        sys.stdout.write(render_moe(result, args.style, args.width))
    return 0
