"""Renderers: turn a Report into terminal tables, Markdown or JSON.

``REPORTER_BY_NAME`` is the one table the CLI's ``--format`` choices come from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def to_json(report: Any) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"


def to_markdown(report: Any) -> str:
    from .markdown import render

    return render(report)


def to_table(report: Any) -> str:
    from .terminal import render

    return render(report)


REPORTER_BY_NAME: dict[str, Callable[[Any], str]] = {
    "table": to_table,
    "json": to_json,
    "markdown": to_markdown,
}
