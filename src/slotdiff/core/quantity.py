"""Numbers as people type them on a command line: ``128K`` tokens, ``80GiB``, ``2.5``.

One parser for every flag that takes a count, a size or a rate, so that ``--context 128K``
means the same in every command and NaN, infinity or a negative value is refused everywhere
(a NaN timeout once made every model of a scan an "error" that was then remembered).

Suffixes follow vLLM's human-readable convention for token counts: lower case is decimal
(``1k`` = 1,000), upper case is binary (``1K`` = 1,024); ``1M`` is 1,048,576 and ``1m``
1,000,000. Byte sizes take explicit units: ``GiB``/``MiB``/``TiB`` binary, ``GB``/``MB``/``TB``
decimal.
"""

from __future__ import annotations

import math
import re

from .errors import UsageError

_COUNT_SCALE = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
}
_BYTE_SCALE = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_NUMBER = re.compile(r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*")


def _shown(text: str) -> str:
    """The typed value for an error message, cut short: a 400-digit number is one line too."""
    return repr(text if len(text) <= 32 else text[:29] + "...")


def _split(text: str) -> tuple[float, str]:
    m = _NUMBER.fullmatch(text)
    if not m:
        raise UsageError(f"{_shown(text)} is not a number")
    value = float(m.group(1))
    if not math.isfinite(value):
        raise UsageError(f"{_shown(text)} is not a finite number")
    return value, m.group(2)


def parse_count(text: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """``8192``, ``128K`` (131,072), ``1M``, ``25.6k`` (25,600) → an integer within the bounds."""
    value, suffix = _split(text)
    if suffix not in _COUNT_SCALE:
        raise UsageError(f"{_shown(text)}: unknown suffix {suffix!r} (k/m/g: 10^3.., K/M/G: 2^10..)")
    scaled = value * _COUNT_SCALE[suffix]
    if scaled != int(scaled):
        raise UsageError(f"{_shown(text)} is not a whole number")
    out = int(scaled)
    if out < minimum:
        raise UsageError(f"{_shown(text)} must be at least {minimum}")
    if maximum is not None and out > maximum:
        raise UsageError(f"{_shown(text)} must be at most {maximum:,}")
    return out


def parse_real(
    text: str,
    *,
    minimum: float = 0.0,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    exclusive_maximum: bool = False,
) -> float:
    """A finite decimal number within the bounds (no suffix: rates, shares, seconds)."""
    value, suffix = _split(text)
    if suffix:
        raise UsageError(f"{_shown(text)}: expected a plain number, not one with {suffix!r}")
    if value < minimum or (exclusive_minimum and value == minimum):
        raise UsageError(f"{_shown(text)} must be {'above' if exclusive_minimum else 'at least'} {minimum:g}")
    if maximum is not None and (value > maximum or (exclusive_maximum and value == maximum)):
        raise UsageError(f"{_shown(text)} must be {'below' if exclusive_maximum else 'at most'} {maximum:g}")
    return value


def parse_gib(
    text: str, *, allow_zero: bool = False, minimum: float = 0.0, maximum: float | None = None
) -> float:
    """A memory size in GiB: ``80`` (GiB), ``80GiB``, ``80GB`` (decimal), ``512MiB``; 0 only
    with ``allow_zero``, else at least ``minimum`` GiB, and at most ``maximum`` GiB."""
    value, suffix = _split(text)
    unit = suffix.lower() or "gib"
    if unit not in _BYTE_SCALE:
        raise UsageError(f"{_shown(text)}: unknown unit {suffix!r} (use GiB, GB, MiB, MB, TiB, TB)")
    gib = value * _BYTE_SCALE[unit] / 2**30
    if gib < 0 or (gib == 0 and not allow_zero):
        raise UsageError(f"{_shown(text)} must be {'at least 0' if allow_zero else 'above 0'}")
    if gib != 0 and gib < minimum:
        raise UsageError(f"{_shown(text)} must be at least {minimum:g} GiB{' (or 0)' if allow_zero else ''}")
    if maximum is not None and gib > maximum:
        raise UsageError(f"{_shown(text)} must be at most {maximum:g} GiB")
    return gib


def parse_whole(text: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """A small whole number typed plainly (GPUs, parallel degrees, draft tokens, a ZeRO stage):
    no suffix, since ``--gamma 4K`` is a typo, not a size."""
    _, suffix = _split(text)
    if suffix:
        raise UsageError(f"{_shown(text)}: expected a plain whole number, not one with {suffix!r}")
    return parse_count(text, minimum=minimum, maximum=maximum)
