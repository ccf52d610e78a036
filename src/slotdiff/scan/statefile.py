"""The scan state file on disk: its lock, its type, its schema (schemas/scan-state.schema.json).

Everything a hostile or hand-edited state file could do is stopped here, before a scan
starts: a FIFO or folder in its place (which would block or crash the read), a second scan
on the same file (which would lose one scan's models), JSON of the wrong shape (which
would crash the merge), a date that is not one. Each is one line and exit 2.
"""

from __future__ import annotations

import fcntl  # POSIX only: scan (not lint or analysis) needs a POSIX system
import json
import os
import stat
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import IO, Any

from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from .listing import from_iso

FORMAT = "slotdiff-scan-state"
VERSION = 1
MAX_STATE_BYTES = 1 << 30  # a state past 1 GiB is not one slotdiff wrote


def empty_state() -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "updated": None,
        "scans": [],
        "models": {},
        "fingerprints": {},
        "model_types": {},
        "keys": {},
        "current": None,
    }


# ------------------------------------------------------------------------------ the file


def regular_file(path: Path) -> None:
    """Refuse a path that exists and is not a regular file (a FIFO would block the read)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise SlotdiffError(str(path), f"cannot read the scan state ({err.strerror})") from err
    if not stat.S_ISREG(mode):
        raise SlotdiffError(str(path), "is not a regular file; the scan state must be a plain JSON file")


def lock_state(path: Path) -> IO[bytes]:
    """An exclusive OS lock on ``PATH.lock``, or exit 2 when another scan holds it.

    The lock is on a file of its own because the state file itself is replaced (renamed
    over) at every checkpoint, and a lock on a replaced inode guards nothing.
    """
    regular_file(path)
    lock_path = path.with_name(path.name + ".lock")
    regular_file(lock_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as err:
        raise SlotdiffError(str(lock_path), f"cannot open the scan lock ({err.strerror})") from err
    fh = os.fdopen(fd, "r+b")
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        fh.close()
        raise SlotdiffError(
            str(path),
            "another scan is using this state file (it holds "
            f"{lock_path.name}); wait for it to finish, or give this scan its own --state",
        ) from err
    return fh


def read_state(path: Path) -> dict[str, Any]:
    """The state in ``path`` (empty when missing), checked against scan-state.schema.json."""
    if not path.exists():
        return empty_state()
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_STATE_BYTES + 1)
        if len(raw) > MAX_STATE_BYTES:
            raise ValueError(f"over {MAX_STATE_BYTES} bytes")
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise SlotdiffError(
            str(path), f"cannot read the scan state ({err}); move it away to start over"
        ) from err
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SlotdiffError(str(path), "is not a slotdiff scan state file")
    if data.get("version") != VERSION:
        raise SlotdiffError(str(path), f"scan state version {data.get('version')} is not {VERSION}")
    error = next(iter(sorted(validator().iter_errors(data), key=lambda e: list(e.path))), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top)"
        raise SlotdiffError(
            str(path), f"scan state {where}: {error.message[:200]}; move the file away to start over"
        )
    for where, value in _dates(data):
        try:
            from_iso(value)
        except ValueError as err:
            raise SlotdiffError(str(path), f"scan state {where}: {value!r} is not a date") from err
    for key, value in empty_state().items():
        data.setdefault(key, value)
    return data


def _dates(data: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    for i, scan in enumerate(data.get("scans") or ()):
        yield f"scans/{i}/started", scan["started"]
        if scan.get("finished"):
            yield f"scans/{i}/finished", scan["finished"]
    for repo, entry in (data.get("models") or {}).items():
        if entry.get("checked"):
            yield f"models/{repo}/checked", entry["checked"]
    cur = data.get("current")
    if cur:
        yield "current/started", cur["started"]
        if cur["since"]:
            yield "current/since", cur["since"]


@cache
def validator(part: str | None = None) -> Any:
    """A jsonschema validator for the whole state, or for one of its ``$defs`` (a record)."""
    from jsonschema import Draft202012Validator

    schema = load_schema_file("scan-state.schema.json")
    if part is not None:
        schema = {**schema, "$ref": f"#/$defs/{part}"}
        schema.pop("required")
        schema.pop("properties")
        schema.pop("type")
    return Draft202012Validator(schema)
