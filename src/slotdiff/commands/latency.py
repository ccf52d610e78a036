"""Time to first token and inter-token latency of MODEL under load: a closed loop of
--concurrency clients sending --prompt-token prompts for --output tokens each, scheduled as
vLLM's V1 scheduler does (decodes first, prompts chunked to --max-num-batched-tokens), every
step priced by the decode model on the layout; the TTFT, TPOT and tokens/s a benchmark run
(vllm bench serve) would print, per user and per GPU.
"""

from __future__ import annotations

import argparse
import sys

from ..analysis.analyze import load
from ..core.errors import UsageError
from ..cost.workload import MAX_CONTEXT
from ..deploy.engine_terms import DEFAULT_VLLM, parse_version, vllm_defaults
from ..deploy.load import simulate
from ..deploy.serving import deployment
from ..render.load import render_load
from .argtypes import COUNT, TOKENS
from .options import (
    add_layout_arguments,
    add_style_arguments,
    add_workload_arguments,
    workload_from,
    write_json,
)

EPILOG = """\
examples:
  slotdiff latency meta-llama/Llama-3.1-8B --concurrency 16 --prompt 1024 --output 128
  slotdiff latency meta-llama/Llama-3.1-70B -tp 4 --concurrency 64 --prompt 2K --efficiency vllm-h100
  slotdiff latency Qwen/Qwen3-30B-A3B --concurrency 32 --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument("--concurrency", type=COUNT, default=1, help="clients in the closed loop (default 1)")
    parser.add_argument(
        "--prompt", type=TOKENS, default=1024, help="prompt tokens per request (default 1024)"
    )
    parser.add_argument("--output", type=TOKENS, default=128, help="output tokens per request (default 128)")
    parser.add_argument(
        "--requests", type=COUNT, help="requests in all (default 10 × concurrency, at least 100)"
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=TOKENS,
        help="tokens a step (default: vLLM's for the GPU, 8192 or 2048)",
    )
    parser.add_argument("--max-num-seqs", type=COUNT, help="running sequences (default: vLLM's, 1024 or 256)")
    add_style_arguments(parser, "latency.schema.json")
    add_workload_arguments(parser)
    add_layout_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.prompt + args.output > MAX_CONTEXT:
        raise UsageError(f"--prompt + --output must be at most {MAX_CONTEXT:,} tokens")
    args.context = args.prompt + args.output
    args.batch = args.concurrency
    wl = workload_from(args)
    dep = deployment(load(args.model).arch, wl)
    tokens, seqs, _ = vllm_defaults(parse_version(DEFAULT_VLLM), dep.device, args.context, False)
    report = simulate(
        dep,
        args.concurrency,
        args.prompt,
        args.output,
        args.requests,
        args.max_num_batched_tokens or tokens,
        args.max_num_seqs or seqs,
    )
    if args.style == "json":
        write_json(report.to_dict())
    else:
        sys.stdout.write(render_load(report, args.style, args.width))
    return 0
