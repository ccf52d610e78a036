"""List the published configs bundled with slotdiff (served when the Hub is unreachable)."""

from __future__ import annotations

import argparse
import sys

from ..read.source import catalog_entries
from ..render.listings import catalog_page
from .options import add_style_arguments, write_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_style_arguments(parser, "catalog.schema.json")


def run(args: argparse.Namespace) -> int:
    entries = catalog_entries()
    if args.style == "json":
        rows = [
            {
                "repo_id": e.repo_id,
                "aliases": list(e.aliases),
                "complete": e.complete,
                "source": e.source,
                "notes": e.notes,
            }
            for e in entries
        ]
        write_json({"entries": rows})
        return 0
    sys.stdout.write(catalog_page(entries, args.style, args.width))
    return 0
