"""JSON output: the Report (the shape ``schemas/report.schema.json`` describes), one document
per run, and ``dumps``, the one writer every command's ``--json`` goes through."""

from __future__ import annotations

import json
from typing import Any


def dumps(data: Any) -> str:
    """``data`` as one indented JSON document (NaN and infinity refused, not written)."""
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"


def render(report: Any) -> str:
    return dumps(report.to_dict())
