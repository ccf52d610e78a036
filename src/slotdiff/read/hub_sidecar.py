"""A Hub repo's ``hf_quant_config.json`` (ModelOpt's scheme, when config.json states none),
fetched at the commit its config.json was read at, through huggingface_hub and the HF cache.

The same bounds as config.json's fetch: one metadata request without huggingface_hub's retry
pass (which sleeps any Retry-After), the size cap before any download, the Hub deadline over
the whole fetch, the HF cache offline or when the Hub fails. Most repos have no such file:
the 404 is the ordinary answer and says nothing.
"""

from __future__ import annotations

import os

from ..core.errors import SlotdiffError
from ..core.files import read_capped
from .hf_quant import FILENAME
from .hub import hub_deadline, quiet_side_requests, within
from .hub_errors import HubFailure, describe_failure
from .hub_weights import commit_of
from .jsonpos import MAX_BYTES
from .offline import offline


def _cached(repo_id: str, revision: str | None) -> str | None:
    """The file's path in the HF cache at ``revision``, or None (not cached, or known absent)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, FILENAME, revision=revision)
    return found if isinstance(found, str) else None


def _download(repo_id: str, revision: str | None, timeout: float) -> str | None:
    """The file's path after downloading it into the HF cache, or None when the repo has none."""
    import huggingface_hub
    from huggingface_hub.errors import RemoteEntryNotFoundError
    from huggingface_hub.utils import logging as hf_logging

    url = huggingface_hub.hf_hub_url(repo_id, FILENAME, revision=revision)
    try:
        meta = huggingface_hub.get_hf_file_metadata(url, timeout=timeout)
    except RemoteEntryNotFoundError:
        return None
    except Exception as err:
        raise describe_failure(err, repo_id, revision) from err
    if meta.size is not None and meta.size > MAX_BYTES:
        raise HubFailure("too_large", f"file is {meta.size:,} bytes, over the {MAX_BYTES:,}-byte cap")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its retry warnings are not slotdiff's one line
    try:
        return huggingface_hub.hf_hub_download(repo_id, FILENAME, revision=revision, etag_timeout=timeout)
    except RemoteEntryNotFoundError:
        return None
    except Exception as err:
        raise describe_failure(err, repo_id, revision) from err
    finally:
        hf_logging.set_verbosity(verbosity)


def _fallback(
    repo_id: str, pinned: str | None, name: str, fail: HubFailure
) -> tuple[bytes | None, str | None]:
    """After the Hub failed on the file: the HF cache's copy, else none and why."""
    path = _cached(repo_id, pinned)
    if path is None:
        return None, f"{FILENAME} could not be read ({fail}): weights priced from config.json alone"
    return read_capped(path, name, MAX_BYTES), None


def fetch_sidecar(
    repo_id: str, revision: str | None, location: str, origin: str, deadline: float | None = None
) -> tuple[bytes | None, str | None]:
    """(the bytes of ``repo_id``'s hf_quant_config.json or None, why it could not be read or
    None), at the commit of the config.json read at ``location``, within ``deadline`` seconds
    (what the Hub deadline left after config.json); a config read from the HF cache (offline,
    or the Hub failing) finds it there only. A file over the size cap is a SlotdiffError
    naming it; a Hub failure leaves the weights to config.json and says so."""
    name = f"{repo_id}/{FILENAME}"
    pinned = commit_of(location, revision) or revision
    if origin != "hub" or offline():
        path = _cached(repo_id, pinned)
        return (read_capped(path, name, MAX_BYTES) if path else None), None
    from huggingface_hub import constants

    quiet_side_requests()
    deadline = hub_deadline() if deadline is None else deadline
    if deadline <= 0:
        fail = HubFailure("network", "no time left within the Hub deadline", retryable=True)
        return _fallback(repo_id, pinned, name, fail)
    probe = min(float(constants.HF_HUB_ETAG_TIMEOUT or 10), deadline)
    try:
        path = within(lambda: _download(repo_id, pinned, probe), deadline)
    except HubFailure as fail:
        if fail.kind == "too_large":
            raise SlotdiffError(name, fail.reason) from fail
        return _fallback(repo_id, pinned, name, fail)
    if path is None or not os.path.exists(path):
        return None, None
    return read_capped(path, name, MAX_BYTES), None
