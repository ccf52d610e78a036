"""Markdown for pasting into a pull request or a wiki page."""

from __future__ import annotations

from typing import Any

from . import fmt
from .fmt import short_name  # not from .terminal: Markdown needs no rich


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(report: Any) -> str:
    lines: list[str] = [f"### {report.model} (`{report.model_type}`)", ""]
    src = report.source
    if src.note:
        lines += [f"> {src.note}", ""]
    cls = report.classification
    if cls is not None:
        lines.append(f"**Class:** {cls.label}  ")
        if cls.family and not cls.is_new and cls.new_model_type:
            lines.append(
                f"**New model_type:** nearest family {cls.family.name}, same design (`{cls.fingerprint.id}`)"
                + (f"; read as `{cls.read_as}`, its structure facts assumed" if cls.read_as else "")
            )
        elif cls.family and not cls.is_new:
            lines.append(f"**Family:** {cls.family.name} (`{cls.fingerprint.id}`)")
        elif cls.family:
            lines.append(
                f"**New architecture**: nearest family {cls.family.name} at distance "
                f"{cls.distance} ({', '.join(f'`{d}`' for d in cls.differs)})"
            )
        lines.append("")
    against = report.baselines.get("against")
    head = "| slot | GPT-2 | this model | vs GPT-2 | vs Llama |" + (" vs other |" if against else "")
    lines += [head + " article |", "|" + "---|" * (head.count("|") - 1 + 1)]
    for f in report.facets:
        row = [f"`{f.fill.id}`", _cell(f.gpt2.detail), _cell(f.fill.detail), f.vs_gpt2, f.vs_llama]
        if against:
            row.append(f.vs_against or "")
        row.append(f.info.article)
        lines.append("| " + " | ".join(row) + " |")
    c = report.cost
    if c is None and (line := fmt.shape_line(getattr(report, "shape", None), None)):
        lines += ["", f"- {line}"]
    if c is not None:
        d, kv, p = c.decode, c.kv, c.params
        weights = fmt.si_bytes(c.weights.bytes) if c.weights.supported else "not given"
        lines += [
            "",
            f"**Cost** ({short_name(c.workload.device.name)}, batch {d.batch}, context "
            f"{kv.context:,}, KV {kv.dtype}):",
            "",
            f"- params {fmt.count(p.total)}"
            + (f", active {fmt.active(p.active, p.active_is_maximum)}" if p.active != p.total else "")
            + (f", MTP {fmt.count(p.mtp)} apart" if p.mtp else "")
            + (", MTP modules not counted" if p.mtp is None else ""),
            *([f"- {line}"] if (line := fmt.shape_line(getattr(report, "shape", None), kv)) else []),
            *([f"- trust: {report.coverage.line()}"] if getattr(report, "coverage", None) else []),
            *(
                [f"- {ck.sentence()}"]
                if (ck := getattr(report, "checkpoint", None)) and ck.unreadable
                else []
            ),
            f"- weights {weights} ({c.weights.detail})",
            f"- KV cache {fmt.bin_bytes(kv.bytes_per_token)}/token, {fmt.bin_bytes(kv.bytes_at_context)} "
            f"at {kv.context:,} tokens"
            + (
                f", fixed state {fmt.bin_bytes(kv.state_bytes_per_sequence)}/sequence"
                if kv.state_bytes_per_sequence
                else ""
            ),
            f"- FLOPs/token {fmt.flops(c.flops.per_token)} (weights {fmt.flops(c.flops.weights_per_token)}, "
            f"attention {fmt.flops(c.flops.attention_per_token)})",
            f"- decode step ≥ {fmt.ms(d.step_ms)} ({d.bound}-bound), ≤ {d.tokens_per_s:,.0f} tokens/s",
        ]
        if c.feasibility is not None:
            lines.append(f"- memory: {c.feasibility.line(short_name(c.workload.device.name))}")
        if c.precision is not None:
            lines.append(f"- {c.precision.note()}; {c.workload.efficiency_note}")
        if p.by_part:
            lines += ["", "| part | params | share |", "|---|---:|---:|"]
            lines += [f"| {a} | {b} | {c_} |" for a, b, c_ in fmt.part_rows(p.by_part, p.total)]
            lines.append(f"| **total** | {fmt.count(p.total)} | |")
        priced = [ch for ch in report.changes if ch.facet != "*" and ch.deltas]
        if priced:
            lines += [
                "",
                "| change | Δ params | Δ KV/token | Δ FLOPs/token | Δ decode |",
                "|---|---|---|---|---|",
            ]
            for ch in priced:
                dd = ch.deltas
                lines.append(
                    f"| `{ch.facet}` | {fmt.signed(fmt.count(dd['params']), dd['params'])} | "
                    f"{fmt.signed(fmt.bin_bytes(dd['kv_bytes_per_token']), dd['kv_bytes_per_token'])} | "
                    f"{fmt.signed(fmt.flops(dd['flops_per_token']), dd['flops_per_token'])} | "
                    f"{fmt.signed(fmt.ms(dd['decode_step_ms']), dd['decode_step_ms'])} |"
                )
    if report.arch.unknown_keys:
        lines += [
            "",
            "Keys slotdiff does not read: " + ", ".join(f"`{k}`" for k in report.arch.unknown_keys),
        ]
    return "\n".join(lines) + "\n"
