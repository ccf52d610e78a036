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
from collections.abc import Callable, Iterable, Iterator
from typing import Any

# What json leaves raw but a terminal or a UTF-8 encoder must not see (see core.printable).
_RAW = re.compile("[\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ue000]")


def _u(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


class Stream:
    """A JSON array whose items are made only when the writer reaches them (a 50,000-model
    report read back from disk one model at a time): a top-level value of the dict given to
    :func:`iterdumps`, which writes each item on a line of its own with json's C encoder.
    Iterable again and again, sized; :func:`dumps` refuses it rather than print it as text."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: Callable[[], Iterable[Any]], length: int) -> None:
        self._items = items
        self._n = length

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items())

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0


def _plain(value: Any) -> Any:
    if isinstance(value, Stream):
        raise TypeError("a Stream is written by iterdumps only, as a top-level value")
    return str(value)


def _text(value: Any, indent: int | None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False, default=_plain)


def dumps(value: Any, indent: int | None = 2) -> str:
    """``value`` as strict JSON text (no trailing newline), safe for any terminal or file."""
    return _RAW.sub(_u, _text(value, indent))


def _chunks(value: Any, indent: int) -> Iterator[str]:
    """The text of :func:`iterdumps`, in json's chunks; a top-level :class:`Stream` as one
    compact line per item (json's C encoder: the pure-Python indenting one costs about
    0.6 ms per scan model)."""
    enc = json.JSONEncoder(indent=indent, ensure_ascii=False, allow_nan=False, default=_plain)
    if not (isinstance(value, dict) and any(isinstance(v, Stream) for v in value.values())):
        yield from enc.iterencode(value)
        return
    pad = " " * indent
    yield "{"
    for n, (key, item) in enumerate(value.items()):
        yield ("," if n else "") + "\n" + pad + _text(str(key), None) + ": "
        if not isinstance(item, Stream):
            # One level in: a newline is only ever json's indentation (strings escape theirs).
            yield from (chunk.replace("\n", "\n" + pad) for chunk in enc.iterencode(item))
        elif not item:
            yield "[]"
        else:
            yield "["
            for i, entry in enumerate(item):
                yield ("," if i else "") + "\n" + pad + pad + _text(entry, None)
            yield "\n" + pad + "]"
    yield "\n}" if value else "}"


def iterdumps(value: Any, indent: int = 2, size: int = 1 << 16) -> Iterator[str]:
    """:func:`dumps` in pieces of about ``size`` characters, for a big report streamed to a
    file without its whole text (or json's million small chunks) in memory. Joined, the same
    text as :func:`dumps`, except that a top-level :class:`Stream` is written one item a line."""
    batch: list[str] = []
    held = 0
    for chunk in _chunks(value, indent):
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
