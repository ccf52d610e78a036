"""Plain-text views of the deployment answers: fit, sweep, MoE traffic, speculative decoding, formats.

Each ``render_*`` takes the frozen result of a cost module and builds a page (render/page.py)
of lines and tables, returned as text at ``width`` or as Markdown; every number carries its unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from ..schema.precision import dtype_label
from . import fmt, page
from .page import Block


def display_name(name: str) -> str:
    """A repo id as is; a local config by its file name (its folder's, for config.json)."""
    p = PurePath(name)
    if p.suffix == ".json":
        return p.parent.name if p.name == "config.json" else p.stem
    return name


def table(
    headers: Sequence[str], body: Sequence[Sequence[str]], left: int = 0, indent: str = ""
) -> list[Block]:
    """A table block (page.Rows): right-aligned columns, the first ``left`` left-aligned."""
    return list(page.rows(headers, body, left, indent))


def _gib(n: float | None) -> str:
    return "—" if n is None else f"{n / 2**30:,.2f} GiB"


def _count(n: int | None, never: str = "never") -> str:
    return never if n is None else f"{n:,}"


def step_detail(step: Any) -> str:
    """How a step's time splits: the binding roofline side, the other, communication (how
    many collectives, and whether latency or bytes dominate) and the pipeline's mode."""
    other = (
        f"compute {fmt.ms(step.compute_ms)}" if step.bound == "memory" else f"memory {fmt.ms(step.memory_ms)}"
    )
    parts = [f"{step.bound}-bound", other]
    t = step.traffic
    if step.comm_ms:
        side = "latency" if t.latency_s >= t.transfer_s else "bandwidth"
        parts.append(f"communication {fmt.ms(step.comm_ms)}, {t.count:,} transfers, {side}-bound")
    if step.pp > 1:
        mode = (
            f"{step.micro_batches} micro-batches overlapped"
            if step.overlapped
            else f"{step.pp} stages in turn"
        )
        parts.append(f"pipeline: {mode}")
    return "; ".join(parts)


def _decode_line(step: Any, label: str, bound: bool = True) -> str:
    per_seq = step.tokens_per_s / step.batch if step.batch else 0.0
    ge, le = ("≥", "≤") if bound else ("≈", "≈")
    return (
        f"{label}: {ge} {fmt.ms(step.step_ms)}/step ({step_detail(step)}) → "
        f"{le} {step.tokens_per_s:,.1f} tokens/s ({per_seq:,.1f}/seq.)"
    )


def _fl(n: float) -> str:
    """FLOPs in a column headed '... FLOP': 15009316864 → '15.01 G'."""
    return fmt.flops(n).replace("FLOP", "").strip()


def _sweep_header(s: Any) -> list[str]:
    fixed = f"at {s.fixed:,} tokens" if s.over == "batch" else f"at batch {s.fixed:,}"
    over = "batch" if s.over == "batch" else "context"
    lines = [
        f"{display_name(s.model)} · decode over {over} {fixed} · {s.gpus} × {s.gpu} "
        f"(weights {s.weight_format}; KV {dtype_label(s.kv_dtype)})",
    ]
    cb = _count(s.compute_bound_batch_weights, "never (≤ 2^20)")
    line = f"ridge {s.ridge:.0f} FLOP/byte; weights alone turn decode compute-bound at batch {cb}"
    if s.over == "batch":
        kv = _count(s.compute_bound_batch, "never (KV reads grow with batch as fast as FLOPs)")
        line += f"; with KV at {s.fixed:,} tokens: {kv}"
    lines.append(line)
    ac = s.attention_overtakes_context
    lines.append(
        "attention FLOPs overtake weight FLOPs per decode token from context "
        + (f"{ac:,}" if ac else "never (windowed)")
    )
    if s.over == "batch":
        mb = s.max_batch
        lines.append(
            f"largest batch that fits {s.gpus} × {s.gpu} at {s.fixed:,} tokens: "
            + (
                "no limit from memory"
                if mb is None
                else "none (the weights alone do not fit)"
                if mb == 0
                else f"{mb:,}"
            )
        )
        if s.model_max_context and s.fixed > s.model_max_context:
            lines.append(
                f"warning: context {s.fixed:,} is beyond the model's {s.model_max_context:,}-token limit"
            )
    return lines


def render_sweep(s: Any, style: str = "text", width: int | None = None) -> str:
    lines = _sweep_header(s)
    rows = []
    if s.over == "batch":
        headers = ["batch", "KV total", "weight FLOP", "attn FLOP", "bytes/GPU", "memory", "compute"]
        headers += ["binds", "tokens/s", ""]
        marked_w = marked_c = False
        for r in s.rows:
            st = r.step
            mark = ""
            cbw = s.compute_bound_batch_weights
            if cbw and not marked_w and r.batch >= cbw:
                mark, marked_w = "◀W", True
            if st.bound == "compute" and not marked_c:
                mark, marked_c = mark + "◀C", True
            rows.append(
                [
                    f"{r.batch:,}" + (" " if r.fits else "*"),
                    fmt.bin_bytes(r.kv_bytes_per_sequence * r.batch),
                    _fl(st.weight_flops * st.gpus),
                    _fl(st.attention_flops * st.gpus),
                    fmt.si_bytes(st.bytes),
                    fmt.ms(st.memory_ms),
                    fmt.ms(st.compute_ms),
                    st.bound,
                    f"{st.tokens_per_s:,.0f}",
                    mark,
                ]
            )
        lines += table(headers, rows, left=0)
        lines += [
            "FLOPs per step over all GPUs; bytes, memory and compute times per GPU; tokens/s an upper "
            "bound. ◀W weights alone turn compute-bound, ◀C the step turns compute-bound; * does not fit"
        ]
    else:
        headers = ["context", "KV/seq", "weight FLOP", "attn FLOP", "attn", "prefill FLOP", "prefill"]
        headers += ["step", "binds", ""]
        marked = False
        for r in s.rows:
            st = r.step
            mark = ""
            if not marked and r.attention_flops_per_token >= r.weight_flops_per_token:
                mark, marked = "◀A", True
            rows.append(
                [
                    f"{r.context:,}" + ("†" if r.beyond_model_context else " ") + (" " if r.fits else "*"),
                    fmt.bin_bytes(r.kv_bytes_per_sequence),
                    _fl(r.weight_flops_per_token),
                    _fl(r.attention_flops_per_token),
                    f"{r.attention_share:.0%}",
                    _fl(r.prefill_flops),
                    fmt.ms(r.prefill_s * 1e3),
                    fmt.ms(st.step_ms),
                    st.bound,
                    mark,
                ]
            )
        lines += table(headers, rows)
        lines += [
            "FLOPs per decode token; prefill = one causal prompt of the context's length; step = "
            "decode step bound at the batch; ◀A attention FLOPs reach weight FLOPs; * does not fit"
            + (
                f"; † beyond the model's {s.model_max_context:,}-token limit"
                if any(r.beyond_model_context for r in s.rows)
                else ""
            )
        ]
    return page.render(lines, s.notes, style, width)


def render_sweeps(sweeps: Sequence[Any], style: str = "text", width: int | None = None) -> str:
    return "\n".join(render_sweep(s, style, width) for s in sweeps)


def render_moe(m: Any, style: str = "text", width: int | None = None) -> str:
    shared = f", {m.n_shared} shared" if m.n_shared else ""
    lines = [
        f"{display_name(m.model)} · MoE {m.n_experts} routed experts, top-{m.top_k}{shared} · "
        f"{m.moe_layers} of {m.n_layers} layers MoE",
        f"params {fmt.count(m.params_total)} total ({fmt.count(m.routed_params)} in routed experts) · "
        f"{fmt.count(m.params_active)} activated per token · weights {fmt.si_bytes(m.weight_bytes)} "
        f"({m.weight_format})",
        "read per decode step (one token per sequence), by batch:",
    ]
    rows = [
        [
            f"{r.tokens:,}" + (" " if r.fits else "*"),
            f"{r.experts_touched:,.1f} / {m.n_experts}",
            fmt.count(r.params_read),
            fmt.si_bytes(r.bytes_read),
            f"{r.bytes_read / m.weight_bytes:.1%}",
        ]
        for r in m.rows
    ]
    lines += table(["batch", "experts/layer", "params read", "bytes read", "of weights"], rows)
    a = m.a2a
    lines += [
        f"expert-parallel all-to-all, EP {a.ep}, {a.tokens:,} tokens per step:",
        f"  per MoE layer: dispatch {fmt.si_bytes(a.dispatch_bytes)} ({a.dispatch_dtype}) + combine "
        f"{fmt.si_bytes(a.combine_bytes)} ({a.combine_dtype}) = {fmt.si_bytes(a.layer_bytes)} "
        f"over the group, {fmt.si_bytes(a.layer_bytes_per_gpu)} per GPU",
        f"  {a.remote_copies_per_token:.2f} of {a.top_k} copies per token leave its GPU, d = {a.d_model:,}; "
        f"per step ({a.moe_layers} MoE layers): {fmt.si_bytes(a.step_bytes)}",
        f"  one copy per destination GPU instead: {a.remote_gpus_per_token:.2f} GPUs per token, "
        f"dispatch {fmt.si_bytes(a.dispatch_bytes_dedup)} per layer",
        f"  tensor parallel over {a.ep} instead: two ring all-reduces per layer, "
        f"{fmt.si_bytes(a.tp_allreduce_bytes_per_gpu)} per GPU per layer",
        f"largest batch that fits {m.layout} at {m.context:,} tokens: "
        + (
            "no limit from memory"
            if m.max_batch is None
            else "none"
            if m.max_batch == 0
            else f"{m.max_batch:,}"
        ),
    ]
    if m.context_warning:
        lines.append("warning: " + m.context_warning)
    return page.render(lines, m.notes, style, width)


def _specdec_block(s: Any) -> list[str]:
    a, g = s.alpha, s.gamma
    if s.draft == "mtp":
        head = f"draft: the config's MTP module{'s' if g > 1 else ''} (γ = {g}), α {a:g}"
        head += f", one draft token costs {s.draft_cost:.3f} of a decode step at batch 1"
    else:
        head = f"draft: external, α {a:g}, γ {g}, one draft token costs {s.draft_cost:g} of a decode step"
    h = s.headline
    lines = [
        head,
        f"  speedup at batch {h.batch:,}: {h.speedup:.2f}× ({s.expected_tokens:.2f} tokens per "
        f"verification of {fmt.ms(h.verify_ms)} + drafts {fmt.ms(h.draft_ms)}, against "
        f"{fmt.ms(h.decode_ms)} a token)",
        f"  expected tokens per verification: (1 − {a:g}^{g + 1}) / (1 − {a:g}) = {s.expected_tokens:.2f}",
        f"  seed 08's figure, if verification cost one decode step: {s.expected_tokens:.2f} / ({g} × "
        f"{s.draft_cost:.3g} + 1) = {s.ideal_speedup:.2f}×; here it costs {h.verify_ratio:.2f} at batch "
        f"{h.batch:,}",
        f"  verification ({g + 1} positions) turns compute-bound from batch "
        f"{_count(s.verify_compute_bound_batch_weights)} by the weights alone "
        f"(ridge {s.ridge:.0f} / (γ+1) = {s.ridge / (g + 1):.0f}); with KV at {s.context:,} tokens: "
        f"{_count(s.verify_compute_bound_batch)}",
        f"  first slower than plain decoding at batch {_count(s.break_even_batch_weights)} (weights "
        f"alone), {_count(s.break_even_batch)} (with KV)",
        "  largest batch that fits at this context: "
        + (
            "no limit from memory"
            if s.max_batch is None
            else "none"
            if s.max_batch == 0
            else f"{s.max_batch:,}"
        ),
    ]
    if s.context_warning:
        lines.append("  warning: " + s.context_warning)
    rows = [
        [
            f"{r.batch:,}" + (" " if r.fits else "*"),
            fmt.ms(r.decode_ms),
            fmt.ms(r.verify_ms),
            f"{r.verify_ratio:.2f}",
            r.verify_bound,
            fmt.ms(r.draft_ms),
            f"{r.speedup:.2f}×",
            f"{r.speedup_weights_only:.2f}×",
        ]
        for r in s.rows
    ]
    headers = ["batch", "decode step", "verify step", "ratio", "verify", "draft", "speedup"]
    lines += table([*headers, "weights alone"], rows, indent="  ")
    return lines


def render_specdec(result: Any, style: str = "text", width: int | None = None) -> str:
    ext, mtp = result.external, result.mtp
    first = ext or mtp
    lines = [
        f"{display_name(first.model)} · speculative decoding at {first.context:,} tokens on "
        f"{first.gpus} × {first.gpu}"
    ]
    if ext:
        lines += _specdec_block(ext)
    if mtp:
        lines.append(
            f"this config has {mtp.gamma} MTP module{'s' if mtp.gamma > 1 else ''}: "
            "offered as the draft (DeepSeek-V3 reports 85–90% acceptance)"
        )
        lines += _specdec_block(mtp)
    notes = first.notes if not mtp or not ext else (*ext.notes, mtp.notes[-1])
    return page.render(lines, notes, style, width)


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    if x == int(x) and abs(x) < 1e6:
        return f"{int(x)}"
    return f"{x:.3g}"


def render_formats(r: Any, style: str = "text", width: int | None = None) -> str:
    c = r.chosen
    lines = [
        f"{display_name(r.model)} · {fmt.count(r.params)} params · checkpoint: {r.checkpoint_format} · "
        f"{r.gpu}, context {r.context:,}",
        f"chosen: weights {c['weights']} = {fmt.si_bytes(c['weight_bytes'])} "
        f"({c['weight_bits_per_param'] / 8:.3g} B/param); KV {dtype_label(c['kv_dtype'])} = "
        f"{fmt.bin_bytes(c['kv_bytes_per_token'])}/token, {fmt.bin_bytes(c['kv_bytes_at_context'])} "
        f"at {r.context:,}; decode at batch {c['batch']} ≥ {fmt.ms(c['decode']['step_ms'])}/step"
        + ("" if c["fits"] else f" — does not fit one {r.gpu} at batch {c['batch']}")
        + (
            f"; largest batch that fits: {c['max_batch_that_fits']:,}"
            if c["max_batch_that_fits"] is not None
            else ""
        ),
        "format facts (one element):",
    ]
    rows = []
    for row in r.rows:
        f = row.facts
        em = f"{f.exponent_bits}/{f.mantissa_bits}" if f.exponent_bits is not None else "int"
        block = f"{f.group} + {f.scale_format.split(' ')[0]}" if f.group else "—"
        rows.append(
            [
                f.label.split(" (")[0],
                f"{f.bits}",
                em,
                _num(f.max),
                _num(f.min_normal),
                _num(f.epsilon),
                block,
                f"{f.storage_bits:g}",
            ]
        )
    lines += table(["format", "bits", "e/m", "max", "min normal", "epsilon", "block", "bits+scale"], rows, 1)
    lines.append("this model in each format (weights: --dtype; KV: --kv-dtype):")
    rows = []
    for row in r.rows:
        rows.append(
            [
                row.facts.label.split(" (")[0] + ("" if row.fits else "*"),
                fmt.si_bytes(row.weight_bytes),
                f"{row.weight_bits_per_param / 8:.3f}",
                fmt.bin_bytes(row.kv_bytes_per_token),
                fmt.bin_bytes(row.kv_bytes_at_context),
                fmt.ms(row.decode_ms),
                f"{row.peak / 1e12:,.0f} T",
                row.peak_note.replace(" tensor cores", ""),  # the column says "tensor-core math in"
            ]
        )
    headers = ["format", "weights", "B/param", "KV/token", f"KV @{r.context // 1024}K", "decode B=1", "peak"]
    lines += table([*headers, "math in"], rows, 1)
    parts = " + ".join(str(v) for v in r.training_state_parts.values())
    lines.append(
        f"training state (mixed-precision Adam): {parts} = {r.training_state_bytes_per_param} B/param → "
        f"{fmt.si_bytes(r.training_state_bytes)} for {fmt.count(r.params)} params, activations excluded"
    )
    return page.render(lines, r.notes, style, width)
