"""This scan's finished models, on disk: the journal is also the store the report reads.

A 50,000-model scan cannot hold every :class:`Record` until the report is out (about 10 KB
each in Python objects). Each finished model is one JSON line in the journal (flushed at
once, so a SIGKILL loses only the models in flight), and what stays in memory is the line's
byte offset per repo id. The report, the merge into the state and ``ScanResult.records``
read the lines back, one at a time. Without a state file the lines go to an anonymous
temporary file instead.

The journal is replaced (unlinked, then created anew) rather than truncated when a new scan
starts, so a :class:`RecordView` of an earlier scan in the same process still reads its own
lines (POSIX keeps an unlinked file readable while it is open).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, overload

from ..core.errors import OutputError
from .verdict import Record


class RecordStore:
    """Records of one scan as JSON lines (``{"scan": id, "record": {...}}``), indexed by repo id.

    The last line for a repo wins (a transient failure retried on resume is written again).
    Only the main thread of a scan writes; readers (a report, a view) seek and read a line.
    """

    def __init__(self, fh: IO[bytes], scan_id: str | None, index: dict[str, int] | None = None) -> None:
        self._fh = fh
        self.scan_id = scan_id
        self._index: dict[str, int] = index or {}
        self._writable = True

    # -------------------------------------------------------------------------- opening

    @classmethod
    def anonymous(cls, scan_id: str | None = None) -> RecordStore:
        """A store in an anonymous temporary file (a scan without a state file)."""
        return cls(tempfile.TemporaryFile("w+b"), scan_id)

    @classmethod
    def replay(
        cls, path: Path, scan_id: str | None, valid: Callable[[Any], bool], writable: bool
    ) -> RecordStore:
        """The journal at ``path``, indexed for ``scan_id`` (``writable``: the scan's own, created
        when missing and appended to; else a reader's, which must exist).

        A line cut short by a kill, a line of another scan, or a record that fails ``valid``
        is not indexed: that model is examined again. Transient failures are dropped too
        (they get another try). Nothing but the offsets is kept.
        """
        if writable:
            path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path, "a+b" if writable else "rb")  # noqa: SIM115 (owned by the store)
        index: dict[str, int] = {}
        if scan_id is not None:
            fh.seek(0)
            offset = 0
            for line in fh:
                at, offset = offset, offset + len(line)
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(entry, dict) or entry.get("scan") != scan_id:
                    continue
                record = entry.get("record")
                if not valid(record):
                    continue
                if Record.from_dict(record).transient:
                    index.pop(record["repo_id"], None)
                else:
                    index[record["repo_id"]] = at
        store = cls(fh, scan_id, index)
        store._writable = writable
        return store

    @classmethod
    def fresh(cls, path: Path, scan_id: str) -> RecordStore:
        """A new, empty journal at ``path`` for ``scan_id`` (the old file is unlinked, not
        truncated: views of the scan it held keep reading it)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return cls(open(path, "a+b"), scan_id)

    # -------------------------------------------------------------------------- writing

    def add(self, record: Mapping[str, Any]) -> int:
        """Append one record (a Record's dict); returns its line's offset."""
        assert self._writable, "add() after seal()"
        line = json.dumps({"scan": self.scan_id, "record": record}, default=str).encode("utf-8") + b"\n"
        fh = self._fh
        try:
            fh.seek(0, os.SEEK_END)
            at = fh.tell()
            fh.write(line)
            fh.flush()  # in the OS's hands: survives SIGKILL of this process
        except OSError as err:  # a full disk: the lines before stay; a part line is skipped on replay
            name = fh.name if isinstance(fh.name, str) else "the scan's temporary journal"
            raise OutputError.of(err, name) from err
        self._index[record["repo_id"]] = at
        return at

    def seal(self) -> None:
        """No more writes (the scan is over); the lines stay readable while the store lives."""
        with contextlib.suppress(OSError, ValueError):
            self._fh.flush()
        self._writable = False

    # -------------------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, repo_id: object) -> bool:
        return repo_id in self._index

    def ids(self) -> Iterator[str]:
        return iter(self._index)

    def offset(self, repo_id: str) -> int:
        return self._index[repo_id]

    def offsets(self) -> Iterator[tuple[str, int]]:
        return iter(self._index.items())

    def raw(self, at: int) -> dict[str, Any]:
        """The record dict of the line at ``at`` (as :meth:`Record.to_dict` wrote it)."""
        fh = self._fh
        fh.seek(at)
        return json.loads(fh.readline())["record"]

    def record(self, at: int) -> Record:
        return Record.from_dict(self.raw(at))


class RecordView(Sequence[Record]):
    """Records read from a store, in a fixed order (offsets), one at a time: a sequence of
    :class:`Record` to its users, a list of byte offsets in memory."""

    def __init__(self, store: RecordStore, offsets: Sequence[int]) -> None:
        self.store = store
        self.offsets = list(offsets)

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, i: int) -> Record: ...
    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...
    def __getitem__(self, i: int | slice) -> Record | list[Record]:
        if isinstance(i, slice):
            return [self.store.record(at) for at in self.offsets[i]]
        return self.store.record(self.offsets[i])

    def __iter__(self) -> Iterator[Record]:
        for at in self.offsets:
            yield self.store.record(at)

    def raw(self) -> Iterator[dict[str, Any]]:
        """The records as the dicts they were written as (no Record built: the report's pass)."""
        for at in self.offsets:
            yield self.store.raw(at)
