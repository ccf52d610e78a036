"""The ``slotdiff latency`` page: what a serving benchmark would print, from the schedule."""

from __future__ import annotations

from typing import Any

from . import fmt, page
from .deploy import display_name


def render_load(r: Any, style: str = "text", width: int | None = None) -> str:
    ge = "≥" if r.bound else "≈"
    le = "≤" if r.bound else "≈"
    t, p = r.ttft, r.tpot
    rows = page.Rows(
        ("", "mean", "median", "p99"),
        (
            ("TTFT", fmt.ms(t["mean"]), fmt.ms(t["median"]), fmt.ms(t["p99"])),
            ("TPOT (ITL)", fmt.ms(p["mean"]), fmt.ms(p["median"]), fmt.ms(p["p99"])),
        ),
        left=1,
        indent="  ",
    )
    lines: list[page.Block] = [
        f"{display_name(r.model)} on {r.gpus} × {r.gpu} ({r.layout}): {r.concurrency:,} concurrent "
        f"requests of {r.prompt:,} prompt + {r.output:,} output tokens, {r.requests:,} requests",
        f"times {ge} (lower bounds)" if r.bound else "times ≈ (estimates at the stated efficiency)",
        rows,
        f"output {le} {r.output_tokens_per_s:,.0f} tokens/s in all, "
        f"{le} {r.output_tokens_per_s / r.gpus:,.0f} per GPU, {le} {r.tokens_per_s_per_user:,.1f} per user; "
        f"{r.requests / r.duration_s:,.2f} requests/s",
        f"a decode step with every request decoding and no prompt in it: {ge} {fmt.ms(r.decode_only_itl_ms)}",
        f"scheduled in {r.steps:,} steps over {r.duration_s:,.2f} s",
        "compare with: vllm bench serve --dataset-name random --random-input-len "
        f"{r.prompt} --random-output-len {r.output} --ignore-eos --max-concurrency {r.concurrency} "
        f"--num-prompts {r.requests} --request-rate inf",
    ]
    return page.render(lines, r.notes, style, width)
