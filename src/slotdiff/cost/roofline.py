"""Roofline time bounds: decode step and prefill, max(bytes / bandwidth, FLOPs / peak).

The decode step is ``cost.step``'s model on the workload's layout (what each GPU reads and
computes, communication, pipeline stages); here it gets the searches the report prints (the
batch from which it turns compute-bound). Prefill reads every weight once and writes the KV.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schema.arch import Architecture
from .breakdown import TOWERS
from .deployment import Deployment
from .flops import FlopsCost
from .kv import KVCost
from .step import Step, compute_bound_batch, step
from .touched import experts_touched
from .weights import WeightsCost
from .workload import GPU

__all__ = ["DecodeCost", "PrefillCost", "StepBound", "decode_cost", "experts_touched", "prefill_cost"]


class StepBound:
    """The roofline verdict shared by every step cost: the slower of reading and computing.

    A subclass provides ``memory_ms`` and ``compute_ms`` (as fields or properties).
    """

    memory_ms: float
    compute_ms: float

    @property
    def step_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_ms > self.memory_ms else "memory"


@dataclass(frozen=True)
class DecodeCost:
    """One decode step at (batch, context) on the workload's layout: ``cost.step``'s model,
    per GPU of the busiest stage, with the batches at which it turns compute-bound."""

    step: Step
    ridge: float  # FLOP/byte where the GPU turns compute-bound
    compute_bound_batch_weights: int | None  # weights only, KV ignored
    compute_bound_batch: int | None  # with KV at this context; None = never within 2^20

    @property
    def batch(self) -> int:
        return self.step.batch

    @property
    def context(self) -> int:
        return self.step.context

    @property
    def bytes(self) -> float:
        return self.step.bytes

    @property
    def flops(self) -> float:
        return self.step.flops

    @property
    def memory_ms(self) -> float:
        return self.step.memory_ms

    @property
    def compute_ms(self) -> float:
        return self.step.compute_ms

    @property
    def comm_ms(self) -> float:
        return self.step.comm_ms

    @property
    def step_ms(self) -> float:
        return self.step.step_ms

    @property
    def bound(self) -> str:
        return self.step.bound

    @property
    def intensity(self) -> float:
        return self.step.intensity

    @property
    def experts_touched(self) -> float | None:
        return self.step.experts_touched

    @property
    def tokens_per_s(self) -> float:
        return self.step.tokens_per_s

    def to_dict(self) -> dict[str, object]:
        return {
            **self.step.to_dict(),
            "bytes": self.bytes,
            "flops": self.flops,
            "intensity": self.intensity,
            "ridge": self.ridge,
            "compute_bound_batch_weights_only": self.compute_bound_batch_weights,
            "compute_bound_batch": self.compute_bound_batch,
        }


def decode_cost(dep: Deployment, batch: int, context: int, searches: bool = True) -> DecodeCost:
    """One decode step of ``dep`` (the one step model), with the compute-bound batch searches
    unless ``searches`` is False (a counterfactual's price does not use them)."""
    return DecodeCost(
        step(dep, batch, context),
        dep.ridge,
        compute_bound_batch(dep, context, with_kv=False) if searches else None,
        compute_bound_batch(dep, context) if searches else None,
    )


@dataclass(frozen=True)
class PrefillCost:
    """Prefill of one prompt of ``tokens`` tokens (causal FLOPs)."""

    tokens: int
    flops: int
    bytes: float
    compute_ms: float
    memory_ms: float

    @property
    def time_ms(self) -> float:
        return max(self.compute_ms, self.memory_ms)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_ms >= self.memory_ms else "memory"

    def to_dict(self) -> dict[str, object]:
        return {
            "tokens": self.tokens,
            "time_ms": self.time_ms,
            "bound": self.bound,
            "flops": self.flops,
            "bytes": self.bytes,
            "compute_ms": self.compute_ms,
            "memory_ms": self.memory_ms,
        }


def prefill_cost(
    arch: Architecture,
    weights: WeightsCost,
    kv: KVCost,
    flops: FlopsCost,
    gpu: GPU,
    peak: float,
    bandwidth: float | None = None,
) -> PrefillCost:
    """Prefilling one ``context``-token prompt: weights read once, KV written; at the
    effective ``peak`` and ``bandwidth`` (a lower bound when both are the GPU's peaks)."""
    # A long prompt touches every expert, so all weights are read once.
    read = weights.bytes - weights.position_bytes
    read -= 0 if arch.get("tie_embeddings") else weights.embedding_bytes
    read -= sum(b for slot, b in weights.by_part if slot in TOWERS)  # a text prompt runs no encoder
    nbytes = read + kv.bytes_at_context + kv.state_bytes_per_sequence
    return PrefillCost(
        flops.context,
        flops.prefill,
        nbytes,
        flops.prefill / peak * 1e3,
        nbytes / (bandwidth or gpu.bandwidth) * 1e3,
    )
