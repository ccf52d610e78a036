"""The scan report as Markdown, for an issue or a chat post.

Sections by novelty: new model_types (unreadable ones included, with the keys slotdiff could
not read and the nearest model_type by key overlap), new designs (one heading per design,
each difference with both values), new mechanisms (the unread keys), new sizes (each size
with both values), known, skipped. Each model carries its figures and trust level;
derivatives are folded under their base. Every string from the Hub is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..read.hub_errors import looks_like_repo_id
from ..render.fmt import bin_bytes, count
from . import text
from .groups import base_of, derivatives_line, fold, relation_of
from .verdict import SKIP_REASONS, TITLES, VERDICTS

REPORTED = tuple(v for v in VERDICTS if v != "unchanged")


def md(value: Any) -> str:
    """Inline text safe in Markdown (repo ids and config keys come from strangers)."""
    out = str(value).replace("\\", "\\\\")
    for ch in "`*_[]<>|#":
        out = out.replace(ch, "\\" + ch)
    return " ".join(out.split())


def code(value: Any) -> str:
    """A code span that stays one table cell: no backticks, newlines or bare pipes."""
    body = " ".join(str(value).replace("`", "'").split())
    return "`" + body.replace("|", "\\|") + "`"


def link(repo: str, base: str) -> str:
    if not looks_like_repo_id(repo):
        return code(repo)
    return f"[{md(repo)}]({base.rstrip('/')}/{repo})"


def headline(data: Mapping[str, Any]) -> str:
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


def _differs(nearest: Mapping[str, Any] | None) -> str:
    if not nearest:
        return ""
    items = "; ".join(
        f"{code(d['facet'])} {md(d.get('was') or '?')} → {md(d.get('now') or '?')} (article {d['article']})"
        for d in nearest.get("differs", [])
    )
    return f"nearest family **{md(nearest['family'])}** at distance {nearest['distance']}" + (
        f": {items}" if items else ""
    )


def render_markdown(data: Mapping[str, Any]) -> str:
    """Markdown for an issue or a chat post."""
    scan = data["scan"]
    base = scan["endpoint"]
    tags = scan["filters"].get("pipeline_tags") or []
    lines = [
        f"## slotdiff scan: {headline(data)}",
        "",
        f"{data['counts']['models']} models {'created' if scan['by'] == 'created' else 'created or updated'} "
        f"since {text.day(scan['since'])} (scan `{scan['id']}`, {text.day(scan['started'])}"
        + (", resumed" if scan["resumed"] else "")
        + ")"
        + (f"; pipeline tags {', '.join(code(t) for t in tags)}" if tags else "")
        + ".",
        "",
    ]
    if data["listing_error"]:
        lines += [f"> **Listing incomplete:** {md(data['listing_error'])}", ""]
    for note in data["notes"]:
        lines += [f"> {md(note)}", ""]
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
                lines.append(f"#### {code(fp_id)} · {md(entry.get('label', members[0]['label']))}")
                lines.append("")
                near = _differs(members[0].get("nearest"))
                if near:
                    lines += [near[0].upper() + near[1:] + ".", ""]
                lines += [_item(m, d, base, show_nearest=False) for m, d in fold(members)]
                lines.append("")
            continue
        lines += [_item(m, d, base) for m, d in fold(models)]
        lines.append("")
    lines += _lineage(data, base)
    if data["proposed_families"]:
        lines += ["### Proposed family files", ""]
        lines += [f"- {code(p)}" for p in data["proposed_families"]]
        lines.append("")
    r = data["retries"]
    if r["count"] or r["abandoned"]:
        lines += [
            f"<sub>{r['count']} retries, {r['waited_s']:g} s waited, "
            f"{r['abandoned']} models given up at their deadline.</sub>",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def _item(
    m: Mapping[str, Any], derivs: Sequence[Mapping[str, Any]], base: str, show_nearest: bool = True
) -> str:
    listed = m["listed"]
    head = f"- **{link(m['repo_id'], base)}**"
    if m.get("model_type"):
        head += f" {code(m['model_type'])}"
    meta = " · ".join(x for x in (text.when(listed), text.popularity(listed)) if x)
    if meta:
        head += f" — {meta}"
    sub = []
    figs = text.figures(m.get("figures"))
    if m.get("label"):
        sub.append(f"class: {code(m['label'])}" + (f" · {md(figs)}" if figs else ""))
    elif figs:
        sub.append(md(figs))
    if m.get("family"):
        sub.append(f"family: **{md(m['family'])}**")
    if show_nearest and m.get("nearest"):
        sub.append(_differs(m["nearest"]))
    unread = m.get("unreadable")
    if unread:
        sub += text.unreadable_lines(unread, md, code, max_keys=24)
    elif m.get("model_type_new"):
        sub.append("model_type never seen before")
    if m.get("new_keys") and not unread:
        sub.append("new config keys: " + ", ".join(code(k) for k in m["new_keys"][:12]))
    if m.get("size_changes"):
        sub.append("sizes: " + md(text.size_changes(m["size_changes"])))
    if m.get("previous"):
        sub.append(f"was {code(m['previous']['fingerprint'])} in the last scan")
    parent = base_of(m)
    if parent and parent not in {d["repo_id"] for d in derivs}:
        sub.append(f"{md(relation_of(m) or 'derivative')} of {link(parent, base)}")
    if derivs:
        names = ", ".join(link(d["repo_id"], base) for d in derivs[:8])
        more = f" and {len(derivs) - 8} more" if len(derivs) > 8 else ""
        sub.append(f"{derivatives_line(derivs)}: {names}{more}")
    return "\n".join([head, *[f"  - {s}" for s in sub]])


def _table(verdict: str, models: Sequence[Mapping[str, Any]], base: str) -> list[str]:
    if verdict == "known":
        rows = [
            "| model | date | downloads | family | class | params | KV/token | fit | trust |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for m, derivs in fold(models):
            listed = m["listed"]
            when = text.day(max(listed.get("created") or "", listed.get("modified") or ""))
            f = m.get("figures") or {}
            name = link(m["repo_id"], base) + (f" (+{derivatives_line(derivs)})" if derivs else "")
            rows.append(
                f"| {name} | {when} | {text.short_count(listed.get('downloads'))} "
                f"| {md(m.get('family') or '')} | {md(m.get('label') or '')} "
                f"| {md(_params(f))} | {md(_kv(f))} | {md(text.fit_words(f))} | {md(f.get('trust') or '')} |"
            )
    else:
        rows = ["| model | reason | detail |", "|---|---|---|"]
        for m in models:
            reason = SKIP_REASONS.get(m.get("reason") or "", m.get("reason") or "")
            rows.append(f"| {link(m['repo_id'], base)} | {md(reason)} | {md(m.get('detail') or '')} |")
    return [*rows, ""]


def _params(f: Mapping[str, Any]) -> str:
    return "" if f.get("params") is None else count(f["params"])


def _kv(f: Mapping[str, Any]) -> str:
    return "" if f.get("kv_bytes_per_token") is None else bin_bytes(f["kv_bytes_per_token"])


def _lineage(data: Mapping[str, Any], base: str) -> list[str]:
    groups = [g for g in data.get("lineage", []) if g["count"] > 1 or g["in_scan"]]
    if not groups:
        return []
    lines = ["### Derivatives by base model", "", "| base | in this scan | derivatives |", "|---|---|---|"]
    for g in groups[:50]:
        rel = ", ".join(f"{n} {r}" for r, n in g["by_relation"].items())
        seen = md(g["verdict"]) if g["in_scan"] else "no"
        lines.append(f"| {link(g['base'], base)} | {seen} | {g['count']} ({md(rel)}) |")
    return [*lines, ""]
