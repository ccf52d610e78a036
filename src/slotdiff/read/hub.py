"""The Hugging Face Hub client: fetch a repo's config.json and explain failures in one line.

huggingface_hub is imported only here and only when a Hub lookup happens, so local runs
stay fast. It honours ``HF_TOKEN``, ``HF_ENDPOINT``, ``HF_HUB_OFFLINE`` and the HF cache.

``fetch_config`` is the scan's fetch: huggingface_hub 2.4 retries a failed metadata request
itself and sleeps ``Retry-After + 1`` seconds uncapped, so the one HEAD that may fail is
made here, without its retry pass, and retried under a :class:`Retrier` whose waits are
capped and counted against budgets.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import TypeVar

from .jsonpos import MAX_BYTES

T = TypeVar("T")

# Hub repo ids: "name" (legacy) or "org/name"; letters, digits, "-", "_", ".".
REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


class HubFailure(Exception):
    """Why a Hub fetch failed: ``kind`` is stable (for fallbacks and scan verdicts).

    Kinds: not_found, gated, revision, no_config, offline, network, http, too_large.
    """

    def __init__(
        self,
        kind: str,
        reason: str,
        retryable: bool = False,
        *,
        detail: str = "",
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.retryable = retryable
        # Finer cause for retryable failures: timeout, connection, rate_limited, server.
        self.detail = detail
        self.status = status
        self.retry_after = retry_after  # seconds the server asked for (429 / 503)

    def __str__(self) -> str:
        return self.reason


def looks_like_repo_id(text: str) -> bool:
    """True when ``text`` has the shape of a Hub repo id (and so is no path traversal)."""
    return bool(REPO_ID.match(text)) and ".." not in text


def _retry_after(err: BaseException) -> float | None:
    """The ``Retry-After`` of an HTTP error response, in seconds (delay-seconds form only)."""
    headers = getattr(getattr(err, "response", None), "headers", None) or {}
    value = str(headers.get("Retry-After") or headers.get("retry-after") or "").strip()
    return float(value) if value.isdigit() else None


# Transport-level failures of httpx/httpx2 (and requests), by class name along the MRO, so
# that raw exceptions escaping huggingface_hub are caught whatever HTTP client it uses.
_TRANSPORT = frozenset({"TransportError", "RequestError", "StreamError", "ConnectionError"})


def _describe(err: BaseException, repo_id: str, revision: str | None) -> HubFailure:
    """Map a huggingface_hub / transport exception to a HubFailure (order matters)."""
    from huggingface_hub import errors as hf

    status = getattr(getattr(err, "response", None), "status_code", None)
    # Ordered like huggingface_hub's own CLI: gated is a subclass of not-found.
    if isinstance(err, hf.GatedRepoError):
        return HubFailure(
            "gated", f"repo {repo_id} is gated: accept its terms on the Hub and set HF_TOKEN", status=status
        )
    if isinstance(err, hf.RevisionNotFoundError):
        return HubFailure("revision", f"revision {revision!r} not found in {repo_id}")
    if isinstance(err, hf.RepositoryNotFoundError):
        if status == 401:
            return HubFailure("gated", f"repo {repo_id} needs authentication (401): set HF_TOKEN", status=401)
        return HubFailure("not_found", f"repo {repo_id} not found on the Hub (or private)", status=status)
    if isinstance(err, hf.RemoteEntryNotFoundError):
        return HubFailure("no_config", f"repo {repo_id} has no config.json", status=status)
    if isinstance(err, hf.OfflineModeIsEnabled) or (
        isinstance(err, hf.LocalEntryNotFoundError)
        and (err.__cause__ is None or isinstance(err.__cause__, hf.OfflineModeIsEnabled))
    ):
        return HubFailure(
            "offline", "the Hub is offline (HF_HUB_OFFLINE) and config.json is not in the HF cache"
        )
    if isinstance(err, hf.LocalEntryNotFoundError) and err.__cause__ is not None:
        # huggingface_hub's retry pass gave up and nothing was cached: say why it failed.
        return _describe(err.__cause__, repo_id, revision)
    if isinstance(err, hf.HfHubHTTPError):
        if status in (401, 403):
            word = "needs authentication" if status == 401 else "refused access"
            return HubFailure(
                "gated", f"the Hub {word} ({status}) for {repo_id}: set HF_TOKEN", status=status
            )
        if status == 429:
            wait = _retry_after(err)
            after = f", Retry-After {wait:g} s" if wait is not None else ""
            return HubFailure(
                "http",
                f"the Hub answered HTTP 429 (rate limited{after})",
                retryable=True,
                detail="rate_limited",
                status=429,
                retry_after=wait,
            )
        retry = status in (408, 500, 502, 503, 504)
        return HubFailure(
            "http",
            f"the Hub answered HTTP {status}",
            retryable=retry,
            detail="server" if retry else "",
            status=status,
            retry_after=_retry_after(err) if retry else None,
        )
    if isinstance(err, hf.HFValidationError):
        return HubFailure("not_found", f"{repo_id!r} is not a valid repo id")
    name = type(err).__name__
    if "Timeout" in name:
        return HubFailure("network", "the Hub did not answer in time", retryable=True, detail="timeout")
    mro = {c.__name__ for c in type(err).__mro__}
    if (
        isinstance(err, (ConnectionError, OSError))
        or mro & _TRANSPORT
        or any(part in name for part in ("Connect", "Network", "Protocol", "Transport"))
    ):
        said = " ".join(str(err).split())[:160]
        return HubFailure(
            "network",
            f"the Hub could not be reached ({name}{': ' + said if said else ''})",
            retryable=True,
            detail="connection",
        )
    raise err


def _cached(repo_id: str, revision: str | None) -> str | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return found if isinstance(found, str) else None


def download_config(
    repo_id: str, revision: str | None = None, timeout: float | None = None
) -> tuple[str, str, str | None]:
    """Fetch ``config.json`` through huggingface_hub; return (path, origin, note).

    One metadata request without retries comes first, so an unreachable Hub fails in
    seconds (huggingface_hub alone would retry for ~20 s) and a cached copy is used
    instead; the size is checked before anything is downloaded.
    """
    if not looks_like_repo_id(repo_id):
        raise HubFailure("not_found", f"{repo_id!r} is not a valid repo id")
    import huggingface_hub
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "") in ("1", "true", "True"):
        cached = _cached(repo_id, revision)
        if cached:
            return cached, "hf-cache", "HF_HUB_OFFLINE is set: read from the HF cache"
        raise HubFailure("offline", "HF_HUB_OFFLINE is set and config.json is not in the HF cache")
    try:
        url = huggingface_hub.hf_hub_url(repo_id, "config.json", revision=revision)
        # HF_HUB_ETAG_TIMEOUT (default 10 s) bounds the probe, as it bounds huggingface_hub's.
        meta = huggingface_hub.get_hf_file_metadata(url, timeout=timeout or constants.HF_HUB_ETAG_TIMEOUT)
    except Exception as err:  # every failure becomes one line
        fail = _describe(err, repo_id, revision)
        if fail.retryable:
            cached = _cached(repo_id, revision)
            if cached:
                return cached, "hf-cache", f"{fail.reason}; read from the HF cache"
        raise fail from err
    if meta.size is not None and meta.size > MAX_BYTES:
        raise HubFailure("too_large", f"config.json is {meta.size:,} bytes, over the {MAX_BYTES:,}-byte cap")
    try:
        path = huggingface_hub.hf_hub_download(repo_id, "config.json", revision=revision)
    except Exception as err:
        raise _describe(err, repo_id, revision) from err
    return path, "hub", None


# ---------------------------------------------------------------------------- bounded retries


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
                    failure.reason += f"; not waiting over {pol.retry_after_cap:g} s"
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


@dataclass(frozen=True)
class ConfigFile:
    """A repo's config.json as fetched: its bytes (or a path to them) and which version it is.

    ``data`` and ``path`` are both None when the etag showed the file unchanged.
    """

    data: bytes | None
    path: str | None
    commit: str | None
    etag: str | None  # git blob sha1 of config.json (or the LFS sha256)
    size: int | None
    origin: str  # hub | hf-cache | unchanged

    def read(self) -> bytes | None:
        """The bytes, read from ``path`` (with the size cap) when not held."""
        if self.data is not None or self.path is None:
            return self.data

        size = os.path.getsize(self.path)
        if size > MAX_BYTES:
            raise HubFailure("too_large", f"config.json is {size:,} bytes, over the {MAX_BYTES:,}-byte cap")
        with open(self.path, "rb") as fh:
            return fh.read()


def _etag(value: str | None) -> str | None:
    """An ETag header as huggingface_hub stores it: no weak prefix, no quotes."""
    return None if not value else re.sub(r"^W/", "", value).strip('"')


@cache
def _hf() -> SimpleNamespace:
    """huggingface_hub's functions a scan calls per model, looked up once: its modules resolve
    names lazily on every attribute access (about eight import_module calls per request)."""
    import huggingface_hub
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    return SimpleNamespace(
        build_hf_headers=build_hf_headers,
        get_session=get_session,
        hf_raise_for_status=hf_raise_for_status,
        hf_hub_url=huggingface_hub.hf_hub_url,
        try_to_load_from_cache=huggingface_hub.try_to_load_from_cache,
    )


def _get(url: str, *, timeout: float, token: str | bool | None, size: int | None = None) -> ConfigFile:
    """One GET through huggingface_hub's HTTP session, bounded in time and in size.

    The body must arrive within ``timeout`` seconds of the headers (huggingface_hub's own
    download has a per-read timeout only, so a trickling server could hold it for ever), it
    may not pass the size cap whatever the headers said, and a short body is an error. The
    commit and etag come from the answer's headers (the first hop's, for an LFS redirect,
    which httpx follows without the token when it leaves the Hub's origin).
    """

    hf = _hf()
    headers = hf.build_hf_headers(token=token)
    with hf.get_session().stream("GET", url, headers=headers, timeout=timeout, follow_redirects=True) as resp:
        hf.hf_raise_for_status(resp)
        first = resp.history[0] if resp.history else resp
        declared = resp.headers.get("Content-Length")
        if declared and declared.isdigit() and int(declared) > MAX_BYTES:
            raise HubFailure(
                "too_large", f"config.json is {int(declared):,} bytes, over the {MAX_BYTES:,}-byte cap"
            )
        if size is None and declared and declared.isdigit() and not resp.headers.get("Content-Encoding"):
            size = int(declared)
        deadline = time.monotonic() + timeout
        chunks, total = [], 0
        for chunk in resp.iter_bytes():
            total += len(chunk)
            if total > MAX_BYTES:
                raise HubFailure("too_large", f"config.json is over the {MAX_BYTES:,}-byte cap")
            if time.monotonic() > deadline:
                raise HubFailure(
                    "network",
                    f"config.json took over {timeout:g} s to arrive",
                    retryable=True,
                    detail="timeout",
                )
            chunks.append(chunk)
    data = b"".join(chunks)
    if size is not None and len(data) != size and not resp.headers.get("Content-Encoding"):
        raise HubFailure(
            "network",
            f"config.json arrived with {len(data)} of {size} bytes",
            retryable=True,
            detail="connection",
        )
    etag = _etag(first.headers.get("X-Linked-Etag") or first.headers.get("ETag"))
    return ConfigFile(data, None, first.headers.get("X-Repo-Commit"), etag, len(data), "hub")


def fetch_config(
    repo_id: str,
    *,
    revision: str | None = None,
    timeout: float = 10.0,
    endpoint: str | None = None,
    token: str | bool | None = None,
    cache_dir: str | None = None,
    retrier: Retrier | None = None,
    known_etag: str | None = None,
    via_hf_cache: bool = False,
) -> ConfigFile:
    """Fetch ``config.json`` for a scan with requests whose waits are all bounded.

    ``revision`` (a commit sha from the listing, when it gave one) already in the HF cache:
    no request. A repo never seen before (no ``known_etag``): one GET through
    huggingface_hub's session (token, endpoint, user agent, its error classes), capped in
    size and time; its headers give the commit and etag. A repo seen before: first one HEAD
    (huggingface_hub's metadata call, without its retry pass), so an unchanged etag costs
    no download and an oversized file is refused unread, then the GET pinned to the HEAD's
    commit. ``via_hf_cache`` downloads through ``hf_hub_download`` instead (after the HEAD),
    which keeps the file in the HF cache but adds a second HEAD and huggingface_hub's own
    retries; a scan's per-model deadline bounds those.
    """
    if not looks_like_repo_id(repo_id):
        raise HubFailure("not_found", f"{repo_id!r} is not a valid repo id")
    import huggingface_hub

    retrier = retrier or Retrier()
    budget = retrier.budget()

    def describe(err: BaseException) -> HubFailure:
        return _describe(err, repo_id, revision)

    def cached(commit: str | None) -> str | None:
        if not commit or not re.fullmatch(r"[0-9a-f]{40}", commit):
            return None
        found = _hf().try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir, revision=commit)
        return found if isinstance(found, str) else None

    if (path := cached(revision)) is not None:
        return ConfigFile(None, path, revision, None, None, "hf-cache")
    url = _hf().hf_hub_url(repo_id, "config.json", revision=revision, endpoint=endpoint)
    if known_etag is None and not via_hf_cache:
        return retrier.call(lambda: _get(url, timeout=timeout, token=token), describe, budget)
    meta = retrier.call(
        lambda: huggingface_hub.get_hf_file_metadata(url, token=token, timeout=timeout, endpoint=endpoint),
        describe,
        budget,
    )
    if meta.size is not None and meta.size > MAX_BYTES:
        raise HubFailure("too_large", f"config.json is {meta.size:,} bytes, over the {MAX_BYTES:,}-byte cap")
    if known_etag is not None and meta.etag == known_etag:
        return ConfigFile(None, None, meta.commit_hash, meta.etag, meta.size, "unchanged")
    if (path := cached(meta.commit_hash)) is not None:
        return ConfigFile(None, path, meta.commit_hash, meta.etag, meta.size, "hf-cache")
    pinned = meta.commit_hash or revision
    if via_hf_cache:
        path = retrier.call(
            lambda: huggingface_hub.hf_hub_download(
                repo_id,
                "config.json",
                revision=pinned,
                endpoint=endpoint,
                token=token,
                cache_dir=cache_dir,
                etag_timeout=timeout,
            ),
            describe,
            budget,
        )
        return ConfigFile(None, path, meta.commit_hash, meta.etag, meta.size, "hub")
    at = huggingface_hub.hf_hub_url(repo_id, "config.json", revision=pinned, endpoint=endpoint)
    got = retrier.call(lambda: _get(at, timeout=timeout, token=token, size=meta.size), describe, budget)
    return ConfigFile(got.data, None, meta.commit_hash, meta.etag, got.size, "hub")
