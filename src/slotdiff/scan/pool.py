"""A bounded pool of worker threads where every task has a deadline.

A task still running at its deadline is given up: the scan gets a ``timeout`` outcome for
it at once, a fresh worker takes the stuck one's place, and the stuck thread (a daemon)
finishes in the background and drops its result. So one slow model never stalls the scan,
and a worker asleep inside a library can never hold the process open at exit.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    """What became of one task: ``ok`` (value), ``error`` (exception) or ``timeout``."""

    key: Hashable
    item: Any
    status: str
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


class DeadlinePool:
    """``workers`` daemon threads running ``fn(item)``; each task gets ``deadline`` seconds."""

    def __init__(self, fn: Callable[[Any], Any], workers: int, deadline: float | None) -> None:
        self._fn = fn
        self._deadline = deadline
        self._tasks: queue.Queue[tuple[Hashable, Any] | None] = queue.Queue()
        self._results: queue.Queue[Outcome] = queue.Queue()
        self._lock = threading.Lock()
        self._running: dict[Hashable, tuple[float, Any]] = {}
        self._workers = max(1, workers)
        self._spawned = 0
        self._threads: list[threading.Thread] = []
        self.abandoned = 0  # threads given up on (still finishing in the background)
        self.pending = 0  # submitted, outcome not yet handed out
        for _ in range(self._workers):
            self._spawn()

    def _spawn(self) -> None:
        self._spawned += 1
        t = threading.Thread(target=self._work, name=f"slotdiff-fetch-{self._spawned}", daemon=True)
        self._threads.append(t)
        t.start()

    def _work(self) -> None:
        while True:
            job = self._tasks.get()
            if job is None:
                return
            key, item = job
            start = time.monotonic()
            with self._lock:
                self._running[key] = (start, item)
            try:
                out = Outcome(key, item, "ok", value=self._fn(item))
            except BaseException as err:  # handed to the scan, which records it
                out = Outcome(key, item, "error", error=err)
            with self._lock:
                mine = self._running.pop(key, None) is not None
            if not mine:
                return  # given up on at its deadline: a replacement worker already runs
            self._results.put(
                Outcome(out.key, out.item, out.status, out.value, out.error, time.monotonic() - start)
            )

    def submit(self, key: Hashable, item: Any) -> None:
        self.pending += 1
        self._tasks.put((key, item))

    def _expire(self) -> float | None:
        """Give up on tasks past their deadline; return seconds until the next deadline."""
        if self._deadline is None:
            return None
        now = time.monotonic()
        expired: list[tuple[Hashable, Any, float]] = []
        next_in: float | None = None
        with self._lock:
            for key, (start, item) in list(self._running.items()):
                left = start + self._deadline - now
                if left <= 0:
                    del self._running[key]
                    expired.append((key, item, now - start))
                else:
                    next_in = left if next_in is None else min(next_in, left)
        for key, item, took in expired:
            self.abandoned += 1
            self._results.put(Outcome(key, item, "timeout", seconds=took))
            self._spawn()
        return next_in

    def poll(self, timeout: float) -> list[Outcome]:
        """Outcomes ready now, waiting up to ``timeout`` seconds for the first one."""
        next_in = self._expire()
        wait = timeout if next_in is None else max(0.0, min(timeout, next_in + 0.001))
        out: list[Outcome] = []
        try:
            out.append(self._results.get(timeout=wait) if wait > 0 else self._results.get_nowait())
            while True:
                out.append(self._results.get_nowait())
        except queue.Empty:
            pass
        if not out:
            self._expire()
            try:
                while True:
                    out.append(self._results.get_nowait())
            except queue.Empty:
                pass
        self.pending -= len(out)
        return out

    def close(self, wait: float = 0.0) -> None:
        """Stop the idle workers; busy and abandoned ones are daemons and end on their own.
        ``wait``: give the busy ones up to that many seconds to end first, when the scan stops
        early (a daemon thread still inside a C call as the interpreter finalizes can crash the
        process after its error is written: exit -11 instead of 2)."""
        for _ in range(self._workers):
            self._tasks.put(None)
        end = time.monotonic() + wait
        for t in self._threads if wait > 0 else ():
            t.join(max(0.0, end - time.monotonic()))
