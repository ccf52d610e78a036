"""Compare two models slot by slot, with cost deltas and the raw key changes beneath.

Each changed facet names its article; each changed config key is attributed to the slot it
feeds (or listed as unattributed). Works on two local files, two repo ids, or a mix.
"""

from __future__ import annotations

import argparse
import sys

from ..analysis.compare import diff
from ..core.jsonout import dumps_line
from ..render.diff import render_markdown, render_table
from .options import add_workload_arguments, workload_from

EPILOG = """\
examples:
  slotdiff diff meta-llama/Meta-Llama-3-8B meta-llama/Llama-3.1-8B
  slotdiff diff configs/old.json configs/new.json --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", help="the model before (path or repo id)")
    parser.add_argument("b", help="the model after (path or repo id)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", dest="format", action="store_const", const="json")
    out.add_argument("--markdown", dest="format", action="store_const", const="markdown")
    parser.set_defaults(format="table")
    add_workload_arguments(parser)


def run(args: argparse.Namespace) -> int:
    result = diff(args.a, args.b, workload=workload_from(args))
    if args.format == "json":
        sys.stdout.write(dumps_line(result.to_dict()))
    elif args.format == "markdown":
        sys.stdout.write(render_markdown(result))
    else:
        sys.stdout.write(render_table(result))
    return 0
