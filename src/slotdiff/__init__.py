"""slotdiff: what a model's config changed relative to GPT-2 and Llama, slot by slot, and what it costs.

Python API (the CLI uses the same functions)::

    import slotdiff
    report = slotdiff.analyze("Qwen/Qwen3-30B-A3B")      # Report
    report.to_dict()["cost"]["kv"]["bytes_per_token"]
    d = slotdiff.diff("meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.1-8B")
    cls = slotdiff.classify(report.arch)                  # Classification

The names load on first use (PEP 562): ``python -m slotdiff lint`` imports this package
before its command, and no command should pay for the analysis pipeline it does not run.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .core.version import __version__

if TYPE_CHECKING:
    from .analysis.analyze import analyze
    from .analysis.compare import diff
    from .analysis.report import Report
    from .slots.classify import classify

__all__ = ["Report", "__version__", "analyze", "classify", "diff"]

# public name → the module that defines it
_WHERE = {
    "analyze": "slotdiff.analysis.analyze",
    "diff": "slotdiff.analysis.compare",
    "Report": "slotdiff.analysis.report",
    "classify": "slotdiff.slots.classify",
}


def __getattr__(name: str) -> Any:
    """Load a public name from its module the first time it is asked for."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'slotdiff' has no attribute {name!r}")
    value = getattr(import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
