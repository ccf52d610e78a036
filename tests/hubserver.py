"""A fake Hugging Face Hub for tests: stdlib only, loopback only, bounded in time.

    from hubserver import Fault, HubServer, Repo

    repos = [Repo("org/model", files={"config.json": {"model_type": "llama"}})]
    with HubServer(repos) as hub:
        path = hf_hub_download("org/model", "config.json", endpoint=hub.url, cache_dir=tmp)
        assert hub.count(method="GET", kind="resolve") == 1

It speaks the subset of the Hub protocol that ``huggingface_hub`` 2.4 uses for
``hf_hub_download`` (HEAD/GET ``/{repo_id}/resolve/{revision}/{filename}``),
``HfApi.list_models`` (``GET /api/models`` with ``Link: <...>; rel="next"`` pagination)
and ``HfApi.model_info`` (``GET /api/models/{repo_id}[/revision/{rev}]``). It never sends
``X-Xet-Hash``/``X-Xet-Refresh-Route``, so the client always downloads over plain HTTP.

Faults are data (:class:`Fault`), attached to a repo or to the whole server. See
``tests/HUBSERVER.md`` for the exchange each one produces and what the client raises.
Every injected wait is finite, clamped to :data:`MAX_DELAY` and cut short when the server
stops, so no request can keep the server (or a test) alive forever.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

__all__ = [
    "MAX_DELAY",
    "Fault",
    "Generated",
    "HubServer",
    "LogEntry",
    "Repo",
    "git_blob_sha1",
    "model_card",
    "run_slotdiff",
]

#: Upper bound (seconds) on any single injected wait (delay, trickle interval, total trickle).
MAX_DELAY = 30.0
#: Socket timeout of each connection: a client that stops reading cannot pin a thread longer.
SOCKET_TIMEOUT = 10.0
_CHUNK = 64 * 1024
_SHA40 = re.compile(r"[0-9a-f]{40}")
_UNGATED_FILES = frozenset({"README.md", ".gitattributes"})


# --------------------------------------------------------------------------- content


@dataclass(frozen=True)
class Generated:
    """``size`` bytes made on the fly from a repeated ``pattern``; never held in memory."""

    size: int
    pattern: bytes = b"0123456789abcdef"

    def __post_init__(self) -> None:
        if self.size < 0 or not self.pattern:
            raise ValueError("Generated needs size >= 0 and a non-empty pattern")

    def iter_range(self, start: int, end: int) -> Iterator[bytes]:
        """Yield bytes [start, end) in chunks."""
        n = len(self.pattern)
        block = self.pattern * max(1, _CHUNK // n)
        pos = start
        while pos < end:
            off = pos % n
            take = min(end - pos, len(block) - off)
            yield block[off : off + take]
            pos += take


Content = bytes | str | dict | list | Generated


def _as_body(content: Content) -> bytes | Generated:
    if isinstance(content, Generated | bytes):
        return content
    if isinstance(content, str):
        return content.encode()
    if isinstance(content, dict | list):
        return json.dumps(content, indent=2).encode()
    raise TypeError(f"unsupported file content: {type(content).__name__}")


def git_blob_sha1(data: bytes) -> str:
    """The git blob id of ``data`` (what the Hub sends as ETag for non-LFS files)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _etag_of(body: bytes | Generated, lfs: bool) -> str:
    if isinstance(body, Generated):
        return hashlib.sha256(b"generated:%d:" % body.size + body.pattern).hexdigest()
    return hashlib.sha256(body).hexdigest() if lfs else git_blob_sha1(body)


def _iso(value: datetime | str | None) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- faults

_STATUS_KINDS = frozenset({"status", "drop"})
_BODY_KINDS = frozenset({"trickle", "truncate"})
_CONTENT_KINDS = frozenset({"invalid_json", "huge"})


@dataclass(eq=False)
class Fault:
    """One injected misbehaviour. Build them with the classmethods below.

    Filters (all optional; a fault applies to a request only if every given filter matches):
      ``on``: ``"resolve"`` (file HEAD/GET), ``"cdn"`` (LFS redirect target), ``"info"``
      (``/api/models/{id}``), ``"list"`` (``/api/models``) or a tuple of those;
      ``methods``: e.g. ``("HEAD",)``; ``files``: filenames (resolve/cdn requests only).
    ``times``: the fault fires for the first ``times`` matching requests, then the request is
    served normally; ``None`` means always. ``hits`` counts matching requests seen.
    ``invalid_json`` and ``huge`` replace content and always apply (they ignore ``times``) so
    HEAD metadata and GET bodies stay consistent.
    """

    kind: str
    times: int | None = None
    on: str | tuple[str, ...] | None = None
    methods: tuple[str, ...] | None = None
    files: tuple[str, ...] | None = None
    status: int = 0
    error_code: str | None = None
    message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    chunk_size: int = 1
    keep: int = 0
    size: int = 0
    body: bytes = b""
    hits: int = 0
    fired: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        known = _STATUS_KINDS | _BODY_KINDS | _CONTENT_KINDS | {"delay"}
        if self.kind not in known:
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if isinstance(self.methods, str):
            self.methods = (self.methods,)
        if self.methods is not None:
            self.methods = tuple(m.upper() for m in self.methods)
        if isinstance(self.files, str):
            self.files = (self.files,)
        if self.files is not None:
            self.files = tuple(self.files)
        if isinstance(self.on, list):
            self.on = tuple(self.on)

    # -- constructors -------------------------------------------------------
    @classmethod
    def status_code(
        cls,
        status: int,
        *,
        error_code: str | None = None,
        message: str | None = None,
        headers: Mapping[str, str] | None = None,
        **filters: Any,
    ) -> Fault:
        """Answer ``status`` (with optional ``X-Error-Code``/``X-Error-Message``) instead."""
        return cls(
            "status",
            status=status,
            error_code=error_code,
            message=message,
            headers=dict(headers or {}),
            **filters,
        )

    @classmethod
    def repo_not_found(cls, status: int = 404, **filters: Any) -> Fault:
        """``X-Error-Code: RepoNotFound`` (the Hub answers 401 to anonymous callers, 404 else)."""
        return cls.status_code(status, error_code="RepoNotFound", message="Repository not found", **filters)

    @classmethod
    def entry_not_found(cls, **filters: Any) -> Fault:
        """404 ``X-Error-Code: EntryNotFound`` with ``X-Repo-Commit`` (the repo exists)."""
        return cls.status_code(404, error_code="EntryNotFound", message="Entry not found", **filters)

    @classmethod
    def revision_not_found(cls, **filters: Any) -> Fault:
        """404 ``X-Error-Code: RevisionNotFound``."""
        return cls.status_code(404, error_code="RevisionNotFound", message="Invalid rev id", **filters)

    @classmethod
    def gated(cls, status: int = 401, message: str | None = None, **filters: Any) -> Fault:
        """401/403 ``X-Error-Code: GatedRepo`` + ``X-Error-Message``."""
        msg = message or (
            "Access to this model is restricted. You must have access to it and be "
            "authenticated to access it. Please log in."
            if status == 401
            else "Access to this model is restricted and you are not in the authorized list."
        )
        return cls.status_code(status, error_code="GatedRepo", message=msg, **filters)

    @classmethod
    def unauthorized(cls, **filters: Any) -> Fault:
        """Bare 401, no ``X-Error-Code``."""
        return cls.status_code(401, message="Invalid credentials in Authorization header", **filters)

    @classmethod
    def forbidden(cls, **filters: Any) -> Fault:
        """Bare 403, no ``X-Error-Code``."""
        return cls.status_code(403, message="Forbidden", **filters)

    @classmethod
    def rate_limited(
        cls,
        times: int | None = 1,
        retry_after: int | str | None = 1,
        ratelimit: str | None = None,
        **filters: Any,
    ) -> Fault:
        """429 with ``Retry-After`` (optionally a ``RateLimit`` header, e.g. '"api";r=0;t=5')."""
        headers = {}
        if retry_after is not None:
            headers["Retry-After"] = str(retry_after)
        if ratelimit is not None:
            headers["RateLimit"] = ratelimit
            headers["RateLimit-Policy"] = '"fixed window";"api";q=500;w=300'
        return cls.status_code(429, message="Too Many Requests", headers=headers, times=times, **filters)

    @classmethod
    def server_error(cls, status: int = 500, times: int | None = 1, **filters: Any) -> Fault:
        """5xx for the first ``times`` matching requests (``None``: always)."""
        return cls.status_code(status, message="Internal Error", times=times, **filters)

    @classmethod
    def drop(cls, times: int | None = 1, **filters: Any) -> Fault:
        """Close the connection without answering."""
        return cls("drop", times=times, **filters)

    @classmethod
    def delay(cls, seconds: float, times: int | None = None, **filters: Any) -> Fault:
        """Wait ``seconds`` (<= MAX_DELAY) before sending the status line and headers."""
        return cls("delay", seconds=_bounded(seconds), times=times, **filters)

    @classmethod
    def trickle(
        cls, chunk_size: int = 1, interval: float = 0.05, times: int | None = None, **filters: Any
    ) -> Fault:
        """Send the body ``chunk_size`` bytes at a time, ``interval`` s apart (<= MAX_DELAY)."""
        return cls(
            "trickle",
            chunk_size=max(1, chunk_size),
            seconds=_bounded(interval),
            times=times,
            **filters,
        )

    @classmethod
    def truncate(cls, keep: int = 0, times: int | None = None, **filters: Any) -> Fault:
        """Announce the full Content-Length, send only ``keep`` body bytes, then close."""
        return cls("truncate", keep=max(0, keep), times=times, **filters)

    @classmethod
    def invalid_json(cls, body: bytes = b'{"model_type": "llama", "hidden_size": ', **filters: Any) -> Fault:
        """Replace the content (file, model info or listing) with ``body`` (not valid JSON)."""
        return cls("invalid_json", body=body, **filters)

    @classmethod
    def huge(cls, size: int = 50 * 1024 * 1024, **filters: Any) -> Fault:
        """Replace the file content with ``size`` generated bytes, streamed."""
        return cls("huge", size=size, **filters)

    # -- matching -------------------------------------------------------------
    def matches(self, kind: str, method: str, filename: str | None) -> bool:
        if self.on is not None:
            allowed = (self.on,) if isinstance(self.on, str) else self.on
            if kind not in allowed:
                return False
        if self.methods is not None and method not in self.methods:
            return False
        return self.files is None or (filename is not None and filename in self.files)

    def fire(self) -> bool:
        """Count one matching request; True if the fault applies to it."""
        with self._lock:
            self.hits += 1
            active = self.kind in _CONTENT_KINDS or self.times is None or self.hits <= self.times
            if active:
                self.fired += 1
            return active


def _bounded(seconds: float) -> float:
    if not 0 <= seconds <= MAX_DELAY:
        raise ValueError(f"injected waits must be within [0, {MAX_DELAY}] s, got {seconds}")
    return float(seconds)


# --------------------------------------------------------------------------- repos


@dataclass
class Repo:
    """A model repo: files per revision, listing metadata, optional faults.

    ``files`` is the ``main`` revision; ``revisions`` maps other branch/tag names to their
    files. Every revision gets a deterministic 40-hex commit sha (:meth:`sha`), usable as
    ``revision=``. Content may be bytes, str, a dict/list (served as JSON) or
    :class:`Generated`. Files named in ``lfs`` are served like LFS/CDN files: resolve answers
    302 to ``/__cdn__/...`` on ``localhost`` (another origin) with ``X-Linked-Etag``/``-Size``.
    ``gated`` ("auto"/"manual") makes every file but README.md/.gitattributes answer
    401/403 ``GatedRepo`` unless the request carries ``Bearer <t>`` with ``t`` in
    ``access_tokens``; ``private`` makes the repo answer ``RepoNotFound`` (and vanish from
    listings) without such a token.
    """

    id: str
    files: Mapping[str, Content] = field(default_factory=dict)
    revisions: Mapping[str, Mapping[str, Content]] = field(default_factory=dict)
    created_at: datetime | str = "2024-01-01T00:00:00.000Z"
    last_modified: datetime | str | None = None
    downloads: int = 0
    likes: int = 0
    trending_score: int = 0
    pipeline_tag: str | None = "text-generation"
    library_name: str | None = "transformers"
    tags: Sequence[str] = ()
    gated: str | bool = False
    private: bool = False
    access_tokens: Sequence[str] = ()
    lfs: Sequence[str] = ()
    faults: Sequence[Fault] = ()
    # Stored parameters per safetensors dtype, as the Hub's ``safetensors`` field gives them
    # (``expand=safetensors`` in listings, and model info); None: the repo has no safetensors.
    safetensors: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        for f in self.faults:
            if f.on == "list" or (isinstance(f.on, tuple) and "list" in f.on):
                raise ValueError("listing faults belong to HubServer(faults=...), not to a Repo")
        self._bodies: dict[str, dict[str, bytes | Generated]] = {
            "main": {k: _as_body(v) for k, v in self.files.items()}
        }
        for rev, files in self.revisions.items():
            self._bodies[rev] = {k: _as_body(v) for k, v in files.items()}
        self._shas = {rev: self._compute_sha(rev) for rev in self._bodies}

    def _compute_sha(self, rev: str) -> str:
        h = hashlib.sha1(f"{self.id}@{rev}".encode())
        for name, body in sorted(self._bodies[rev].items()):
            h.update(name.encode() + b"\0" + _etag_of(body, name in self.lfs).encode())
        return h.hexdigest()

    @property
    def author(self) -> str | None:
        return self.id.split("/")[0] if "/" in self.id else None

    def sha(self, revision: str = "main") -> str:
        """Commit sha of a branch/tag name."""
        return self._shas[revision]

    def resolve(self, revision: str) -> str | None:
        """Branch/tag name or commit sha -> revision name, or None."""
        if revision in self._bodies:
            return revision
        for name, sha in self._shas.items():
            if sha == revision:
                return name
        return None

    def body(self, revision_name: str, filename: str) -> bytes | Generated | None:
        return self._bodies[revision_name].get(filename)

    def filenames(self, revision_name: str = "main") -> list[str]:
        return sorted(self._bodies[revision_name])

    def entry(self, fields: Iterable[str] | None, revision_name: str = "main") -> dict[str, Any]:
        """The JSON entry for listings/model info. ``fields=None``: every field."""
        created = _iso(self.created_at)
        full: dict[str, Any] = {
            "_id": hashlib.sha1(self.id.encode()).hexdigest()[:24],
            "id": self.id,
            "modelId": self.id,
            "author": self.author,
            "sha": self.sha(revision_name),
            "createdAt": created,
            "lastModified": _iso(self.last_modified) or created,
            "private": self.private,
            "gated": self.gated,
            "disabled": False,
            "downloads": self.downloads,
            "likes": self.likes,
            "trendingScore": self.trending_score,
            "pipeline_tag": self.pipeline_tag,
            "library_name": self.library_name,
            "tags": list(self.tags),
            "siblings": [{"rfilename": f} for f in self.filenames(revision_name)],
        }
        if self.safetensors is not None:
            full["safetensors"] = {
                "parameters": dict(self.safetensors),
                "total": sum(self.safetensors.values()),
            }
        if fields is None:
            return full
        return {k: full[k] for k in ("_id", "id", *fields) if k in full}

    def sort_value(self, key: str) -> Any:
        """The listing field ``key`` (as :meth:`entry` gives it) without building the entry:
        a listing of tens of thousands of repos sorts them on every page."""
        if key == "createdAt":
            return _iso(self.created_at)
        if key == "lastModified":
            return _iso(self.last_modified) or _iso(self.created_at)
        if key == "id":
            return self.id
        numbers = {"downloads": self.downloads, "likes": self.likes, "trendingScore": self.trending_score}
        return numbers.get(key)

    def json_config(self) -> Any:
        body = self._bodies["main"].get("config.json")
        if not isinstance(body, bytes):
            return None
        try:
            return json.loads(body)
        except ValueError:
            return None


# --------------------------------------------------------------------------- request log


@dataclass
class LogEntry:
    """One request as the server saw it.

    Appended when the request arrives (so counts are right even while a delayed handler is
    still running). ``status`` is what the server sent, None until then (and for dropped or
    aborted requests); the client may already have given up on it (see ``error``:
    "dropped", "truncated", "_Stop", "BrokenPipeError", ...). ``faults``: fault kinds or
    status codes that fired for this request. ``headers`` are lower-cased.
    """

    method: str
    path: str
    query: dict[str, list[str]]
    kind: str
    repo_id: str | None
    revision: str | None
    filename: str | None
    headers: dict[str, str]
    started: float
    status: int | None = None
    duration: float | None = None
    faults: list[str] = field(default_factory=list)
    error: str | None = None


# Fields the Hub returns in /api/models without full/expand (approximation of the real API).
LIST_DEFAULT_FIELDS = (
    "likes",
    "trendingScore",
    "private",
    "downloads",
    "tags",
    "pipeline_tag",
    "library_name",
    "createdAt",
    "modelId",
)
LIST_FULL_FIELDS = (
    *LIST_DEFAULT_FIELDS,
    "author",
    "gated",
    "lastModified",
    "disabled",
    "sha",
    "siblings",
)
_SORT_KEYS = {
    "createdAt": "createdAt",
    "lastModified": "lastModified",
    "downloads": "downloads",
    "likes": "likes",
    "trendingScore": "trendingScore",
    "created_at": "createdAt",
    "last_modified": "lastModified",
    "trending_score": "trendingScore",
    "id": "id",
}


class _Stop(Exception):
    """Raised inside a handler when the server is stopping or the client went away."""


# --------------------------------------------------------------------------- handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeHub/1.0"
    timeout = SOCKET_TIMEOUT
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without NODELAY, Nagle + delayed ACK
        # add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.hub._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.hub._track(self.connection, add=False)

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(min(length, 1 << 20))
        self._dispatch("POST")

    # -- plumbing -------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        hub = self.server.hub
        split = urlsplit(self.path)
        route = hub._route(split.path)
        entry = LogEntry(
            method=method,
            path=split.path,
            query=parse_qs(split.query),
            kind=route.kind,
            repo_id=route.repo_id,
            revision=route.revision,
            filename=route.filename,
            headers={k.lower(): v for k, v in self.headers.items()},
            started=time.monotonic(),
        )
        hub._log(entry)
        self._entry = entry
        try:
            self._serve(method, route, split.query)
        except (_Stop, OSError) as exc:
            entry.error = entry.error or type(exc).__name__
            self.close_connection = True
        finally:
            entry.duration = time.monotonic() - entry.started

    def _wait(self, seconds: float) -> None:
        if self.server.hub._stopping.wait(seconds):
            raise _Stop("server stopping")

    def _send_head(self, status: int, headers: Mapping[str, str]) -> None:
        self._entry.status = status
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("X-Request-Id", f"fakehub-{id(self._entry):x}")
        self.end_headers()

    def _send(self, status: int, headers: Mapping[str, str], body: bytes, method: str) -> None:
        headers = {"Content-Length": str(len(body)), **headers}
        self._send_head(status, headers)
        if method != "HEAD" and body:
            self.wfile.write(body)

    def _error(
        self,
        method: str,
        status: int,
        error_code: str | None,
        message: str | None,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if error_code:
            headers["X-Error-Code"] = error_code
        if message:
            headers["X-Error-Message"] = message
        headers.update(extra or {})
        body = json.dumps({"error": message or f"HTTP {status}"}).encode()
        self._send(status, headers, body, method)

    # -- faults -----------------------------------------------------------------
    def _faults(self, route: _Route, method: str) -> list[Fault]:
        hub = self.server.hub
        repo = hub.repos.get(route.repo_id) if route.repo_id else None
        pool = [*hub.faults, *(repo.faults if repo else ())]
        return [f for f in pool if f.matches(route.kind, method, route.filename)]

    def _fire(
        self, faults: list[Fault], kinds: frozenset[str] | set[str], first: bool = False
    ) -> list[Fault]:
        """Fire the faults of ``kinds`` in order; with ``first``, stop at the first that fires
        (later ones do not see, nor count, the request)."""
        fired = []
        for f in faults:
            if f.kind in kinds and f.fire():
                fired.append(f)
                self._entry.faults.append(f.kind if f.kind != "status" else str(f.status))
                if first:
                    break
        return fired

    # -- routing ------------------------------------------------------------------
    def _serve(self, method: str, route: _Route, query: str) -> None:
        faults = self._faults(route, method)
        for f in self._fire(faults, {"delay"}):
            self._wait(f.seconds)
        for f in self._fire(faults, _STATUS_KINDS, first=True):
            if f.kind == "drop":
                self._entry.error = "dropped"
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            repo = self.server.hub.repos.get(route.repo_id or "")
            extra = dict(f.headers)
            if f.error_code == "EntryNotFound" and repo is not None:
                rev = repo.resolve(route.revision or "main") or "main"
                extra.setdefault("X-Repo-Commit", repo.sha(rev))
            self._error(method, f.status, f.error_code, f.message, extra)
            return
        content = [f for f in faults if f.kind in _CONTENT_KINDS]
        body_faults = [f for f in faults if f.kind in _BODY_KINDS]
        handler = {
            "resolve": self._resolve,
            "cdn": self._cdn,
            "info": self._info,
            "list": self._list,
        }.get(route.kind)
        if handler is None or method == "POST":
            self._error(method, 404, None, "Not Found")
            return
        handler(method, route, query, content, body_faults)

    def _auth_ok(self, repo: Repo) -> bool:
        auth = self.headers.get("Authorization") or ""
        return auth.startswith("Bearer ") and auth[7:] in repo.access_tokens

    def _repo_or_error(self, method: str, route: _Route) -> Repo | None:
        hub = self.server.hub
        repo = hub.repos.get(route.repo_id or "")
        if repo is None or (repo.private and not self._auth_ok(repo)):
            status = 401 if repo is not None else hub.missing_repo_status
            self._error(method, status, "RepoNotFound", "Repository not found")
            return None
        return repo

    def _resolve(self, method, route, query, content, body_faults) -> None:
        repo = self._repo_or_error(method, route)
        if repo is None:
            return
        rev = repo.resolve(route.revision or "")
        if rev is None:
            self._error(method, 404, "RevisionNotFound", f"Invalid rev id: {route.revision}")
            return
        commit = repo.sha(rev)
        filename = route.filename or ""
        if repo.gated and filename not in _UNGATED_FILES and not self._auth_ok(repo):
            authed = (self.headers.get("Authorization") or "").startswith("Bearer ")
            gate = Fault.gated(403 if authed else 401, message=None)
            self._error(
                method,
                gate.status,
                "GatedRepo",
                (gate.message or "").replace("this model", f"model {repo.id}"),
            )
            return
        body = repo.body(rev, filename)
        if body is None:
            self._error(method, 404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit})
            return
        body = self._apply_content(body, content)
        is_lfs = filename in repo.lfs
        etag = _etag_of(body, is_lfs)
        size = body.size if isinstance(body, Generated) else len(body)
        headers = {
            "X-Repo-Commit": commit,
            "Accept-Ranges": "bytes",
            "Access-Control-Expose-Headers": "X-Repo-Commit,X-Request-Id,X-Error-Code,"
            "X-Error-Message,X-Linked-Size,X-Linked-ETag",
        }
        if is_lfs:
            hub = self.server.hub
            location = (
                f"http://localhost:{hub.port}/__cdn__/{quote(repo.id, safe='')}/{commit}/{quote(filename)}"
            )
            headers.update(
                {
                    "Location": location,
                    "ETag": f'"{git_blob_sha1(_lfs_pointer(etag, size))}"',
                    "X-Linked-Etag": f'"{etag}"',
                    "X-Linked-Size": str(size),
                }
            )
            self._send(302, headers, b"", method)
            return
        headers["ETag"] = f'"{etag}"'
        self._send_body(method, headers, body, body_faults)

    def _cdn(self, method, route, query, content, body_faults) -> None:
        hub = self.server.hub
        repo = hub.repos.get(route.repo_id or "")
        rev = repo.resolve(route.revision or "") if repo else None
        body = repo.body(rev, route.filename or "") if repo and rev else None
        if body is None:
            self._error(method, 404, None, "NoSuchKey")
            return
        body = self._apply_content(body, content)
        headers = {
            "ETag": f'"{_etag_of(body, True)}"',
            "Accept-Ranges": "bytes",
            "Content-Disposition": f'inline; filename="{route.filename}";',
        }
        self._send_body(method, headers, body, body_faults)

    @staticmethod
    def _apply_content(body: bytes | Generated, content: list[Fault]) -> bytes | Generated:
        for f in content:
            f.fire()
            body = Generated(f.size) if f.kind == "huge" else f.body
        return body

    def _send_body(
        self,
        method: str,
        headers: dict[str, str],
        body: bytes | Generated,
        body_faults: list[Fault],
    ) -> None:
        total = body.size if isinstance(body, Generated) else len(body)
        status, start, end = 200, 0, total
        rng = self.headers.get("Range")
        if rng and method == "GET":
            m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", rng)
            if m and (m.group(1) or m.group(2)):
                a, b = m.group(1), m.group(2)
                start = int(a) if a else max(0, total - int(b))
                end = min(total, int(b) + 1) if a and b else total
                if start >= total or start >= end:
                    self._send(416, {"Content-Range": f"bytes */{total}"}, b"", method)
                    return
                status = 206
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{total}"
        headers["Content-Length"] = str(end - start)
        headers.setdefault("Content-Type", "application/octet-stream")
        fired = self._fire(body_faults, _BODY_KINDS) if method == "GET" else []
        self._send_head(status, headers)
        if method == "HEAD":
            return
        chunks: Iterator[bytes] = (
            body.iter_range(start, end) if isinstance(body, Generated) else _slices(body, start, end)
        )
        limit = end - start
        trickle = next((f for f in fired if f.kind == "trickle"), None)
        truncate = next((f for f in fired if f.kind == "truncate"), None)
        if truncate is not None:
            limit = min(limit, truncate.keep)
        sent = 0
        deadline = time.monotonic() + MAX_DELAY
        for chunk in chunks:
            chunk = chunk[: limit - sent]
            if not chunk:
                break
            if trickle is None:
                self.wfile.write(chunk)
            else:
                for i in range(0, len(chunk), trickle.chunk_size):
                    self.wfile.write(chunk[i : i + trickle.chunk_size])
                    self.wfile.flush()
                    if time.monotonic() >= deadline:
                        raise _Stop("trickle exceeded MAX_DELAY")
                    self._wait(trickle.seconds)
            sent += len(chunk)
        if truncate is not None and sent < end - start:
            self.wfile.flush()
            self._entry.error = "truncated"
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    def _json(
        self, method: str, data: Any, content: list[Fault], headers: Mapping[str, str] | None = None
    ) -> None:
        body = json.dumps(data).encode()
        for f in content:
            f.fire()
            if f.kind == "invalid_json":
                body = f.body
        self._send(
            200,
            {"Content-Type": "application/json; charset=utf-8", **(headers or {})},
            body,
            method,
        )

    def _info(self, method, route, query, content, body_faults) -> None:
        repo = self._repo_or_error(method, route)
        if repo is None:
            return
        rev = repo.resolve(route.revision or "main")
        if rev is None:
            self._error(method, 404, "RevisionNotFound", f"Invalid rev id: {route.revision}")
            return
        params = parse_qs(query)
        expand = params.get("expand") or params.get("expand[]")
        entry = repo.entry(expand, rev)
        if expand is None and repo.json_config() is not None:
            entry["config"] = repo.json_config()
        self._json(method, entry, content)

    def _list(self, method, route, query, content, body_faults) -> None:
        hub = self.server.hub
        params = parse_qs(query)

        def one(name: str) -> str | None:
            values = params.get(name)
            return values[-1] if values else None

        items = [r for r in hub.repos.values() if not r.private or self._auth_ok(r)]
        if (search := one("search")) is not None:
            items = [r for r in items if search.lower() in r.id.lower()]
        if (author := one("author")) is not None:
            items = [r for r in items if r.author == author]
        for tag in params.get("filter", []) + params.get("library", []):
            items = [r for r in items if tag in r.tags or tag in (r.library_name, r.pipeline_tag)]
        if (pipeline := one("pipeline_tag")) is not None:
            items = [r for r in items if r.pipeline_tag == pipeline]
        if (gated := one("gated")) is not None:
            want = gated.lower() == "true"
            items = [r for r in items if bool(r.gated) is want]
        sort = one("sort")
        if sort is not None:
            key = _SORT_KEYS.get(sort)
            if key is None:
                self._error(method, 400, None, f"Invalid sort parameter: {sort}")
                return
            descending = one("direction") != "1"
            items.sort(key=lambda r: (r.sort_value(key) or "", r.id), reverse=descending)
        expand = params.get("expand") or params.get("expand[]")
        if expand is not None:
            fields: Sequence[str] | None = expand
        elif (one("full") or "").lower() == "true":
            fields = LIST_FULL_FIELDS
        else:
            fields = LIST_DEFAULT_FIELDS
        page = hub.page_size
        if (limit := one("limit")) is not None:
            page = max(1, min(page, int(limit)))
        offset = int(one("cursor") or 0)
        chunk = items[offset : offset + page]
        data = []
        for r in chunk:
            e = r.entry(fields)
            if (one("config") or "").lower() == "true":
                e["config"] = r.json_config()
            data.append(e)
        headers = {}
        if offset + page < len(items):
            nxt = [(k, v) for k, vs in params.items() if k != "cursor" for v in vs]
            nxt.append(("cursor", str(offset + page)))
            headers["Link"] = f'<{hub.url}/api/models?{urlencode(nxt)}>; rel="next"'
        self._json(method, data, content, headers)


def _slices(data: bytes, start: int, end: int) -> Iterator[bytes]:
    for i in range(start, end, _CHUNK):
        yield data[i : min(end, i + _CHUNK)]


def _lfs_pointer(sha256: str, size: int) -> bytes:
    return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n").encode()


@dataclass(frozen=True)
class _Route:
    kind: str  # resolve | cdn | info | list | other
    repo_id: str | None = None
    revision: str | None = None
    filename: str | None = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # HubServer.stop() joins handler threads with a deadline
    allow_reuse_address = True
    request_queue_size = 64
    hub: HubServer

    def process_request(self, request, client_address):  # type: ignore[override]
        t = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            daemon=True,
            name="fakehub-request",
        )
        self.hub._threads_add(t)
        t.start()


# --------------------------------------------------------------------------- server


class HubServer:
    """Threaded fake Hub on 127.0.0.1:<ephemeral port>. Use as a context manager.

    ``repos``: :class:`Repo` objects (or a mapping id -> Repo). ``faults``: server-wide
    :class:`Fault` list (e.g. ``Fault.server_error(on="list")``). ``page_size``: max entries
    per ``/api/models`` page. ``missing_repo_status``: 404 (default) or 401 for unknown repos.
    """

    def __init__(
        self,
        repos: Iterable[Repo] | Mapping[str, Repo] = (),
        *,
        faults: Sequence[Fault] = (),
        page_size: int = 1000,
        missing_repo_status: int = 404,
    ) -> None:
        values = repos.values() if isinstance(repos, Mapping) else repos
        self.repos: dict[str, Repo] = {r.id: r for r in values}
        self.faults: list[Fault] = list(faults)
        self.page_size = page_size
        self.missing_repo_status = missing_repo_status
        self.log: list[LogEntry] = []
        self._log_lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._state_lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle ----------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123`` (pass as ``endpoint=`` / HF_ENDPOINT)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HubServer:
        if self._server is not None:
            raise RuntimeError("already started")
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.hub = self
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.01}, name="fakehub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, wake every injected wait, close live connections, join threads."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._state_lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        with self._state_lock:
            threads = list(self._threads)
        for t in [self._thread, *threads]:
            if t is not None:
                t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- data -----------------------------------------------------------------------
    def add(self, repo: Repo) -> Repo:
        self.repos[repo.id] = repo
        return repo

    def requests(
        self,
        method: str | None = None,
        kind: str | None = None,
        repo_id: str | None = None,
        filename: str | None = None,
        path: str | None = None,
        where: Callable[[LogEntry], bool] | None = None,
    ) -> list[LogEntry]:
        """Log entries matching every given filter (``path``: substring)."""
        with self._log_lock:
            entries = list(self.log)
        return [
            e
            for e in entries
            if (method is None or e.method == method)
            and (kind is None or e.kind == kind)
            and (repo_id is None or e.repo_id == repo_id)
            and (filename is None or e.filename == filename)
            and (path is None or path in e.path)
            and (where is None or where(e))
        ]

    def count(self, **filters: Any) -> int:
        return len(self.requests(**filters))

    def statuses(self, **filters: Any) -> list[int | None]:
        return [e.status for e in self.requests(**filters)]

    def clear_log(self) -> None:
        with self._log_lock:
            self.log.clear()

    # -- internals ----------------------------------------------------------------------
    def _log(self, entry: LogEntry) -> None:
        with self._log_lock:
            self.log.append(entry)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._state_lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _threads_add(self, t: threading.Thread) -> None:
        with self._state_lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)

    def _route(self, path: str) -> _Route:
        if path == "/api/models":
            return _Route("list")
        if path.startswith("/api/models/"):
            rest = path[len("/api/models/") :]
            revision = None
            if "/revision/" in rest:
                rest, revision = rest.split("/revision/", 1)
                revision = unquote(revision)
            return _Route("info", unquote(rest), revision)
        if path.startswith("/__cdn__/"):
            parts = path[len("/__cdn__/") :].split("/", 1)
            if len(parts) == 2:
                repo_id = unquote(parts[0])
                commit, _, filename = parts[1].partition("/")
                return _Route("cdn", repo_id, commit, unquote(filename))
            return _Route("other")
        if "/resolve/" in path:
            left, right = path.split("/resolve/", 1)
            revision, _, filename = right.partition("/")
            return _Route("resolve", unquote(left.lstrip("/")), unquote(revision), unquote(filename))
        return _Route("other")


def model_card(body: str = "# Model card\n", **metadata: Any) -> str:
    """A README.md with YAML front matter, as the Hub stores a model card (``base_model``,
    ``base_model_relation``, ``license``, ...). Values are written as JSON, which YAML reads."""
    if not metadata:
        return body
    lines = ["---", *(f"{k}: {json.dumps(v)}" for k, v in metadata.items()), "---", ""]
    return "\n".join(lines) + body


def run_slotdiff(hub: HubServer, cache: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``slotdiff ARGS --json`` in a child that knows only this Hub: HF_* variables replaced
    (a stripped child's HF_HOME falls back under the tests' XDG_CACHE_HOME), short timeouts."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    base.update(
        HF_ENDPOINT=hub.url,
        HF_HUB_CACHE=str(cache),
        HF_HUB_ETAG_TIMEOUT="1",
        HF_HUB_DOWNLOAD_TIMEOUT="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        NO_PROXY="*",
    )
    base.update(env)
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", *args, "--json"],
        capture_output=True,
        text=True,
        env=base,
        timeout=120,
    )
