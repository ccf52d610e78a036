"""Time the key diff (slots/keydiff.py) against deepdiff, which it replaced, on repetitive arrays.

deepdiff aligns arrays with difflib, quadratic in their length; keydiff compares them position
by position in one pass. Each row: the input, keydiff's CPU seconds, and deepdiff's (as
``slots/differ.py`` called it until issue 30.4; skipped when deepdiff is not installed, and cut
off after ``--deepdiff-limit`` seconds of wall time). Nothing is asserted: the figures are for
a person and for docs/TESTING.md.

    PYTHONPATH=src python benchmarks/keydiff.py
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LLAMA = json.loads(
    (ROOT / "tests" / "fixtures" / "corpus" / "raw" / "meta-llama__Meta-Llama-3-8B.json").read_text()
)
HALF = 16_384 // 2

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "layer_types, 16,384 entries, every one changed": (
        {**LLAMA, "layer_types": ["full_attention", "sliding_attention"] * HALF},
        {**LLAMA, "layer_types": ["sliding_attention", "full_attention"] * HALF},
    ),
    "layer_types, 16,384 entries, one changed": (
        {**LLAMA, "layer_types": ["full_attention", "sliding_attention"] * HALF},
        {
            **LLAMA,
            "layer_types": ["full_attention", "sliding_attention"] * (HALF - 1) + ["full_attention"] * 2,
        },
    ),
    '"x": [0] * 64,000 against [1] * 64,000': ({**LLAMA, "x": [0] * 64_000}, {**LLAMA, "x": [1] * 64_000}),
}


def _keydiff(a: dict[str, Any], b: dict[str, Any]) -> int:
    from slotdiff.slots.differ import key_changes

    return len(key_changes(a, b))


def _deepdiff(a: dict[str, Any], b: dict[str, Any]) -> int:
    from deepdiff import DeepDiff  # the call slots/differ.py made before issue 30.4

    dd = DeepDiff(a, b, verbose_level=2, view="tree", threshold_to_diff_deeper=0)
    return sum(len(v) for v in dd.values())


def _cpu(fn: Callable[[dict[str, Any], dict[str, Any]], int], a: Any, b: Any, out: Any) -> None:
    started = time.process_time()
    n = fn(a, b)
    out.put((time.process_time() - started, n))


def timed(fn: Callable[..., int], a: Any, b: Any, limit: float) -> str:
    """CPU seconds of ``fn(a, b)`` in a child process, or past ``limit`` s of wall time."""
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_cpu, args=(fn, a, b, out))
    proc.start()
    proc.join(limit)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return f"> {limit:g} (stopped)"
    seconds, n = out.get()
    return f"{seconds:.3f} ({n} changes)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--deepdiff-limit", type=float, default=120.0, help="wall seconds before deepdiff is cut off"
    )
    args = ap.parse_args(argv)
    try:
        import deepdiff  # noqa: F401
    except ImportError:
        have_deepdiff = False
    else:
        have_deepdiff = True
    print("| input | keydiff (CPU s) | deepdiff (CPU s) |\n|---|---|---|")
    for name, (a, b) in CASES.items():
        dd = timed(_deepdiff, a, b, args.deepdiff_limit) if have_deepdiff else "not installed"
        print(f"| {name} | {timed(_keydiff, a, b, args.deepdiff_limit)} | {dd} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
