"""Keep control characters from configs off the user's terminal.

A config can hold any string: an ESC sequence in a key or a model_type would retitle,
clear or rewrite the terminal that prints it, and bidi overrides would make the printed
text read differently from what the file says. Everything slotdiff prints goes through
:func:`printable`, which writes such characters as visible escapes (``\\x1b``, ``\\u202e``).
"""

from __future__ import annotations

import os
import re
from typing import Any, TextIO

from .errors import OutputError

# C0 controls except tab and newline, DEL, C1 controls, the bidi embedding, override and
# isolate marks (Trojan Source), the line and paragraph separators, and lone surrogates
# (which no UTF-8 stream can encode: JSON's "\ud800" decodes to one).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
# slotdiff's own colours: render/console.py prefixes every Select Graphic Rendition code that
# rich writes with this mark, after escaping the text rich was given. Only marked codes reach
# a terminal; an SGR code that came from a config (unmarked) is escaped. The mark is drawn
# at random per process (the OS's CSPRNG, as ``secrets.token_hex`` reads it: not importing
# secrets keeps hmac and its hashing out of every run's start-up), so no config can carry one.
STYLE_MARK = f"\ue000{os.urandom(8).hex()}\ue001"
_SGR = re.compile("(" + re.escape(STYLE_MARK) + "\x1b\\[[0-9;]*m)")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep_sgr: bool = False) -> str:
    """``text`` with every unsafe character escaped; ``keep_sgr`` keeps slotdiff's own
    (marked) colour codes, which are dropped otherwise."""
    parts = _SGR.split(text)
    if not keep_sgr:
        return "".join(_UNSAFE.sub(_escape, p) for p in parts[::2])
    return "".join(p[len(STYLE_MARK) :] if i % 2 else _UNSAFE.sub(_escape, p) for i, p in enumerate(parts))


def one_line(text: str) -> str:
    """``text`` on one line: :func:`printable`, with newlines and tabs escaped as well (for
    formats where a line is a record, like lint's ``path:line:col: CODE message``)."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


class PrintableStream:
    """A text stream that escapes unsafe characters in everything written to it (slotdiff's own
    marked colour codes are kept when the stream is a terminal)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        try:
            self._tty = stream.isatty()
        except (AttributeError, ValueError):
            self._tty = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(printable(text, keep_sgr=self._tty))
        except BrokenPipeError:
            raise
        except OSError as err:  # a full disk, /dev/full: the output's failure, not slotdiff's
            raise OutputError.of(err, "stdout") from err

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as err:
            raise OutputError.of(err, "stdout") from err

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_JSON_KINDS = {
    "list": "an array",
    "dict": "an object",
    "str": "a string",
    "NoneType": "null",
    "int": "an integer",
    "float": "a number",
    "bool": "true/false",
}


def json_kind(value: object) -> str:
    """What JSON value ``value`` is, in words, for a refusal ("top level is an array")."""
    name = type(value).__name__
    return _JSON_KINDS.get(name, f"a {name}")
