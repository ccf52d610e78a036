"""One page of answer, as plain text at a width or as Markdown: lines, tables and notes.

The deployment renderers (fit, sweep, moe, specdec, formats, train, gpus, catalog, image)
build a list of blocks (a line of prose, or a ``Rows`` table) and hand it here, so the text
and the Markdown views come from the same content. Text is wrapped at word boundaries only:
a path, a repo id or a number is never broken, and a table row is never wrapped at all
(piped output reads the same as the terminal's; ``--width`` sets the width).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

PIPED_WIDTH = 120  # stdout is a file or a pipe and COLUMNS is unset
MIN_WIDTH = 40
STYLES = ("text", "markdown")


def output_width(width: int | None = None, stream: TextIO | None = None) -> int:
    """The width to lay text out at: ``--width``, else COLUMNS, else the terminal's, else 120.

    Piped output no longer falls back to a narrow default: a table laid out for 80 columns
    because stdout was not a terminal wrapped every cell it had."""
    if width:
        return max(width, MIN_WIDTH)
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) >= MIN_WIDTH:
        return int(env)
    stream = stream or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        return max(shutil.get_terminal_size((PIPED_WIDTH, 24)).columns, MIN_WIDTH)
    return PIPED_WIDTH


@dataclass(frozen=True)
class Rows:
    """A table: right-aligned columns (the first ``left`` left-aligned), two spaces apart."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    left: int = 0
    indent: str = ""

    def text_lines(self) -> list[str]:
        widths = [max(len(h), *(len(r[i]) for r in self.rows)) for i, h in enumerate(self.headers)]

        def line(cells: Sequence[str]) -> str:
            out = [
                c.ljust(w) if i < self.left else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            ]
            return (self.indent + "  ".join(out)).rstrip()

        return [line(self.headers), *(line(r) for r in self.rows)]

    def markdown_lines(self) -> list[str]:
        align = ["---" if i < self.left else "---:" for i in range(len(self.headers))]
        return [
            "| " + " | ".join(cell(h) or " " for h in self.headers) + " |",
            "|" + "|".join(align) + "|",
            *("| " + " | ".join(cell(c) for c in r) + " |" for r in self.rows),
        ]


Block = str | Rows


def rows(
    headers: Sequence[str], body: Iterable[Sequence[str]], left: int = 0, indent: str = ""
) -> list[Rows]:
    """A table block in a list, so a renderer writes ``lines += rows(...)``."""
    return [Rows(tuple(headers), tuple(tuple(r) for r in body), left, indent)]


def cell(text: str) -> str:
    """A Markdown table cell: pipes escaped, one line."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _prose(text: str) -> str:
    """A Markdown prose line: emphasis and table characters escaped (``8*``, ``a|b``)."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_").replace("|", "\\|")


# A number and its unit are one word to the line breaker: "549 MiB" never ends a line at "549".
_NUMBER = re.compile(r"^[-+−≥≤≈~(]*[0-9][0-9,.]*[×%]?\Z")
_UNIT = re.compile(
    r"^(?:[kKMGTP]?i?B|[kMGTP]?FLOPs?|ms|µs|ns|s|tokens?|tokens/s|FLOP/byte|GB/s|TB/s|TFLOP/s|"
    r"[kKMGT]i?B/token|experts?|GPUs?|layers?)[,;:.)]*\Z"
)


def _glued(before: str, word: str) -> bool:
    """Whether ``word`` is the unit of the number ``before`` (no line break between them)."""
    return bool(_NUMBER.match(before)) and bool(_UNIT.match(word))


def word_breaks(line: str, width: int) -> list[int]:
    """Offsets at which to break ``line`` to fit ``width``: only where a word starts (a number
    and its unit count as one word), so a word longer than the width (a path, a URL) runs past
    it whole (rich folds it)."""
    words = [(m.start(), m.end()) for m in re.finditer(r"[^ ]+", line)]
    breaks: list[int] = []
    start = 0
    for k, (i, end) in enumerate(words):
        at = i
        if k and _glued(line[words[k - 1][0] : words[k - 1][1]], line[i:end]):
            at = words[k - 1][0]  # break before the number, never between it and its unit
        # a word too long for any line stays beside a short lead-in ("from <path>")
        lone = end - i > width and i - start <= 16
        if end - start > width and at > start and not lone:
            breaks.append(at)
            start = at
    return breaks


def print_table(console: Any, table: Any) -> None:
    """Print a rich table with column widths of our own: each column at least its longest word
    (no-wrap columns whole), the room left shared by how much each would wrap; past the
    console's width only when even the narrowest layout does not fit. A cell is never cut to
    "…" and a word never folded (rich's own collapse can narrow a column below its longest
    word, and then cuts it)."""
    from rich.measure import Measurement  # rich only where a table is drawn

    wide = console.options.update_width(100_000)
    pad = [table._get_padding_width(i) for i in range(len(table.columns))]  # cell padding
    low, high = [], []
    for column in table.columns:
        sizes = [Measurement.get(console, wide, c) for c in (column.header, *column.cells)]
        most = max(m.maximum for m in sizes)
        low.append(most if column.no_wrap else max(m.minimum for m in sizes))
        high.append(most)
    room = console.width - table._extra_width - sum(pad)
    widths = list(high)
    if sum(high) > room:
        spare = max(0, room - sum(low))
        slack = [h - lo for lo, h in zip(low, high, strict=True)]
        total = sum(slack) or 1
        widths = [lo + spare * s // total for lo, s in zip(low, slack, strict=True)]
    for column, w in zip(table.columns, widths, strict=True):
        column.width = max(w, 1)
    need = sum(widths) + sum(pad) + table._extra_width
    width = console.width  # print(width=) cannot exceed the console's: widen it for this table
    console.width = max(width, need)
    try:
        console.print(table)
    finally:
        console.width = width


def _pieces(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` where it can be (word_breaks), spaces trimmed."""
    cuts = [0, *word_breaks(text, width), len(text)]
    return [p for a, b in itertools.pairwise(cuts) if (p := text[a:b].strip())] or [""]


def wrap(line: str, width: int) -> list[str]:
    """A prose line at ``width``, continuation lines indented two more; words are never split,
    so a path or a repo id longer than the width stands whole on its own line."""
    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    cuts = [0, *word_breaks(line, width - len(indent)), len(line)]
    pieces = [line[a:b].rstrip() for a, b in itertools.pairwise(cuts)]
    return [pieces[0], *(indent + p.lstrip() for p in pieces[1:] if p.strip())]


def to_text(
    blocks: Sequence[Block],
    notes: Sequence[str] = (),
    width: int | None = None,
    notes_title: str = "assumes:",
) -> str:
    w = output_width(width)
    out: list[str] = []
    for b in blocks:
        out += b.text_lines() if isinstance(b, Rows) else wrap(b, w)
    if notes:
        out.append(notes_title)
        for n in notes:
            out += [("  - " if k == 0 else "    ") + p for k, p in enumerate(_pieces(n, w - 4))]
    return "\n".join(out) + "\n"


def to_markdown(blocks: Sequence[Block], notes: Sequence[str] = (), notes_title: str = "assumes:") -> str:
    """The first line as a heading, indented lines as list items, tables as pipe tables."""
    out: list[str] = []
    prev = ""  # "p" prose, "li" list item, "t" table
    for i, b in enumerate(blocks):
        if isinstance(b, Rows):
            out += ["", *b.markdown_lines()]
            prev = "t"
            continue
        if not b.strip():
            continue
        if i == 0:
            out.append(f"### {_prose(b.strip())}")
            prev = "h"
        elif b.startswith(" "):
            out += ([""] if prev not in ("li",) else []) + [f"- {_prose(b.strip())}"]
            prev = "li"
        else:
            out += ["", _prose(b)]
            prev = "p"
    if notes:
        out += ["", f"**{notes_title.rstrip(':').capitalize()}:**", ""]
        out += [f"- {_prose(n)}" for n in notes]
    return "\n".join(out).lstrip("\n") + "\n"


def render(
    blocks: Sequence[Block],
    notes: Sequence[str] = (),
    style: str = "text",
    width: int | None = None,
    notes_title: str = "assumes:",
) -> str:
    """The page in ``style`` (``text`` or ``markdown``)."""
    if style == "markdown":
        return to_markdown(blocks, notes, notes_title)
    return to_text(blocks, notes, width, notes_title)
