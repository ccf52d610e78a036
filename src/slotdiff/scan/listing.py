"""List new and updated models on the Hub, newest first: the scan's input.

huggingface_hub's pager has no timeout and retries on its own, so the listing runs in a
daemon thread (:class:`Lister`) that the scan watches from outside and can give up on.
"""

from __future__ import annotations

import heapq
import json
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..core.errors import UsageError
from ..read.hub import quiet_side_requests
from ..read.hub_errors import describe_failure
from .pipelines import expand_pipeline_tags, not_lm_pipeline_tags

# Fields asked of the listing: dates to cut at --since, the commit sha (an unchanged repo
# needs no request at all), popularity for the report, the tags that decide "not an LM".
EXPAND = [
    "createdAt",
    "lastModified",
    "sha",
    "downloads",
    "likes",
    "pipeline_tag",
    "library_name",
    "tags",
    "gated",
    "safetensors",  # stored parameters per dtype: the checkpoint's count at no extra request
]

# Pipeline tags of models that are not language models (schemas/scan.json): skipped without
# fetching. Any other tag (or none) is fetched, and the config decides (a text model must be in it).
NOT_LM_PIPELINES = not_lm_pipeline_tags()

_SINCE = re.compile(r"\s*([0-9]{1,9})\s*([mhdw])\s*\Z", re.ASCII)
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``7d``, ``12h``, ``2w``, ``30m`` (before ``now``) or an ISO date / datetime → aware UTC."""
    now = now or datetime.now(UTC)
    m = _SINCE.fullmatch(text)
    if m:
        return now - timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as err:
        raise UsageError(f"--since {text!r}: expected e.g. 7d, 12h, 2w, or an ISO date (2025-01-31)") from err
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def iso(when: datetime | None) -> str | None:
    """``2025-01-31T12:00:00Z`` (UTC, seconds), or None."""
    if when is None:
        return None
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_iso(text: str | None) -> datetime | None:
    return None if not text else datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class Query:
    """What to list: the window, the order, the filters and the cap."""

    since: datetime
    since_spec: str = "7d"
    by: str = "modified"  # modified: created or updated since; created: new repos only
    pipeline_tag: str | None = None
    library: str | None = None
    author: str | None = None
    search: str | None = None
    limit: int | None = None

    def key(self) -> dict[str, Any]:
        """What identifies the query (the window as written, not as resolved), for resuming."""
        out = asdict(self)
        out.pop("since")
        return out


@dataclass(frozen=True, slots=True)  # one per listed model: no per-instance dict
class Listed:
    """One model as the listing gave it (fields the listing left out are None)."""

    repo_id: str
    created: str | None = None  # ISO, UTC
    modified: str | None = None
    sha: str | None = None
    downloads: int | None = None
    likes: int | None = None
    pipeline_tag: str | None = None
    library: str | None = None
    gated: str | bool | None = None
    tags: tuple[str, ...] = field(default=())
    safetensors: tuple[tuple[str, int], ...] | None = None  # stored parameters per dtype (the Hub's count)

    @property
    def date(self) -> str | None:
        """The later of created and modified (what put it in the window)."""
        return max(filter(None, (self.created, self.modified)), default=None)

    def to_dict(self) -> dict[str, Any]:
        # Field by field, not asdict(): its deep copies cost more than the rest of a record.
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["tags"] = list(self.tags)
        out["safetensors"] = None if self.safetensors is None else dict(self.safetensors)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Listed:
        known = {k: data.get(k) for k in cls.__dataclass_fields__ if k in data}
        known["tags"] = tuple(known.get("tags") or ())
        stored = known.get("safetensors")
        known["safetensors"] = tuple(stored.items()) if isinstance(stored, Mapping) else None
        return cls(**known)


def _listed(info: Any) -> Listed:
    gated = getattr(info, "gated", None)
    return Listed(
        repo_id=str(info.id),
        created=iso(getattr(info, "created_at", None)),
        modified=iso(getattr(info, "last_modified", None)),
        sha=getattr(info, "sha", None),
        downloads=getattr(info, "downloads", None),
        likes=getattr(info, "likes", None),
        pipeline_tag=getattr(info, "pipeline_tag", None),
        library=getattr(info, "library_name", None),
        gated=gated if isinstance(gated, (str, bool)) else None,
        tags=tuple(str(t) for t in (getattr(info, "tags", None) or ())),
        safetensors=_stored(getattr(info, "safetensors", None)),
    )


def _stored(info: Any) -> tuple[tuple[str, int], ...] | None:
    """The listing's per-dtype parameter counts (``SafeTensorsInfo.parameters``), checked."""
    counts = getattr(info, "parameters", None)
    if not isinstance(counts, Mapping):
        return None
    out = tuple(
        (str(k)[:16], v)
        for k, v in counts.items()
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0
    )
    return out if len(out) == len(counts) else None


def list_models(
    query: Query,
    *,
    endpoint: str | None = None,
    token: str | bool | None = None,
    note: Callable[[str], None] | None = None,
) -> Iterator[Listed]:
    """Models in the window, newest first, through ``HfApi.list_models`` (lazy, paged).

    A ``pipeline_tag`` naming several tags (a preset such as ``lm``, or ``a,b``) is one
    listing per tag, merged newest first (the Hub filters on one tag per listing). An entry
    the listing gives in a shape no model has (a date that is not one) is left out, and
    ``note`` is told which and why: one bad entry does not end the scan.
    """
    note = note or (lambda text: None)
    tags = expand_pipeline_tags(query.pipeline_tag)
    if len(tags) <= 1:
        yield from _list_one(query, tags[0] if tags else None, endpoint, token, note)
        return
    field_name = "modified" if query.by == "modified" else "created"
    streams = [_list_one(query, tag, endpoint, token, note) for tag in tags]
    seen: set[str] = set()
    count = 0
    merged = heapq.merge(*streams, key=lambda m: getattr(m, field_name) or m.created or "", reverse=True)
    for listed in merged:
        if listed.repo_id in seen:
            continue
        seen.add(listed.repo_id)
        yield listed
        count += 1
        if query.limit is not None and count >= query.limit:
            return


def _list_one(
    query: Query,
    pipeline_tag: str | None,
    endpoint: str | None,
    token: str | bool | None,
    note: Callable[[str], None],
) -> Iterator[Listed]:
    """One tag's listing, paged by :func:`_pages` (the token stays on the endpoint's origin)."""
    from huggingface_hub import HfApi, ModelInfo

    api = HfApi(endpoint=endpoint, token=token)
    params: dict[str, Any] = {
        "sort": "lastModified" if query.by == "modified" else "createdAt",
        "expand": EXPAND,
    }
    for name, value in (
        ("author", query.author),
        ("pipeline_tag", pipeline_tag),
        ("filter", [query.library] if query.library else None),
        ("search", query.search),
        ("limit", query.limit),
    ):
        if value:
            params[name] = value
    for count, item in enumerate(_pages(f"{api.endpoint.rstrip('/')}/api/models", params, token)):
        if query.limit is not None and count >= query.limit:
            return
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise ValueError("the Hub's model list holds an entry that is not a model")
        try:
            info = ModelInfo(**{"siblings": None, **item})
            when = getattr(info, "last_modified" if query.by == "modified" else "created_at", None)
            when = when or getattr(info, "created_at", None)
            if when is not None and when < query.since:
                return  # sorted newest first: everything after this is older
            listed = _listed(info)
        except (ValueError, TypeError, OverflowError) as err:
            dates = {k: item.get(k) for k in ("lastModified", "createdAt") if k in item}
            note(f"{item['id']}: left out, the listing's entry is not one a model has ({err}; {dates})")
            continue
        yield listed


class CrossOriginPage(Exception):
    """The listing's next page is on another origin than the endpoint (see :func:`_pages`)."""


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of ``url``, the unit a credential belongs to."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


def _pages(url: str, params: dict[str, Any], token: str | bool | None) -> Iterator[Any]:
    """The entries of every page of a listing, following ``Link: <...>; rel="next"``.

    huggingface_hub's own pager sends the token to whatever URL a next link names; this one
    follows a link only on the endpoint's own origin and refuses any other, so HF_TOKEN is
    only ever sent where the user pointed the scan.
    """
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status, http_backoff

    quiet_side_requests()
    headers = build_hf_headers(token=token)
    home = origin(url)
    next_url: str | None = url
    first = True
    while next_url is not None:
        response = http_backoff("GET", next_url, params=params if first else None, headers=headers)
        hf_raise_for_status(response)
        page = response.json()
        if not isinstance(page, list):
            raise ValueError(f"the Hub's model list was a JSON {type(page).__name__}, not a list")
        yield from page
        link = response.links.get("next", {}).get("url")
        next_url = urljoin(next_url, link) if link else None
        if next_url is not None and origin(next_url) != home:
            raise CrossOriginPage(
                f"the next page is on another origin ({origin(next_url)[1]}), not followed: "
                "the token is only sent to the endpoint"
            )
        first = False


_END = object()


class Lister(threading.Thread):
    """Runs a listing in a daemon thread and hands its items over through a queue.

    ``error`` is set (one line) when the listing failed; ``progress`` is the monotonic time
    of the last item, so the scan can tell a slow page from a stalled pager.
    """

    def __init__(
        self, produce: Callable[[], Iterator[Listed]], describe: Callable[[BaseException], str]
    ) -> None:
        super().__init__(name="slotdiff-listing", daemon=True)
        self._produce = produce
        self.describe_failure = describe
        self.items: queue.Queue[Any] = queue.Queue()
        self.error: str | None = None
        self.finished = threading.Event()
        self.progress = time.monotonic()
        self.count = 0

    def run(self) -> None:
        try:
            for item in self._produce():
                self.count += 1
                self.progress = time.monotonic()
                self.items.put(item)
        except BaseException as err:  # the scan reports it; nothing escapes a daemon thread
            self.error = self.describe_failure(err)
        finally:
            self.finished.set()
            self.items.put(_END)

    def drain(self, timeout: float) -> tuple[list[Listed], bool]:
        """Items available now (waiting up to ``timeout`` for the first); True once all are out."""
        out: list[Listed] = []
        try:
            item = self.items.get(timeout=timeout) if timeout > 0 else self.items.get_nowait()
            while True:
                if item is _END:
                    return out, True
                out.append(item)
                item = self.items.get_nowait()
        except queue.Empty:
            return out, False


def describe_listing_error(err: BaseException) -> str:
    """One line for a failed listing."""

    if isinstance(err, CrossOriginPage):
        return f"listing stopped: {err}"
    if isinstance(err, json.JSONDecodeError):
        return f"the Hub's model list was not valid JSON ({err.msg} at line {err.lineno})"

    try:
        fail = describe_failure(err, "(listing)", None)
    except Exception:
        return f"listing failed: {type(err).__name__}: {' '.join(str(err).split())[:200]}"
    return f"listing failed: {fail.reason}"
