"""The argument types every command's flags share (counts, sizes, shares, widths): their own
module, importing nothing of the cost pass, so that ``lint`` and ``scan`` parse their flags
without importing the workload machinery of commands/options.py."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..core.errors import UsageError
from ..core.quantity import parse_count, parse_gib, parse_real, parse_whole

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


def add_width_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--width N``: lay tables and text out at N columns (default: COLUMNS, else the
    terminal's width, else 120 when piped)."""
    parser.add_argument(
        "--width",
        type=COLUMNS,
        metavar="N",
        help="columns to lay the text out at (default: COLUMNS, the terminal's width, or 120 when piped)",
    )
