"""Does the model fit on N GPUs at a context: weights per GPU, KV per sequence with its
replication, the most concurrent sequences, the longest context, and the assumptions behind
the verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..core.errors import UsageError
from ..cost.kv import kv_cost
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
    state_bytes,
)


@dataclass(frozen=True)
class Fit:
    """Whether ``batch`` sequences of ``context`` tokens fit on the GPUs, and what does."""

    model: str
    gpu: str
    gpu_name: str
    gpus: int
    context: int
    batch: int
    kv_dtype: str
    weight_format: str
    reserve_fraction: float
    memory_per_gpu: int
    usable_per_gpu: float
    weights_bytes: int  # resident, all GPUs together
    mtp_included: bool
    kv_per_sequence: int  # one copy, at the context
    kv_per_sequence_per_gpu: float
    state_per_sequence: int
    needed_per_gpu: float
    max_sequences: int | None  # at the context; None: sequences need no memory
    max_context: int | None  # one sequence; None: memory does not bind (windowed layers)
    model_max_context: int | None
    min_gpus: int | None  # fewest GPUs of this kind that hold `batch` sequences (None: > 4096)
    decode: DecodeStep | None  # at `batch`, when it fits
    decode_at_max: DecodeStep | None  # at max_sequences
    assumptions: tuple[str, ...]

    @property
    def weights_per_gpu(self) -> float:
        return self.weights_bytes / self.gpus

    @property
    def fits(self) -> bool:
        return self.needed_per_gpu <= self.usable_per_gpu

    @property
    def shortfall_per_gpu(self) -> float:
        return max(0.0, self.needed_per_gpu - self.usable_per_gpu)

    @property
    def kv_replication(self) -> float:
        """KV bytes stored over all GPUs ÷ one copy (1 = split without duplication)."""
        if not self.kv_per_sequence:
            return 1.0
        return self.kv_per_sequence_per_gpu * self.gpus / self.kv_per_sequence

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "gpu_name": self.gpu_name,
            "gpus": self.gpus,
            "context": self.context,
            "batch": self.batch,
            "kv_dtype": self.kv_dtype,
            "weight_format": self.weight_format,
            "fits": self.fits,
            "shortfall_bytes_per_gpu": self.shortfall_per_gpu,
            "shortfall_bytes": self.shortfall_per_gpu * self.gpus,
            "min_gpus": self.min_gpus,
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
            "decode": self.decode.to_dict() if self.decode else None,
            "decode_at_max_sequences": self.decode_at_max.to_dict() if self.decode_at_max else None,
            "assumptions": list(self.assumptions),
        }


def _needed(dep: Deployment, resident: float, batch: int, context: int) -> float:
    return resident / dep.gpus + batch * (dep.kv_per_gpu(context) + dep.state_per_gpu())


def fit(
    arch: Architecture,
    workload: Workload | None = None,
    gpus: int = 1,
    reserve: float = RESERVE_FRACTION,
    mtp: bool = False,
) -> Fit:
    """Memory verdict for ``workload.batch`` sequences at ``workload.context`` on ``gpus`` GPUs."""
    if not 0 <= reserve < 1:
        raise UsageError(f"--reserve must be in [0, 1), got {reserve}")
    wl = workload or Workload()
    dep = deployment(arch, wl, gpus)
    resident = dep.weights.bytes + (dep.weights.mtp_bytes if mtp else 0)
    usable = dep.device.memory_bytes * (1 - reserve)
    ctx, batch = wl.context, wl.batch
    per_seq = dep.kv_per_gpu(ctx) + dep.state_per_gpu()
    free = usable - resident / gpus
    if free < 0:
        max_seq: int | None = 0
    elif per_seq == 0:
        max_seq = None
    else:
        max_seq = int(free // per_seq)

    def one_fits(s: int) -> bool:
        return _needed(dep, resident, 1, s) <= usable

    if not one_fits(1):
        max_ctx: int | None = 0
    elif one_fits(CONTEXT_LIMIT):
        max_ctx = None
    else:
        over = first_true(lambda s: not one_fits(s), CONTEXT_LIMIT)
        max_ctx = (over or CONTEXT_LIMIT) - 1

    def fits_on(n: int) -> bool:
        other = Deployment(dep.arch, dep.params, dep.weights, wl, n, dep._flops)
        return _needed(other, resident, batch, ctx) <= usable

    min_gpus = next((n for n in range(1, 4097) if fits_on(n)), None)
    needed = _needed(dep, resident, batch, ctx)
    fits_now = needed <= usable
    kv_logical = kv_cost(arch, ctx, wl.kv_dtype).bytes_at_context
    return Fit(
        model=arch.name,
        gpu=dep.device.id,
        gpu_name=dep.device.name,
        gpus=gpus,
        context=ctx,
        batch=batch,
        kv_dtype=wl.kv_dtype,
        weight_format=dep.weights.detail,
        reserve_fraction=reserve,
        memory_per_gpu=dep.device.memory_bytes,
        usable_per_gpu=usable,
        weights_bytes=resident,
        mtp_included=mtp,
        kv_per_sequence=kv_logical,
        kv_per_sequence_per_gpu=dep.kv_per_gpu(ctx),
        state_per_sequence=state_bytes(arch, wl.kv_dtype),
        needed_per_gpu=needed,
        max_sequences=max_seq,
        max_context=max_ctx,
        model_max_context=arch.get("max_positions"),
        min_gpus=min_gpus,
        decode=decode_step(dep, batch, ctx) if fits_now else None,
        decode_at_max=decode_step(dep, max_seq, ctx) if max_seq else None,
        assumptions=tuple(fit_assumptions(dep, reserve, mtp)),
    )


def fit_assumptions(dep: Deployment, reserve: float, mtp: bool) -> list[str]:
    """What the verdict assumes, in words, with this model's particulars."""
    arch, n, wl = dep.arch, dep.gpus, dep.workload
    notes = [
        f"runtime reserve {reserve:.0%} of each GPU's memory for the CUDA context, activations and "
        "allocator slack (vLLM's default gpu_memory_utilization is 0.9)",
        f"GPU memory {dep.device.memory_bytes / 2**30:g} GiB, the preset's nominal capacity (vendor GB "
        "read as GiB); the driver keeps a few hundred MiB of it",
        f"one replica, tensor parallel over {n} GPU{'s' if n > 1 else ''}: weights split evenly",
        f"KV cache in {dtype_label(wl.kv_dtype)}, every sequence at the full context",
        f"weights as {dep.weights.detail}",
    ]
    if any(s.mixer == "mla" for s in arch.layers) and n > 1:
        notes.append(
            f"MLA's latent KV has no heads to split: every GPU holds the whole cache (×{n} in all); "
            "data-parallel attention would avoid that"
        )
    gs = {s.n_kv_heads or arch.get("n_kv_heads") for s in arch.layers if s.mixer == "attention"}
    for g in sorted(x for x in gs if x):
        if g < n:
            notes.append(f"{g} KV heads < {n} GPUs: each GPU holds one head, KV replicated ×{n / g:g}")
        elif g % n:
            notes.append(f"{g} KV heads do not divide over {n} GPUs: each holds {math.ceil(g / n)}")
    h = arch.get("n_heads") or 0
    if h and h % n:
        notes.append(f"{n} GPUs do not divide the {h} query heads; engines need them to")
    if state_bytes(arch, wl.kv_dtype):
        notes.append("recurrent (linear-attention / SSM) state priced at the KV dtype, split evenly")
    if dep.weights.mtp_bytes:
        notes.append(
            "MTP modules loaded beside the weights" if mtp else "MTP modules not loaded (add them with --mtp)"
        )
    notes.append(
        "decode bound per GPU: its share of the weights read plus its KV over HBM bandwidth, against "
        "its share of the FLOPs over the dense peak; ideal scaling, all-reduce time not counted"
    )
    return notes
