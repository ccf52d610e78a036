"""List the GPU presets (bandwidth, dense peaks, memory) and where each figure comes from."""

from __future__ import annotations

import argparse
import sys

from ..core.jsonout import dumps_line
from ..core.resources import load_schema_file
from ..cost.gpus import ALIASES, gpus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="the presets as JSON")


def run(args: argparse.Namespace) -> int:

    if args.json:
        sys.stdout.write(dumps_line(load_schema_file("gpus.json")["gpus"]))
        return 0
    head = f"{'id':<10} {'memory':>9} {'HBM':>10} {'bf16 dense':>15} {'fp8':>7} {'link':>9}  name\n"
    sys.stdout.write(head)
    for g in gpus().values():
        fp8 = g.peak.get("fp8")
        link = f"{g.link_bytes_per_s / 1e9:,.0f} GB/s" if g.link_bytes_per_s else "—"
        sys.stdout.write(
            f"{g.id:<10} {g.memory_bytes / 2**30:>5.0f} GiB {g.bandwidth / 1e12:>6.2f} TB/s "
            f"{(g.peak.get('bf16') or 0) / 1e12:>7.1f} TFLOP/s {(fp8 / 1e12 if fp8 else 0):>5.0f} T "
            f"{link:>9}  {g.name}\n"
        )
    aliases = ", ".join(f"{a} = {b}" for a, b in sorted(ALIASES.items()))
    sys.stdout.write(f"aliases: {aliases}; link = the scale-up interconnect, bidirectional\n")
    sys.stdout.write("sources: slotdiff gpus --json (every figure cites its datasheet)\n")
    return 0
