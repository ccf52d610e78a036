"""What can go wrong on the Hub, as one HubFailure with a stable kind and a one-line reason:
huggingface_hub's and the transport's exceptions mapped in one ordered place (gated before
not found), and the repo-id check."""

from __future__ import annotations

import re

# Hub repo ids: "name" (legacy) or "org/name"; letters, digits, "-", "_", ".".
REPO_ID = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}\Z", re.ASCII)


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
    return bool(REPO_ID.fullmatch(text)) and ".." not in text


def _retry_after(err: BaseException) -> float | None:
    """The ``Retry-After`` of an HTTP error response, in seconds (delay-seconds form only)."""
    headers = getattr(getattr(err, "response", None), "headers", None) or {}
    value = str(headers.get("Retry-After") or headers.get("retry-after") or "").strip()
    return float(value) if value.isdigit() else None


# Transport-level failures of httpx/httpx2 (and requests), by class name along the MRO, so
# that raw exceptions escaping huggingface_hub are caught whatever HTTP client it uses.
_TRANSPORT = frozenset({"TransportError", "RequestError", "StreamError", "ConnectionError"})


def describe_failure(err: BaseException, repo_id: str, revision: str | None) -> HubFailure:
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
        return describe_failure(err.__cause__, repo_id, revision)
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
