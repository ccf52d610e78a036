"""JSON output: the Report (the shape ``schemas/report.schema.json`` describes), one document
per run, and ``dumps``, the one writer every command's ``--json`` goes through."""

from __future__ import annotations

from typing import Any

from ..core.jsonout import dumps_line


def dumps(data: Any) -> str:
    """``data`` as one indented JSON document (NaN and infinity refused, not written; DEL, C1,
    bidi marks and lone surrogates escaped by core.jsonout, so it is valid JSON anywhere)."""
    return dumps_line(data)


def render(report: Any) -> str:
    return dumps(report.to_dict())
