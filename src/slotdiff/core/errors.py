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
        return self._line(self.source)

    def message(self, prog: str = "slotdiff") -> str:
        """The line after ``slotdiff: error: ``. A source that is the program itself (a usage
        error, ``slotdiff fit``'s parser) is not named again, so no line reads
        ``slotdiff: error: slotdiff: ...``; a command's name stays (``fit: argument --gpus``)."""
        source = self.source
        if source == prog or source.startswith(prog + " "):
            source = source[len(prog) :].strip()
        return self._line(source)

    def _line(self, source: str) -> str:
        where = ": ".join(p for p in (source, self.key) if p)
        # One line, always: reasons from libraries can carry newlines.
        reason = " ".join(self.reason.split())
        return f"{where}: {reason}" if where else reason


class UsageError(SlotdiffError):
    """A command-line mistake (unknown flag value, missing argument)."""

    def __init__(self, reason: str) -> None:
        super().__init__("slotdiff", reason)
        # str(err) is the reason alone: a message that quotes it ("bad point 'x': {err}") must
        # not name the program a second time.
        self.args = (" ".join(reason.split()),)


class OutputError(OSError):
    """A write slotdiff's output could not make (a full disk, a read-only file system, a quota,
    ``/dev/full`` as stdout), with ``filename`` the output it was for: the CLI reports it as
    one line and exit 2, like bad input, because nothing is wrong with slotdiff. Still an
    OSError, so callers that clean up after a failed write (the scan's report) see it."""

    @classmethod
    def of(cls, err: OSError, where: str) -> OutputError:
        """``err`` (any OSError of a write) as the failure to write ``where``."""
        if isinstance(err, OutputError):
            return err
        return cls(err.errno, err.strerror or str(err), where)

    def line(self) -> str:
        return f"{self.filename}: cannot write ({self.strerror})"
