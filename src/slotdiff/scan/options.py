"""What a scan is asked to do: the CLI flags as one frozen value, handed to the loop and the
workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..read.retry import RetryPolicy


@dataclass(frozen=True)
class ScanOptions:
    """Everything a scan needs to know (the CLI flags, as data)."""

    since: str = "7d"
    by: str = "modified"
    pipeline_tag: str | None = None
    library: str | None = None
    author: str | None = None
    search: str | None = None
    limit: int | None = 1000
    workers: int = 8
    timeout: float = 10.0  # per request
    deadline: float = 60.0  # per model, all requests and retries included
    list_timeout: float = 120.0  # longest the listing may go without a new item
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    state: Path | None = None
    fingerprints: Path | None = None
    endpoint: str | None = None
    cache_dir: str | None = None
    token: str | bool | None = None
    via_hf_cache: bool = False  # download through hf_hub_download (keeps configs in the HF cache)
    cards: bool = True  # read each model card's base_model (one more GET per fetched model)
