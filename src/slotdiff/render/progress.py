"""Progress for long work: a rich progress bar on stderr when it is a terminal, nothing when
it is piped or redirected (a CI log or a captured stderr gets no control sequences)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import TextIO, TypeVar

T = TypeVar("T")

# Fewer items than this finish before a bar would be seen: no bar.
MIN_ITEMS = 32


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def track(items: Sequence[T], label: str, stream: TextIO | None = None) -> Iterator[T]:
    """``items`` one by one, with a transient progress bar on ``stream`` (stderr) if it is a
    terminal and there are at least MIN_ITEMS of them."""
    stream = stream or sys.stderr
    if len(items) < MIN_ITEMS or not is_terminal(stream):
        yield from items
        return
    from rich.console import Console
    from rich.progress import track as rich_track

    yield from rich_track(items, description=label, console=Console(file=stream), transient=True)
