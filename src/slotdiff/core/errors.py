"""The one error type every stage raises for bad input, so the CLI can print one line."""

from __future__ import annotations


class SlotdiffError(Exception):
    """Bad input or an unreachable source: names the source, the key (if any) and the reason.

    The CLI prints ``str(err)`` as a single line and exits with ``exit_code``; no stage
    prints tracebacks for these.
    """

    exit_code = 2

    def __init__(self, source: str, reason: str, key: str | None = None) -> None:
        self.source = source
        self.key = key
        self.reason = reason
        super().__init__(self.line())

    def line(self) -> str:
        where = f"{self.source}: {self.key}" if self.key else self.source
        # One line, always: reasons from libraries can carry newlines.
        reason = " ".join(self.reason.split())
        return f"{where}: {reason}"


class UsageError(SlotdiffError):
    """A command-line mistake (unknown flag value, missing argument)."""

    def __init__(self, reason: str) -> None:
        super().__init__("slotdiff", reason)
