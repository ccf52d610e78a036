"""The Report as JSON (the shape ``schemas/report.schema.json`` describes), one document per run."""

from __future__ import annotations

from typing import Any

from ..core.jsonout import dumps_line


def render(report: Any) -> str:
    return dumps_line(report.to_dict())
