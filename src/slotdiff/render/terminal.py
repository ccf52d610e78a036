"""The terminal view: slot table, class line, main costs and the price of each change.

Laid out at the output width (render/page.py); cells and prose break at spaces, never
inside a word. Only this module imports rich.
"""

from __future__ import annotations

import io
import sys
from typing import Any

from rich.table import Table
from rich.text import Text

from . import fmt
from .console import safe_console
from .deploy import step_detail
from .fmt import short_name
from .page import output_width, print_table, word_breaks

STATUS_STYLE = {"same": "dim", "resized": "cyan", "changed": "bold yellow"}


def _status(value: str | None) -> Text:
    if value is None:
        return Text("")
    return Text(value, style=STATUS_STYLE.get(value, ""))


def slot_table(report: Any) -> Table:
    against = report.baselines.get("against")
    # no ratios: rich narrows wrapping columns to their longest word before anything is cut,
    # and page.print_table widens the line if even that does not fit
    table = Table(title=None, show_lines=False, expand=False, pad_edge=False, box=None, header_style="bold")
    table.add_column("slot", min_width=17, no_wrap=True)
    table.add_column("GPT-2", style="dim")
    table.add_column("this model")
    table.add_column("vs GPT-2", min_width=8, no_wrap=True)
    table.add_column("vs Llama", min_width=8, no_wrap=True)
    if against:
        table.add_column("vs other", min_width=8, no_wrap=True)
    table.add_column("art", min_width=3, no_wrap=True, justify="right")
    for f in report.facets:
        row = [f.fill.id, f.gpt2.detail, f.fill.detail, _status(f.vs_gpt2), _status(f.vs_llama)]
        if against:
            row.append(_status(f.vs_against))
        row.append(f.info.article)
        table.add_row(*row)
    return table


def cost_lines(report: Any) -> Text:
    c = report.cost
    if c is None:
        note = next((ch.note for ch in report.changes if ch.facet == "*"), "not supported")
        text = Text(f"cost: not computed: {note}", style="yellow")
        shape = fmt.shape_line(getattr(report, "shape", None), None)
        if shape:
            text = Text(shape + "\n") + text
        trust = getattr(report, "coverage", None)
        if trust is not None and not trust.verified:
            text.append("\n" + trust.line(), style="yellow")
        return text
    wl = c.workload
    t = Text()
    p = c.params
    line = f"params {fmt.count(p.total)}"
    if p.active != p.total:
        line += f", active {fmt.active(p.active, p.active_is_maximum)}" + _without_table(report)
    if p.mtp:
        line += f", MTP modules {fmt.count(p.mtp)} (apart)"
    elif p.mtp is None:
        line += ", MTP modules not counted (the config does not describe their tensors)"
    ck = getattr(report, "checkpoint", None)
    if ck is not None and ck.status == "differs":
        line += f"; DIFFERS from the checkpoint: {ck.sentence()}"
    t.append(line + "\n", style="bold red" if ck is not None and ck.status == "differs" else None)
    shape = fmt.shape_line(getattr(report, "shape", None), c.kv)
    if shape:
        t.append(shape + "\n")
    trust = getattr(report, "coverage", None)
    if trust is not None:
        t.append(trust.line() + "\n", style=None if trust.verified else "yellow")
    if ck is not None and ck.unreadable:
        t.append(ck.sentence() + "\n", style="yellow")
    w = c.weights
    t.append(f"weights {fmt.si_bytes(w.bytes) if w.supported else 'not given'} ({w.detail})\n")
    kv = c.kv
    kv_line = f"KV cache {fmt.bin_bytes(kv.bytes_per_token)}/token ({kv.dtype})"
    if kv.windowed:
        kv_line += f" within the windows, {fmt.bin_bytes(kv.bytes_per_token_long)}/token past them"
    kv_line += f", {fmt.bin_bytes(kv.bytes_at_context)} at {kv.context:,} tokens"
    if kv.state_bytes_per_sequence:
        kv_line += f", + fixed state {fmt.bin_bytes(kv.state_bytes_per_sequence)}/sequence"
    t.append(kv_line + "\n")
    fl = c.flops
    t.append(
        f"FLOPs/token {fmt.flops(fl.per_token)} = weights {fmt.flops(fl.weights_per_token)}"
        f" + attention {fmt.flops(fl.attention_per_token)} at {fl.context:,}; "
        f"prefill {fmt.flops(fl.prefill)}\n"
    )
    d = c.decode
    feas = c.feasibility
    if feas is not None:
        style = None if feas.fits else "bold red"
        t.append(f"memory: {feas.line(short_name(wl.device.name))}", style=style)
        if feas.limit.beyond(kv.context):
            t.append(
                f"; context {kv.context:,} is beyond the model's {feas.limit.tokens:,}", style="bold red"
            )
        t.append("\n")
    # Weight bytes unknown (a format slotdiff does not model): the step reads them as bf16, so
    # its time is an estimate, never a bound, and says so.
    bound = "≥" if wl.mfu == 1 and wl.mbu == 1 and w.supported else "≈"
    unknown = "" if w.supported else " (weights read as bf16: their format is not modelled)"
    lay = wl.parallel
    where = short_name(wl.device.name) + (f" ×{lay.gpus} ({lay.label()})" if lay.gpus > 1 else "")
    unfit = ("" if feas is None or feas.fits else " (if it fit)") + unknown
    t.append(
        f"decode on {where} at batch {d.batch}{unfit}: {bound} {fmt.ms(d.step_ms)}/step "
        f"({step_detail(d.step)}), {'≤' if bound == '≥' else '≈'} {d.tokens_per_s:,.0f} tokens/s\n"
    )
    if c.decode_bound is not None:
        b = c.decode_bound
        t.append(
            f"  the bound at 100% of peak: ≥ {fmt.ms(b.step_ms)}/step; this estimate is "
            f"{d.step_ms / b.step_ms:.2f}× it ({wl.efficiency or '--mbu/--mfu'})\n"
        )
    cb = d.compute_bound_batch_weights
    cbk = d.compute_bound_batch
    t.append(
        f"ridge {d.ridge:.0f} FLOP/byte; weight GEMMs turn compute-bound at batch ≈ {cb}"
        + (
            f", with KV at {kv.context:,}: batch {cbk}"
            if cbk
            else f"; with KV at {kv.context:,} tokens decode stays memory-bound"
        )
        + "\n"
    )
    pre = c.prefill
    t.append(f"prefill of {pre.tokens:,} tokens {bound} {fmt.ms(pre.time_ms)} ({pre.bound}-bound)\n")
    t.append(((c.precision.note() + "; ") if c.precision else "") + wl.efficiency_note, style="dim")
    return t


def _without_table(report: Any) -> str:
    """The active count without the gathered embedding table, and whose convention it is."""
    p = report.cost.params
    if p.active_without_embedding == p.active:
        return ""
    head = report.cost.active
    who = ""
    if head is None:
        pass
    elif head.owner and head.owner_counts_embedding is False:
        who = f", as {head.owner} counts"
    elif head.owner:
        who = f"; {head.owner} counts the table"
    return f" ({fmt.count(p.active_without_embedding)} without the embedding table{who})"


def titled_table(title: str, first: str, *numbers: str) -> Table:
    """A borderless table under a left-aligned title: a name column, then number columns, which
    never wrap (a figure and its unit stay one line; page.print_table widens the line instead)."""
    table = Table(title=title, title_justify="left", expand=False, box=None, header_style="bold")
    table.pad_edge = False
    table.add_column(first, min_width=17, no_wrap=True)
    for name in numbers:
        table.add_column(name, justify="right", no_wrap=True)
    return table


def parts_table(report: Any) -> Table | None:
    """Parameters by part of the model (embedding, attention, FFN, experts, norms, head ...)."""
    c = report.cost
    if c is None or not c.params.by_part:
        return None
    table = titled_table("parameters by part", "part", "params", "share")
    for row in fmt.part_rows(c.params.by_part, c.params.total):
        table.add_row(*row)
    table.add_row(Text("total", style="bold"), fmt.count(c.params.total), "")
    return table


def changes_table(report: Any) -> Table | None:
    priced = [ch for ch in report.changes if ch.facet != "*"]
    if not priced:
        return None
    base = "the other model" if report.baselines.get("against") else "GPT-2"
    table = titled_table(
        f"price of each change vs {base} (this model − counterfactual)",
        "facet",
        "Δ params",
        "Δ KV/token",
        "Δ FLOPs/token",
        "Δ decode",
    )
    for ch in priced:
        d = ch.deltas
        if not d:
            table.add_row(ch.facet, Text("not priced", style="dim"), "", "", "")
            continue
        params = fmt.signed(fmt.count(d["params"]), d["params"])
        if not d["params"] and d.get("mtp_params"):
            params = "MTP " + fmt.signed(fmt.count(d["mtp_params"]), d["mtp_params"])
        table.add_row(
            ch.facet,
            params,
            fmt.signed(fmt.bin_bytes(d["kv_bytes_per_token"]), d["kv_bytes_per_token"]),
            fmt.signed(fmt.flops(d["flops_per_token"]), d["flops_per_token"]),
            fmt.signed(fmt.ms(d["decode_step_ms"]), d["decode_step_ms"]),
        )
    return table


def header(report: Any) -> Text:
    t = Text()
    t.append(report.model, style="bold")
    t.append(f"  ·  {report.model_type or 'no model_type'}")
    src = report.source
    t.append(f"  ·  {src.origin}" + (f" @ {src.revision}" if src.revision else "") + "\n")
    if src.note:
        t.append(f"{src.note}\n", style="yellow" if src.origin == "catalog" else "dim")
    cls = report.classification
    if cls is not None:
        t.append("class  ", style="bold")
        t.append(cls.label + "\n")
        if cls.family and not cls.is_new and cls.new_model_type:
            t.append(
                f"new model_type {report.model_type or '(none)'!r}: nearest family {cls.family.name}, "
                f"same design ({cls.fingerprint.id})"
                + (f"; read as {cls.read_as}, its structure facts assumed" if cls.read_as else "")
                + "\n",
                style="bold magenta",
            )
        elif cls.family and not cls.is_new:
            t.append(f"family {cls.family.name} ({cls.fingerprint.id})\n")
        elif cls.family:
            t.append(
                f"new architecture: nearest family {cls.family.name} at distance {cls.distance} "
                f"({', '.join(cls.differs)})\n",
                style="bold magenta",
            )
        else:
            t.append("new architecture (no known families)\n", style="bold magenta")
    return t


def notes(report: Any) -> Text:
    t = Text(style="dim")
    arch = report.arch
    defaults = sorted(
        {
            f"{k} ({v.note.split(';')[-1].strip()})"
            for k, v in arch.fields.items()
            if v.how == "default" and v.value is not None and k in _SHOWN
        }
    )
    if defaults:
        t.append("defaults used: " + ", ".join(defaults) + "\n")
    if arch.unknown_keys:
        t.append("keys slotdiff does not read: " + ", ".join(arch.unknown_keys) + "\n")
    for n in (*arch.notes, *report.notes):
        t.append(n + "\n")
    return t


_SHOWN = frozenset(
    {
        "d_model",
        "n_layers",
        "n_heads",
        "n_kv_heads",
        "head_dim",
        "d_ff",
        "vocab",
        "tie_embeddings",
        "rope_theta",
        "activation",
        "norm_eps",
        "max_positions",
        "sliding_window",
        "n_experts",
        "top_k",
    }
)


def render(report: Any, width: int | None = None) -> str:
    """Render a report for a terminal (colour only when stdout is a terminal), at ``width``
    (page.output_width: --width, COLUMNS, the terminal's, or 120 when piped)."""
    width = output_width(width)
    buf = io.StringIO()
    console = safe_console(
        file=buf,
        width=width,
        force_terminal=sys.stdout.isatty(),
        color_system="auto" if sys.stdout.isatty() else None,
        highlight=False,
        markup=False,  # config strings ("[/x]") are text, never rich markup
    )
    parts: list[Any] = [header(report), slot_table(report), Text(""), cost_lines(report)]
    by_part = parts_table(report)
    if by_part is not None:
        parts += [Text(""), by_part]
    changes = changes_table(report)
    if changes is not None:
        parts += [Text(""), changes]
    parts += [Text(""), notes(report)]
    for part in parts:
        if isinstance(part, Text):  # prose: broken at spaces only, never inside a path
            console.print(prose(part, width), soft_wrap=True)
        else:
            print_table(console, part)
    return buf.getvalue().rstrip() + "\n"


def prose(text: Text, width: int) -> Text:
    """``text`` with line breaks where words start, so that rich need not fold a long word."""
    out = Text()
    for k, line in enumerate(text.split("\n", allow_blank=True)):
        if k:
            out.append("\n")
        pieces = line.divide(word_breaks(line.plain, width - 2))  # room for the indent
        for n, piece in enumerate(pieces):
            piece.rstrip()
            out.append_text(piece if not n else Text("  ") + piece)
            if n < len(pieces) - 1:
                out.append("\n")
    return out
