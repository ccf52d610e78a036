"""The scan report as Markdown, for an issue or a chat post.

Sections by novelty: new model_types (unreadable ones included, with the keys slotdiff could
not read and the nearest model_type by key overlap), new designs (one heading per design,
each difference with both values), new mechanisms (the unread keys), new sizes (each size
with both values), known, skipped. Each model carries its figures and trust level;
derivatives are folded under their base. Every string from the Hub is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..read.hub_errors import looks_like_repo_id
from ..render.fmt import bin_bytes, count
from . import text
from .groups import base_of, derivatives_line, fold, relation_of, slim
from .verdict import SKIP_REASONS, TITLES, VERDICTS

REPORTED = tuple(v for v in VERDICTS if v != "unchanged")
# The sections shown as tables (a row per model: the big ones), with their header rows.
TABLE_HEADS = {
    "known": [
        "| model | date | downloads | family | class | params | KV/token | fit | trust |",
        "|---|---|---|---|---|---|---|---|---|",
    ],
    "skipped": ["| model | reason | detail |", "|---|---|---|"],
}


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
    return "".join(iter_markdown(data))


def iter_markdown(data: Mapping[str, Any]) -> Iterator[str]:
    """:func:`render_markdown` a line at a time (each with its newline), for a report of
    50,000 models spooled to a file. The models are read twice and never all held: first the
    novel sections whole and the known models' lineage only, then a row per shown known model
    and per skipped one."""
    yield from _trimmed(_lines(data))


def _lines(data: Mapping[str, Any]) -> Iterator[str]:
    scan = data["scan"]
    base = scan["endpoint"]
    tags = scan["filters"].get("pipeline_tags") or []
    yield from [
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
        yield from [f"> **Listing incomplete:** {md(data['listing_error'])}", ""]
    for note in data["notes"]:
        yield from [f"> {md(note)}", ""]
    for line in text.checkpoint_lines(data):
        yield from [f"> {md(line)}", ""]
    novel: dict[str, list[Mapping[str, Any]]] = {}
    known: list[Mapping[str, Any]] = []  # lineage only: what folding needs
    skipped = 0
    for m in data["models"]:
        if m["verdict"] == "known":
            known.append(slim(m))
        elif m["verdict"] == "skipped":
            skipped += 1
        else:
            novel.setdefault(m["verdict"], []).append(m)
    fps = {e["fingerprint"]: e for e in data["new_fingerprints"]}
    folded = fold(known)
    rows: dict[str, list[str]] | None = None  # the tables' rows, from the second read
    for verdict in REPORTED:
        models = novel.get(verdict, [])
        n = len(known) if verdict == "known" else skipped if verdict == "skipped" else len(models)
        if not n:
            continue
        yield from [f"### {TITLES[verdict]} ({n})", ""]
        if verdict in TABLE_HEADS:
            rows = rows if rows is not None else _table_rows(data["models"], folded, base)
            yield from [*TABLE_HEADS[verdict], *rows[verdict], ""]
        elif verdict == "new_fingerprint":
            for fp_id in dict.fromkeys(m["fingerprint"] for m in models):
                entry = fps.get(fp_id, {})
                members = [m for m in models if m["fingerprint"] == fp_id]
                yield f"#### {code(fp_id)} · {md(entry.get('label', members[0]['label']))}"
                yield ""
                near = _differs(members[0].get("nearest"))
                if near:
                    yield from [near[0].upper() + near[1:] + ".", ""]
                yield from (_item(m, d, base, show_nearest=False) for m, d in fold(members))
                yield ""
        else:
            yield from (_item(m, d, base) for m, d in fold(models))
            yield ""
    yield from _lineage(data, base)
    if data["proposed_families"]:
        yield from ["### Proposed family files", ""]
        yield from (f"- {code(p)}" for p in data["proposed_families"])
        yield ""
    r = data["retries"]
    if r["count"] or r["abandoned"]:
        yield from [
            f"<sub>{r['count']} retries, {r['waited_s']:g} s waited, "
            f"{r['abandoned']} models given up at their deadline.</sub>",
            "",
        ]


def _trimmed(lines: Iterable[str]) -> Iterator[str]:
    """``"\\n".join(lines).rstrip() + "\\n"``, a line at a time: trailing blank lines are
    held back until a line with text follows them, and the last line is stripped."""
    held: str | None = None
    blanks: list[str] = []
    for line in lines:
        if not line.strip():
            blanks.append(line)
            continue
        if held is not None:
            yield held + "\n" + "".join(b + "\n" for b in blanks)
        elif blanks:
            yield "".join(b + "\n" for b in blanks)
        held, blanks = line, []
    yield ("" if held is None else held.rstrip()) + "\n"


def _item(
    m: Mapping[str, Any], derivs: Sequence[Mapping[str, Any]], base: str, show_nearest: bool = True
) -> str:
    listed = m["listed"]
    head = f"- **{link(m['repo_id'], base)}**"
    if text.shown_type(m):
        head += f" {code(text.shown_type(m))}"
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


def _table_rows(
    models: Iterable[Mapping[str, Any]], folded: Sequence[tuple[Mapping[str, Any], list[Any]]], base: str
) -> dict[str, list[str]]:
    """The second read: a row per shown known model (its folded derivatives counted in it), in
    the section's order, and a row per skipped model."""
    derivs = {lead["repo_id"]: d for lead, d in folded}
    known: dict[str, str] = {}
    skipped: list[str] = []
    for m in models:
        if m["verdict"] == "known" and m["repo_id"] in derivs:
            known[m["repo_id"]] = _known_row(m, derivs[m["repo_id"]], base)
        elif m["verdict"] == "skipped":
            reason = SKIP_REASONS.get(m.get("reason") or "", m.get("reason") or "")
            skipped.append(f"| {link(m['repo_id'], base)} | {md(reason)} | {md(m.get('detail') or '')} |")
    return {"known": [known[lead["repo_id"]] for lead, _ in folded], "skipped": skipped}


def _known_row(m: Mapping[str, Any], derivs: Sequence[Mapping[str, Any]], base: str) -> str:
    listed = m["listed"]
    when = text.day(max(listed.get("created") or "", listed.get("modified") or ""))
    f = m.get("figures") or {}
    name = link(m["repo_id"], base) + (f" (+{derivatives_line(derivs)})" if derivs else "")
    return (
        f"| {name} | {when} | {text.short_count(listed.get('downloads'))} "
        f"| {md(m.get('family') or '')} | {md(m.get('label') or '')} "
        f"| {md(_params(f))} | {md(_kv(f))} | {md(text.fit_words(f))} | {md(f.get('trust') or '')} |"
    )


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
