"""A Hub repository's tensor index: ``model.safetensors.index.json`` (downloaded into the HF
cache) and each shard's safetensors header, read by HTTP range requests through
huggingface_hub (``parse_safetensors_file_metadata``), many at once; never tensor data.

The index read for a commit is kept in the HF cache (``slotdiff-checkpoints/``) and read from
there afterwards, offline included; the whole read ends within the Hub deadline.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_text, safe_name
from ..core.jsonout import dumps
from .checkpoint import (
    INDEX_FILE,
    MAX_INDEX_BYTES,
    MAX_SHARDS,
    Lookup,
    StoredIndex,
    StoredTensor,
    Unavailable,
    listed,
    weight_map_of,
)
from .hub import hub_deadline, quiet_side_requests, within
from .hub_errors import HubFailure, describe_failure

WORKERS = 32  # concurrent range requests: a 163-shard index in ~6 round trips
SINGLE_FILE = "model.safetensors"
SOURCE = "Hub safetensors headers"
_COMMIT = re.compile(r"[0-9a-f]{40}")
CACHE_VERSION = 1


def commit_of(location: str, revision: str | None) -> str | None:
    """The commit a config was read at: its HF cache snapshot folder, or a full-sha revision."""
    if revision and _COMMIT.fullmatch(revision):
        return revision
    folder = Path(location).parent.name
    return folder if _COMMIT.fullmatch(folder) and Path(location).parent.parent.name == "snapshots" else None


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "") in ("1", "true", "True")


def _cache_file(repo_id: str, commit: str) -> Path:
    from huggingface_hub import constants

    folder = Path(constants.HF_HUB_CACHE) / "slotdiff-checkpoints" / safe_name(repo_id.replace("/", "--"))
    return folder / f"{commit}.json"


def _from_cache(path: Path, repo_id: str) -> StoredIndex | None:
    """A cached index, or None when there is none or it is not one slotdiff wrote (ignored)."""
    try:
        if path.stat().st_size > MAX_INDEX_BYTES:
            return None
        doc = json.loads(path.read_bytes())
        if doc.get("version") != CACHE_VERSION:
            return None
        tensors = tuple(StoredTensor(n, d, tuple(s), b) for n, d, s, b in doc["tensors"])
        if not all(isinstance(t.name, str) and isinstance(t.nbytes, int) for t in tensors):
            return None
        total = doc.get("total_size")
        return StoredIndex(
            tensors,
            SOURCE,
            repo_id,
            int(doc["shards"]),
            int(doc["shards_read"]),
            total if isinstance(total, int) else None,
            cached=True,
        )
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def _to_cache(path: Path, index: StoredIndex) -> None:
    doc = {
        "version": CACHE_VERSION,
        "shards": index.shards,
        "shards_read": index.shards_read,
        "total_size": index.total_size,
        "tensors": [[t.name, t.dtype, list(t.shape or ()), t.nbytes] for t in index.tensors],
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, dumps(doc, indent=None))
    except OSError:
        pass  # a cache that cannot be written is read again next time


def hub_index(repo_id: str, revision: str | None, commit: str | None) -> Lookup:
    """The tensor index of ``repo_id`` at ``commit`` (or ``revision``), cached per commit."""
    cache = _cache_file(repo_id, commit) if commit else None
    if cache is not None:
        found = _from_cache(cache, repo_id)
        if found is not None:
            return found
    if _offline():
        return Unavailable("HF_HUB_OFFLINE is set and the checkpoint's tensor index is not in the HF cache")
    quiet_side_requests()
    from huggingface_hub import constants

    deadline = hub_deadline()
    probe = min(float(constants.HF_HUB_ETAG_TIMEOUT), deadline)  # per request (default 10 s)
    try:
        read = within(lambda: _read(repo_id, commit or revision, probe), deadline)
    except HubFailure as fail:
        return Unavailable(f"the Hub: {fail}")
    if isinstance(read, StoredIndex) and cache is not None:
        _to_cache(cache, read)
    return read


def thread_map(fn: Callable[[str], Any], items: list[str], workers: int) -> list[Any]:
    """``[fn(x) for x in items]`` on up to ``workers`` threads, in order, as a thread pool's
    ``map`` inside its ``with`` block: after a failure no new item starts, the started ones
    finish, and the failure of the first item (in ``items`` order) that failed is raised.
    (Threads of its own: concurrent.futures would load logging into every run's start-up.)"""
    results: list[Any] = [None] * len(items)
    failures: list[BaseException | None] = [None] * len(items)
    todo = iter(range(len(items)))
    lock = threading.Lock()
    failed = threading.Event()

    def work() -> None:
        while True:
            with lock:
                i = None if failed.is_set() else next(todo, None)
            if i is None:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as err:  # raised in the caller's thread below
                failures[i] = err
                failed.set()

    threads = [
        threading.Thread(target=work, name=f"slotdiff-headers_{k}", daemon=True)
        for k in range(max(1, min(workers, len(items))))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = next((err for err in failures if err is not None), None)
    if first is not None:
        raise first
    return results


def _read(repo_id: str, revision: str | None, timeout: float) -> Lookup:
    import huggingface_hub
    from huggingface_hub.errors import RemoteEntryNotFoundError, SafetensorsParsingError

    api = huggingface_hub.HfApi()

    def header(filename: str) -> Any:
        return api.parse_safetensors_file_metadata(repo_id, filename, revision=revision, timeout=timeout)

    try:
        url = huggingface_hub.hf_hub_url(repo_id, INDEX_FILE, revision=revision)
        try:  # one HEAD without huggingface_hub's retry pass (60 s timeouts, uncapped Retry-After)
            huggingface_hub.get_hf_file_metadata(url, timeout=timeout)
        except RemoteEntryNotFoundError:
            path = None
        else:
            path = huggingface_hub.hf_hub_download(
                repo_id, INDEX_FILE, revision=revision, etag_timeout=timeout
            )
        if path is None:
            try:
                metas = {SINGLE_FILE: header(SINGLE_FILE)}
            except RemoteEntryNotFoundError:
                return Unavailable(f"the repo has neither {INDEX_FILE} nor {SINGLE_FILE}")
            shards, total = [SINGLE_FILE], None
        else:
            with open(path, "rb") as fh:
                read = weight_map_of(fh.read(MAX_INDEX_BYTES + 1))
            if isinstance(read, Unavailable):
                return read
            shards, total = sorted(set(read[0].values())), read[1]
            if len(shards) > MAX_SHARDS:
                return Unavailable(f"{len(shards):,} shards, over the {MAX_SHARDS:,} cap")
            metas = dict(zip(shards, thread_map(header, shards, WORKERS), strict=True))
    except SafetensorsParsingError as err:
        return Unavailable(f"a shard's safetensors header cannot be read: {str(err).splitlines()[0][:160]}")
    except Exception as err:
        raise describe_failure(err, repo_id, revision) from err
    try:
        tensors = [t for meta in metas.values() for t in listed(meta)]
    except (TypeError, ValueError) as err:
        return Unavailable(f"a tensor entry of a shard's header is malformed ({err})")
    return StoredIndex(
        tuple(sorted(tensors, key=lambda t: t.name)), SOURCE, repo_id, len(shards), len(metas), total
    )
