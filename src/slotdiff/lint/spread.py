"""A lint run's files spread over the machine's cores: each file is read and checked on its
own, so N processes check N shares at once and the results come back in the files' order.

The extra processes are forks of this one (everything imported and every cache already
warm: nothing is started, nothing re-imported); each checks its share and sends the
results back pickled through a pipe. Files of one size go to one share, so identical copies
(a training run's checkpoint folders) stay together and are read once, as in one process.
A share whose process fails in any way is checked again here, so the answer never depends
on the spread: only the time does.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

# Below this many files a share, a fork costs more than it saves (one file takes about a
# millisecond to check; a fork and its pipe about two).
MIN_FILES_PER_JOB = 16


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def jobs_for(files: int, jobs: int | None) -> int:
    """How many processes check ``files`` files: ``jobs`` (None: every usable CPU), fewer
    when the shares would be small, and one where forking is unsafe or unavailable (a
    process with threads running, or an OS without fork)."""
    want = usable_cpus() if jobs is None else jobs
    want = min(want, files // MIN_FILES_PER_JOB) if jobs is None else min(want, files)
    if want <= 1 or not hasattr(os, "fork") or threading.active_count() > 1:
        return 1
    return want


def shares(paths: Sequence[str], n: int) -> list[list[int]]:
    """``n`` lists of indices into ``paths``, files of one size in one list, the lists
    about equal in files (the largest groups placed first, each on the emptiest list)."""
    groups: dict[object, list[int]] = {}
    for i, p in enumerate(paths):
        try:
            key: object = os.stat(p).st_size
        except OSError:
            key = ("unreadable", i)  # checked wherever it lands: its own error says why
        groups.setdefault(key, []).append(i)
    out: list[list[int]] = [[] for _ in range(n)]
    for group in sorted(groups.values(), key=len, reverse=True):
        min(out, key=len).extend(group)
    return [sorted(s) for s in out]


def spread(paths: Sequence[str], check: Callable[[list[str]], list[T]], jobs: int | None = None) -> list[T]:
    """``check(paths)``, with the paths split over ``jobs_for`` processes; the results in
    the order of ``paths``."""
    n = jobs_for(len(paths), jobs)
    if n == 1:
        return check(list(paths))
    parts = [s for s in shares(paths, n) if s]
    for stream in (sys.stdout, sys.stderr):  # a fork must not write this process's buffered output
        stream.flush()
    children = [_fork(check, [paths[i] for i in part]) for part in parts[1:]]
    try:
        mine = check([paths[i] for i in parts[0]])
    except BaseException:  # the run stops (a refused policy, ^C): no child is left behind
        for child in children:
            _abandon(child)
        raise
    results: dict[int, T] = dict(zip(parts[0], mine, strict=True))
    for part, child in zip(parts[1:], children, strict=True):
        got = _collect(child)
        if got is None or len(got) != len(part):  # the share failed there: check it here
            got = check([paths[i] for i in part])
        results.update(zip(part, got, strict=True))
    return [results[i] for i in range(len(paths))]


def _fork(check: Callable[[list[str]], list[T]], names: list[str]) -> tuple[int, int] | None:
    """A child checking ``names``: (its pid, the read end of its pipe); None when no fork."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid:
        os.close(write_end)
        return pid, read_end
    # The child: check, send, and leave without running the parent's exit handlers.
    status = 1
    try:
        os.close(read_end)
        payload = pickle.dumps(check(names), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(payload)
        status = 0
    finally:
        os._exit(status)


def _abandon(child: tuple[int, int] | None) -> None:
    """Stop a child whose results are no longer wanted, and reap it."""
    if child is None:
        return
    pid, read_end = child
    os.close(read_end)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _collect(child: tuple[int, int] | None) -> list[T] | None:
    """The child's results, or None when it could not give them (killed, failed, no fork)."""
    if child is None:
        return None
    pid, read_end = child
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not payload:
        return None
    try:
        got = pickle.loads(payload)  # our own child's bytes, through our own pipe
    except Exception:  # a truncated payload (the child was killed mid-write)
        return None
    return got if isinstance(got, list) else None
