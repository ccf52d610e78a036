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
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from types import SimpleNamespace
from typing import Any, TypeVar

from ..core.errors import SlotdiffError
from ..core.quantity import parse_real
from .hub_errors import HubFailure, describe_failure, looks_like_repo_id
from .jsonpos import MAX_BYTES
from .offline import hf_cache_may_hold, offline
from .retry import Retrier, RetryPolicy

T = TypeVar("T")


def _cached(repo_id: str, revision: str | None) -> str | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return found if isinstance(found, str) else None


# The analysis's bounds on the Hub (the scan has its own flags): every request and retry
# of one ``slotdiff MODEL`` within DEADLINE seconds, no Retry-After above the cap waited for.
DEADLINE = 60.0
ANALYZE_RETRY = RetryPolicy(
    attempts=3, backoff=1.0, max_backoff=4.0, retry_after_cap=10.0, model_budget=20.0, total_budget=20.0
)


OFFLINE_MISS = "HF_HUB_OFFLINE is set and config.json is not in the HF cache"


def hub_deadline() -> float:
    """The analysis's Hub deadline: ``SLOTDIFF_HUB_DEADLINE`` seconds when set, else DEADLINE."""
    text = os.environ.get("SLOTDIFF_HUB_DEADLINE", "").strip()
    if not text:
        return DEADLINE
    try:
        return parse_real(text, exclusive_minimum=True)
    except SlotdiffError as err:
        raise SlotdiffError("SLOTDIFF_HUB_DEADLINE", err.reason) from err


def quiet_side_requests() -> None:
    """Turn off huggingface_hub's agent-harness lookup before any request.

    Building its user agent, huggingface_hub fetches ``{endpoint}/api/agent-harnesses`` once
    a day and caches the answer under HF_HOME; a broken or hostile endpoint that answers it
    with other JSON poisons that cache, and every later request fails with an
    AttributeError. slotdiff needs no agent detection: the lookup is answered empty here,
    so no side request is made and no cached answer is read.
    """
    try:
        from huggingface_hub.utils import _detect_agent
    except ImportError:  # a huggingface_hub without it: nothing to turn off
        return
    if getattr(_detect_agent, "_registry", 0) is None:
        _detect_agent._registry = {"standardEnvVars": [], "harnesses": {}}


def download_config(
    repo_id: str, revision: str | None = None, timeout: float | None = None, deadline: float | None = None
) -> tuple[str, str, str | None]:
    """Fetch ``config.json`` through huggingface_hub; return (path, origin, note).

    One metadata request comes first, without huggingface_hub's own retries (which sleep
    any Retry-After, an hour if the server says so): it is retried here under
    ``ANALYZE_RETRY``, so an unreachable or rate-limiting Hub fails in seconds with the
    reason ("rate limited: retry after 3600 s") and a cached copy is used instead. The size
    is checked before anything is downloaded, and the whole fetch, the download included
    (which a stalled or trickling server could otherwise hold for minutes), ends within
    ``deadline`` seconds.
    """
    if not looks_like_repo_id(repo_id):
        raise HubFailure("not_found", f"{repo_id!r} is not a valid repo id")
    if offline() and not hf_cache_may_hold(repo_id):  # the answer below, without the import
        raise HubFailure("offline", OFFLINE_MISS)
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "") in ("1", "true", "True"):
        cached = _cached(repo_id, revision)
        if cached:
            return cached, "hf-cache", "HF_HUB_OFFLINE is set: read from the HF cache"
        raise HubFailure("offline", OFFLINE_MISS)
    quiet_side_requests()
    deadline = deadline or hub_deadline()
    probe = timeout or constants.HF_HUB_ETAG_TIMEOUT  # HF_HUB_ETAG_TIMEOUT (default 10 s)
    try:
        return within(lambda: _download(repo_id, revision, min(probe, deadline)), deadline)
    except HubFailure as fail:
        if fail.retryable:
            cached = _cached(repo_id, revision)
            if cached:
                return cached, "hf-cache", f"{fail.reason}; read from the HF cache"
        raise


def _download(repo_id: str, revision: str | None, timeout: float) -> tuple[str, str, str | None]:
    import huggingface_hub

    def describe(err: BaseException) -> HubFailure:
        return describe_failure(err, repo_id, revision)

    retrier = Retrier(ANALYZE_RETRY)
    url = huggingface_hub.hf_hub_url(repo_id, "config.json", revision=revision)
    meta = retrier.call(
        lambda: huggingface_hub.get_hf_file_metadata(url, timeout=timeout), describe, retrier.budget()
    )
    if meta.size is not None and meta.size > MAX_BYTES:
        raise HubFailure("too_large", f"config.json is {meta.size:,} bytes, over the {MAX_BYTES:,}-byte cap")
    from huggingface_hub.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its retry warnings are not slotdiff's one line
    try:
        path = huggingface_hub.hf_hub_download(
            repo_id, "config.json", revision=revision, etag_timeout=timeout
        )
    except Exception as err:
        raise describe(err) from err
    finally:
        hf_logging.set_verbosity(verbosity)
    return path, "hub", None


def within(fn: Callable[[], T], seconds: float) -> T:
    """``fn()`` in a daemon thread, or a retryable HubFailure once ``seconds`` have passed
    (the thread is left to end with the process: huggingface_hub's calls cannot be cancelled)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as err:  # handed to the caller's thread
            box["error"] = err

    worker = threading.Thread(target=target, name="slotdiff-fetch-analyze", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise HubFailure(
            "network",
            f"no complete answer from the Hub within {seconds:g} s",
            retryable=True,
            detail="timeout",
        )
    if "error" in box:
        raise box["error"]
    return box["value"]


# ---------------------------------------------------------------------------- bounded retries


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

    quiet_side_requests()

    return SimpleNamespace(
        build_hf_headers=build_hf_headers,
        get_session=get_session,
        hf_raise_for_status=hf_raise_for_status,
        hf_hub_url=huggingface_hub.hf_hub_url,
        try_to_load_from_cache=huggingface_hub.try_to_load_from_cache,
    )


def _get(
    url: str,
    *,
    timeout: float,
    token: str | bool | None,
    size: int | None = None,
    filename: str = "config.json",
    cap: int = MAX_BYTES,
) -> ConfigFile:
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
        if declared and declared.isdigit() and int(declared) > cap:
            raise HubFailure("too_large", f"{filename} is {int(declared):,} bytes, over the {cap:,}-byte cap")
        if size is None and declared and declared.isdigit() and not resp.headers.get("Content-Encoding"):
            size = int(declared)
        deadline = time.monotonic() + timeout
        chunks, total = [], 0
        for chunk in resp.iter_bytes():
            total += len(chunk)
            if total > cap:
                raise HubFailure("too_large", f"{filename} is over the {cap:,}-byte cap")
            if time.monotonic() > deadline:
                raise HubFailure(
                    "network",
                    f"{filename} took over {timeout:g} s to arrive",
                    retryable=True,
                    detail="timeout",
                )
            chunks.append(chunk)
    data = b"".join(chunks)
    if size is not None and len(data) != size and not resp.headers.get("Content-Encoding"):
        raise HubFailure(
            "network",
            f"{filename} arrived with {len(data)} of {size} bytes",
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
        return describe_failure(err, repo_id, revision)

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


def fetch_file(
    repo_id: str,
    filename: str,
    *,
    revision: str | None = None,
    timeout: float = 10.0,
    endpoint: str | None = None,
    token: str | bool | None = None,
    retrier: Retrier | None = None,
    cap: int = MAX_BYTES,
) -> bytes:
    """Another small file of a repo (a model card) by the scan's path: one GET through
    huggingface_hub's session, capped in size and time, retried under ``retrier``'s budgets."""
    if not looks_like_repo_id(repo_id):
        raise HubFailure("not_found", f"{repo_id!r} is not a valid repo id")
    retrier = retrier or Retrier()
    url = _hf().hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint)
    got = retrier.call(
        lambda: _get(url, timeout=timeout, token=token, filename=filename, cap=cap),
        lambda err: describe_failure(err, repo_id, revision),
        retrier.budget(),
    )
    return got.data or b""
