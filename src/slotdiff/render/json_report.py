"""The Report as JSON (the shape ``schemas/report.schema.json`` describes), one document per run."""

from __future__ import annotations

import json
from typing import Any


def render(report: Any) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"
