"""The scan report as one self-contained HTML page (``--write-html``).

No network: the CSS and the sorting script are inline, there are no fonts, images or
external scripts, and a Content-Security-Policy forbids loading anything (the one script is
allowed by its sha256, so nothing injected could run). On top: the week's new model_types
and new designs, each design with its slot diff against the nearest family; then new
mechanisms and new sizes; the derivatives by base model; then one sortable table of every entry
with its figures (html_table). Every
string from the Hub (repo ids, config keys, error text) goes through ``html.escape``.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from . import text
from .groups import base_of, derivatives_line, fold, relation_of, slim
from .html_table import TABLE_CSS, derivatives_section, e, entries_table, link
from .markdown import headline
from .verdict import TITLES

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d8dce3}
h3{font-size:15px;margin:16px 0 6px}.meta{color:#5a6372}code{font:12px ui-monospace,monospace;
background:#f1f3f6;padding:1px 4px;border-radius:3px}.card{border:1px solid #d8dce3;border-radius:6px;
padding:10px 14px;margin:8px 0}.card ul{margin:4px 0 0 18px;padding:0}table{border-collapse:collapse;
width:100%;font-size:13px}th,td{border-bottom:1px solid #e6e9ee;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f6f7f9;cursor:pointer;user-select:none;white-space:nowrap}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}.was{color:#8a3b12}
.now{color:#0f5c2e}.v-new_model_type,.v-new_fingerprint,.v-new_keys{font-weight:600;color:#8a1538}
.v-skipped{color:#6b7280}a{color:#1f4fb5;text-decoration:none}a:hover{text-decoration:underline}
"""

SCRIPT = """(function () {
  var table = document.getElementById("entries");
  if (!table) { return; }
  var body = table.tBodies[0], heads = table.tHead.rows[0].cells;
  function key(row, i, num) {
    var cell = row.cells[i], v = cell.getAttribute("data-sort");
    if (v === null) { v = cell.textContent; }
    if (num) { var n = parseFloat(v); return isNaN(n) ? null : n; }
    return v.toLowerCase();
  }
  function sortBy(i) {
    var th = heads[i], num = th.getAttribute("data-type") === "num";
    var asc = th.getAttribute("aria-sort") !== "ascending";
    for (var j = 0; j < heads.length; j++) { heads[j].removeAttribute("aria-sort"); }
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, i, num), y = key(b, i, num);
      if (x === y) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      return (x < y ? -1 : 1) * (asc ? 1 : -1);
    });
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) { frag.appendChild(r); });
    body.appendChild(frag);
  }
  Array.prototype.forEach.call(heads, function (th, i) {
    th.addEventListener("click", function () { sortBy(i); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(i); }
    });
  });
})();
"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    return f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{digest}'; img-src data:"


def _hub(endpoint: str) -> str | None:
    parts = urlsplit(endpoint)
    return endpoint.rstrip("/") if parts.scheme in ("http", "https") and parts.netloc else None


def render_html(data: Mapping[str, Any]) -> str:
    """The whole page."""
    return "".join(iter_html(data))


def iter_html(data: Mapping[str, Any]) -> Iterator[str]:
    """:func:`render_html` a line at a time (each with its newline), for a page of 50,000
    models spooled to a file: the novel sections are held (they are the week's few), the
    table's rows are written as a second read of the models reaches them."""
    scan = data["scan"]
    hub = _hub(scan["endpoint"])
    by_verdict: dict[str, list[Mapping[str, Any]]] = {}
    sections: dict[str, list[Mapping[str, Any]]] = {}  # every verdict's lineage, for folding
    for m in data["models"]:
        if m["verdict"] not in ("known", "skipped"):
            by_verdict.setdefault(m["verdict"], []).append(m)
        sections.setdefault(m["verdict"], []).append(slim(m) | {"verdict": m["verdict"]})
    folded = {lead["repo_id"]: d for sec in sections.values() for lead, d in fold(sec) if d}
    hidden = {d["repo_id"] for ds in folded.values() for d in ds}
    tags = scan["filters"].get("pipeline_tags") or []
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{e(_csp())}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>slotdiff scan {e(scan['id'])}</title>",
        f"<style>{CSS}{TABLE_CSS}</style></head><body>",
        f"<h1>slotdiff scan: {e(headline(data))}</h1>",
        f'<p class="meta">{data["counts"]["models"]} models since {e(text.day(scan["since"]))} · scan '
        f"<code>{e(scan['id'])}</code>" + (f" · pipeline tags {e(', '.join(tags))}" if tags else "") + "</p>",
    ]
    if data.get("listing_error"):
        out.append(f"<p><strong>Listing incomplete:</strong> {e(data['listing_error'])}</p>")
    out += [f'<p class="meta">{e(n)}</p>' for n in data.get("notes", [])]
    out += [f"<p><strong>{e(line)}</strong></p>" for line in text.checkpoint_lines(data)]
    out += _new_types(by_verdict.get("new_model_type", []), hub)
    out += _new_designs(by_verdict.get("new_fingerprint", []), data["new_fingerprints"], hub)
    out += _simple("new_keys", by_verdict.get("new_keys", []), hub)
    out += _simple("new_sizes", by_verdict.get("new_sizes", []), hub)
    out += derivatives_section(data, hub)
    yield from (line + "\n" for line in out)
    n = len(data["models"])
    yield from (line + "\n" for line in entries_table(data["models"], folded, hidden, n, hub))
    yield f"<script>{SCRIPT}</script>\n</body></html>\n"


def _bullets(items: Sequence[str]) -> str:
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items if i) + "</ul>" if any(items) else ""


def _codes(keys: Sequence[str]) -> str:
    return ", ".join(f"<code>{e(k)}</code>" for k in keys)


def _lineage_items(m: Mapping[str, Any], derivs: Sequence[Mapping[str, Any]], hub: str | None) -> list[str]:
    items = []
    parent = base_of(m)
    if parent:
        items.append(f"{e(relation_of(m) or 'derivative')} of {link(parent, hub)}")
    if derivs:
        names = ", ".join(link(d["repo_id"], hub) for d in derivs[:12])
        more = f" and {len(derivs) - 12} more" if len(derivs) > 12 else ""
        items.append(f"{e(derivatives_line(derivs))}: {names}{more}")
    return items


def _head(m: Mapping[str, Any]) -> str:
    bits = [f"<code>{e(text.shown_type(m))}</code>" if text.shown_type(m) else ""]
    if m.get("label"):
        bits.append(e(m["label"]))
    figs = text.figures(m.get("figures"))
    if figs:
        bits.append(e(figs))
    return " · ".join(b for b in bits if b)


def _new_types(models: Sequence[Mapping[str, Any]], hub: str | None) -> list[str]:
    if not models:
        return []
    out = [f"<h2>{e(TITLES['new_model_type'])} ({len(models)})</h2>"]
    for m, derivs in fold(models):
        items = []
        unread = m.get("unreadable")
        if unread:
            items += text.unreadable_lines(unread, e, lambda k: f"<code>{e(k)}</code>")
        if m.get("family"):
            items.append(f"design of family <strong>{e(m['family'])}</strong>")
        if m.get("nearest"):
            items.append(_diff_table(m["nearest"]))
        if m.get("new_keys") and not unread:
            items.append("new config keys: " + _codes(m["new_keys"]))
        items += _lineage_items(m, derivs, hub)
        out.append(
            f'<div class="card"><strong>{link(m["repo_id"], hub)}</strong> {_head(m)}{_bullets(items)}</div>'
        )
    return out


def _diff_table(nearest: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td><code>{e(d['facet'])}</code></td><td>{e(d.get('article'))}</td>"
        f'<td class="was">{e(d.get("was"))}</td><td class="now">{e(d.get("now"))}</td></tr>'
        for d in nearest.get("differs", [])
    )
    caption = (
        f"slot diff against the nearest family <strong>{e(nearest['family'])}</strong> "
        f"(distance {int(nearest['distance'])})"
    )
    if not rows:
        return caption
    return (
        f"{caption}<table><thead><tr><th>facet</th><th>article</th><th>{e(nearest['family'])}</th>"
        f"<th>this design</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _new_designs(
    models: Sequence[Mapping[str, Any]], designs: Sequence[Mapping[str, Any]], hub: str | None
) -> list[str]:
    if not models:
        return []
    labels = {d["fingerprint"]: d.get("label") for d in designs}
    out = [f"<h2>{e(TITLES['new_fingerprint'])} ({len(models)})</h2>"]
    for fp in dict.fromkeys(m["fingerprint"] for m in models):
        members = [m for m in models if m["fingerprint"] == fp]
        out.append(
            f'<div class="card"><h3><code>{e(fp)}</code> · '
            f"{e(labels.get(fp) or members[0].get('label'))}</h3>"
        )
        if members[0].get("nearest"):
            out.append(_diff_table(members[0]["nearest"]))
        items = [
            f"{link(m['repo_id'], hub)} {_head(m)}" + _bullets(_lineage_items(m, derivs, hub))
            for m, derivs in fold(members)
        ]
        out.append(_bullets(items) + "</div>")
    return out


def _simple(verdict: str, models: Sequence[Mapping[str, Any]], hub: str | None) -> list[str]:
    if not models:
        return []
    out = [f"<h2>{e(TITLES[verdict])} ({len(models)})</h2>"]
    for m, derivs in fold(models):
        items = []
        if m.get("family"):
            items.append(f"family <strong>{e(m['family'])}</strong>")
        if m.get("new_keys"):
            items.append("keys slotdiff cannot read yet: " + _codes(m["new_keys"]))
        if m.get("size_changes"):
            items.append("sizes: " + e(text.size_changes(m["size_changes"], limit=12)))
        items += _lineage_items(m, derivs, hub)
        out.append(
            f'<div class="card"><strong>{link(m["repo_id"], hub)}</strong> {_head(m)}{_bullets(items)}</div>'
        )
    return out
