"""slotdiff: what a model's config changed relative to GPT-2 and Llama, slot by slot, and what it costs.

Python API (the CLI uses the same functions)::

    import slotdiff
    report = slotdiff.analyze("Qwen/Qwen3-30B-A3B")      # Report
    report.to_dict()["cost"]["kv"]["bytes_per_token"]
    d = slotdiff.diff("meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.1-8B")
    cls = slotdiff.classify(report.arch)                  # Classification
"""

from __future__ import annotations

from .analysis.analyze import analyze
from .analysis.compare import diff
from .analysis.report import Report
from .core.version import __version__
from .slots.classify import classify

__all__ = ["Report", "__version__", "analyze", "classify", "diff"]
