"""Read a model's config.json and say, slot by slot, what it changed relative to GPT-2 and
Llama-3-8B, what class of architecture it is, and what each change costs."""

from __future__ import annotations

import argparse
import sys

from ..analysis.analyze import analyze
from ..core.version import __version__
from ..render import REPORTER_BY_NAME
from .options import add_layout_arguments, add_output_arguments, add_workload_arguments, workload_from

EPILOG = """\
examples:
  slotdiff Qwen/Qwen3-30B-A3B                  slots, class and cost of a Hub model
  slotdiff ./config.json --against meta-llama/Llama-3.1-8B
  slotdiff deepseek-ai/DeepSeek-V3 --json      machine-readable (schemas/report.schema.json)
  slotdiff ./my-model/                         config + its safetensors headers, reconciled
  slotdiff meta-llama/Llama-3.1-70B --gpu h200 --batch 32 --context 32768
  slotdiff meta-llama/Llama-3.1-70B -tp 8 --efficiency vllm-h100   the bound and a measured engine's pace
  HF_HUB_OFFLINE=1 slotdiff openai/gpt-oss-20b  served from the bundled catalog offline

other commands: {commands}  (slotdiff COMMAND --help)
"""
EXIT_1 = (
    "the analysis never returns it; other commands do for a finding (lint errors, "
    "scan --fail-on-new found something new, fit or train does not fit)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument("--revision", help="Hub branch, tag or commit")
    parser.add_argument("--against", metavar="MODEL", help="also compare with this model")
    parser.add_argument("--no-cost", action="store_true", help="skip the cost pass")
    parser.add_argument(
        "--no-weights",
        action="store_true",
        help="do not read the checkpoint's tensor index (safetensors headers) to check the count",
    )
    parser.add_argument("--version", action="version", version=f"slotdiff {__version__}")
    add_output_arguments(parser)
    add_workload_arguments(parser)
    add_layout_arguments(parser)


def run(args: argparse.Namespace) -> int:
    report = analyze(
        args.model,
        revision=args.revision,
        against=args.against,
        workload=workload_from(args),
        cost=not args.no_cost,
        weights=not args.no_weights,
    )
    layout = {"width": args.width} if args.format == "table" else {}
    sys.stdout.write(REPORTER_BY_NAME[args.format](report, **layout))
    return 0
