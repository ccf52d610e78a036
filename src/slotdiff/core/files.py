"""Safe file writing: atomic replace, and never outside the folder the user named."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .errors import OutputError, SlotdiffError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str, limit: int = 120) -> str:
    """A file-name-safe rendering of an untrusted string (repo id, model name)."""
    name = _UNSAFE.sub("_", text.replace("/", "__")).strip("._") or "unnamed"
    return name[:limit]


def safe_child(folder: Path, name: str) -> Path:
    """``folder/name``, refusing names that would escape ``folder``."""
    if (
        not name
        or "\x00" in name
        or os.sep in name
        or (os.altsep and os.altsep in name)
        or name in (".", "..")
    ):
        raise SlotdiffError(str(folder), f"refusing unsafe file name {name!r}")
    base = folder.resolve()
    target = (base / name).resolve()
    if target.parent != base:
        raise SlotdiffError(str(folder), f"refusing to write outside it: {name!r}")
    return target


def current_umask() -> int:
    """The process's umask: from /proc on Linux, else by setting it and putting it back (there
    is no getter; the brief swap is why /proc comes first, with scan's worker threads about)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Create or replace ``path`` atomically: ``write`` fills a temp file in the same folder,
    which is synced and renamed over ``path``. Readers see the old file or the new one,
    never a part; a writer killed midway leaves the old file as it was (and at worst a
    ``.NAME.*.tmp`` beside it, which no later run reads or trips over)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise OutputError.of(err, str(path)) from err
    try:
        # mkstemp makes the file 0600; a written report or plot gets the mode any new file of
        # the user's would (0666 less the umask), so a shared CI folder or a team can read it.
        os.chmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(err, OSError) and not isinstance(err, BrokenPipeError):
            raise OutputError.of(err, str(path)) from err  # named by the file asked for, not the temp
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_write`)."""
    data = text.encode("utf-8")
    atomic_write(path, lambda fh: fh.write(data))  # type: ignore[arg-type, return-value]


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def _not_regular(mode: int) -> str | None:
    """What a file of this mode is, when it is not a regular file (None when it is one)."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def read_capped(path: str | os.PathLike[str], name: str, cap: int) -> bytes:
    """The bytes of a regular file the user named, at most ``cap`` of them, or a SlotdiffError
    naming ``name``: a FIFO, device, socket or folder (a symlink to one included) is refused
    without blocking on it, and no more than ``cap + 1`` bytes are ever read, whatever size
    the file system reports (``/proc`` files say 0)."""
    try:
        kind = _not_regular(os.stat(path).st_mode)
        if kind:
            raise SlotdiffError(name, f"not a regular file ({kind})")
        # O_NONBLOCK: a FIFO swapped in after the stat above still cannot block the open,
        # and fstat on the open file is the one that decides.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except PermissionError as err:
        raise SlotdiffError(name, "permission denied") from err
    except OSError as err:
        raise SlotdiffError(name, f"cannot read: {err.strerror or err}") from err
    with os.fdopen(fd, "rb") as fh:
        try:
            info = os.fstat(fd)
            kind = _not_regular(info.st_mode)
            if kind:
                raise SlotdiffError(name, f"not a regular file ({kind})")
            if info.st_size > cap:
                raise SlotdiffError(name, f"file is {info.st_size:,} bytes, over the {cap:,}-byte cap")
            data = fh.read(cap + 1)
        except OSError as err:
            raise SlotdiffError(name, f"cannot read: {err.strerror or err}") from err
    if len(data) > cap:
        raise SlotdiffError(name, f"file is over the {cap:,}-byte cap")
    return data


def drop_stdout(stream: object) -> None:
    """After stdout failed to take the output (a full disk, /dev/full): what is still buffered
    goes to /dev/null, so the interpreter's own flush at exit neither fails again nor prints
    a second error after the one line the CLI said."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())  # type: ignore[attr-defined]
        os.close(null)
    except (OSError, AttributeError, ValueError):
        pass  # not a real file (a test's capture): nothing is flushed at exit
