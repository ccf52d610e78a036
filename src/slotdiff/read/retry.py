"""Bounded retries against a failing Hub: a RetryPolicy of attempts, backoff, a cap on Retry-
After and wait budgets per model and in total, and the Retrier the scan's workers share."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .hub_errors import HubFailure

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How long a scan may wait on a failing Hub: per request, per model, and in total.

    A ``Retry-After`` above ``retry_after_cap`` is not waited for (the model is skipped as
    rate limited and retried by the next scan); every wait counts against ``model_budget``
    and ``total_budget``, so no worker ever sleeps for the hour a server may ask for.
    """

    attempts: int = 4  # tries per request, the first one included
    backoff: float = 1.0  # first wait; doubles per retry
    max_backoff: float = 8.0
    retry_after_cap: float = 30.0
    model_budget: float = 30.0  # seconds of waiting for one model
    total_budget: float = 300.0  # seconds of waiting for the whole scan


class Retrier:
    """Retry a retryable :class:`HubFailure` under a :class:`RetryPolicy`; shared by workers.

    A 429 pauses every worker until its ``Retry-After`` has passed (one polite client, not
    N impatient ones). ``cancel`` (set on Ctrl-C or when the scan stops) ends any wait at once.
    """

    def __init__(self, policy: RetryPolicy | None = None, cancel: threading.Event | None = None) -> None:
        self.policy = policy or RetryPolicy()
        self.cancel = cancel or threading.Event()
        self._lock = threading.Lock()
        self._resume_at = 0.0  # monotonic time before which nobody sends (after a 429)
        self.waited = 0.0  # total seconds spent waiting, all workers together
        self.retries = 0

    def budget(self) -> list[float]:
        """A fresh per-model wait budget (a one-element list: seconds left)."""
        return [self.policy.model_budget]

    def _take(self, seconds: float, budget: list[float]) -> bool:
        with self._lock:
            if seconds > budget[0] or self.waited + seconds > self.policy.total_budget:
                return False
            budget[0] -= seconds
            self.waited += seconds
            self.retries += 1
            return True

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self.cancel.wait(seconds):
            raise HubFailure("network", "the scan was stopped", retryable=True, detail="cancelled")

    def _pause_first(self, budget: list[float]) -> None:
        with self._lock:
            wait = self._resume_at - time.monotonic()
        if wait > 0:
            # Waiting out another worker's 429 spends this model's budget too.
            wait = min(wait, max(budget[0], 0.0))
            with self._lock:
                budget[0] -= wait
            self._sleep(wait)

    def call(
        self, fn: Callable[[], T], describe: Callable[[BaseException], HubFailure], budget: list[float]
    ) -> T:
        """``fn()`` with retries; any exception becomes a HubFailure through ``describe``."""
        pol = self.policy
        backoff = pol.backoff
        for attempt in range(1, pol.attempts + 1):
            if self.cancel.is_set():
                raise HubFailure("network", "the scan was stopped", retryable=True, detail="cancelled")
            self._pause_first(budget)
            try:
                return fn()
            except HubFailure as fail:
                failure = fail
            except Exception as err:  # raw transport errors escape huggingface_hub
                failure = describe(err)
            if not failure.retryable or attempt == pol.attempts:
                raise failure
            if failure.retry_after is not None:
                if failure.retry_after > pol.retry_after_cap:
                    failure.reason = (
                        f"rate limited: retry after {failure.retry_after:g} s "
                        f"(the Hub's Retry-After; not waiting over {pol.retry_after_cap:g} s)"
                    )
                    raise failure
                wait = failure.retry_after
                with self._lock:
                    self._resume_at = max(self._resume_at, time.monotonic() + wait)
            else:
                wait = min(backoff, pol.max_backoff) * random.uniform(0.8, 1.2)
                backoff *= 2
            if not self._take(wait, budget):
                failure.reason += " (retry budget spent)"
                raise failure
            self._sleep(wait)
        raise AssertionError("unreachable")
