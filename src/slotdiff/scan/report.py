"""The scan report: one JSON-ready dict, and Markdown / terminal renderings of it.

Grouped by verdict, new things first; each model with its repo id, date, downloads and
likes (where the listing gave them), class label, nearest family and the facets that
differ with their article pointers. Unchanged models are only counted.
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from ..core.jsonout import Stream, iterdumps
from ..render.console import safe_console
from ..render.json_report import dumps
from ..render.page import output_width, print_table
from . import text
from .groups import base_of, lineage_groups
from .html import iter_html
from .listing import Listed, iso
from .markdown import REPORTED, headline, iter_markdown, render_markdown
from .pipelines import expand_pipeline_tags
from .records import RecordView
from .stored import DIFFERS, weekly_shares
from .verdict import NEW, TITLES

FORMAT = "slotdiff-scan-report"
VERSION = 1
HUB = "https://huggingface.co"


def _date(rec: Mapping[str, Any]) -> str:
    """The listing's date of a record dict (``Listed.date``: newest first within a group)."""
    return Listed.from_dict(rec.get("listed") or {"repo_id": rec["repo_id"]}).date or ""


def _model(rec: Mapping[str, Any]) -> dict[str, Any]:
    data = dict(rec)
    data.pop("fills", None)  # the design is in new_fingerprints (and proposals), once
    return data


def new_fingerprints(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each new design once, with every model that has it (first seen first).

    ``records`` are record dicts (``ScanResult.raw()``); only the new designs' are kept."""
    fresh = [r for r in records if r.get("fingerprint_new") and r.get("fingerprint") is not None]
    fresh.sort(key=lambda r: (_date(r), r["repo_id"]))
    out: dict[str, dict[str, Any]] = {}
    for rec in fresh:
        entry = out.setdefault(
            rec["fingerprint"],
            {
                "fingerprint": rec["fingerprint"],
                "label": rec.get("label"),
                "model_types": [],
                "nearest": rec.get("nearest"),
                "models": [],
                "model_type_of": {},
                "fills": rec.get("fills"),
                "sizes": [],
            },
        )
        mt = rec.get("model_type")
        entry["model_type_of"][rec["repo_id"]] = mt
        if mt and mt not in entry["model_types"]:
            entry["model_types"].append(mt)
        entry["models"].append(rec["repo_id"])
        sizes = rec.get("sizes")
        if sizes is not None and sizes not in entry["sizes"]:
            entry["sizes"].append(sizes)
    return list(out.values())


@dataclass
class _Pass:
    """What one read of every record gives the report (the records themselves stay on disk)."""

    order: list[tuple[int, str, str, int]] = field(default_factory=list)  # rank, date, id, index
    verdicts: dict[str, str] = field(default_factory=dict)  # repo id → verdict (lineage's in_scan)
    derivatives: list[dict[str, Any]] = field(default_factory=list)  # models whose card names a base
    designs: list[Mapping[str, Any]] = field(default_factory=list)  # records with a new design
    new: bool = False
    checks: list[tuple[str | None, Mapping[str, Any]]] = field(default_factory=list)  # (date, check)
    differs: list[dict[str, Any]] = field(default_factory=list)  # counts the checkpoint disagrees with


_RANK = {v: i for i, v in enumerate(REPORTED)}


def _one_pass(records: Iterable[Mapping[str, Any]]) -> _Pass:
    out = _Pass()
    derivatives: dict[int, dict[str, Any]] = {}
    for i, rec in enumerate(records):
        verdict, repo = rec["verdict"], rec["repo_id"]
        out.new = out.new or verdict in NEW
        check = rec.get("checkpoint")
        if check:
            out.checks.append((_date(rec), check))
            if check.get("status") == DIFFERS:
                out.differs.append({"repo_id": repo, **{k: v for k, v in check.items() if k != "status"}})
        if verdict not in _RANK:
            continue  # unchanged: only counted
        out.verdicts[repo] = verdict
        out.order.append((_RANK[verdict], _date(rec), repo, i))
        if base_of(rec) is not None:
            derivatives[i] = {"repo_id": repo, "verdict": verdict, "lineage": rec.get("lineage")}
        if rec.get("fingerprint_new"):
            out.designs.append(rec)
    # Grouped by verdict, newest first within a group, the repo id breaking ties (stable sorts).
    out.order.sort(key=lambda k: k[2])
    out.order.sort(key=lambda k: k[1], reverse=True)
    out.order.sort(key=lambda k: k[0])
    out.derivatives = [derivatives[i] for *_, i in out.order if i in derivatives]  # report order
    return out


def to_dict(result: Any, proposed: Sequence[str] = (), *, stream: bool = False) -> dict[str, Any]:
    """The JSON report of a :class:`~slotdiff.scan.engine.ScanResult`.

    ``stream=True``: ``models`` is a :class:`~slotdiff.core.jsonout.Stream` that reads each
    model from the scan's journal as the writer (or a renderer) reaches it, so a 50,000-model
    report is never whole in memory; spool it (:data:`PIECES` and :func:`spool`, as the CLI
    does). Without it, a list.
    """
    q = result.query
    seen = _one_pass(result.raw())
    positions = [i for *_, i in seen.order]
    records = result.records

    def models() -> Iterator[dict[str, Any]]:
        if isinstance(records, RecordView):
            for at in (records.offsets[i] for i in positions):
                yield _model(records.store.raw(at))
        else:
            for i in positions:
                yield _model(records[i].to_dict())

    return {
        "format": FORMAT,
        "version": VERSION,
        "scan": {
            "id": result.scan_id,
            "started": result.started,
            "finished": result.finished,
            "since": iso(q.since),
            "since_spec": q.since_spec,
            "by": q.by,
            "filters": {
                "pipeline_tag": q.pipeline_tag,
                "pipeline_tags": list(expand_pipeline_tags(q.pipeline_tag)),
                "library": q.library,
                "author": q.author,
                "search": q.search,
            },
            "limit": q.limit,
            "resumed": result.resumed,
            "interrupted": result.interrupted,
            "endpoint": result.endpoint or HUB,
        },
        "counts": result.counts(),
        "new": seen.new,
        "checkpoints": {"differs": seen.differs, "weeks": weekly_shares(seen.checks)},
        "listing_error": result.listing_error,
        "notes": list(result.notes),
        "retries": {
            "count": result.retries,
            "waited_s": round(result.waited_s, 3),
            "abandoned": result.abandoned,
        },
        "new_fingerprints": [
            {k: v for k, v in e.items() if k not in ("fills", "model_type_of")}
            for e in new_fingerprints(seen.designs)
        ],
        "models": Stream(models, len(positions)) if stream else list(models()),
        "lineage": lineage_groups(seen.derivatives, seen.verdicts),
        "proposed_families": list(proposed),
    }


def render_json(data: Mapping[str, Any]) -> str:
    return dumps(data)  # the one JSON writer (render/json_report.py → core/jsonout.py)


def spool(pieces: Iterable[str]) -> IO[str]:
    """``pieces`` joined in an anonymous temporary file, read from the start (a report too big
    to hold as one string: JSON, Markdown or HTML of a 50,000-model scan). The caller closes
    it; the file goes with it. A lone surrogate from a config (which no UTF-8 file can hold)
    passes through as itself, for :func:`~slotdiff.core.printable.printable` to escape."""
    fh = tempfile.TemporaryFile("w+", encoding="utf-8", errors="surrogatepass", newline="")  # noqa: SIM115
    try:
        for piece in pieces:
            fh.write(piece)
        fh.seek(0)
    except BaseException:
        fh.close()
        raise
    return fh


def render_terminal(data: Mapping[str, Any], width: int | None = None) -> str:
    """A short summary for a terminal: counts, then one line per reported model."""

    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = safe_console(
        file=buf,
        width=output_width(width),
        force_terminal=False,
        color_system=None,
        highlight=False,
        markup=False,
    )
    scan = data["scan"]
    console.print(
        Text(f"slotdiff scan {scan['id']}: ", style="bold")
        + Text(headline(data))
        + Text(f"  (since {text.day(scan['since'])})", style="dim")
    )
    if data["listing_error"]:
        console.print(Text(f"listing incomplete: {data['listing_error']}", style="yellow"))
    for note in data["notes"]:
        console.print(Text(note, style="dim"))
    for line in text.checkpoint_lines(data):
        console.print(Text(line, style="bold" if line.startswith("counts") else "dim"))
    by_verdict: dict[str, list[Mapping[str, Any]]] = {}
    for m in data["models"]:
        by_verdict.setdefault(m["verdict"], []).append(m)
    for verdict in REPORTED:
        models = by_verdict.get(verdict, [])
        if not models:
            continue
        # a repo id whole on its line, the description wrapped at spaces: no word is ever cut
        table = Table(title=None, box=None, pad_edge=False, expand=False, show_header=False)
        table.add_column("model", no_wrap=True)
        table.add_column("what")
        for m in models:
            table.add_row(m["repo_id"], _terminal_what(m))
        console.print(Text(f"\n{TITLES[verdict]} ({len(models)})", style="bold"))
        print_table(console, table)
    return buf.getvalue()


def _terminal_what(m: Mapping[str, Any]) -> str:
    if m["verdict"] == "skipped":
        return f"{m.get('reason')}: {m.get('detail') or ''}"
    bits = [m.get("label") or "", text.figures(m.get("figures"))]
    if m.get("family"):
        bits.append(f"family {m['family']}")
    near = m.get("nearest")
    if near and m["verdict"] != "known":
        bits.append(
            f"nearest {near['family']} Δ{near['distance']}: "
            + "; ".join(map(text.difference, near["differs"]))
        )
    unread = m.get("unreadable")
    if unread:
        by_keys = unread.get("nearest_by_keys")
        bits.append("unreadable: " + unread["why"])
        if by_keys:
            bits.append(f"nearest by keys {by_keys['model_type']} ({by_keys['overlap']:.0%})")
    if m.get("new_keys"):
        bits.append("new keys: " + ", ".join(m["new_keys"][:8]))
    if m.get("size_changes"):
        bits.append("sizes: " + text.size_changes(m["size_changes"], limit=4))
    return " · ".join(b for b in bits if b)


__all__ = [
    "PIECES",
    "RENDERERS",
    "new_fingerprints",
    "render_json",
    "render_markdown",
    "render_terminal",
    "spool",
    "to_dict",
]

# The reports that hold a row per model, each as the pieces of its text (spooled by the CLI).
PIECES: dict[str, Callable[[Mapping[str, Any]], Iterable[str]]] = {
    "json": iterdumps,
    "markdown": iter_markdown,
    "html": iter_html,
}

RENDERERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "table": render_terminal,
    "markdown": render_markdown,
    "json": render_json,
}
