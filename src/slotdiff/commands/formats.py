"""Number formats for MODEL (seed 10): bytes per parameter with block-scale overhead, and what
changes for fp32 / bf16 / fp16 / fp8 (E4M3, E5M2) / int8 / int4 / MXFP4 / NVFP4 when this
model's weights (--dtype) or KV cache (--kv-dtype) are stored in them; each format's facts
(exponent/mantissa bits, max, smallest normal, epsilon) come from schemas/formats.json.
"""

from __future__ import annotations

import argparse
import sys

from ..analysis.analyze import load
from ..deploy.formats import formats_report
from ..render.deploy import render_formats
from .options import (
    add_layout_arguments,
    add_style_arguments,
    add_workload_arguments,
    workload_from,
    write_json,
)

EPILOG = """\
examples:
  slotdiff formats meta-llama/Meta-Llama-3-8B
  slotdiff formats deepseek-ai/DeepSeek-V3 --dtype mxfp4 --kv-dtype fp8 --context 131072
  slotdiff formats openai/gpt-oss-20b --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    add_style_arguments(parser, "formats-report.schema.json")
    add_workload_arguments(parser)
    add_layout_arguments(parser)


def run(args: argparse.Namespace) -> int:
    result = formats_report(load(args.model).arch, workload_from(args))
    if args.style == "json":
        write_json(result.to_dict())
    else:
        sys.stdout.write(render_formats(result, args.style, args.width))
    return 0
