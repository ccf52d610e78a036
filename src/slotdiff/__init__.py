"""slotdiff: what a model's config changed relative to GPT-2 and Llama, slot by slot, and what it costs.

Python API (the CLI uses the same functions)::

    import slotdiff
    report = slotdiff.analyze("Qwen/Qwen3-30B-A3B")      # Report
    report.to_dict()["cost"]["kv"]["bytes_per_token"]
    d = slotdiff.diff("meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.1-8B")
    cls = slotdiff.classify(report.arch)                  # Classification
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .analyze import analyze
    from .classify import classify
    from .compare import diff

__all__ = ["__version__", "analyze", "classify", "diff"]


def __getattr__(name: str) -> Any:
    # Lazy: `import slotdiff` stays cheap; the pipeline loads on first use.
    if name == "analyze":
        from .analyze import analyze

        return analyze
    if name == "classify":
        from .classify import classify

        return classify
    if name == "diff":
        from .compare import diff

        return diff
    raise AttributeError(f"module 'slotdiff' has no attribute {name!r}")
