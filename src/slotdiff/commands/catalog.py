"""List the published configs bundled with slotdiff (served when the Hub is unreachable)."""

from __future__ import annotations

import argparse
import sys

from ..core.jsonout import dumps_line
from ..read.source import catalog_entries


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def run(args: argparse.Namespace) -> int:

    for e in catalog_entries():
        if args.json:
            sys.stdout.write(
                dumps_line(
                    {
                        "repo_id": e.repo_id,
                        "complete": e.complete,
                        "source": e.source,
                        "notes": e.notes,
                    },
                    indent=None,
                )
            )
        else:
            flag = "" if e.complete else "  (trimmed copy)"
            sys.stdout.write(f"{e.repo_id}{flag}\n    from {e.source}\n")
    return 0
