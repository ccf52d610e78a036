"""Sweep MODEL over batch or context: KV, FLOPs split weights vs attention, the decode bound
and which side binds; marks the batch where decode turns compute-bound and the context where
attention FLOPs overtake weight FLOPs. ``--plot`` draws it (needs matplotlib); ``--vs`` adds
models to the same table run and chart.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from ..analysis.analyze import load
from ..core.errors import UsageError
from ..core.quantity import parse_count
from ..deploy.serving import deployment
from ..deploy.sweep import sweep_batch, sweep_context
from ..render.deploy import render_sweeps
from ..render.plot import plot_sweeps, require_matplotlib
from ..render.progress import track
from .argtypes import COUNT_FORMS
from .options import (
    add_layout_arguments,
    add_style_arguments,
    add_workload_arguments,
    workload_from,
    write_json,
)

EPILOG = """\
examples:
  slotdiff sweep meta-llama/Meta-Llama-3-8B --over batch --context 8192
  slotdiff sweep meta-llama/Meta-Llama-3-8B --over context --vs deepseek-ai/DeepSeek-V3 --plot ctx.png
  slotdiff sweep Qwen/Qwen3-30B-A3B --over batch --points 1,8,64,512 --plot roofline.svg
points take K and M suffixes (8K = 8192, 1M = 1048576)
"""

PLOT_SUFFIXES = (".png", ".svg")


def parse_points(text: str) -> tuple[int, ...]:
    """'1,8,64' or '8K,128K,1M' (K = 1024, k = 1000, as every count flag) → sorted distinct points."""
    out = set()
    for part in text.split(","):
        try:
            out.add(parse_count(part, minimum=1))
        except UsageError as err:
            raise UsageError(f"bad point {part.strip()!r}: {err} (expected 8, 8K or 1M)") from None
    return tuple(sorted(out))


parse_points.accepts = "each point " + COUNT_FORMS  # type: ignore[attr-defined]  # shown under --help


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument("--over", choices=("batch", "context"), required=True, help="what to sweep")
    parser.add_argument("--points", type=parse_points, help="comma-separated points (default: powers of 2)")
    parser.add_argument(
        "--vs", metavar="MODEL", action="append", default=[], help="another model (repeatable)"
    )
    parser.add_argument(
        "--plot", metavar="FILE", help="draw to FILE.png or FILE.svg (pip install 'slotdiff[plot]')"
    )
    add_style_arguments(parser, "sweep.schema.json")
    add_workload_arguments(parser)
    add_layout_arguments(parser)


def run(args: argparse.Namespace) -> int:
    if args.plot and Path(args.plot).suffix.lower() not in PLOT_SUFFIXES:
        raise UsageError(f"--plot {args.plot}: the file must end in .png or .svg")
    if args.plot:
        require_matplotlib()
    wl = workload_from(args)
    sweeps = []
    for name in (args.model, *args.vs):
        dep = deployment(load(name).arch, wl)

        def each(points: tuple[int, ...], name: str = name) -> Iterable[int]:
            return track(points, f"{args.over} sweep of {name}")  # a bar on a terminal only

        if args.over == "batch":
            sweeps.append(sweep_batch(dep, wl.context, args.points, each))
        else:
            sweeps.append(sweep_context(dep, wl.batch, args.points, each))
    if args.plot:
        plot_sweeps(sweeps, Path(args.plot))
    if args.style == "json":
        write_json({"over": args.over, "plot": args.plot, "models": [s.to_dict() for s in sweeps]})
    else:
        sys.stdout.write(render_sweeps(sweeps, args.style, args.width))
        if args.plot:
            sys.stdout.write(f"wrote {args.plot}\n")
    return 0
