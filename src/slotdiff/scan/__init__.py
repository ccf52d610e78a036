"""``slotdiff scan``: the weekly Hub scan for new architectures.

listing (what is new on the Hub) → pool (fetch config.json concurrently, every model under
a deadline) → verdict (classify and judge against the family files and earlier scans) →
state (what was seen; resumable) → report (Markdown, JSON, terminal).
"""

from __future__ import annotations

from .engine import ScanOptions, ScanResult, run_scan

__all__ = ["ScanOptions", "ScanResult", "run_scan"]
