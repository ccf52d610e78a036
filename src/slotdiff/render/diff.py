"""Render a model-to-model Comparison (terminal and Markdown)."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

from . import fmt
from .console import safe_console
from .page import output_width, print_table, wrap


def _value(v: Any) -> str:
    text = json.dumps(v, default=str) if not isinstance(v, str) else v
    return text if len(text) <= 40 else text[:37] + "..."


def _delta_lines(result: Any) -> list[str]:
    d = result.deltas()
    if not d:
        return ["cost deltas: not available (a model could not be priced)"]
    return [
        f"Δ params {fmt.signed(fmt.count(d['params']), d['params'])}, "
        f"Δ active {fmt.signed(fmt.count(d['active_params']), d['active_params'])}, "
        f"Δ KV/token {fmt.signed(fmt.bin_bytes(d['kv_bytes_per_token']), d['kv_bytes_per_token'])}, "
        f"Δ FLOPs/token {fmt.signed(fmt.flops(d['flops_per_token']), d['flops_per_token'])}, "
        f"Δ decode step {fmt.signed(fmt.ms(d['decode_step_ms']), d['decode_step_ms'])}"
    ]


def render_table(result: Any, width: int | None = None) -> str:
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    tty = sys.stdout.isatty()
    console = safe_console(
        file=buf,
        width=output_width(width),
        force_terminal=tty,
        color_system="auto" if tty else None,
        highlight=False,
        markup=False,  # model names and config values are text, never rich markup
    )
    # prose is never cut nor folded: the names' line as one line, the rest broken at spaces
    head = Text(result.a.raw.name, style="bold") + Text(" → ") + Text(result.b.raw.name, style="bold")
    console.print(head, soft_wrap=True)
    for line in (f"A: {result.class_a.label}", f"B: {result.class_b.label}"):
        console.print("\n".join(wrap(line, console.width)), soft_wrap=True)
    table = Table(box=None, expand=False, header_style="bold", pad_edge=False)
    for col in ("facet", "A", "B", "status"):  # no ratios: nothing is cut before it must be
        table.add_column(col, no_wrap=col in ("facet", "status"))
    for f in result.facets:
        if f.status == "same":
            continue
        style = "bold yellow" if f.status == "changed" else "cyan"
        table.add_row(f.facet, f.a.detail, f.b.detail, Text(f.status, style=style))
    if table.row_count:
        print_table(console, table)
    else:
        console.print("no slot changes")
    for line in _delta_lines(result):
        console.print("\n".join(wrap(line, console.width)), soft_wrap=True)
    keys = Table(
        title="raw key changes",
        title_justify="left",
        box=None,
        expand=False,
        header_style="bold",
        pad_edge=False,
    )
    for col in ("key", "change", "old", "new", "slot"):
        keys.add_column(col)
    for k in result.keys:
        keys.add_row(
            k.path,
            k.change,
            _value(k.old),
            _value(k.new),
            k.facet or Text("no structure" if k.free else "unattributed", style="dim"),
        )
    if result.keys:
        print_table(console, keys)
    return buf.getvalue()


def render_markdown(result: Any) -> str:
    lines = [
        f"### {result.a.raw.name} → {result.b.raw.name}",
        "",
        f"- A: {result.class_a.label}",
        f"- B: {result.class_b.label}",
        "",
        "| facet | A | B | status |",
        "|---|---|---|---|",
    ]
    for f in result.facets:
        if f.status != "same":
            lines.append(f"| `{f.facet}` | {f.a.detail} | {f.b.detail} | {f.status} |")
    lines += [
        "",
        *(f"{line}" for line in _delta_lines(result)),
        "",
        "| key | change | old | new | slot |",
        "|---|---|---|---|---|",
    ]
    for k in result.keys:
        lines.append(
            f"| `{k.path}` | {k.change} | `{_value(k.old)}` | `{_value(k.new)}` | "
            f"{k.facet or ('no structure' if k.free else 'unattributed')} |"
        )
    return "\n".join(lines) + "\n"
