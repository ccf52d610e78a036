"""A rich Console whose output can carry colour but never a config's control characters.

rich passes the text it is given through to the terminal, escape codes included, so a
model_type of ``"\\x1b[31m..."`` would restyle (or, with other sequences, retitle or clear)
the user's terminal. This console escapes the text of every segment just before rich turns
segments into output, then marks rich's own colour codes (core.printable.STYLE_MARK), the
only ones the stdout stream lets through.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.printable import STYLE_MARK, printable

_RICH_SGR = re.compile("\x1b\\[[0-9;]*m")


def safe_console(**kwargs: Any) -> Any:
    """A ``rich.console.Console(**kwargs)`` that escapes what it was given (rich loads here)."""
    from rich.console import Console
    from rich.segment import Segment

    class _SafeConsole(Console):
        def _render_buffer(self, buffer: Any) -> str:
            clean = [seg if seg.control else Segment(printable(seg.text), seg.style) for seg in buffer]
            return _RICH_SGR.sub(lambda m: STYLE_MARK + m.group(), super()._render_buffer(clean))

    return _SafeConsole(**kwargs)
