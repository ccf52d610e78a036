"""The HTML report's tables: every entry (sortable, derivatives folded under their base) and
the derivatives by base model, laid out to fit a 1024-pixel window without scrolling sideways.

A row is a shown model: a derivative with the same verdict and design as its base (a
quantized copy, a finetune of the same shape) is folded into the base's row, as the Markdown
folds it. Figures never wrap; names and classes wrap at spaces (a repo id anywhere, only when
it is longer than its column). Every string from the Hub goes through ``html.escape``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from html import escape
from typing import Any

from ..read.hub_errors import looks_like_repo_id
from ..render.fmt import bin_bytes, count, si_bytes
from . import text
from .groups import base_of, derivatives_line, relation_of
from .verdict import SKIP_REASONS, VERDICTS

# (header, numeric?) of the entries table, in column order.
COLUMNS = (
    ("model", False),
    ("verdict", True),
    ("model_type", False),
    ("class", False),
    ("params", True),
    ("weights", True),
    ("KV/ token", True),
    ("fit", True),
    ("date", False),
    ("downloads", True),
)

# Text cells wrap (a long repo id or model_type anywhere, the rest at spaces); figures never;
# the class gets room for its label on two or three lines.
TABLE_CSS = """
#entries{font-size:12.5px}#entries th,#entries td{padding:4px 5px}#entries th{white-space:normal}
#entries td.m{min-width:9em;overflow-wrap:anywhere}#entries td.t{min-width:6em;overflow-wrap:anywhere}
#entries td.c{min-width:12em;font-size:12px}#entries td.f{text-align:right}
.nw,#entries td.d{white-space:nowrap}
.sub{font-size:11.5px;color:#5a6372}details summary{cursor:pointer;font-size:11.5px;color:#5a6372}
details ul{margin:2px 0 0 16px;padding:0}.card,code{overflow-wrap:anywhere}
@media (max-width:1100px){body{margin:12px}}
"""


def e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def link(repo: str, hub: str | None) -> str:
    if hub is None or not looks_like_repo_id(repo):
        return f"<code>{e(repo)}</code>"
    return f'<a href="{e(hub + "/" + repo)}" rel="noopener noreferrer">{e(repo)}</a>'


def _cell(shown: str, sort: Any = None, kind: str = "") -> str:
    attr = "" if sort is None else f' data-sort="{e(sort)}"'
    return f"<td{attr}{f' class={kind}' if kind else ''}>{shown}</td>"


def _model_cell(m: Mapping[str, Any], derivs: Sequence[Mapping[str, Any]], hub: str | None) -> str:
    shown = link(m["repo_id"], hub)
    parent = base_of(m)
    if parent:
        shown += f'<div class="sub">{e(relation_of(m) or "derivative")} of {link(parent, hub)}</div>'
    if derivs:
        names = "".join(
            f"<li>{link(d['repo_id'], hub)} <span class=sub>{e(relation_of(d) or '')}</span></li>"
            for d in derivs
        )
        shown += f"<details><summary>+{e(derivatives_line(derivs))}</summary><ul>{names}</ul></details>"
    return _cell(shown, m["repo_id"], "m")


def _breakable(word: Any) -> str:
    """``new_model_type`` that may wrap after each underscore (escaped)."""
    return e(word).replace("_", "_<wbr>")


def _fit(words: str) -> str:
    """``needs 2× H100-SXM`` that wraps before the GPU count, never inside ``2× H100-SXM``."""
    head, sep, gpu = words.rpartition(" ")
    head, _, n = head.rpartition(" ") if "×" in head else (head, "", "")
    whole = f"{n} {gpu}".strip()
    return f'{e(head)} <span class="nw">{e(whole)}</span>' if sep else e(words)


def _row(m: Mapping[str, Any], derivs: Sequence[Mapping[str, Any]], hub: str | None) -> str:
    f = m.get("figures") or {}
    listed = m.get("listed") or {}
    verdict = m["verdict"]
    shown_verdict = verdict if verdict != "skipped" else f"skipped: {m.get('reason')}"
    fit_rank = None if f.get("fits") is None else (1 if f["fits"] else (f.get("min_gpus") or 10_000))
    what = m.get("label") or (
        SKIP_REASONS.get(m.get("reason") or "", "") + ": " + (m.get("detail") or "")
    ).strip(": ")

    def figure(key: str, shown: str) -> str:
        return _cell(e(shown) if f.get(key) is not None else "", f.get(key), "n")

    params = e(count(f["params"])) if f.get("params") is not None else ""
    active = f.get("active_params")
    if params and active is not None and active != f["params"]:  # MoE: the active share below
        at_most = "≤ " if f.get("active_is") == "maximum" else ""
        params += f'<div class="sub">{e(at_most + count(active))} active</div>'
    cells = [
        _model_cell(m, derivs, hub),
        f'<td data-sort="{VERDICTS.index(verdict)}" class="v-{e(verdict)}">{_breakable(shown_verdict)}</td>',
        _cell(_breakable(text.shown_type(m)), kind="t"),
        _cell(f'<span class="lbl">{e(what)}</span>' if m.get("label") else e(what), kind="c"),
        _cell(params, f.get("params"), "n"),
        figure("weight_bytes", si_bytes(f["weight_bytes"]) if f.get("weight_bytes") is not None else ""),
        figure(
            "kv_bytes_per_token",
            bin_bytes(f["kv_bytes_per_token"]) if f.get("kv_bytes_per_token") is not None else "",
        ),
        _cell(
            _fit(text.fit_words(f)) + (f'<div class="sub">{e(f["trust"])}</div>' if f.get("trust") else ""),
            fit_rank,
            "f",
        ),
        _cell(e(text.day(max(listed.get("created") or "", listed.get("modified") or ""))), kind="d"),
        _cell(e(text.short_count(listed.get("downloads"))), listed.get("downloads"), "n"),
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def entries_table(
    models: Iterable[Mapping[str, Any]],
    folded: Mapping[str, Sequence[Mapping[str, Any]]],
    hidden: set[str],
    n: int,
    hub: str | None,
) -> Iterator[str]:
    """Every shown entry (the report's order: by verdict, newest first), a row as it is read;
    ``folded`` maps a shown model to the derivatives under it, ``hidden`` is those."""
    heads = "".join(
        f'<th tabindex="0" data-type="{"num" if num else "text"}">{e(name)}</th>' for name, num in COLUMNS
    )
    shown = n - len(hidden)
    yield f"<h2>All entries ({n}{f', {shown} rows' if hidden else ''})</h2>"
    yield (
        '<p class="meta">Click a header to sort. Figures: the default workload (H100 SXM, batch 1, '
        "context 8192, the checkpoint's weight format, bf16 KV). A derivative with the same verdict "
        "and design as its base is listed under the base.</p>"
    )
    yield f'<table id="entries"><thead><tr>{heads}</tr></thead><tbody>'
    yield from (_row(m, folded.get(m["repo_id"], ()), hub) for m in models if m["repo_id"] not in hidden)
    yield "</tbody></table>"


def derivatives_section(data: Mapping[str, Any], hub: str | None) -> list[str]:
    """Bases named by two or more derivatives, or in the scan themselves (the Markdown's
    "Derivatives by base model")."""
    groups = [g for g in data.get("lineage", []) if g["count"] > 1 or g["in_scan"]]
    if not groups:
        return []
    rows = "".join(
        f"<tr><td>{link(g['base'], hub)}</td><td>{e(g['verdict']) if g['in_scan'] else 'no'}</td>"
        f'<td class="n" data-sort="{g["count"]}">{g["count"]}</td>'
        f"<td>{e(', '.join(f'{n} {r}' for r, n in g['by_relation'].items()))}</td></tr>"
        for g in groups[:50]
    )
    return [
        f"<h2>Derivatives by base model ({len(groups)})</h2>",
        '<table id="derivatives"><thead><tr><th>base</th><th>in this scan</th><th>derivatives</th>'
        f"<th>by relation</th></tr></thead><tbody>{rows}</tbody></table>",
    ]
