"""Flags shared by the commands: the workload every pricing command takes, and the report formats."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from ..core.errors import UsageError
from ..core.quantity import parse_count, parse_gib, parse_real, parse_whole
from ..cost.gpus import resolve_gpu
from ..cost.layout import Layout
from ..cost.workload import Workload
from ..deploy.efficiency import efficiency_of, presets
from ..render import REPORTER_BY_NAME, json_report

COUNT_FORMS = "takes 8K = 8192, 8k = 8000, 1M = 1048576"
SIZE_FORMS = "takes 80 (GiB), 80GiB, 96GB, 512MiB"


def _argtype(
    parse: Callable[[str], object], name: str, accepts: str | None = None
) -> Callable[[str], object]:
    """Wrap a core.quantity parser so argparse names the flag in its one-line error; ``accepts``
    is what the CLI's help formatter adds under each flag of this type (the suffixes it takes)."""

    def convert(text: str) -> object:
        try:
            return parse(text)
        except UsageError as err:
            raise argparse.ArgumentTypeError(err.reason) from None

    convert.__name__ = name
    convert.accepts = accepts  # type: ignore[attr-defined]
    return convert


# Every numeric flag takes one of these: suffixes (128K, 80GiB) and the bounds are the same
# in every command, and NaN, infinity and negative values are refused with exit status 2.
# A rate, a share or a time is also held between a floor and a ceiling no real setting comes
# near (a GPU at 1 GB/s, a 0.1% utilization; a million TB/s), so every figure priced from it
# stays finite: --bandwidth 1e-300 once divided by zero, --mbu 2e-308 priced a step at inf.
FLOOR = 1e-3
CEILING = 1e9
COUNT = _argtype(lambda t: parse_count(t, minimum=1), "count", COUNT_FORMS)
COUNT0 = _argtype(lambda t: parse_count(t, minimum=0), "count", COUNT_FORMS)
TOKENS = _argtype(lambda t: parse_count(t, minimum=1), "tokens", COUNT_FORMS)
GIB = _argtype(lambda t: parse_gib(t, minimum=FLOOR, maximum=CEILING), "size", SIZE_FORMS)
GIB0 = _argtype(lambda t: parse_gib(t, allow_zero=True, minimum=FLOOR, maximum=CEILING), "size", SIZE_FORMS)
POSITIVE = _argtype(lambda t: parse_real(t, minimum=FLOOR, maximum=CEILING), "number")
NONNEGATIVE = _argtype(lambda t: parse_real(t, maximum=CEILING), "number")
SHARE = _argtype(lambda t: parse_real(t, minimum=FLOOR, maximum=1.0), "share")
FRACTION = _argtype(lambda t: parse_real(t, maximum=1.0), "share")
RESERVE = _argtype(lambda t: parse_real(t, maximum=1.0, exclusive_maximum=True), "share")
# Small whole numbers (GPU counts, parallel degrees, draft tokens, ZeRO stages, ranks) are typed
# plainly: no suffix is taken, and none is offered under --help, where it would read as a size.
WHOLE = _argtype(lambda t: parse_whole(t, minimum=1), "count")
WHOLE0 = _argtype(lambda t: parse_whole(t, minimum=0), "count")
COLUMNS = _argtype(lambda t: parse_count(t, minimum=40, maximum=10_000), "columns")
SECONDS = _argtype(lambda t: parse_real(t, minimum=FLOOR, maximum=CEILING), "seconds")


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


def add_width_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--width N``: lay tables and text out at N columns (default: COLUMNS, else the
    terminal's width, else 120 when piped)."""
    parser.add_argument(
        "--width",
        type=COLUMNS,
        metavar="N",
        help="columns to lay the text out at (default: COLUMNS, the terminal's width, or 120 when piped)",
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
