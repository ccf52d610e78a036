"""Which checkpoint sits beside a config: the folder of a local config, or the Hub repo it
was fetched from (its tensor index read through huggingface_hub)."""

from __future__ import annotations

from pathlib import Path

from ..read.checkpoint import Lookup, local_index
from ..read.hub_weights import commit_of, hub_index
from ..read.source import RawConfig


def checkpoint_lookup(raw: RawConfig) -> Lookup | bool | None:
    """The tensor index beside ``raw``; None: no weights there; False: no checkpoint can sit
    beside this config (an in-memory dict, the bundled catalog)."""
    if raw.origin == "file":
        return local_index(Path(raw.location).parent)
    if raw.origin in ("hub", "hf-cache") and raw.repo_id:
        return hub_index(raw.repo_id, raw.revision, commit_of(raw.location, raw.revision))
    return False
