"""Sweeps over batch or context: KV, FLOPs split weights vs attention, decode bound, binding side.

Over batch (context fixed): where decode turns compute-bound, by the weights alone (seed 02's
B ≈ ridge for a dense bf16 model) and with every sequence's KV read too. Over context (batch
fixed): KV per sequence, FLOPs per decode token split weights vs attention, prefill of one
prompt, and the context from which attention FLOPs overtake weight FLOPs (seed 05).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import UsageError
from ..cost.context import context_limit
from ..cost.flops import attention_flops
from ..cost.kv import kv_cost
from ..cost.roofline import prefill_cost
from ..schema.arch import Architecture
from ..schema.precision import dtype_label
from .serving import DecodeStep, Deployment, compute_bound_batch, decode_step, first_true

CROSSOVER_LIMIT = 1 << 26  # contexts searched for attention > weights


@dataclass(frozen=True)
class SweepRow:
    """One point: ``batch`` sequences at ``context`` tokens."""

    batch: int
    context: int
    kv_bytes_per_sequence: int  # one copy, all layers, at the context
    weight_flops_per_token: int
    attention_flops_per_token: int
    prefill_flops: int  # one causal prompt of ``context`` tokens
    prefill_s: float  # the roofline bound of one prompt over the GPUs, at --mfu / --mbu
    step: DecodeStep
    fits: bool = True  # weights + the batch's KV at the context fit the GPUs
    beyond_model_context: bool = False

    @property
    def attention_share(self) -> float:
        total = self.weight_flops_per_token + self.attention_flops_per_token
        return self.attention_flops_per_token / total if total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "context": self.context,
            "kv_bytes_per_sequence": self.kv_bytes_per_sequence,
            "kv_bytes_batch": self.kv_bytes_per_sequence * self.batch,
            "weight_flops_per_token": self.weight_flops_per_token,
            "attention_flops_per_token": self.attention_flops_per_token,
            "attention_share": self.attention_share,
            "prefill_flops": self.prefill_flops,
            "prefill_s": self.prefill_s,
            "decode": self.step.to_dict(),
            "fits": self.fits,
            "beyond_model_context": self.beyond_model_context,
        }


@dataclass(frozen=True)
class Sweep:
    """A sweep of one model over batch or context on one GPU kind."""

    model: str
    over: str  # "batch" | "context"
    gpu: str
    gpu_name: str
    gpus: int
    kv_dtype: str
    weight_format: str
    fixed: int  # the context (over batch) or the batch (over context)
    ridge: float
    peak: int
    bandwidth: int
    rows: tuple[SweepRow, ...]
    compute_bound_batch_weights: int | None  # weights alone, KV ignored
    compute_bound_batch: int | None  # with KV at the fixed context (over batch only)
    attention_overtakes_context: int | None  # attention FLOPs/token ≥ weight FLOPs/token from here
    model_max_context: int | None  # the context limit the config declares
    notes: tuple[str, ...]
    max_batch: int | None = None  # over batch: the largest that fits at the context
    layout: str = "TP=1"
    mfu: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "over": self.over,
            "gpu": self.gpu,
            "gpus": self.gpus,
            "kv_dtype": self.kv_dtype,
            "weight_format": self.weight_format,
            "context" if self.over == "batch" else "batch": self.fixed,
            "ridge_flop_per_byte": self.ridge,
            "compute_bound_batch_weights_only": self.compute_bound_batch_weights,
            "compute_bound_batch": self.compute_bound_batch,
            "attention_overtakes_weights_context": self.attention_overtakes_context,
            "model_max_context": self.model_max_context,
            "layout": self.layout,
            "mfu": self.mfu,
            "max_batch_that_fits": self.max_batch,
            "rows": [r.to_dict() for r in self.rows],
            "notes": list(self.notes),
        }


def envelope(arch: Architecture) -> Architecture:
    """``arch`` with chunked layers seen at a full chunk (their cost per token peaks there)."""
    layers = tuple(replace(s, window=s.chunk, chunk=None) if s.chunk else s for s in arch.layers)
    return replace(arch, layers=layers)


def attention_overtakes(arch: Architecture, weight_flops: int) -> int | None:
    """First context at which a decode token's attention FLOPs reach its weight FLOPs."""
    env = envelope(arch)
    return first_true(lambda s: attention_flops(env, s) >= weight_flops, CROSSOVER_LIMIT)


def prefill_s(dep: Deployment, context: int) -> float:
    """One prompt's prefill bound over the deployment's GPUs: the cost pass's roofline
    (max of FLOPs / peak and bytes / bandwidth, at --mfu / --mbu), split evenly."""
    kv = kv_cost(dep.arch, context, dep.workload.kv_dtype)
    p = prefill_cost(dep.arch, dep.weights, kv, dep.flops(context), dep.device, dep.peak, dep.bandwidth)
    return p.time_ms / 1e3 / dep.gpus


def row(dep: Deployment, batch: int, context: int) -> SweepRow:
    fl = dep.flops(context)
    return SweepRow(
        batch=batch,
        context=context,
        kv_bytes_per_sequence=kv_cost(dep.arch, context, dep.workload.kv_dtype).bytes_at_context,
        weight_flops_per_token=fl.weights_per_token,
        attention_flops_per_token=fl.attention_per_token,
        prefill_flops=fl.prefill,
        prefill_s=prefill_s(dep, context),
        step=decode_step(dep, batch, context),
        fits=dep.fits(batch, context),
        beyond_model_context=context_limit(dep.arch).beyond(context),
    )


def _pow2(lo: int, hi: int) -> tuple[int, ...]:
    out, x = [], lo
    while x <= hi:
        out.append(x)
        x *= 2
    return tuple(out)


def default_batches(dep: Deployment, context: int) -> tuple[int, ...]:
    """1, 2, 4, ... past twice the weights-only compute-bound batch (at least 1024), plus the
    compute-bound batches and the largest batch that fits, so the table has a row at each."""
    marks = {compute_bound_batch(dep, context, with_kv=False), compute_bound_batch(dep, context)}
    top = min(1 << 16, max(1024, 2 * max((m for m in marks if m), default=0)))
    largest = dep.max_batch(context)
    if largest and largest <= top:
        marks.add(largest)
    return tuple(sorted({*_pow2(1, top), *(m for m in marks if m and m <= top)}))


def default_contexts(arch: Architecture, weight_flops: int) -> tuple[int, ...]:
    """1K, 2K, ... up to the model's longest context (at least 128K, at most 1M), plus the
    context where attention overtakes weights when it falls inside."""
    top = max(131072, min(1 << 20, arch.get("max_positions") or 0))
    cross = attention_overtakes(arch, weight_flops)
    points = set(_pow2(1024, top))
    if cross and 1024 <= cross <= top:
        points.add(cross)
    return tuple(sorted(points))


def _sweep(dep: Deployment, over: str, fixed: int, rows: tuple[SweepRow, ...]) -> Sweep:
    ctx = fixed if over == "batch" else dep.workload.context
    weights_flops = dep.flops(ctx).weights_per_token
    limit = context_limit(dep.arch)
    notes = [
        f"decode bound per GPU on {dep.gpus} × {dep.device.id} ({dep.layout.label()}): max(bytes / HBM "
        "bandwidth, FLOPs / dense peak) + TP all-reduce / EP all-to-all over the link; "
        + dep.precision.note(),
        dep.workload.efficiency_note,
        "every sequence at the full context; KV in " + dtype_label(dep.workload.kv_dtype),
        "FLOPs per decode token: weights = 2 × active matmul params (head included); attention = "
        "q·kᵀ and p·v over the keys each query sees",
        "prefill: one causal prompt of the context's length, the same roofline bound as the main report",
        "rows marked * do not fit: weights + every sequence's KV at the context exceed the GPUs (10% kept "
        "for the runtime)",
    ]
    if any(r.beyond_model_context for r in rows):
        notes.append(f"rows marked † are beyond the model's {limit.tokens:,}-token limit ({limit.source})")
    if any(s.chunk for s in dep.arch.layers):
        notes.append("attention-overtakes context: chunked layers taken at a full chunk")
    return Sweep(
        model=dep.arch.name,
        over=over,
        gpu=dep.device.id,
        gpu_name=dep.device.name,
        gpus=dep.gpus,
        kv_dtype=dep.workload.kv_dtype,
        weight_format=dep.weights.detail,
        fixed=fixed,
        ridge=dep.ridge,
        peak=dep.peak,
        bandwidth=dep.device.bandwidth,
        rows=rows,
        compute_bound_batch_weights=compute_bound_batch(dep, ctx, with_kv=False),
        compute_bound_batch=compute_bound_batch(dep, ctx) if over == "batch" else None,
        attention_overtakes_context=attention_overtakes(dep.arch, weights_flops),
        model_max_context=limit.tokens,
        notes=tuple(notes),
        max_batch=dep.max_batch(ctx) if over == "batch" else None,
        layout=dep.layout.label(),
        mfu=dep.workload.mfu,
    )


def sweep_batch(
    dep: Deployment,
    context: int,
    batches: tuple[int, ...] | None = None,
    each: Callable[[tuple[int, ...]], Iterable[int]] = iter,
) -> Sweep:
    """Decode at each batch in ``batches`` (default: powers of two) at ``context`` tokens."""
    points = batches or default_batches(dep, context)
    if min(points) < 1:
        raise UsageError("batch points must be at least 1")
    return _sweep(dep, "batch", context, tuple(row(dep, b, context) for b in each(points)))


def sweep_context(
    dep: Deployment,
    batch: int,
    contexts: tuple[int, ...] | None = None,
    each: Callable[[tuple[int, ...]], Iterable[int]] = iter,
) -> Sweep:
    """Decode and prefill at each context in ``contexts`` (default: powers of two) at ``batch``."""
    points = contexts or default_contexts(dep.arch, dep.flops(dep.workload.context).weights_per_token)
    if min(points) < 1:
        raise UsageError("context points must be at least 1")
    return _sweep(dep, "context", batch, tuple(row(dep, batch, s) for s in each(points)))
