"""Deployment on N GPUs: does the model fit at a context, how many sequences, how fast.

Layout assumed: one replica, tensor parallel over all N GPUs, every weight split evenly
(1/N per GPU). The KV cache follows the heads: a softmax layer's g KV heads spread over N
GPUs with ceil(g/N) heads on each, so heads replicate when g < N (what vLLM does); MLA's
latent cache has no heads to split, so every GPU holds all of it. Recurrent state splits
evenly. A runtime reserve (``RESERVE_FRACTION`` of each GPU) is kept for the CUDA context,
activations and allocator slack. Decode time is the roofline bound of one GPU (its share
of the weights read, its KV, its share of the FLOPs), with ideal scaling: no
communication time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import UsageError
from ..cost.flops import FlopsCost, flops_cost
from ..cost.inventory.mtp import mtp_tensors
from ..cost.kv import KVCost, kv_cost, layer_kv_elements, layer_span
from ..cost.params import ParamCount, count
from ..cost.roofline import StepBound, decode_bytes, experts_touched
from ..cost.weights import WeightsCost, weights_cost
from ..cost.workload import GPU, Workload
from ..schema.arch import Architecture
from ..schema.precision import storage_bits

# vLLM's gpu_memory_utilization defaults to 0.9: the other 10% holds the CUDA context,
# activations of the largest forward and allocator fragmentation. The one place it is set.
RESERVE_FRACTION = 0.10
CONTEXT_LIMIT = 1 << 30  # searches stop here: beyond it memory does not bind
_NO_KV = KVCost("bfloat16", 0, 0, 1, 0, (), 0, 0)


@dataclass(frozen=True)
class Deployment:
    """A model priced once for a workload and a GPU count; evaluated at any (batch, context)."""

    arch: Architecture
    params: ParamCount
    weights: WeightsCost
    workload: Workload
    gpus: int = 1
    _flops: dict[int, FlopsCost] = field(default_factory=dict, repr=False, compare=False)

    @property
    def device(self) -> GPU:
        return self.workload.device

    @property
    def peak(self) -> int:
        return self.device.peak_for(self.workload.compute_dtype)

    @property
    def ridge(self) -> float:
        return self.peak / self.device.bandwidth

    def flops(self, context: int) -> FlopsCost:
        if context not in self._flops:
            self._flops[context] = flops_cost(self.arch, self.params, context)
        return self._flops[context]

    def kv_per_gpu(self, context: int) -> float:
        """KV bytes of one sequence at ``context`` held by each GPU (heads split, MLA whole)."""
        return kv_bytes_per_gpu(self.arch, context, self.workload.kv_dtype, self.gpus)

    def state_per_gpu(self) -> float:
        return state_bytes(self.arch, self.workload.kv_dtype) / self.gpus

    def weight_bytes_read(self, tokens: int) -> float:
        """Weight bytes read from HBM (all GPUs together) by one forward over ``tokens`` tokens."""
        return decode_bytes(self.arch, self.weights, _NO_KV, tokens)


def deployment(arch: Architecture, workload: Workload | None = None, gpus: int = 1) -> Deployment:
    """Price ``arch``'s weights once for ``workload`` on ``gpus`` GPUs."""
    if gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    wl = workload or Workload()
    params = count(arch)
    weights = weights_cost(arch, params, wl.weight_dtype, mtp_tensors(arch))
    if not weights.supported:
        raise UsageError(f"{arch.name}: {weights.detail}: weight bytes unknown, pass --dtype")
    return Deployment(arch, params, weights, wl, gpus)


def kv_share(arch: Architecture, layer_index: int, gpus: int) -> float:
    """Share of one layer's per-token KV each GPU holds under tensor parallelism."""
    layer = arch.layers[layer_index]
    if layer.mixer != "attention":
        return 1.0  # MLA latent (and anything without KV heads) is replicated
    g = layer.n_kv_heads or arch.get("n_kv_heads") or 1
    return math.ceil(g / gpus) / g


def kv_bytes_per_gpu(arch: Architecture, context: int, dtype: str, gpus: int) -> float:
    """KV bytes of one sequence at ``context`` on each of ``gpus`` GPUs."""
    b = storage_bits(dtype) / 8
    total = 0.0
    for i, layer in enumerate(arch.layers):
        elems = layer_kv_elements(arch, layer)
        if elems:
            total += elems * b * layer_span(layer, context) * kv_share(arch, i, gpus)
    return total


def state_bytes(arch: Architecture, dtype: str) -> int:
    """Fixed recurrent (linear-attention / SSM) state of one sequence."""
    return kv_cost(arch, 1, dtype).state_bytes_per_sequence


@dataclass(frozen=True)
class DecodeStep(StepBound):
    """One forward of ``batch`` sequences × ``tokens_per_sequence`` tokens, per GPU."""

    gpus: int
    batch: int
    context: int
    tokens_per_sequence: int
    weight_bytes: float  # per GPU: its share of the weights read this step
    kv_bytes: float  # per GPU: every sequence's KV at the context + recurrent state
    weight_flops: float  # per GPU
    attention_flops: float  # per GPU
    bandwidth: int
    peak: int
    experts_touched: float | None  # per MoE layer, expected

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes

    @property
    def flops(self) -> float:
        return self.weight_flops + self.attention_flops

    @property
    def memory_ms(self) -> float:
        return self.bytes / self.bandwidth * 1e3

    @property
    def compute_ms(self) -> float:
        return self.flops / self.peak * 1e3

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Tokens processed per second by the whole group (an upper bound)."""
        return self.batch * self.tokens_per_sequence / (self.step_ms / 1e3) if self.step_ms else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "batch": self.batch,
            "context": self.context,
            "tokens_per_sequence": self.tokens_per_sequence,
            "step_ms": self.step_ms,
            "bound": self.bound,
            "tokens_per_s": self.tokens_per_s,
            "memory_ms": self.memory_ms,
            "compute_ms": self.compute_ms,
            "bytes_per_gpu": self.bytes,
            "weight_bytes_per_gpu": self.weight_bytes,
            "kv_bytes_per_gpu": self.kv_bytes,
            "flops_per_gpu": self.flops,
            "weight_flops_per_gpu": self.weight_flops,
            "attention_flops_per_gpu": self.attention_flops,
            "intensity_flop_per_byte": self.intensity,
            "experts_touched_per_layer": self.experts_touched,
        }


def decode_step(
    dep: Deployment,
    batch: int,
    context: int,
    tokens_per_sequence: int = 1,
    with_kv: bool = True,
) -> DecodeStep:
    """Roofline bound of one step; ``with_kv=False`` counts the weights alone (bytes and FLOPs)."""
    tokens = batch * tokens_per_sequence
    fl = dep.flops(context)
    e, k = dep.arch.get("n_experts") or 0, dep.arch.get("top_k") or 0
    n = dep.gpus
    kv = batch * (dep.kv_per_gpu(context) + dep.state_per_gpu()) if with_kv else 0.0
    return DecodeStep(
        gpus=n,
        batch=batch,
        context=context,
        tokens_per_sequence=tokens_per_sequence,
        weight_bytes=dep.weight_bytes_read(tokens) / n,
        kv_bytes=kv,
        weight_flops=tokens * fl.weights_per_token / n,
        attention_flops=tokens * fl.attention_per_token / n if with_kv else 0.0,
        bandwidth=dep.device.bandwidth,
        peak=dep.peak,
        experts_touched=experts_touched(e, k, tokens) if e else None,
    )


def first_true(predicate: Callable[[int], bool], limit: int = 1 << 20) -> int | None:
    """Smallest x in [1, limit] with ``predicate(x)``, for a predicate that stays true once true."""
    hi = 1
    while not predicate(hi):
        if hi >= limit:
            return None
        hi = min(hi * 2, limit)
    lo = hi // 2 + 1 if hi > 1 else 1
    while lo < hi:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def compute_bound_batch(
    dep: Deployment, context: int, tokens_per_sequence: int = 1, with_kv: bool = True
) -> int | None:
    """Smallest batch whose step is compute-bound (None: never, within 2^20 sequences)."""
    return first_true(lambda b: decode_step(dep, b, context, tokens_per_sequence, with_kv).bound == "compute")
