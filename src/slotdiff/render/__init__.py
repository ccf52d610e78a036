"""Renderers: turn a Report into terminal tables, Markdown or JSON.

``REPORTER_BY_NAME`` is the one table the CLI's ``--format`` choices come from. Each
renderer's module is imported when it is first used, so JSON output never loads rich.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# format name → module of this package with ``render(report) -> str``
RENDERER_MODULES: dict[str, str] = {"table": "terminal", "json": "json_report", "markdown": "markdown"}


def _lazy(module: str) -> Callable[..., str]:
    def render(report: Any, **layout: Any) -> str:  # layout: the table's width=
        return importlib.import_module(f"{__name__}.{module}").render(report, **layout)

    return render


REPORTER_BY_NAME: dict[str, Callable[..., str]] = {
    name: _lazy(module) for name, module in RENDERER_MODULES.items()
}
