"""Roofline time bounds: decode step and prefill, max(bytes / bandwidth, FLOPs / peak).

Decode at batch B and context s reads every weight once per step (the embedding table is a
gather and is skipped unless the head is tied to it; for MoE the expected union of experts
the batch touches, E·[1 − (1 − k/E)^B] per layer, assuming independent uniform routing)
plus each sequence's KV cache and recurrent state. Both sides are reported with the bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..schema.arch import Architecture
from .flops import FlopsCost
from .kv import KVCost
from .weights import WeightsCost
from .workload import GPU


def experts_touched(n_experts: int, top_k: int, batch: int) -> float:
    """Expected distinct experts a batch of ``batch`` tokens routes to, per MoE layer."""
    if n_experts <= 0:
        return 0.0
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** batch)


def decode_bytes_at(arch: Architecture, weights: WeightsCost, kv: KVCost) -> Callable[[int], float]:
    """Bytes read in one decode step as a function of the batch (weights once + each
    sequence's KV/state); the batch searches below call it dozens of times."""
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    fixed = weights.bytes - weights.routed_bytes - weights.position_bytes
    if not arch.get("tie_embeddings"):
        fixed -= weights.embedding_bytes
    routed = weights.routed_bytes
    per_sequence = kv.read_at_context + kv.state_bytes_per_sequence

    def at(batch: int) -> float:
        read = fixed
        if e:
            read += routed * experts_touched(e, k, batch) / e
        return read + batch * per_sequence

    return at


def decode_bytes(arch: Architecture, weights: WeightsCost, kv: KVCost, batch: int) -> float:
    """Bytes read in one decode step at ``batch`` (weights once + each sequence's KV/state)."""
    return decode_bytes_at(arch, weights, kv)(batch)


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
class DecodeCost(StepBound):
    """One decode step at (batch, context) on a GPU."""

    batch: int
    context: int
    bytes: float
    flops: int
    memory_ms: float
    compute_ms: float
    ridge: float  # FLOP/byte where the GPU turns compute-bound
    intensity: float  # this step's FLOP/byte
    experts_touched: float | None
    compute_bound_batch_weights: int | None  # weights only, KV ignored
    compute_bound_batch: int | None  # with KV at this context; None = never within 2^20

    @property
    def tokens_per_s(self) -> float:
        return self.batch / (self.step_ms / 1e3) if self.step_ms else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "batch": self.batch,
            "context": self.context,
            "step_ms": self.step_ms,
            "bound": self.bound,
            "tokens_per_s": self.tokens_per_s,
            "memory_ms": self.memory_ms,
            "compute_ms": self.compute_ms,
            "bytes": self.bytes,
            "flops": self.flops,
            "intensity": self.intensity,
            "ridge": self.ridge,
            "experts_touched_per_layer": self.experts_touched,
            "compute_bound_batch_weights_only": self.compute_bound_batch_weights,
            "compute_bound_batch": self.compute_bound_batch,
        }


def _first_batch(predicate: object, limit: int = 1 << 20) -> int | None:
    """Smallest B in [1, limit] with predicate(B) true, assuming it stays true (binary search)."""
    hi = 1
    while not predicate(hi):  # type: ignore[operator]
        hi *= 2
        if hi > limit:
            return None
    lo = hi // 2 + 1 if hi > 1 else 1
    while lo < hi:
        mid = (lo + hi) // 2
        if predicate(mid):  # type: ignore[operator]
            hi = mid
        else:
            lo = mid + 1
    return hi


def decode_cost(
    arch: Architecture,
    weights: WeightsCost,
    kv: KVCost,
    flops: FlopsCost,
    gpu: GPU,
    peak: float,
    batch: int,
    searches: bool = True,
    bandwidth: float | None = None,
) -> DecodeCost:
    """Roofline bound of one decode step; ``searches=False`` leaves the compute-bound
    batches out (None), which a counterfactual's price does not use. ``peak`` and
    ``bandwidth`` are the effective ones (after --mfu / --mbu; bandwidth defaults to the
    GPU's peak)."""
    bytes_at = decode_bytes_at(arch, weights, kv)
    nbytes = bytes_at(batch)
    nflops = batch * flops.per_token
    bw = bandwidth or gpu.bandwidth
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    per_sequence = kv.read_at_context + kv.state_bytes_per_sequence
    w_flops, all_flops = flops.weights_per_token, flops.per_token

    def weights_only(b: int) -> bool:
        return b * w_flops / peak >= (bytes_at(b) - b * per_sequence) / bw

    def with_kv(b: int) -> bool:
        return b * all_flops / peak >= bytes_at(b) / bw

    return DecodeCost(
        batch=batch,
        context=kv.context,
        bytes=nbytes,
        flops=nflops,
        memory_ms=nbytes / bw * 1e3,
        compute_ms=nflops / peak * 1e3,
        ridge=peak / bw,
        intensity=nflops / nbytes if nbytes else 0.0,
        experts_touched=experts_touched(e, k, batch) if e else None,
        compute_bound_batch_weights=_first_batch(weights_only) if searches else None,
        compute_bound_batch=_first_batch(with_kv) if searches else None,
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
    nbytes = read + kv.bytes_at_context + kv.state_bytes_per_sequence
    return PrefillCost(
        flops.context,
        flops.prefill,
        nbytes,
        flops.prefill / peak * 1e3,
        nbytes / (bandwidth or gpu.bandwidth) * 1e3,
    )
