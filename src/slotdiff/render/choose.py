"""Terminal and Markdown views of ``slotdiff choose``: the ranked table, what bought each
recommendation, why the others miss, and how far each answer can be trusted.

Takes the report's ``to_dict()`` (the shape schemas/choose.schema.json checks); the table
is rich's, imported when first drawn, so ``--json`` and ``--markdown`` never load rich.
"""

from __future__ import annotations

import io
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from . import fmt
from .deploy import display_name
from .page import output_width, print_table

VERDICT_WORDS = {
    "fits": "fits",
    "too_slow": "too slow",
    "no_fit": "no fit",
    "short_context": "ctx > limit",
    "not_priced": "not priced",
}
HEADERS = ("#", "model", "verdict", "precision, layout", "decode", "tokens/s", "KV/seq.", "verified")
RIGHT = ("#", "decode", "tokens/s", "KV/seq.")
WRAPPING = ("model", "precision, layout")


def headers(d: dict[str, Any]) -> tuple[str, ...]:
    """The column headers; times are bounds (≥ ms, ≤ tokens/s) at --mfu/--mbu 1, else estimates."""
    t = d["target"]
    exact = t["mfu"] == 1 and t["mbu"] == 1
    marks = {
        "decode": "decode ≥" if exact else "decode ≈",
        "tokens/s": "tok/s ≤" if exact else "tok/s ≈",
    }
    return tuple(marks.get(h, h) for h in HEADERS)


def _target_line(d: dict[str, Any]) -> str:
    t = d["target"]
    budget = []
    if t["max_decode_ms"] is not None:
        budget.append(f"decode ≤ {fmt.ms(t['max_decode_ms'])}")
    if t["min_tokens_per_s"] is not None:
        budget.append(f"≥ {t['min_tokens_per_s']:,.0f} tokens/s")
    extra = f" · {', '.join(budget)}" if budget else ""
    modality = " · image input" if t["modality"] == "image" else ""
    return (
        f"target: {t['gpus']}× {fmt.short_name(t['gpu_name'])} · batch {t['batch']:,} × "
        f"{t['context']:,} tokens · KV {t['kv_dtype']}{extra}{modality} · optimise {t['optimise']}"
    )


def _placed(c: dict[str, Any]) -> str:
    """``bf16, TP=8 · fewest 1``: the precision, the layout priced, and the fewest GPUs when fewer."""
    if not (c["precision"] and c["layout"]):
        return "—"
    text = f"{c['precision']}, {c['layout']['label']}"
    if c["min_gpus"] and c["min_gpus"] < c["layout"]["gpus"]:
        text += f" · fewest {c['min_gpus']}"
    return text


def _cells(c: dict[str, Any]) -> list[str]:
    step = c["decode"]
    kv = c["kv"]["bytes_at_context"]
    state = c["kv"]["state_bytes_per_sequence"] or 0
    # the repo's name without its owner (the sections below give the full id)
    name = display_name(c["name"]).rsplit("/", 1)[-1] + (" †" if c["trimmed_copy"] else "")
    return [
        str(c["rank"]),
        name,
        VERDICT_WORDS[c["verdict"]],
        _placed(c),
        fmt.ms(step["step_ms"]) if step else "—",
        f"{step['tokens_per_s']:,.0f}" if step else "—",
        fmt.bin_bytes(kv + state) if kv is not None else "—",
        "yes" if (c["trust"] or {}).get("status") == "verified" else "no",
    ]


def _bought(c: dict[str, Any]) -> list[str]:
    out = []
    for cr in c["credits"]:
        mark = " [decisive]" if cr["decisive"] else ""
        out.append(f"{cr['text']}; {cr['without']}{mark}")
    return out


def _sections(d: dict[str, Any]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """(heading, [(candidate, lines)]) for what bought, why not, and trust."""
    bought, why_not, trust = [], [], []
    for c in d["candidates"]:
        who = f"{c['rank']}. {display_name(c['name'])}"
        if c["verdict"] in ("fits", "too_slow"):
            lines = _bought(c) or ["no serving facet differs from GPT-2's at this target"]
            if c["verdict"] == "too_slow":
                lines = [c["why"], *lines]
            bought.append((who, lines))
        else:
            why_not.append((who, [c["why"]]))
        t = c["trust"] or {}
        if t.get("status") != "verified" and t.get("reasons"):
            trust.append((who, list(t["reasons"])))
    return [
        ("what bought it (each facet set back to GPT-2's design, priced on this target)", bought),
        ("why not", why_not),
        ("trust (unverified answers, and why)", trust),
    ]


def _footer(d: dict[str, Any]) -> list[str]:
    lines = []
    if any(c["trimmed_copy"] for c in d["candidates"]):
        lines.append("† a trimmed catalog copy of the published config (some keys missing)")
    if d["excluded"]:
        names = ", ".join(display_name(e["name"]) for e in d["excluded"])
        lines.append(f"left out by --modality image (no vision tower): {len(d['excluded'])}: {names}")
    return lines


def _wrap(text: str, indent: str, more: str, width: int) -> list[str]:
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=more,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


def render_choose(d: dict[str, Any], width: int | None = None) -> str:
    from rich.console import Console
    from rich.table import Table

    buf = io.StringIO()
    tty = sys.stdout.isatty()
    WIDTH = output_width(width)
    console = Console(
        file=buf,
        width=WIDTH,
        force_terminal=tty,
        color_system="auto" if tty else None,
        highlight=False,
        markup=False,  # model names are text, never rich markup
    )
    console.print(_target_line(d))
    console.print(d["ranked_by"])
    rows = [_cells(c) for c in d["candidates"]]
    shown = headers(d)
    table = Table(box=None, header_style="bold", pad_edge=False, collapse_padding=True, expand=False)
    for h, head in zip(HEADERS, shown, strict=True):
        # figures never wrap; names and layouts wrap at spaces, never inside a word
        table.add_column(head, justify="right" if h in RIGHT else "left", no_wrap=h not in WRAPPING)
    for row in rows:
        table.add_row(*row)
    print_table(console, table)
    lines: list[str] = []
    for heading, items in _sections(d):
        if not items:
            continue
        lines += ["", heading + ":"]
        for who, texts in items:
            lines.append(who)
            for t in texts:
                lines += _wrap(t, "  - ", "    ", WIDTH)
    lines += _footer(d)
    lines += ["", "assumes:"]
    for n in d["assumptions"][1:]:
        lines += _wrap(n, "  - ", "    ", WIDTH)
    console.print("\n".join(lines), soft_wrap=True)  # wrapped above at word starts only
    return "\n".join(line.rstrip() for line in buf.getvalue().rstrip().splitlines()) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def render_choose_markdown(d: dict[str, Any]) -> str:
    lines = ["## Choosing a model", "", _target_line(d), "", f"*{d['ranked_by']}*", ""]
    lines.append(_md_row(headers(d)))
    lines.append("|" + "|".join("---:" if h in RIGHT else "---" for h in HEADERS) + "|")
    lines += [_md_row(_cells(c)) for c in d["candidates"]]
    for heading, items in _sections(d):
        if not items:
            continue
        lines += ["", f"### {heading[0].upper()}{heading[1:]}", ""]
        for who, texts in items:
            lines.append(f"- **{who}**")
            lines += [f"  - {t}" for t in texts]
    foot = _footer(d)
    if foot:
        lines += ["", *foot]
    lines += ["", "Assumes:", "", *(f"- {n}" for n in d["assumptions"][1:])]
    return "\n".join(lines) + "\n"
