"""Does the model fit on N GPUs of a layout at a context: weights per GPU, KV per sequence
with its replication, the most concurrent sequences, the longest context, the fewest GPUs of
any valid layout, and — with an engine — the KV pool that engine would build
(``deploy.vllm``, ``deploy.sglang``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..constructs import construct
from ..core.errors import UsageError
from ..cost.context import context_limit
from ..cost.kv import kv_cost
from ..cost.layout import Layout, kv_heads_of, problems, uneven_pp
from ..cost.memory import MemoryPlan, Need
from ..cost.step import layout_notes
from ..cost.weights import effective_format
from ..cost.workload import Workload
from ..schema.arch import Architecture
from ..schema.precision import dtype_label
from .serving import (
    CONTEXT_LIMIT,
    RESERVE_FRACTION,
    DecodeStep,
    Deployment,
    decode_step,
    deployment,
    first_true,
)
from .sglang import sglang_fit
from .vllm import EngineArgs, EngineFit, vllm_fit


@dataclass(frozen=True)
class Fit:
    """Whether ``batch`` sequences of ``context`` tokens fit on the GPUs, and what does."""

    model: str
    gpu: str
    gpu_name: str
    gpus: int
    layout: Layout
    layout_problems: tuple[str, ...]
    context: int
    batch: int
    kv_dtype: str
    weight_format: str
    reserve_fraction: float
    memory_per_gpu: int
    usable_per_gpu: float
    weights_bytes: int  # resident, all GPUs together (one copy)
    weights_per_gpu: float
    mtp_included: bool
    kv_per_sequence: int  # one copy, at the context
    kv_per_sequence_per_gpu: float
    state_per_sequence: int
    needed_per_gpu: float
    max_sequences: int | None  # at the context; None: sequences need no memory
    max_context: int | None  # one sequence; None: memory does not bind (windowed layers)
    model_max_context: int | None
    context_warning: str | None
    min_gpus: int | None  # fewest GPUs of a valid layout that hold `batch` sequences
    min_layout: Layout | None
    decode: DecodeStep | None  # at `batch`, when it fits
    decode_at_max: DecodeStep | None  # at max_sequences
    engine: EngineFit | None
    efficiency: str
    assumptions: tuple[str, ...]
    bound: bool = True  # times at 100% of peak: lower bounds (else estimates)
    decode_bound: DecodeStep | None = None  # at 100% of peak, beside an estimate

    @property
    def valid(self) -> bool:
        return not self.layout_problems

    @property
    def fits(self) -> bool:
        if not self.valid:
            return False
        if self.engine is not None:
            return self.engine.fits_one_request
        return self.needed_per_gpu <= self.usable_per_gpu

    @property
    def shortfall_per_gpu(self) -> float:
        return max(0.0, self.needed_per_gpu - self.usable_per_gpu)

    @property
    def kv_replication(self) -> float:
        """KV bytes stored over all GPUs ÷ one copy (1 = split without duplication)."""
        if not self.kv_per_sequence:
            return 1.0
        per_rank = self.kv_per_sequence_per_gpu * self.layout.tp * self.layout.pp
        return per_rank / self.kv_per_sequence

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "gpu_name": self.gpu_name,
            "gpus": self.gpus,
            "layout": self.layout.to_dict(),
            "layout_valid": self.valid,
            "layout_problems": list(self.layout_problems),
            "context": self.context,
            "batch": self.batch,
            "kv_dtype": self.kv_dtype,
            "weight_format": self.weight_format,
            "fits": self.fits,
            "shortfall_bytes_per_gpu": self.shortfall_per_gpu,
            "shortfall_bytes": self.shortfall_per_gpu * self.gpus,
            "min_gpus": self.min_gpus,
            "min_gpus_layout": self.min_layout.to_dict() if self.min_layout else None,
            "reserve_fraction": self.reserve_fraction,
            "memory_bytes_per_gpu": self.memory_per_gpu,
            "usable_bytes_per_gpu": self.usable_per_gpu,
            "weights_bytes": self.weights_bytes,
            "weights_bytes_per_gpu": self.weights_per_gpu,
            "mtp_included": self.mtp_included,
            "kv_bytes_per_sequence": self.kv_per_sequence,
            "kv_bytes_per_sequence_per_gpu": self.kv_per_sequence_per_gpu,
            "kv_replication": self.kv_replication,
            "state_bytes_per_sequence": self.state_per_sequence,
            "needed_bytes_per_gpu": self.needed_per_gpu,
            "max_sequences": self.max_sequences,
            "max_context": self.max_context,
            "model_max_context": self.model_max_context,
            "context_warning": self.context_warning,
            "decode": self.decode.to_dict() if self.decode else None,
            "decode_at_max_sequences": self.decode_at_max.to_dict() if self.decode_at_max else None,
            "decode_bound": self.decode_bound.to_dict() if self.decode_bound else None,
            "efficiency": self.efficiency,
            "engine": self.engine.to_dict() if self.engine else None,
            "kv_pool_bytes": self.engine.kv_pool_bytes if self.engine else None,
            "kv_pool_tokens": self.engine.kv_pool_tokens if self.engine else None,
            "max_concurrency": self.engine.max_concurrency if self.engine else None,
            "assumptions": list(self.assumptions),
        }


def _longest(plan: MemoryPlan, layout: Layout, usable: float) -> int | None:
    def one_fits(s: int) -> bool:
        return plan.need(layout, 1, s, usable).fits

    if not one_fits(1):
        return 0
    if one_fits(CONTEXT_LIMIT):
        return None
    over = first_true(lambda s: not one_fits(s), CONTEXT_LIMIT)
    return (over or CONTEXT_LIMIT) - 1


def fit(
    arch: Architecture,
    workload: Workload | None = None,
    gpus: int = 1,
    reserve: float = RESERVE_FRACTION,
    mtp: bool = False,
    layout: Layout | None = None,
    engine: EngineArgs | None = None,
) -> Fit:
    """Memory verdict for ``workload.batch`` sequences at ``workload.context`` on ``layout``
    (default: tensor parallel over ``gpus``); with ``engine``, that engine's KV pool too."""
    if not 0 <= reserve < 1:
        raise UsageError(f"--reserve must be in [0, 1), got {reserve}")
    if gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    wl = workload or Workload()
    if engine is not None:
        layout = engine.layout
    layout = layout or Layout(tp=gpus)
    dep = deployment(arch, wl, layout.gpus, layout)
    fmt = effective_format(arch, wl.weight_dtype)[0]
    plan = MemoryPlan(arch, fmt, wl.kv_dtype, mtp)
    why = problems(arch, layout, fmt)
    usable = dep.device.memory_bytes * (1 - reserve)
    ctx, batch = wl.context, wl.batch
    need: Need | None = None if why else plan.need(layout, batch, ctx, usable)
    fewest = plan.fewest(batch, ctx, usable)
    eng = None
    if engine is not None and not why:
        eng = (sglang_fit if engine.engine == "sglang" else vllm_fit)(arch, plan, dep.device, engine)
    resident = dep.weights.bytes + (dep.weights.mtp_bytes if mtp else 0)
    limit = context_limit(arch)
    fits_now = need is not None and need.fits
    max_seq = need.max_batch if need else 0
    return Fit(
        model=arch.name,
        gpu=dep.device.id,
        gpu_name=dep.device.name,
        gpus=layout.gpus,
        layout=layout,
        layout_problems=why,
        context=ctx,
        batch=batch,
        kv_dtype=wl.kv_dtype,
        weight_format=dep.weights.detail,
        reserve_fraction=reserve,
        memory_per_gpu=dep.device.memory_bytes,
        usable_per_gpu=usable,
        weights_bytes=resident,
        weights_per_gpu=need.weights if need else resident / layout.gpus,
        mtp_included=mtp,
        kv_per_sequence=kv_cost(arch, ctx, wl.kv_dtype).bytes_at_context,
        kv_per_sequence_per_gpu=need.kv_per_sequence if need else 0.0,
        state_per_sequence=kv_cost(arch, 1, wl.kv_dtype).state_bytes_per_sequence,
        needed_per_gpu=need.needed if need else 0.0,
        max_sequences=max_seq,
        max_context=_longest(plan, layout, usable) if need else 0,
        model_max_context=limit.tokens,
        context_warning=limit.warning(ctx),
        min_gpus=fewest[0] if fewest else None,
        min_layout=fewest[1].layout if fewest else None,
        decode=decode_step(dep, batch, ctx) if fits_now else None,
        decode_at_max=decode_step(dep, max_seq, ctx) if max_seq else None,
        engine=eng,
        efficiency=wl.efficiency_note,
        assumptions=tuple(fit_assumptions(dep, plan, reserve, mtp, eng)),
        bound=wl.bound,
        decode_bound=_at_peak(arch, wl, layout, batch, ctx) if fits_now and not wl.bound else None,
    )


def _at_peak(arch: Architecture, wl: Workload, layout: Layout, batch: int, context: int) -> DecodeStep:
    """The same step at 100% of peak bandwidth and FLOP/s: the bound beside an estimate."""
    at_peak = replace(wl, mfu=1.0, mbu=1.0, efficiency=None)
    return decode_step(deployment(arch, at_peak, layout.gpus, layout), batch, context)


def fit_assumptions(
    dep: Deployment, plan: MemoryPlan, reserve: float, mtp: bool, eng: EngineFit | None
) -> list[str]:
    """What the verdict assumes, in words, with this model's particulars."""
    arch, lay, wl = dep.arch, dep.layout, dep.workload
    n = lay.tp
    notes = []
    if eng is None:
        notes.append(
            f"runtime reserve {reserve:.0%} of each GPU's memory for the CUDA context, activations and "
            "allocator slack (vLLM's default gpu_memory_utilization is 0.9; --engine vllm sizes it as "
            "vLLM does)"
        )
    notes += [
        f"GPU memory {dep.device.memory_bytes / 2**30:g} GiB, the preset's nominal capacity (vendor GB "
        "read as GiB); the driver keeps a few hundred MiB of it",
        f"layout {lay.label()}: weights split by what each tensor shards over (cost/layout.py)",
        f"KV cache in {dtype_label(wl.kv_dtype)}, every sequence at the full context",
        f"weights as {dep.weights.detail}",
        dep.precision.note(),
        wl.efficiency_note,
    ]
    if n > 1 and lay.dp == 1:  # a latent cache (MLA's) is held whole on every TP rank
        whole = dict.fromkeys(m for s in arch.layers if (m := construct(s.mixer)) and m.latent_kv)
        notes += [m.tp_note(n) for m in whole]
    for g in sorted(kv_heads_of(arch)):
        if g < n:
            notes.append(f"{g} KV heads < TP {n}: each GPU holds one head, KV replicated ×{n / g:g}")
    if uneven_pp(arch, lay):
        notes.append(
            f"PP={lay.pp} does not divide the {arch.n_layers} layers: the stages before the last get one more"
        )
    if plan.even:
        notes.append("weights of weight-shared blocks spread evenly over the layers")
    if dep.weights.mtp_bytes:
        notes.append(
            "MTP modules loaded beside the weights" if mtp else "MTP modules not loaded (add them with --mtp)"
        )
    notes.append(
        "decode per GPU: its share of the decoder's weights read plus its KV over HBM bandwidth, against "
        "its share of the FLOPs over the dense peak, plus its communication (cost/step.py)"
    )
    notes += layout_notes(dep)
    return notes
