"""Speculative decoding for MODEL (seed 08): expected tokens per verification
(1 − α^(γ+1)) / (1 − α), the speedup given the draft's cost, and the batch above which
verification stops being nearly free, from the roofline. When the config has MTP modules
they are offered as the draft too.
"""

from __future__ import annotations

import argparse
import sys

from ..analysis.analyze import load
from ..deploy.serving import deployment
from ..deploy.specdec import DEFAULT_BATCHES, MTP_ACCEPTANCE, specdec_report
from ..render.deploy import render_specdec
from .argtypes import FRACTION, NONNEGATIVE, WHOLE
from .options import (
    add_layout_arguments,
    add_style_arguments,
    add_workload_arguments,
    workload_from,
    write_json,
)
from .sweep import parse_points

EPILOG = """\
examples:
  slotdiff specdec meta-llama/Meta-Llama-3-8B --alpha 0.8 --gamma 4 --draft-cost 0.1
  slotdiff specdec deepseek-ai/DeepSeek-V3 --gpu h200 --gpus 8 --draft mtp
  slotdiff specdec Qwen/Qwen3-8B --context 1024 --batches 1,16,64,256 --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument("--alpha", type=FRACTION, default=0.8, help="per-token acceptance rate (default 0.8)")
    parser.add_argument("--gamma", type=WHOLE, default=4, help="draft tokens per step (default 4)")
    parser.add_argument(
        "--draft-cost", type=NONNEGATIVE, default=0.1, help="one draft token ÷ one target step (default 0.1)"
    )
    parser.add_argument(
        "--draft",
        choices=("auto", "external", "mtp"),
        default="auto",
        help="auto: an external draft, plus the config's MTP modules when it has them",
    )
    parser.add_argument(
        "--mtp-alpha",
        type=FRACTION,
        default=MTP_ACCEPTANCE,
        help=f"acceptance of an MTP draft token (default {MTP_ACCEPTANCE:g}, DeepSeek-V3's reported low end)",
    )
    parser.add_argument("--batches", type=parse_points, help="batches to tabulate (default 1..1024)")
    add_style_arguments(parser, "specdec.schema.json")
    add_workload_arguments(parser)
    add_layout_arguments(parser)


def run(args: argparse.Namespace) -> int:
    dep = deployment(load(args.model).arch, workload_from(args))
    result = specdec_report(
        dep,
        alpha=args.alpha,
        gamma=args.gamma,
        draft_cost=args.draft_cost,
        draft=args.draft,
        mtp_alpha=args.mtp_alpha,
        batches=args.batches or DEFAULT_BATCHES,
    )
    if args.style == "json":
        write_json(result.to_dict())
    else:
        sys.stdout.write(render_specdec(result, args.style, args.width))
    return 0
