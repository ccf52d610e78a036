"""Flags shared by the commands: the workload every pricing command takes, and the report formats."""

from __future__ import annotations

import argparse

from ..cost.gpus import resolve_gpu
from ..cost.workload import Workload
from ..render import REPORTER_BY_NAME


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags that define the Workload (shared by every command that prices a model)."""
    g = parser.add_argument_group("workload")
    g.add_argument(
        "--gpu", default="h100-sxm", help="GPU preset or alias, e.g. h100 (slotdiff gpus lists them)"
    )
    g.add_argument(
        "--gpu-file", metavar="FILE", help="your own GPUs in gpus.json's format (gpus.schema.json)"
    )
    g.add_argument(
        "--gpu-mem", type=float, metavar="GIB", help="memory per GPU in GiB (overrides the preset)"
    )
    g.add_argument(
        "--bandwidth", type=float, metavar="TB/S", help="memory bandwidth in TB/s (overrides the preset)"
    )
    g.add_argument(
        "--tflops", type=float, metavar="TFLOP/S", help="dense bf16 peak in TFLOP/s (overrides the preset)"
    )
    g.add_argument("--batch", type=int, default=1, help="concurrent sequences (default 1)")
    g.add_argument("--context", type=int, default=8192, help="tokens per sequence (default 8192)")
    g.add_argument("--kv-dtype", default="bf16", help="KV cache element type (default bf16)")
    g.add_argument(
        "--dtype",
        default=None,
        help="re-price weights in this format (bf16, fp8, int4, mxfp4, ...); default: the checkpoint's own",
    )
    g.add_argument(
        "--mfu",
        type=float,
        default=1.0,
        help="share of the dense peak reached (default 1.0: a lower bound on time)",
    )
    g.add_argument(
        "--mbu",
        type=float,
        default=1.0,
        help="share of peak bandwidth reached (default 1.0: a lower bound on time)",
    )


def workload_from(args: argparse.Namespace, gpus: int = 1) -> Workload:
    custom = None
    if args.gpu_file or args.gpu_mem is not None or args.bandwidth is not None or args.tflops is not None:
        custom = resolve_gpu(args.gpu, args.gpu_file, args.gpu_mem, args.bandwidth, args.tflops)
    return Workload(
        gpu=custom.id if custom else args.gpu,
        batch=args.batch,
        context=args.context,
        kv_dtype=args.kv_dtype,
        weight_dtype=args.dtype,
        mfu=args.mfu,
        mbu=args.mbu,
        gpus=gpus,
        custom_device=custom,
    )


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--format`` with the report renderers' names, and ``--json`` / ``--markdown`` for short."""
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--format", choices=sorted(REPORTER_BY_NAME), default="table")
    out.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="JSON validated by schemas/report.schema.json",
    )
    out.add_argument(
        "--markdown",
        dest="format",
        action="store_const",
        const="markdown",
        help="Markdown for a pull request or wiki",
    )
