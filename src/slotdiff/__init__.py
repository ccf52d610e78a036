"""slotdiff: what a model's config changed relative to GPT-2 and Llama, slot by slot, and what it costs.

Python API (the CLI uses the same functions)::

    import slotdiff
    report = slotdiff.analyze("Qwen/Qwen3-30B-A3B")      # Report
    report.to_dict()["cost"]["kv"]["bytes_per_token"]
    d = slotdiff.diff("meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.1-8B")
    cls = slotdiff.classify(report.arch)                  # Classification
"""

from __future__ import annotations

__version__ = "0.1.0"

# The functions share their names with the modules that define them; binding them here,
# after the import, makes ``slotdiff.analyze`` the function (the import system sets a
# submodule attribute only when the submodule is first loaded).
from .analysis.analyze import analyze
from .analysis.compare import diff
from .slots.classify import classify

__all__ = ["__version__", "analyze", "classify", "diff"]
