"""The text of ``slotdiff fit``: the verdict for a layout, what each GPU holds, the longest
context and most sequences, the decode bound, and an engine's start-up KV pool."""

from __future__ import annotations

from typing import Any

from ..schema.precision import dtype_label
from . import fmt, page
from .deploy import _decode_line, _gib, display_name


def _fewest(f: Any) -> str:
    if f.min_gpus:
        return f"fewest {f.gpu} of a valid layout that hold it: {f.min_gpus} ({f.min_layout.label()})"
    return f"no valid layout of up to 65,536 {f.gpu} holds it"


def _engine_lines(f: Any) -> list[str]:
    e = f.engine
    st = e.stages[e.binding]
    name = "vLLM" if e.engine == "vllm" else "SGLang"
    lines = [f"{name} {e.version} start-up, predicted (binding rank: stage {e.binding}):"]
    for t in st.terms:
        lines.append(f"  {t.name:<26} {t.bytes / 2**30:8.2f} GiB  [{t.how}] {t.note}".rstrip())
    if e.engine == "vllm":
        lines += [
            f"  Available KV cache memory: {e.kv_pool_bytes / 2**30:.2f} GiB",
            f"  GPU KV cache size: {e.kv_pool_tokens:,} tokens ({st.blocks:,} blocks of {e.block_size} "
            f"tokens, {st.kv.num_groups} group{'s' if st.kv.num_groups != 1 else ''} × "
            f"{st.kv.group_size} layers)",
            f"  Maximum concurrency for {e.max_model_len:,} tokens per request: {e.max_concurrency:.2f}x",
        ]
    else:
        lines.append(f"  KV Cache is allocated. #tokens: {e.kv_pool_tokens:,} (max_total_num_tokens)")
        lines.append(f"  context_len {e.max_model_len:,}: {e.max_concurrency:.2f} full-length requests")
    lines.append(
        f"  one request at max_model_len needs {e.needed_bytes / 2**30:.2f} GiB: "
        + ("the engine starts" if e.fits_one_request else "the engine refuses to start")
    )
    lines += ["  " + n for n in e.notes]
    return lines


def render_fit(f: Any, style: str = "text", width: int | None = None) -> str:
    lay = f.layout
    lines = [
        f"{display_name(f.model)} on {f.gpus} × {f.gpu} ({f.memory_per_gpu / 2**30:g} GiB each, "
        f"{lay.label()}), context {f.context:,}, {f.batch:,} sequence{'s' if f.batch > 1 else ''}",
    ]
    if f.context_warning:
        lines.append(f"warning: {f.context_warning}")
    if not f.valid:
        lines.append("verdict: INVALID LAYOUT — " + "; ".join(f.layout_problems) + "; " + _fewest(f))
        return page.render(lines, f.assumptions, style, width)
    usable = f"{_gib(f.usable_per_gpu)} usable per GPU"
    if f.engine is not None:
        lines.append(
            "verdict: "
            + ("FITS" if f.fits else "DOES NOT FIT")
            + f" — {f.engine.engine} {'starts' if f.fits else 'does not start'} with this layout"
        )
    elif f.fits:
        lines.append(f"verdict: FITS — needs {_gib(f.needed_per_gpu)} of {usable}")
    else:
        lines.append(
            f"verdict: DOES NOT FIT — needs {_gib(f.needed_per_gpu)} per GPU, {usable}: "
            f"short {_gib(f.shortfall_per_gpu)} per GPU ({_gib(f.shortfall_per_gpu * f.gpus)} in all); "
            + _fewest(f)
        )
    rep = f", replicated ×{f.kv_replication:g} over the GPUs" if f.kv_replication > 1.0001 else ""
    lines += [
        f"  weights         {_gib(f.weights_bytes)} ({f.weight_format}) → {_gib(f.weights_per_gpu)} per GPU",
        f"  KV / sequence   {_gib(f.kv_per_sequence)} at {f.context:,} tokens ({dtype_label(f.kv_dtype)}) → "
        f"{_gib(f.kv_per_sequence_per_gpu)} per GPU{rep}",
    ]
    if f.state_per_sequence:
        lines.append(f"  state / seq.    {_gib(f.state_per_sequence)} fixed (recurrent layers)")
    if f.engine is None:
        reserve = _gib(f.memory_per_gpu * f.reserve_fraction)
        lines.append(f"  reserve         {f.reserve_fraction:.0%} = {reserve} per GPU")
    if f.engine is not None:
        if f.decode:
            lines.append(
                _decode_line(f.decode, f"decode at {f.batch:,} sequence{'s' if f.batch > 1 else ''}", f.bound)
            )
        lines += _engine_lines(f)
        return page.render(lines, f.assumptions, style, width)
    seqs = "no limit from memory" if f.max_sequences is None else f"{f.max_sequences:,}"
    if f.weights_per_gpu > f.usable_per_gpu:
        seqs = "none: the weights alone exceed the usable memory"
    lines.append(f"max concurrent sequences at {f.context:,} tokens: {seqs}")
    trained = f" (the model's limit: {f.model_max_context:,})" if f.model_max_context else ""
    if f.weights_per_gpu > f.usable_per_gpu:
        longest = "none"
    elif f.max_context is None:
        longest = "memory does not bind (every attention layer is windowed)"
    else:
        longest = f"{f.max_context:,} tokens"
    lines.append(f"longest context for one sequence: {longest}{trained}")
    if f.fits and f.min_gpus and f.min_gpus < f.gpus:
        lines.append(_fewest(f))
    if f.decode_at_max:
        lines.append(_decode_line(f.decode_at_max, f"decode at {f.decode_at_max.batch:,} sequences", f.bound))
    if f.decode and (not f.decode_at_max or f.decode.batch != f.decode_at_max.batch):
        lines.append(
            _decode_line(f.decode, f"decode at {f.batch:,} sequence{'s' if f.batch > 1 else ''}", f.bound)
        )
    if f.decode and f.decode_bound:
        ratio = f.decode.step_ms / f.decode_bound.step_ms
        lines.append(
            f"  the bound at 100% of peak: ≥ {fmt.ms(f.decode_bound.step_ms)}/step at {f.batch:,} "
            f"sequence{'s' if f.batch > 1 else ''}; the estimate is {ratio:.2f}× it"
        )
    return page.render(lines, f.assumptions, style, width)
