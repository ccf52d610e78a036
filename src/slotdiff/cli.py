"""Command line: parse → build → execute; ``main(argv) -> int``.

``slotdiff MODEL`` analyzes one model; other commands are looked up in ``COMMANDS`` and
imported only when used, so a run imports only what it needs.

Exit codes: 0 success; 1 lint errors found / ``scan --fail-on-new`` found something new /
``fit`` found the model does not fit;
2 bad input or usage (one line on stderr, never a traceback); 3 internal error (a bug; one
line unless SLOTDIFF_DEBUG=1); 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from . import __version__
from .core.errors import SlotdiffError

# command name → module with add_arguments(parser) and run(args) -> int
COMMANDS: dict[str, str] = {
    "diff": "slotdiff.commands.diff",
    "fingerprint": "slotdiff.commands.fingerprint",
    "catalog": "slotdiff.commands.catalog",
    "gpus": "slotdiff.commands.gpus",
    "lint": "slotdiff.commands.lint",
    "fit": "slotdiff.commands.fit",
    "sweep": "slotdiff.commands.sweep",
    "moe": "slotdiff.commands.moe",
    "specdec": "slotdiff.commands.specdec",
    "formats": "slotdiff.commands.formats",
    "image": "slotdiff.commands.image",
    "scan": "slotdiff.commands.scan",
}

EPILOG = """\
examples:
  slotdiff Qwen/Qwen3-30B-A3B                  slots, class and cost of a Hub model
  slotdiff ./config.json --against meta-llama/Llama-3.1-8B
  slotdiff deepseek-ai/DeepSeek-V3 --json      machine-readable (schemas/report.schema.json)
  slotdiff meta-llama/Llama-3.1-70B --gpu h200 --batch 32 --context 32768
  HF_HUB_OFFLINE=1 slotdiff openai/gpt-oss-20b  served from the bundled catalog offline

other commands: {commands}  (slotdiff COMMAND --help)
exit codes: 0 ok, 1 findings (lint errors, scan --fail-on-new), 2 bad input or usage
"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line and exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SlotdiffError(self.prog, message)


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


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    from .render import REPORTER_BY_NAME

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


def workload_from(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from .cost.workload import Workload

    return Workload(
        gpu=args.gpu,
        batch=args.batch,
        context=args.context,
        kv_dtype=args.kv_dtype,
        weight_dtype=args.dtype,
    )


def analyze_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="slotdiff",
        description="Read a model's config.json and say, slot by slot, what it changed relative "
        "to GPT-2 and Llama-3-8B, what class of architecture it is, and what each "
        "change costs.",
        epilog=EPILOG.format(commands=", ".join(COMMANDS)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument("--revision", help="Hub branch, tag or commit")
    parser.add_argument("--against", metavar="MODEL", help="also compare with this model")
    parser.add_argument("--no-cost", action="store_true", help="skip the cost pass")
    parser.add_argument("--version", action="version", version=f"slotdiff {__version__}")
    add_output_arguments(parser)
    add_workload_arguments(parser)
    return parser


def run_analyze(args: argparse.Namespace) -> int:
    from .analysis.analyze import analyze
    from .render import REPORTER_BY_NAME

    report = analyze(
        args.model,
        revision=args.revision,
        against=args.against,
        workload=workload_from(args),
        cost=not args.no_cost,
    )
    sys.stdout.write(REPORTER_BY_NAME[args.format](report))
    return 0


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in COMMANDS:
        module = importlib.import_module(COMMANDS[argv[0]])
        parser = _Parser(
            prog=f"slotdiff {argv[0]}",
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            epilog=getattr(module, "EPILOG", None),
        )
        module.add_arguments(parser)
        return int(module.run(parser.parse_args(argv[1:])))
    args = analyze_parser().parse_args(argv)
    return run_analyze(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (see the module docstring)."""
    from .core.printable import PrintableStream, printable

    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = sys.stdout
    sys.stdout = PrintableStream(stdout)  # type: ignore[assignment]  # config text cannot drive the terminal
    try:
        return _dispatch(argv)
    except SlotdiffError as err:
        sys.stderr.write(f"slotdiff: error: {printable(err.line())}\n")
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("slotdiff: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except SystemExit as exit_:  # argparse --help / --version
        return int(exit_.code or 0)
    except Exception as err:  # a bug, not bad input: still one line unless debugging
        if os.environ.get("SLOTDIFF_DEBUG"):
            raise
        reason = printable(" ".join(str(err).split()))
        sys.stderr.write(
            f"slotdiff: internal error: {type(err).__name__}: {reason} "
            "(rerun with SLOTDIFF_DEBUG=1 for the traceback, and please report it)\n"
        )
        return 3
    finally:
        sys.stdout = stdout


def entry() -> None:
    """Console-script entry point."""
    raise SystemExit(main())
