"""The scan state file: what earlier scans saw, so a repeated scan reports only what changed.

One JSON file (``--state PATH``), always replaced atomically. A scan in progress is its
``current`` section (id, window, options) plus a journal beside it (``PATH.journal``): every
finished model is one JSON line there, flushed as it is written, so a scan killed at any
moment loses only the models that were in flight, and the next run reads state + journal
and resumes where it stopped. The journal is also where the report reads the models back
from (:mod:`.records`): a big scan never holds them all in memory. Finished scans are merged
into the top-level sections:

``models``        repo id → commit, config etag and sha256, hf_quant_config.json's sha256 (where
                  the scan read one) or why it could not be read (a transient reason has the
                  next scan ask again at the same commit), fingerprint, verdict, when
``fingerprints``  fingerprint id → first repo, label, model_types, fills, sizes seen
``model_types``   model_type → first repo;  ``keys``: unknown config key → first repo
``scans``         the last finished scans (id, window, counts)
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, BinaryIO

from ..core.files import atomic_write, atomic_write_text
from .listing import from_iso, iso
from .records import RecordStore
from .statefile import empty_state, lock_state, read_state, regular_file, validator
from .verdict import Record

KEEP_SCANS = 50  # finished scans remembered
KEEP_SIZES = 50  # size sets remembered per fingerprint
KEEP_EXEMPLARS = 10
FORGET_AFTER = timedelta(days=180)  # models not seen for this long are dropped


class ScanState:
    """The state of earlier scans plus the scan in progress; only the main thread touches it."""

    def __init__(self, path: Path | None, data: dict[str, Any] | None = None) -> None:
        self.path = path
        self.data = data or empty_state()
        self._store: RecordStore | None = None  # the scan in progress's records (the journal)
        self._lock: IO[bytes] | None = None
        self._dirty = False

    # -------------------------------------------------------------------------- reading

    @classmethod
    def load(cls, path: Path | None, lock: bool = False) -> ScanState:
        """Read ``path`` (a missing file is an empty state) and replay its journal.

        ``lock=True`` (what a scan does) first takes ``PATH.lock``, an OS file lock held until
        :meth:`close`: it keeps two scans off one state file, the second refused at once
        instead of losing the first's models. A reader needs no lock (the file is replaced
        atomically, so it always sees a whole state).
        """
        if path is None:
            return cls(None)
        # The real path: a symlink to the state locks, reads and replaces the file it names
        # (a second scan through the link or the file meets the same lock), never the link.
        path = Path(os.path.realpath(path))
        held = lock_state(path) if lock else None
        try:
            state = cls(path, read_state(path))
            state._lock = held
            state._replay(writable=held is not None)
        except BaseException:
            if held is not None:
                held.close()
            raise
        return state

    @property
    def journal_path(self) -> Path | None:
        return None if self.path is None else self.path.with_name(self.path.name + ".journal")

    def _replay(self, writable: bool) -> None:
        """Index the journal's lines of the scan in progress (only offsets are kept)."""
        jp = self.journal_path
        if jp is None or not jp.exists():
            return
        regular_file(jp)
        current = self.data.get("current")
        self._store = RecordStore.replay(
            jp, current["id"] if current else None, validator("record").is_valid, writable=writable
        )

    @property
    def models(self) -> Mapping[str, Mapping[str, Any]]:
        return self.data["models"]

    @property
    def fingerprints(self) -> Mapping[str, Mapping[str, Any]]:
        return self.data["fingerprints"]

    @property
    def model_types(self) -> Iterable[str]:
        return self.data["model_types"].keys()

    @property
    def keys(self) -> Iterable[str]:
        return self.data["keys"].keys()

    @property
    def current(self) -> dict[str, Any] | None:
        return self.data.get("current")

    def last_started(self) -> datetime | None:
        """When the last finished scan started (``--since last``)."""
        scans = self.data["scans"]
        return from_iso(scans[-1]["started"]) if scans else None

    # -------------------------------------------------------------------------- the scan

    def begin(
        self, scan_id: str, query: Mapping[str, Any], since: str, started: str
    ) -> tuple[bool, str | None]:
        """Start (or resume) a scan; returns (resumed, note)."""
        note = None
        cur = self.current
        if cur is not None:
            if cur.get("query") == dict(query):
                store = self._open_store(cur["id"], fresh=False)
                # Records an older slotdiff kept in the state file join the journal; transient
                # failures get another try (the journal's were dropped as it was replayed).
                for rec in cur["done"].values():
                    if not Record.from_dict(rec).transient:
                        store.add(rec)
                cur["done"] = {}
                self.checkpoint(force=True)
                return True, f"resumed scan {cur['id']} ({len(store)} models already done)"
            note = f"discarded the unfinished scan {cur['id']} (it listed with other options)"
        self.data["current"] = {
            "id": scan_id,
            "started": started,
            "since": since,
            "query": dict(query),
            "done": {},
        }
        self._open_store(scan_id, fresh=True)
        self.checkpoint(force=True)
        return False, note

    def _open_store(self, scan_id: str, fresh: bool) -> RecordStore:
        jp = self.journal_path
        if jp is None:
            self._store = RecordStore.anonymous(scan_id)
        elif fresh or self._store is None or self._store.scan_id != scan_id:
            if self._store is not None:
                self._store.seal()
            self._store = (
                RecordStore.fresh(jp, scan_id)
                if fresh
                else RecordStore.replay(jp, scan_id, validator("record").is_valid, writable=True)
            )
        return self._store

    @property
    def store(self) -> RecordStore:
        """The records of the scan in progress (after :meth:`begin`)."""
        assert self._store is not None, "store outside a scan"
        return self._store

    def done_ids(self) -> set[str]:
        """Repo ids the scan in progress has finished (state file and journal; for readers)."""
        cur = self.current
        if cur is None:
            return set()
        ids = set(cur["done"])
        if self._store is not None:
            ids.update(self._store.ids())
        return ids

    def record(self, rec: Record) -> None:
        """Remember one finished model: a journal line now (merged at :meth:`finish`)."""
        assert self.current is not None, "record() outside a scan"
        self.store.add(rec.to_dict())

    def checkpoint(self, force: bool = False, pretty: bool = False) -> None:
        """Write the state file atomically (compact; ``pretty``: indented, for people and for
        diffs of a committed state file). The scan's records stay in the journal."""
        if self.path is None or not (self._dirty or force):
            return
        self.data["updated"] = iso(datetime.now(UTC))
        if pretty:  # json's indenting encoder is pure Python: streamed, not joined in memory
            atomic_write(self.path, lambda fh: _write_indented(self.data, fh))
        else:
            text = json.dumps(self.data, separators=(",", ":"), default=str)
            atomic_write_text(self.path, text + "\n")
        self._dirty = False

    def finish(self, finished: str, counts: Mapping[str, Any]) -> None:
        """Merge the scan into what is known, forget the journal, write the state."""
        cur = self.current
        assert cur is not None
        if self._store is not None:  # begin() moved any records the state file held into it
            for _, at in self._store.offsets():  # one line at a time, never all of them
                self._merge(self._store.record(at), cur["id"], finished)
        self.data["scans"].append(
            {
                "id": cur["id"],
                "started": cur["started"],
                "finished": finished,
                "since": cur["since"],
                "query": cur["query"],
                "counts": dict(counts),
            }
        )
        self.data["scans"] = self.data["scans"][-KEEP_SCANS:]
        self._forget(finished)
        self.data["current"] = None
        self.checkpoint(force=True, pretty=True)
        self.close()
        jp = self.journal_path
        if jp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(jp)

    def close(self) -> None:
        """Stop writing the journal and release the lock (the state stays as last written;
        the records stay readable through the store until it is dropped)."""
        if self._store is not None:
            self._store.seal()
        if self._lock is not None:
            self._lock.close()  # closing the descriptor releases the flock
            self._lock = None

    # -------------------------------------------------------------------------- merging

    def _merge(self, rec: Record, scan_id: str, when: str) -> None:
        if rec.transient:
            return  # not seen: the next scan tries again
        if rec.verdict == "unchanged":
            entry = self.data["models"].get(rec.repo_id)
            if entry is not None:
                entry["checked"] = when
                if rec.commit:
                    entry["commit"] = rec.commit
            return
        self.data["models"][rec.repo_id] = {
            "commit": rec.commit or rec.listed.sha,
            "etag": rec.etag,
            "config_sha256": rec.config_sha256,
            "quant_file": rec.quant_file,
            "quant_reason": rec.quant_reason,
            "model_type": rec.model_type,
            "fingerprint": rec.fingerprint,
            "verdict": rec.verdict,
            "reason": rec.reason,
            "scan": scan_id,
            "checked": when,
        }
        if rec.fingerprint:
            fp = self.data["fingerprints"].setdefault(
                rec.fingerprint,
                {
                    "first_seen": rec.repo_id,
                    "scan": scan_id,
                    "date": when,
                    "label": rec.label,
                    "model_types": [],
                    "exemplars": [],
                    "sizes": [],
                },
            )
            if rec.fills and not fp.get("fills"):
                fp["fills"] = rec.fills
            if rec.model_type and rec.model_type not in fp["model_types"]:
                fp["model_types"].append(rec.model_type)
            if rec.repo_id not in fp["exemplars"] and len(fp["exemplars"]) < KEEP_EXEMPLARS:
                fp["exemplars"].append(rec.repo_id)
            if rec.sizes is not None and rec.sizes not in fp["sizes"] and len(fp["sizes"]) < KEEP_SIZES:
                fp["sizes"].append(rec.sizes)
        if rec.model_type:
            self.data["model_types"].setdefault(rec.model_type, rec.repo_id)
        for key in rec.new_keys:
            self.data["keys"].setdefault(key, rec.repo_id)

    def _forget(self, now: str) -> None:
        cutoff = from_iso(now) - FORGET_AFTER  # type: ignore[operator]
        models = self.data["models"]
        for repo, entry in list(models.items()):
            checked = from_iso(entry.get("checked"))
            if checked is not None and checked < cutoff:
                del models[repo]


def _write_indented(data: Any, fh: BinaryIO) -> None:
    """``json.dumps(data, indent=1)`` and a newline into ``fh``, in pieces of about 64 KB
    (the whole text of a 50,000-model state, and json's millions of chunks, never in memory)."""
    batch: list[str] = []
    held = 0
    for chunk in json.JSONEncoder(indent=1, default=str).iterencode(data):
        batch.append(chunk)
        held += len(chunk)
        if held >= 1 << 16:
            fh.write("".join(batch).encode("utf-8"))
            batch, held = [], 0
    batch.append("\n")
    fh.write("".join(batch).encode("utf-8"))
