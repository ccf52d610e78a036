"""The Hugging Face Hub client: fetch a repo's config.json and explain failures in one line.

huggingface_hub is imported only here and only when a Hub lookup happens, so local runs
stay fast. It honours ``HF_TOKEN``, ``HF_ENDPOINT``, ``HF_HUB_OFFLINE`` and the HF cache.
"""

from __future__ import annotations

import os
import re

# Hub repo ids: "name" (legacy) or "org/name"; letters, digits, "-", "_", ".".
REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


class HubFailure(Exception):
    """Why a Hub fetch failed: ``kind`` is stable (for fallbacks and scan verdicts).

    Kinds: not_found, gated, revision, no_config, offline, network, http, too_large.
    """

    def __init__(self, kind: str, reason: str, retryable: bool = False) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.retryable = retryable


def looks_like_repo_id(text: str) -> bool:
    """True when ``text`` has the shape of a Hub repo id (and so is no path traversal)."""
    return bool(REPO_ID.match(text)) and ".." not in text


def _describe(err: BaseException, repo_id: str, revision: str | None) -> HubFailure:
    """Map a huggingface_hub / transport exception to a HubFailure (order matters)."""
    from huggingface_hub import errors as hf

    status = getattr(getattr(err, "response", None), "status_code", None)
    # Ordered like huggingface_hub's own CLI: gated is a subclass of not-found.
    if isinstance(err, hf.GatedRepoError):
        return HubFailure("gated", f"repo {repo_id} is gated: accept its terms on the Hub and set HF_TOKEN")
    if isinstance(err, hf.RevisionNotFoundError):
        return HubFailure("revision", f"revision {revision!r} not found in {repo_id}")
    if isinstance(err, hf.RepositoryNotFoundError):
        if status == 401:
            return HubFailure("gated", f"repo {repo_id} needs authentication (401): set HF_TOKEN")
        return HubFailure("not_found", f"repo {repo_id} not found on the Hub (or private)")
    if isinstance(err, hf.RemoteEntryNotFoundError):
        return HubFailure("no_config", f"repo {repo_id} has no config.json")
    if isinstance(err, (hf.LocalEntryNotFoundError, hf.OfflineModeIsEnabled)):
        return HubFailure(
            "offline", "the Hub is offline (HF_HUB_OFFLINE) and config.json is not in the HF cache"
        )
    if isinstance(err, hf.HfHubHTTPError):
        retry = status in (429, 500, 502, 503, 504)
        return HubFailure("http", f"the Hub answered HTTP {status}", retryable=retry)
    if isinstance(err, hf.HFValidationError):
        return HubFailure("not_found", f"{repo_id!r} is not a valid repo id")
    name = type(err).__name__
    if "Timeout" in name:
        return HubFailure("network", "the Hub did not answer in time", retryable=True)
    if isinstance(err, (ConnectionError, OSError)) or any(
        part in name for part in ("Connect", "Network", "Protocol", "Transport")
    ):
        return HubFailure("network", f"the Hub could not be reached ({name})", retryable=True)
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

    from .jsonpos import MAX_BYTES

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
