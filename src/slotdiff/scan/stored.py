"""A scan entry's count against the checkpoint's, from the listing alone: the Hub's
``safetensors`` field (stored parameters per dtype) arrives with the listing
(``expand=safetensors``), so the check costs no request of its own.

A quantized checkpoint is not compared: the Hub counts its packed elements (an int32 word
of GPTQ holds eight weights), not the weights. Tensors that are not parameters (buffers, a
tied head saved twice) make a count differ; ``slotdiff MODEL`` reads the headers and says
which.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from .figures import Figures
from .listing import Listed

MATCH, DIFFERS, NO_SAFETENSORS, NOT_COMPARED = "match", "differs", "no safetensors", "not compared"


def stored_check(listed: Listed, figs: Figures | None) -> dict[str, Any]:
    """match / differs / no safetensors / not compared (with why), and the counts."""
    if listed.safetensors is None:
        return {"status": NO_SAFETENSORS}
    stored = sum(n for _, n in listed.safetensors)
    out: dict[str, Any] = {"stored_params": stored, "by_dtype": dict(listed.safetensors)}
    if figs is None or figs.params is None:
        return {**out, "status": NOT_COMPARED, "why": "the config was not priced"}
    if figs.quantized:
        return {**out, "status": NOT_COMPARED, "why": "quantized: the Hub counts packed elements"}
    expected = figs.params + (figs.mtp_params or 0)
    return {**out, "expected_params": expected, "status": MATCH if stored == expected else DIFFERS}


def week_of(date: str | None) -> str | None:
    """``2026-W49`` (ISO week) of an ISO date, or None."""
    if not date:
        return None
    try:
        year, week, _ = datetime.fromisoformat(date.replace("Z", "+00:00")).isocalendar()
    except ValueError:
        return None
    return f"{year}-W{week:02d}"


def weekly_shares(entries: Iterable[tuple[str | None, Mapping[str, Any] | None]]) -> list[dict[str, Any]]:
    """Per ISO week of (date, checkpoint check): models compared, how many match, the share."""
    weeks: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for date, check in entries:
        week = week_of(date)
        if week is None or not check:
            continue
        status = check.get("status")
        if status in (MATCH, DIFFERS):
            weeks[week][0] += 1
            weeks[week][1] += status == MATCH
        elif status == NO_SAFETENSORS:
            weeks[week][2] += 1
    return [
        {
            "week": w,
            "compared": n,
            "match": m,
            "share": round(m / n, 4) if n else None,
            "no_safetensors": none,
        }
        for w, (n, m, none) in sorted(weeks.items(), reverse=True)
    ]
