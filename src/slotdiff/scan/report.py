"""The scan report: one JSON-ready dict, and Markdown / terminal renderings of it.

Grouped by verdict, new things first; each model with its repo id, date, downloads and
likes (where the listing gave them), class label, nearest family and the facets that
differ with their article pointers. Unchanged models are only counted.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..read.hub_errors import looks_like_repo_id
from ..render.console import safe_console
from ..render.json_report import dumps
from ..render.page import output_width
from .listing import iso
from .verdict import NEW, SKIP_REASONS, TITLES, VERDICTS, Record

FORMAT = "slotdiff-scan-report"
VERSION = 1
REPORTED = tuple(v for v in VERDICTS if v != "unchanged")
HUB = "https://huggingface.co"


def _sort_key(rec: Record) -> tuple[str, str]:
    # Newest first within a group; the repo id breaks ties so reports are reproducible.
    return (rec.listed.date or "", rec.repo_id)


def grouped(records: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {v: [] for v in REPORTED}
    for rec in records:
        if rec.verdict in out:
            out[rec.verdict].append(rec)
    for recs in out.values():
        recs.sort(key=lambda r: r.repo_id)
        recs.sort(key=lambda r: r.listed.date or "", reverse=True)  # stable: newest first, then by id
    return out


def _model(rec: Record) -> dict[str, Any]:
    data = rec.to_dict()
    data.pop("fills", None)  # the design is in new_fingerprints (and proposals), once
    return data


def new_fingerprints(records: Sequence[Record]) -> list[dict[str, Any]]:
    """Each new design once, with every model that has it (first seen first)."""
    out: dict[str, dict[str, Any]] = {}
    for rec in sorted(records, key=_sort_key):
        if not rec.fingerprint_new or rec.fingerprint is None:
            continue
        entry = out.setdefault(
            rec.fingerprint,
            {
                "fingerprint": rec.fingerprint,
                "label": rec.label,
                "model_types": [],
                "nearest": rec.nearest,
                "models": [],
                "model_type_of": {},
                "fills": rec.fills,
                "sizes": [],
            },
        )
        entry["model_type_of"][rec.repo_id] = rec.model_type
        if rec.model_type and rec.model_type not in entry["model_types"]:
            entry["model_types"].append(rec.model_type)
        entry["models"].append(rec.repo_id)
        if rec.sizes is not None and rec.sizes not in entry["sizes"]:
            entry["sizes"].append(rec.sizes)
    return list(out.values())


def to_dict(result: Any, proposed: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON report of a :class:`~slotdiff.scan.engine.ScanResult`."""
    q = result.query
    groups = grouped(result.records)
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
        "new": any(r.verdict in NEW for r in result.records),
        "listing_error": result.listing_error,
        "notes": list(result.notes),
        "retries": {
            "count": result.retries,
            "waited_s": round(result.waited_s, 3),
            "abandoned": result.abandoned,
        },
        "new_fingerprints": [
            {k: v for k, v in e.items() if k not in ("fills", "model_type_of")}
            for e in new_fingerprints(result.records)
        ],
        "models": [_model(r) for v in REPORTED for r in groups[v]],
        "proposed_families": list(proposed),
    }


# ---------------------------------------------------------------------------- formatting


def _n(x: int | None) -> str:
    if x is None:
        return ""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if x >= size:
            return f"{x / size:.1f}".rstrip("0").rstrip(".") + unit
    return str(x)


def _day(text: str | None) -> str:
    return (text or "")[:10]


def _when(listed: Mapping[str, Any]) -> str:
    created, modified = _day(listed.get("created")), _day(listed.get("modified"))
    if created and modified and modified != created:
        return f"created {created}, updated {modified}"
    return f"created {created}" if created else (f"updated {modified}" if modified else "")


def _pop(listed: Mapping[str, Any]) -> str:
    parts = []
    if listed.get("downloads") is not None:
        parts.append(f"{_n(listed['downloads'])} downloads")
    if listed.get("likes") is not None:
        parts.append(f"{_n(listed['likes'])} likes")
    return " · ".join(parts)


def _md(text: Any) -> str:
    """Inline text safe in Markdown (repo ids and config keys come from strangers)."""
    out = str(text).replace("\\", "\\\\")
    for ch in "`*_[]<>|#":
        out = out.replace(ch, "\\" + ch)
    return " ".join(out.split())


def _code(text: Any) -> str:
    """A code span that stays one table cell: no backticks, newlines or bare pipes."""
    body = " ".join(str(text).replace("`", "'").split())
    return "`" + body.replace("|", "\\|") + "`"


def _link(repo: str, base: str) -> str:
    if not looks_like_repo_id(repo):
        return _code(repo)
    return f"[{_md(repo)}]({base.rstrip('/')}/{repo})"


def _differs(nearest: Mapping[str, Any] | None) -> str:
    if not nearest:
        return ""
    items = ", ".join(f"{_code(d['facet'])} (article {d['article']})" for d in nearest.get("differs", []))
    return f"nearest family **{_md(nearest['family'])}** at distance {nearest['distance']}" + (
        f": {items}" if items else ""
    )


def _sizes(changes: Sequence[Mapping[str, Any]], limit: int = 6) -> str:
    shown = [f"{_code(c['facet'] + '.' + c['size'])} {c['was']} → {c['now']}" for c in changes[:limit]]
    more = f" (+{len(changes) - limit} more)" if len(changes) > limit else ""
    return ", ".join(shown) + more


def _headline(data: Mapping[str, Any]) -> str:
    c = data["counts"]
    new = c["new_model_type"] + c["new_fingerprint"] + c["new_keys"]
    parts = [
        f"{new} new",
        f"{c['new_sizes']} new sizes",
        f"{c['known']} known",
        f"{c['skipped']} skipped",
        f"{c['unchanged']} unchanged",
    ]
    return " · ".join(parts)


def render_markdown(data: Mapping[str, Any]) -> str:
    """Markdown for an issue or a chat post."""
    scan = data["scan"]
    base = scan["endpoint"]
    lines = [
        f"## slotdiff scan: {_headline(data)}",
        "",
        f"{data['counts']['models']} models {'created' if scan['by'] == 'created' else 'created or updated'} "
        f"since {_day(scan['since'])} (scan `{scan['id']}`, {_day(scan['started'])}"
        + (", resumed" if scan["resumed"] else "")
        + ").",
        "",
    ]
    if data["listing_error"]:
        lines += [f"> **Listing incomplete:** {_md(data['listing_error'])}", ""]
    for note in data["notes"]:
        lines += [f"> {_md(note)}", ""]
    by_verdict: dict[str, list[Mapping[str, Any]]] = {}
    for m in data["models"]:
        by_verdict.setdefault(m["verdict"], []).append(m)
    fps = {e["fingerprint"]: e for e in data["new_fingerprints"]}
    for verdict in REPORTED:
        models = by_verdict.get(verdict, [])
        if not models:
            continue
        lines += [f"### {TITLES[verdict]} ({len(models)})", ""]
        if verdict in ("known", "skipped"):
            lines += _table(verdict, models, base)
            continue
        if verdict == "new_fingerprint":
            for fp_id in dict.fromkeys(m["fingerprint"] for m in models):
                entry = fps.get(fp_id, {})
                members = [m for m in models if m["fingerprint"] == fp_id]
                lines.append(f"#### {_code(fp_id)} · {_md(entry.get('label', members[0]['label']))}")
                lines.append("")
                near = _differs(members[0].get("nearest"))
                if near:
                    lines += [near[0].upper() + near[1:] + ".", ""]
                lines += [_item(m, base, show_nearest=False) for m in members]
                lines.append("")
            continue
        lines += [_item(m, base) for m in models]
        lines.append("")
    if data["proposed_families"]:
        lines += ["### Proposed family files", ""]
        lines += [f"- {_code(p)}" for p in data["proposed_families"]]
        lines.append("")
    r = data["retries"]
    if r["count"] or r["abandoned"]:
        lines += [
            f"<sub>{r['count']} retries, {r['waited_s']:g} s waited, "
            f"{r['abandoned']} models given up at their deadline.</sub>",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def _item(m: Mapping[str, Any], base: str, show_nearest: bool = True) -> str:
    listed = m["listed"]
    head = f"- **{_link(m['repo_id'], base)}**"
    if m.get("model_type"):
        head += f" {_code(m['model_type'])}"
    meta = " · ".join(x for x in (_when(listed), _pop(listed)) if x)
    if meta:
        head += f" — {meta}"
    sub = []
    if m.get("label"):
        sub.append(f"class: {_code(m['label'])}")
    if m.get("family"):
        sub.append(f"family: **{_md(m['family'])}**")
    if show_nearest and m.get("nearest"):
        sub.append(_differs(m["nearest"]))
    if m.get("model_type_new"):
        sub.append("model_type never seen before")
    if m.get("new_keys"):
        sub.append("new config keys: " + ", ".join(_code(k) for k in m["new_keys"][:12]))
    if m.get("size_changes"):
        sub.append("sizes: " + _sizes(m["size_changes"]))
    if m.get("previous"):
        sub.append(f"was {_code(m['previous']['fingerprint'])} in the last scan")
    return "\n".join([head, *[f"  - {s}" for s in sub]])


def _table(verdict: str, models: Sequence[Mapping[str, Any]], base: str) -> list[str]:
    if verdict == "known":
        rows = ["| model | date | downloads | likes | family | class |", "|---|---|---|---|---|---|"]
        for m in models:
            listed = m["listed"]
            day = _day(max(listed.get("created") or "", listed.get("modified") or ""))
            rows.append(
                f"| {_link(m['repo_id'], base)} | {day} "
                f"| {_n(listed.get('downloads'))} | {_n(listed.get('likes'))} | {_md(m.get('family') or '')} "
                f"| {_md(m.get('label') or '')} |"
            )
    else:
        rows = ["| model | reason | detail |", "|---|---|---|"]
        for m in models:
            reason = SKIP_REASONS.get(m.get("reason") or "", m.get("reason") or "")
            rows.append(f"| {_link(m['repo_id'], base)} | {_md(reason)} | {_md(m.get('detail') or '')} |")
    return [*rows, ""]


def render_json(data: Mapping[str, Any]) -> str:
    return dumps(data)  # the one JSON writer (render/json_report.py → core/jsonout.py)


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
        + Text(_headline(data))
        + Text(f"  (since {_day(scan['since'])})", style="dim")
    )
    if data["listing_error"]:
        console.print(Text(f"listing incomplete: {data['listing_error']}", style="yellow"))
    for note in data["notes"]:
        console.print(Text(note, style="dim"))
    by_verdict: dict[str, list[Mapping[str, Any]]] = {}
    for m in data["models"]:
        by_verdict.setdefault(m["verdict"], []).append(m)
    for verdict in REPORTED:
        models = by_verdict.get(verdict, [])
        if not models:
            continue
        table = Table(title=None, box=None, pad_edge=False, expand=True, show_header=False)
        table.add_column("model", ratio=3, overflow="fold")
        table.add_column("what", ratio=5, overflow="fold")
        for m in models:
            table.add_row(m["repo_id"], _terminal_what(m))
        console.print(Text(f"\n{TITLES[verdict]} ({len(models)})", style="bold"))
        console.print(table)
    return buf.getvalue()


def _terminal_what(m: Mapping[str, Any]) -> str:
    if m["verdict"] == "skipped":
        return f"{m.get('reason')}: {m.get('detail') or ''}"
    bits = [m.get("label") or ""]
    if m.get("family"):
        bits.append(f"family {m['family']}")
    near = m.get("nearest")
    if near and m["verdict"] != "known":
        bits.append(
            f"nearest {near['family']} Δ{near['distance']}: "
            + ", ".join(f"{d['facet']} ({d['article']})" for d in near["differs"])
        )
    if m.get("new_keys"):
        bits.append("new keys: " + ", ".join(m["new_keys"][:8]))
    if m.get("size_changes"):
        bits.append(
            "sizes: "
            + ", ".join(f"{c['facet']}.{c['size']} {c['was']}→{c['now']}" for c in m["size_changes"][:4])
        )
    return " · ".join(b for b in bits if b)


RENDERERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "table": render_terminal,
    "markdown": render_markdown,
    "json": render_json,
}
