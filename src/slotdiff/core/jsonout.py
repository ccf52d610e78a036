"""The one JSON writer for everything slotdiff prints or saves as JSON.

``json.dumps(..., ensure_ascii=False)`` escapes only what JSON requires (C0 controls, quote,
backslash) and passes DEL, C1 controls, bidi marks and lone surrogates through raw: the
stdout stream would then escape them as ``\\x7f`` (invalid JSON), and a lone surrogate
cannot be written as UTF-8 at all. Here each of them becomes a JSON ``\\uXXXX`` escape,
which every parser reads back as the same string; outside strings JSON text is ASCII,
so the substitution only ever touches string contents. NaN and Infinity are refused
(strict JSON): callers pass finite numbers or ``jsonpos.strict`` values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

# What json leaves raw but a terminal or a UTF-8 encoder must not see (see core.printable).
_RAW = re.compile("[\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ue000]")


def _u(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def dumps(value: Any, indent: int | None = 2) -> str:
    """``value`` as strict JSON text (no trailing newline), safe for any terminal or file."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False, default=str)
    return _RAW.sub(_u, text)


def iterdumps(value: Any, indent: int | None = 2, size: int = 1 << 16) -> Iterator[str]:
    """:func:`dumps` in pieces of about ``size`` characters (joined, the same text): a big
    report streams to a file without its whole text, or json's million small chunks, in memory."""
    enc = json.JSONEncoder(indent=indent, ensure_ascii=False, allow_nan=False, default=str)
    batch: list[str] = []
    held = 0
    for chunk in enc.iterencode(value):
        batch.append(chunk)
        held += len(chunk)
        if held >= size:
            yield _RAW.sub(_u, "".join(batch))
            batch, held = [], 0
    if batch:
        yield _RAW.sub(_u, "".join(batch))


def dumps_line(value: Any, indent: int | None = 2) -> str:
    """:func:`dumps` plus a newline: one document for stdout or a file."""
    return dumps(value, indent) + "\n"
