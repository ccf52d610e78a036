"""Flags shared by the commands: the workload every pricing command takes, and the report formats."""

from __future__ import annotations

import argparse
import sys

from ..core.errors import UsageError
from ..cost.gpus import resolve_gpu
from ..cost.layout import Layout
from ..cost.workload import Workload
from ..deploy.efficiency import efficiency_of, presets
from ..render import REPORTER_BY_NAME, json_report
from .argtypes import COUNT, GIB, POSITIVE, SHARE, TOKENS, WHOLE, add_width_argument


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
        "--gpu-mem", type=GIB, metavar="GIB", help="memory per GPU: 80, 80GiB, 96GB (overrides the preset)"
    )
    g.add_argument(
        "--bandwidth", type=POSITIVE, metavar="TB/S", help="memory bandwidth in TB/s (overrides the preset)"
    )
    g.add_argument(
        "--tflops", type=POSITIVE, metavar="TFLOP/S", help="dense bf16 peak in TFLOP/s (overrides the preset)"
    )
    g.add_argument("--batch", type=COUNT, default=1, help="concurrent sequences (default 1)")
    g.add_argument(
        "--context",
        type=TOKENS,
        default=8192,
        help="tokens per sequence: 8192, 128K, 1M (default 8192)",
    )
    g.add_argument("--kv-dtype", default="bf16", help="KV cache element type (default bf16)")
    g.add_argument(
        "--dtype",
        default=None,
        help="re-price weights in this format (bf16, fp8, int4, mxfp4, ...); default: the checkpoint's own",
    )
    g.add_argument(
        "--mfu",
        type=SHARE,
        default=None,
        help="share of the dense peak reached (default 1.0: a lower bound on time)",
    )
    g.add_argument(
        "--mbu",
        type=SHARE,
        default=None,
        help="share of peak bandwidth reached (default 1.0: a lower bound on time)",
    )
    g.add_argument(
        "--efficiency",
        metavar="PRESET",
        choices=sorted(presets()),
        help="the share of peak an engine was measured to reach (schemas/efficiency.json: "
        + ", ".join(sorted(presets()))
        + "); the bound is shown beside it",
    )


def add_layout_arguments(parser: argparse.ArgumentParser) -> None:
    """The parallel layout, named as vLLM names it; every command that prices a model takes it."""
    lay = parser.add_argument_group("layout (named as vLLM names them)")
    lay.add_argument(
        "--gpus", type=WHOLE, default=None, help="GPUs of the --gpu kind (default: the layout's, 1)"
    )
    lay.add_argument("--tensor-parallel-size", "-tp", type=WHOLE, help="TP degree (default: --gpus)")
    lay.add_argument("--pipeline-parallel-size", "-pp", type=WHOLE, default=1, help="PP degree (default 1)")
    lay.add_argument("--data-parallel-size", "-dp", type=WHOLE, default=1, help="DP degree (default 1)")
    lay.add_argument(
        "--enable-expert-parallel", action="store_true", help="spread routed experts over TP × DP"
    )


def layout_given(args: argparse.Namespace) -> bool:
    """True when any layout flag was set (a command may then keep its own default layout)."""
    return bool(
        args.gpus
        or args.tensor_parallel_size
        or args.pipeline_parallel_size > 1
        or args.data_parallel_size > 1
        or args.enable_expert_parallel
    )


def layout_from(args: argparse.Namespace) -> Layout:
    """The layout the flags name: TP defaults to --gpus ÷ (PP × DP); --gpus must match it."""
    for flag, value in (
        ("--gpus", args.gpus),
        ("--tensor-parallel-size", args.tensor_parallel_size),
        ("--pipeline-parallel-size", args.pipeline_parallel_size),
        ("--data-parallel-size", args.data_parallel_size),
    ):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    tp = args.tensor_parallel_size
    if tp is None:
        tp = (args.gpus or 1) // max(1, args.pipeline_parallel_size * args.data_parallel_size) or 1
    layout = Layout(tp, args.pipeline_parallel_size, args.data_parallel_size, args.enable_expert_parallel)
    if args.gpus is not None and args.gpus != layout.gpus:
        raise UsageError(f"--gpus {args.gpus} but the layout {layout.label()} uses {layout.gpus}")
    return layout


def workload_from(args: argparse.Namespace, gpus: int = 1, layout: Layout | None = None) -> Workload:
    """The Workload of the flags; the layout from the layout flags when the command has them."""
    custom = None
    if args.gpu_file or args.gpu_mem is not None or args.bandwidth is not None or args.tflops is not None:
        custom = resolve_gpu(args.gpu, args.gpu_file, args.gpu_mem, args.bandwidth, args.tflops)
    if layout is None and hasattr(args, "pipeline_parallel_size"):
        layout = layout_from(args)
    mbu, mfu, preset = args.mbu or 1.0, args.mfu or 1.0, None
    if getattr(args, "efficiency", None):
        mbu, mfu, preset = efficiency_of(args.efficiency, args.mbu, args.mfu)
    return Workload(
        gpu=custom.id if custom else args.gpu,
        batch=args.batch,
        context=args.context,
        kv_dtype=args.kv_dtype,
        weight_dtype=args.dtype,
        mfu=mfu,
        mbu=mbu,
        gpus=layout.gpus if layout else gpus,
        custom_device=custom,
        layout=layout,
        efficiency=preset,
    )


def add_style_arguments(parser: argparse.ArgumentParser, schema: str) -> None:
    """``--json`` (validated by ``schemas/<schema>``) or ``--markdown`` instead of the text
    view (``args.style``), and ``--width``; for the commands whose answer is one page."""
    out = parser.add_argument_group("output")
    style = out.add_mutually_exclusive_group()
    style.add_argument(
        "--json", dest="style", action="store_const", const="json", help=f"JSON validated by schemas/{schema}"
    )
    style.add_argument(
        "--markdown",
        dest="style",
        action="store_const",
        const="markdown",
        help="Markdown for a pull request or wiki",
    )
    parser.set_defaults(style="text")
    add_width_argument(out)


def write_json(data: object) -> None:
    """Every command's JSON goes through render.json_report's one writer (strict: no NaN)."""
    sys.stdout.write(json_report.dumps(data))


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
    add_width_argument(parser)
