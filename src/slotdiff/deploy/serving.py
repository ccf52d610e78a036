"""A deployment on N GPUs of a parallel layout, and one decode step's bound on it.

The layout (``cost.layout``) decides what each GPU holds: its share of the weights (TP
splits them, PP gives each stage its layers, EP spreads the routed experts), its share of
each sequence's KV (heads split over TP and replicated once TP exceeds them; MLA's latent
whole on every TP rank; data-parallel attention keeps each sequence on one rank). The
decode step per GPU is the roofline bound of what it reads and computes, at the precision
the checkpoint's quantization runs in (``cost.compute``), scaled by ``--mbu`` / ``--mfu``,
plus the communication the layout needs over the GPU's scale-up link (TP all-reduces, EP
all-to-all), counted without overlap. With PP the step is a pipeline full of micro-batches:
throughput, each stage reading only its share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..core.errors import UsageError
from ..cost.compute import Precision, compute_precision, explicit_precision
from ..cost.feasibility import RESERVE_FRACTION, Feasibility, feasibility
from ..cost.flops import FlopsCost, flops_cost
from ..cost.gpus import GPU
from ..cost.inventory.mtp import mtp_tensors
from ..cost.kv import KVCost, kv_cost
from ..cost.layout import Layout, kv_heads_of, kv_share
from ..cost.memory import MemoryPlan
from ..cost.params import ParamCount, count
from ..cost.roofline import StepBound, decode_bytes, experts_touched
from ..cost.weights import WeightsCost, effective_format, weights_cost
from ..cost.workload import Workload
from ..schema.arch import Architecture
from ..schema.precision import storage_bits

__all__ = ["RESERVE_FRACTION", "DecodeStep", "Deployment", "decode_step", "deployment", "kv_share"]

CONTEXT_LIMIT = 1 << 30  # searches stop here: beyond it memory does not bind
_NO_KV = KVCost("bfloat16", 0, 0, 1, 0, (), 0, 0)
ACTIVATION_BYTES = 2  # hidden states cross the link in bf16


@dataclass(frozen=True)
class Deployment:
    """A model priced once for a workload and a layout; evaluated at any (batch, context)."""

    arch: Architecture
    params: ParamCount
    weights: WeightsCost
    workload: Workload
    layout: Layout = field(default_factory=Layout)
    _flops: dict[int, FlopsCost] = field(default_factory=dict, repr=False, compare=False)
    _kv: dict[int, KVCost] = field(default_factory=dict, repr=False, compare=False)

    @property
    def gpus(self) -> int:
        return self.layout.gpus

    @property
    def device(self) -> GPU:
        return self.workload.device

    @cached_property
    def precision(self) -> Precision:
        wl = self.workload
        if wl.compute_dtype:
            return explicit_precision(wl.compute_dtype, self.device)
        return compute_precision(self.arch, wl.weight_dtype, self.device)

    @property
    def peak(self) -> float:
        """Effective dense peak per GPU: the precision's peak × --mfu."""
        return self.precision.peak * self.workload.mfu

    @property
    def bandwidth(self) -> float:
        return self.device.bandwidth * self.workload.mbu

    @property
    def ridge(self) -> float:
        return self.peak / self.bandwidth

    @cached_property
    def plan(self) -> MemoryPlan:
        fmt = effective_format(self.arch, self.workload.weight_dtype)[0]
        return MemoryPlan(self.arch, fmt, self.workload.kv_dtype)

    @property
    def usable(self) -> float:
        return self.device.memory_bytes * (1 - RESERVE_FRACTION)

    def fits(self, batch: int, context: int) -> bool:
        """Weights + ``batch`` sequences at ``context`` fit each GPU (10% reserve kept)."""
        return self.plan.need(self.layout, batch, context, self.usable).fits

    def max_batch(self, context: int) -> int | None:
        """Most sequences at ``context`` that fit (None: sequences take no memory)."""
        return self.plan.need(self.layout, 1, context, self.usable).max_batch

    def feasibility(self, batch: int, context: int, search: bool = True) -> Feasibility:
        return feasibility(
            self.plan, self.device, self.gpus, batch, context, layout=self.layout, search=search
        )

    def flops(self, context: int) -> FlopsCost:
        if context not in self._flops:
            self._flops[context] = flops_cost(self.arch, self.params, context)
        return self._flops[context]

    def kv(self, context: int) -> KVCost:
        if context not in self._kv:
            self._kv[context] = kv_cost(self.arch, context, self.workload.kv_dtype)
        return self._kv[context]

    def kv_share(self) -> float:
        """Share of each sequence's softmax KV one GPU reads (heads over TP; MLA whole)."""
        gs = kv_heads_of(self.arch)
        if not gs:
            return 1.0
        return max(kv_share(g, self.layout.tp) for g in gs)

    def kv_read_per_gpu(self, context: int) -> float:
        """KV bytes of one sequence one GPU reads per decode step (its stage, its heads)."""
        kv = self.kv(context)
        mla = sum(1 for s in self.arch.layers if s.mixer == "mla")
        softmax = max(1, kv.attention_layers)
        share = (mla + (softmax - mla) * self.kv_share()) / softmax if kv.attention_layers else 1.0
        state = kv.state_bytes_per_sequence / self.layout.tp
        return (kv.read_at_context * share + state) / self.layout.pp

    def weight_bytes_read(self, tokens: int) -> float:
        """Weight bytes read from HBM (all GPUs together) by one forward over ``tokens`` tokens."""
        return decode_bytes(self.arch, self.weights, _NO_KV, tokens)


def deployment(
    arch: Architecture, workload: Workload | None = None, gpus: int = 1, layout: Layout | None = None
) -> Deployment:
    """Price ``arch``'s weights once for ``workload`` on ``layout`` (default: TP over ``gpus``)."""
    if gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    wl = workload or Workload()
    params = count(arch)
    weights = weights_cost(arch, params, wl.weight_dtype, mtp_tensors(arch))
    if not weights.supported:
        raise UsageError(f"{arch.name}: {weights.detail}: weight bytes unknown, pass --dtype")
    return Deployment(arch, params, weights, wl, layout or Layout(tp=gpus))


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
    bandwidth: float  # effective (× --mbu)
    peak: float  # effective (× --mfu)
    experts_touched: float | None  # per MoE layer, expected
    comm_bytes: float = 0.0  # per GPU, sent over the link this step (all-reduce + all-to-all)
    link_bandwidth: float = 0.0  # one direction, bytes/s

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
    def comm_ms(self) -> float:
        return self.comm_bytes / self.link_bandwidth * 1e3 if self.link_bandwidth and self.comm_bytes else 0.0

    @property
    def step_ms(self) -> float:
        return max(self.memory_ms, self.compute_ms) + self.comm_ms

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
            "communication_ms": self.comm_ms,
            "communication_bytes_per_gpu": self.comm_bytes,
            "bytes_per_gpu": self.bytes,
            "weight_bytes_per_gpu": self.weight_bytes,
            "kv_bytes_per_gpu": self.kv_bytes,
            "flops_per_gpu": self.flops,
            "weight_flops_per_gpu": self.weight_flops,
            "attention_flops_per_gpu": self.attention_flops,
            "intensity_flop_per_byte": self.intensity,
            "experts_touched_per_layer": self.experts_touched,
        }


def comm_bytes(dep: Deployment, tokens: int) -> float:
    """Bytes one GPU sends per step: two ring all-reduces per layer of its TP group
    (2·(TP−1)/TP of tokens × d each) and, under EP, the all-to-all of its tokens' hidden
    vectors to the k experts' GPUs and back (k·(EP−1)/EP copies each way)."""
    lay, arch = dep.layout, dep.arch
    d = arch.get("d_model") or 0
    layers = arch.n_layers / lay.pp
    per_rank_tokens = tokens / lay.dp
    out = 0.0
    if lay.tp > 1:
        out += 2 * layers * 2 * (lay.tp - 1) / lay.tp * per_rank_tokens * d * ACTIVATION_BYTES
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    if lay.ep and lay.ep_size > 1 and e:
        moe_layers = sum(1 for s in arch.layers if s.ffn == "moe") / lay.pp
        per_gpu_tokens = tokens / lay.ep_size
        out += 2 * moe_layers * per_gpu_tokens * k * (lay.ep_size - 1) / lay.ep_size * d * ACTIVATION_BYTES
    return out


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
    lay = dep.layout
    kv = -(-batch // lay.dp) * dep.kv_read_per_gpu(context) if with_kv else 0.0
    if lay.dp > 1 and not lay.ep:  # replicas: each reads its own copy for its share of the batch
        weights = dep.weight_bytes_read(-(-tokens // lay.dp)) / (lay.tp * lay.pp)
    else:
        weights = dep.weight_bytes_read(tokens) / n
    return DecodeStep(
        gpus=n,
        batch=batch,
        context=context,
        tokens_per_sequence=tokens_per_sequence,
        weight_bytes=weights,
        kv_bytes=kv,
        weight_flops=tokens * fl.weights_per_token / n,
        attention_flops=tokens * fl.attention_per_token / n if with_kv else 0.0,
        bandwidth=dep.bandwidth,
        peak=dep.peak,
        experts_touched=experts_touched(e, k, tokens) if e else None,
        comm_bytes=comm_bytes(dep, tokens) if n > 1 else 0.0,
        link_bandwidth=dep.device.link_bandwidth,
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


def kv_dtype_bytes(dtype: str) -> float:
    return storage_bits(dtype) / 8
