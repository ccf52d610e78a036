"""A deployment target for ``slotdiff choose`` and one model priced on it at one precision.

A :class:`Target` is a Workload (GPU, how many, batch, context, KV dtype, efficiency) plus
a latency or throughput budget and the precisions to try. :func:`rung_on` prices a model
on it at one precision with what slotdiff already has: ``--dtype`` re-pricing
(``cost.weights``), the memory verdict on the target's GPUs and the fewest GPUs of a valid
layout (``cost.feasibility``, ``cost.memory``), and the decode step on that layout
(``deploy.serving``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import UsageError
from ..cost.feasibility import RESERVE_FRACTION, feasibility
from ..cost.layout import Layout
from ..cost.memory import MAX_GPUS, Need
from ..cost.weights import effective_format
from ..cost.workload import Workload
from ..render import fmt
from ..schema.arch import Architecture
from ..schema.precision import dtype_bits, dtype_label
from .serving import DecodeStep, decode_step, deployment

LADDER = ("bfloat16", "float8_e4m3fn", "int4")  # widest first: the first that meets the target wins
OPTIMISE = ("tokens-per-s", "decode-ms", "gpus", "params", "kv", "max-batch")


def short_label(dtype: str) -> str:
    """``float8_e4m3fn`` → ``fp8``, ``mxfp4`` → ``MXFP4``: the word people use."""
    return dtype_label(dtype).split(" ")[0]


@dataclass(frozen=True)
class Target:
    """The deployment asked for: GPUs, sequences, context, budget, and what to optimise."""

    workload: Workload  # GPU, batch, context, KV dtype, --mfu/--mbu; ``gpus``: the target's count
    precisions: tuple[str, ...] = LADDER
    max_decode_ms: float | None = None
    min_tokens_per_s: float | None = None  # the whole group's, at the batch
    modality: str | None = None  # "image": only models with a vision tower
    optimise: str = "tokens-per-s"
    reserve: float = RESERVE_FRACTION

    def __post_init__(self) -> None:
        if self.optimise not in OPTIMISE:
            raise UsageError(f"--optimise must be one of {', '.join(OPTIMISE)}, got {self.optimise!r}")
        if not self.precisions:
            raise UsageError("--precisions names no format")
        if not 0 <= self.reserve < 1:
            raise UsageError(f"--reserve must be in [0, 1), got {self.reserve}")

    @property
    def where(self) -> str:
        wl = self.workload
        return f"{wl.gpus}× {fmt.short_name(wl.device.name)}"

    def budget_misses(self, step: DecodeStep) -> str | None:
        """Why ``step`` misses the latency or throughput budget (None: it meets it)."""
        if self.max_decode_ms is not None and step.step_ms > self.max_decode_ms:
            return f"decode {fmt.ms(step.step_ms)} > the {fmt.ms(self.max_decode_ms)} budget"
        if self.min_tokens_per_s is not None and step.tokens_per_s < self.min_tokens_per_s:
            return f"{step.tokens_per_s:,.0f} tokens/s < the {self.min_tokens_per_s:,.0f} asked"
        return None

    def to_dict(self) -> dict[str, Any]:
        wl = self.workload
        d = wl.device
        return {
            "gpu": d.id,
            "gpu_name": d.name,
            "gpus": wl.gpus,
            "memory_bytes_per_gpu": d.memory_bytes,
            "usable_bytes_per_gpu": d.memory_bytes * (1 - self.reserve),
            "reserve_fraction": self.reserve,
            "batch": wl.batch,
            "context": wl.context,
            "kv_dtype": wl.kv_dtype,
            "precisions": list(self.precisions),
            "max_decode_ms": self.max_decode_ms,
            "min_tokens_per_s": self.min_tokens_per_s,
            "modality": self.modality,
            "optimise": self.optimise,
            "mfu": wl.mfu,
            "mbu": wl.mbu,
        }


@dataclass(frozen=True)
class Rung:
    """A model at one precision on the target."""

    label: str
    weight_dtype: str | None  # as --dtype; None: the checkpoint's own format
    weights_bytes: int | None  # one copy (None: not priced)
    fits: bool  # some valid layout of at most the target's GPUs holds the batch at the context
    layout: Layout | None  # the layout priced (None: nothing fits)
    min_gpus: int | None  # fewest GPUs of any valid layout (None: none up to 65,536)
    min_layout: Layout | None
    weights_per_gpu: float | None
    needed_per_gpu: float | None
    max_batch: int | None  # most sequences at the context on ``layout`` (None: memory does not bind)
    decode: DecodeStep | None
    reason: str  # why it misses the target ("" when it meets it)

    @property
    def meets(self) -> bool:
        return self.fits and not self.reason

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.label,
            "weight_dtype": self.weight_dtype,
            "weights_bytes": self.weights_bytes,
            "fits": self.fits,
            "meets_target": self.meets,
            "layout": self.layout.to_dict() if self.layout else None,
            "min_gpus": self.min_gpus,
            "min_gpus_layout": self.min_layout.to_dict() if self.min_layout else None,
            "weights_bytes_per_gpu": self.weights_per_gpu,
            "needed_bytes_per_gpu": self.needed_per_gpu,
            "max_batch": self.max_batch,
            "decode": self.decode.to_dict() if self.decode else None,
            "reason": self.reason or None,
        }


def ladder(arch: Architecture, wanted: Sequence[str]) -> tuple[list[tuple[str | None, str]], list[str]]:
    """(weight dtype, or None for the checkpoint's own; label) to try, widest first, and the
    precisions left out with why. A quantized checkpoint is tried as shipped, then only
    narrower formats: a format as wide as its own holds no more of the weights."""
    own = effective_format(arch, None)[0]
    rungs: list[tuple[str | None, str]] = []
    skipped: list[str] = []
    if own.quantized and own.quant_dtype:
        bits, name = dtype_bits(own.quant_dtype), short_label(own.quant_dtype)
        rungs.append((None, f"{name} (checkpoint)"))
        for d in wanted:
            if dtype_bits(d) < bits:
                rungs.append((d, short_label(d)))
            else:
                skipped.append(
                    f"{short_label(d)}: not narrower than the {name} checkpoint, so it holds no more"
                )
        return rungs, skipped
    base = own.base_dtype or "bfloat16"
    if not own.supported:
        skipped.append(f"the checkpoint as shipped ({own.detail}): its bytes are not modelled")
    for d in wanted:
        if dtype_bits(d) <= dtype_bits(base):
            rungs.append((d, short_label(d)))
        else:
            skipped.append(f"{short_label(d)}: wider than the checkpoint's {short_label(base)}")
    return rungs, skipped


def _short_of(need: Need, batch: int, context: int) -> str:
    """Why the fullest GPU of a layout is short: the weights alone, or with the KV."""
    where = need.layout.label()
    if need.weights > need.usable:
        return f"weights {fmt.si_bytes(need.weights)}/GPU > {fmt.si_bytes(need.usable)} usable ({where})"
    held = f", holds {need.max_batch:,}" if need.max_batch else ""
    return (
        f"weights {fmt.si_bytes(need.weights)} + {batch:,} × KV {fmt.si_bytes(need.per_sequence)} "
        f"= {fmt.si_bytes(need.needed)}/GPU > {fmt.si_bytes(need.usable)} ({where}{held})"
    )


def unpriced(dtype: str | None, label: str, reason: str) -> Rung:
    """A precision whose bytes slotdiff cannot give, and why."""
    return Rung(label, dtype, None, False, None, None, None, None, None, 0, None, f"not priced: {reason}")


def rung_on(arch: Architecture, target: Target, dtype: str | None, label: str) -> Rung:
    """``arch`` with weights in ``dtype`` on the target: the layout of the target's GPUs
    when it holds the batch, else the fewest GPUs that do when that is no more than the
    target has; the decode step on it; and why it misses the target, if it does."""
    wl = replace(target.workload, weight_dtype=dtype)
    n, batch, ctx = wl.gpus, wl.batch, wl.context
    dep = deployment(arch, wl, n)
    f = feasibility(dep.plan, wl.device, n, batch, ctx, target.reserve)
    fewest = f.fewest
    need = f.need if f.fits else (fewest[1] if fewest and fewest[0] <= n else None)
    common: dict[str, Any] = {
        "label": label,
        "weight_dtype": dtype,
        "weights_bytes": dep.weights.bytes,
        "min_gpus": fewest[0] if fewest else None,
        "min_layout": fewest[1].layout if fewest else None,
    }
    if need is None:
        if f.need is not None:
            why = _short_of(f.need, batch, ctx)
        else:
            why = f"no valid layout of {n} GPUs: " + "; ".join(f.layout_problems[:2])
        more = (
            f"; needs ≥ {fewest[0]} ({fewest[1].layout.label()})"
            if fewest
            else f"; no layout of up to {MAX_GPUS:,} GPUs holds it"
        )
        return Rung(
            fits=False,
            layout=None,
            weights_per_gpu=f.need.weights if f.need else None,
            needed_per_gpu=f.need.needed if f.need else None,
            max_batch=f.need.max_batch if f.need else 0,
            decode=None,
            reason=why + more,
            **common,
        )
    step = decode_step(replace(dep, layout=need.layout), batch, ctx)
    return Rung(
        fits=True,
        layout=need.layout,
        weights_per_gpu=need.weights,
        needed_per_gpu=need.needed,
        max_batch=need.max_batch,
        decode=step,
        reason=target.budget_misses(step) or "",
        **common,
    )
