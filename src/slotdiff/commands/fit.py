"""Does MODEL fit on N GPUs at a context? The verdict, the most concurrent sequences at that
context, the longest context for one sequence, and the decode bound in tokens/s.

Weights split evenly over the GPUs (tensor parallel, one replica); KV per sequence follows
the heads (MLA's latent cache is whole on every GPU); a runtime reserve is kept on each GPU.
Exit status 1 when it does not fit.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..analysis.analyze import load
from ..deploy.fit import fit
from ..deploy.serving import RESERVE_FRACTION
from ..render.deploy import render_fit
from .options import add_workload_arguments, workload_from

EPILOG = """\
examples:
  slotdiff fit meta-llama/Llama-3.1-70B --gpu h100-sxm --gpus 8 --context 131072
  slotdiff fit deepseek-ai/DeepSeek-V3 --gpu h200 --gpus 8 --context 32768 --kv-dtype fp8
  slotdiff fit Qwen/Qwen3-8B --gpu rtx-4090 --dtype int4 --json
exit codes: 0 fits, 1 does not fit, 2 bad input or usage
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs of the --gpu kind (default 1)")
    parser.add_argument(
        "--reserve",
        type=float,
        default=RESERVE_FRACTION,
        help=f"share of each GPU kept for the runtime (default {RESERVE_FRACTION:g})",
    )
    parser.add_argument("--mtp", action="store_true", help="load the MTP modules beside the weights")
    parser.add_argument("--json", action="store_true", help="the answer as JSON")
    add_workload_arguments(parser)


def run(args: argparse.Namespace) -> int:
    result = fit(load(args.model).arch, workload_from(args), args.gpus, args.reserve, args.mtp)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(render_fit(result))
    return 0 if result.fits else 1
