"""Flags shared by the commands: the workload every pricing command takes, and the report formats."""

from __future__ import annotations

import argparse

from ..cost.workload import Workload
from ..render import REPORTER_BY_NAME


def add_workload_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags that define the Workload (shared by every command that prices a model)."""
    g = parser.add_argument_group("workload")
    g.add_argument("--gpu", default="h100-sxm", help="GPU preset (slotdiff gpus lists them)")
    g.add_argument("--batch", type=int, default=1, help="concurrent sequences (default 1)")
    g.add_argument("--context", type=int, default=8192, help="tokens per sequence (default 8192)")
    g.add_argument("--kv-dtype", default="bf16", help="KV cache element type (default bf16)")
    g.add_argument(
        "--dtype",
        default=None,
        help="re-price weights in this format (bf16, fp8, int4, mxfp4, ...); default: the checkpoint's own",
    )


def workload_from(args: argparse.Namespace) -> Workload:
    return Workload(
        gpu=args.gpu,
        batch=args.batch,
        context=args.context,
        kv_dtype=args.kv_dtype,
        weight_dtype=args.dtype,
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
