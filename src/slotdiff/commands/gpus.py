"""List the GPU presets (bandwidth, dense peaks, memory) and where each figure comes from."""

from __future__ import annotations

import argparse
import sys

from ..core.resources import load_schema_file
from ..cost.gpus import ALIASES, gpus
from ..render.listings import gpus_page
from .options import add_style_arguments, write_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_style_arguments(parser, "gpus.schema.json (the bundled gpus.json, with every source)")


def run(args: argparse.Namespace) -> int:
    if args.style == "json":
        write_json(load_schema_file("gpus.json"))
        return 0
    sys.stdout.write(gpus_page(list(gpus().values()), ALIASES, args.style, args.width))
    return 0
