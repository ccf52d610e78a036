"""List the GPU presets (bandwidth, dense peaks, memory) and where each figure comes from."""

from __future__ import annotations

import argparse
import json
import sys

from ..core.resources import load_schema_file
from ..cost.workload import gpus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="the presets as JSON")


def run(args: argparse.Namespace) -> int:

    if args.json:
        sys.stdout.write(json.dumps(load_schema_file("gpus.json")["gpus"], indent=2) + "\n")
        return 0
    sys.stdout.write(f"{'id':<11} {'memory':>9} {'HBM':>10} {'bf16 dense':>12} {'fp8 dense':>11}  name\n")
    for g in gpus().values():
        fp8 = g.peak.get("fp8")
        sys.stdout.write(
            f"{g.id:<11} {g.memory_bytes / 2**30:>5.0f} GiB {g.bandwidth / 1e12:>6.2f} TB/s "
            f"{(g.peak.get('bf16') or 0) / 1e12:>7.1f} TFLOP/s "
            f"{(fp8 / 1e12 if fp8 else 0):>6.0f} T  {g.name}\n"
        )
    sys.stdout.write("sources: slotdiff gpus --json (every figure cites its datasheet)\n")
    return 0
