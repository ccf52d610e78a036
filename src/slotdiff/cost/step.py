"""One forward step on a parallel layout: the decode model every command prices with.

Per pipeline stage and per GPU, for one micro-batch: the slower of reading (its weights, the
routed experts the batch touches, every sequence's KV and state) over HBM bandwidth and
computing (its FLOPs) over the dense peak, both at --mbu / --mfu, plus its communication:
two all-reduces a layer over the TP group, the EP all-to-all's dispatch and combine per MoE
layer, each costing the link's latency + bytes / bandwidth (``cost.comm``).

Pipeline stages run in turn for one micro-batch: a step is the sum of the stage times plus a
hop between consecutive stages. With more sequences in flight than one, the batch is split
into min(batch, PP) micro-batches that overlap in the pipe: a round then takes the longer of
one micro-batch's trip through the stages and the busiest stage's time for all of them
(each stage reads its weights once per micro-batch). The step time is the time between two
tokens of one sequence (the inter-token latency); tokens/s is the batch over it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import comm
from .comm import Traffic
from .deployment import Deployment, StageCost
from .touched import experts_touched

ACTIVATION_BYTES = 2  # hidden states cross the links in bf16


@dataclass(frozen=True)
class StageTime:
    """One stage's GPU on one micro-batch."""

    weight_bytes: float
    kv_bytes: float
    weight_flops: float
    attention_flops: float
    memory_ms: float
    compute_ms: float
    traffic: Traffic

    @property
    def comm_ms(self) -> float:
        return self.traffic.seconds * 1e3

    @property
    def ms(self) -> float:
        return max(self.memory_ms, self.compute_ms) + self.comm_ms


@dataclass(frozen=True)
class Step:
    """One step of ``batch`` sequences × ``tokens_per_sequence`` tokens on the layout."""

    gpus: int
    pp: int
    batch: int
    context: int
    tokens_per_sequence: int
    micro_batches: int
    stages: tuple[StageTime, ...]
    hops: Traffic  # one micro-batch's PP − 1 hops between consecutive stages
    bandwidth: float  # effective (× --mbu)
    peak: float  # effective (× --mfu)
    experts_touched: float | None  # per MoE layer, expected, for one micro-batch

    @property
    def hops_ms(self) -> float:
        return self.hops.seconds * 1e3

    @property
    def traversal_ms(self) -> float:
        """One micro-batch through every stage in turn."""
        return sum(s.ms for s in self.stages) + self.hops_ms

    @property
    def busiest_ms(self) -> float:
        """The busiest stage's time for every micro-batch of the round."""
        return self.micro_batches * max(s.ms for s in self.stages)

    @property
    def overlapped(self) -> bool:
        """True when micro-batches fill the pipe (the busiest stage binds, not one trip)."""
        return self.pp > 1 and self.micro_batches > 1 and self.busiest_ms > self.traversal_ms

    @property
    def pipeline(self) -> str:
        if self.pp == 1:
            return "none"
        return "overlapped" if self.overlapped else "sequential"

    @property
    def step_ms(self) -> float:
        return max(self.traversal_ms, self.busiest_ms)

    @property
    def _path(self) -> tuple[StageTime, ...]:
        """The stages on the critical path, once each per micro-batch they serve."""
        if self.overlapped:
            return (max(self.stages, key=lambda s: s.ms),) * self.micro_batches
        return self.stages

    @property
    def memory_ms(self) -> float:
        return sum(s.memory_ms for s in self._path)

    @property
    def compute_ms(self) -> float:
        return sum(s.compute_ms for s in self._path)

    @property
    def comm_ms(self) -> float:
        """Collectives on the critical path, and the pipeline hops."""
        hops = 0.0 if self.overlapped else self.hops_ms
        return sum(s.comm_ms for s in self._path) + hops

    @property
    def traffic(self) -> Traffic:
        out = comm.NONE
        for s in self._path:
            out = out + s.traffic
        return out if self.overlapped else out + self.hops

    @property
    def bound(self) -> str:
        """Which roofline side binds (communication is added to either, and reported apart)."""
        return "compute" if self.compute_ms > self.memory_ms else "memory"

    # Per GPU of the busiest stage, over the whole round (every micro-batch it serves).
    @property
    def _busiest(self) -> StageTime:
        return max(self.stages, key=lambda s: s.ms)

    @property
    def weight_bytes(self) -> float:
        return self._busiest.weight_bytes * self.micro_batches

    @property
    def kv_bytes(self) -> float:
        return self._busiest.kv_bytes * self.micro_batches

    @property
    def weight_flops(self) -> float:
        return self._busiest.weight_flops * self.micro_batches

    @property
    def attention_flops(self) -> float:
        return self._busiest.attention_flops * self.micro_batches

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes

    @property
    def flops(self) -> float:
        return self.weight_flops + self.attention_flops

    @property
    def comm_bytes(self) -> float:
        return self.traffic.bytes

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0

    @property
    def tokens_per_s(self) -> float:
        """Tokens the whole group produces per second (batch × tokens per sequence / step)."""
        return self.batch * self.tokens_per_sequence / (self.step_ms / 1e3) if self.step_ms else 0.0

    @property
    def tokens_per_s_per_sequence(self) -> float:
        return self.tokens_per_sequence / (self.step_ms / 1e3) if self.step_ms else 0.0

    def to_dict(self) -> dict[str, Any]:
        t = self.traffic
        return {
            "gpus": self.gpus,
            "batch": self.batch,
            "context": self.context,
            "tokens_per_sequence": self.tokens_per_sequence,
            "step_ms": self.step_ms,
            "bound": self.bound,
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_sequence": self.tokens_per_s_per_sequence,
            "tokens_per_s_per_gpu": self.tokens_per_s / self.gpus,
            "memory_ms": self.memory_ms,
            "compute_ms": self.compute_ms,
            "communication_ms": self.comm_ms,
            "communication_latency_ms": t.latency_s * 1e3,
            "communication_transfer_ms": t.transfer_s * 1e3,
            "collectives": t.count,
            "communication_bytes_per_gpu": t.bytes,
            "pipeline": {
                "stages": self.pp,
                "micro_batches": self.micro_batches,
                "mode": self.pipeline,
                "stage_ms": [s.ms for s in self.stages],
                "hops_ms": self.hops_ms,
                "traversal_ms": self.traversal_ms,
                "busiest_stage_ms": self.busiest_ms,
            },
            "bytes_per_gpu": self.bytes,
            "weight_bytes_per_gpu": self.weight_bytes,
            "kv_bytes_per_gpu": self.kv_bytes,
            "flops_per_gpu": self.flops,
            "weight_flops_per_gpu": self.weight_flops,
            "attention_flops_per_gpu": self.attention_flops,
            "intensity_flop_per_byte": self.intensity,
            "experts_touched_per_layer": self.experts_touched,
        }


@dataclass(frozen=True)
class Work:
    """One micro-batch's work on one replica: tokens, sequences read, attention share."""

    tokens: int  # query tokens of one data-parallel rank
    sequences: int  # sequences whose KV that rank reads
    expert_tokens: int  # tokens the experts on one GPU see (all DP ranks under EP)
    kv_scale: float = 1.0  # KV and state read per sequence, × the stage's at the context
    attention_scale: float = 1.0  # attention FLOPs, × tokens × the stage's per token


def loads(dep: Deployment, stage: StageCost, work: Work, with_kv: bool) -> tuple[float, float, float, float]:
    """One stage's GPU on one micro-batch: (weight bytes, KV bytes, weight FLOPs, attention FLOPs)."""
    arch = dep.arch
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    touched = experts_touched(e, k, work.expert_tokens) / e if e else 0.0
    weights = stage.dense_bytes + stage.expert_bytes * touched
    kv = work.sequences * (stage.kv_bytes + stage.state_bytes) * work.kv_scale if with_kv else 0.0
    w_flops = work.tokens * stage.dense_flops + work.expert_tokens * stage.expert_flops
    a_flops = work.tokens * stage.attention_flops * work.attention_scale if with_kv else 0.0
    return weights, kv, w_flops, a_flops


def stage_time(dep: Deployment, stage: StageCost, work: Work, with_kv: bool = True) -> StageTime:
    """One stage's GPU on one micro-batch (``cost.step``'s model, docstring above)."""
    arch, lay = dep.arch, dep.layout
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    d = arch.get("d_model") or 0
    weights, kv, w_flops, a_flops = loads(dep, stage, work, with_kv)
    traffic = comm.NONE
    if lay.tp > 1:
        message = work.tokens * d * ACTIVATION_BYTES
        traffic = comm.allreduce(comm.link_for(dep.device, lay.tp), lay.tp, message, 2 * stage.layers)
    if lay.ep and lay.ep_size > 1 and e and stage.moe_layers:
        per_gpu = work.expert_tokens / lay.ep_size
        sent = per_gpu * k * (lay.ep_size - 1) / lay.ep_size * d * ACTIVATION_BYTES
        link = comm.link_for(dep.device, lay.ep_size)
        traffic = traffic + comm.all_to_all(link, lay.ep_size, sent, 2 * stage.moe_layers)
    return StageTime(
        weight_bytes=weights,
        kv_bytes=kv,
        weight_flops=w_flops,
        attention_flops=a_flops,
        memory_ms=(weights + kv) / dep.bandwidth * 1e3,
        compute_ms=(w_flops + a_flops) / dep.peak * 1e3,
        traffic=traffic,
    )


def hops(dep: Deployment, tokens: int) -> Traffic:
    """One micro-batch's hidden states passed down the PP − 1 stage boundaries: inside the
    scale-up domain over its link, the boundaries between nodes over InfiniBand."""
    lay, gpu = dep.layout, dep.device
    if lay.pp <= 1:
        return comm.NONE
    message = tokens * (dep.arch.get("d_model") or 0) * ACTIVATION_BYTES
    stages_per_node = gpu.domain // lay.tp if lay.tp <= gpu.domain else 0
    crossing = lay.pp - 1 if not stages_per_node else math.ceil(lay.pp / stages_per_node) - 1
    inside = lay.pp - 1 - crossing
    near = comm.send(comm.link_for(gpu, 2), message, inside)
    return near + comm.send(comm.link_for(gpu, gpu.domain + 1), message, crossing)


def _work(dep: Deployment, batch: int, tokens_per_sequence: int) -> tuple[int, int, Work]:
    """(micro-batches, tokens of the largest, one rank's Work) of ``batch`` sequences."""
    lay = dep.layout
    micro = max(1, min(batch, lay.pp))
    seqs = math.ceil(batch / micro)  # the largest micro-batch
    tokens = seqs * tokens_per_sequence
    rank_seqs = math.ceil(seqs / lay.dp)
    rank_tokens = rank_seqs * tokens_per_sequence
    return micro, tokens, Work(rank_tokens, rank_seqs, tokens if lay.ep else rank_tokens)


def step(
    dep: Deployment,
    batch: int,
    context: int,
    tokens_per_sequence: int = 1,
    with_kv: bool = True,
) -> Step:
    """One step of ``batch`` sequences at ``context``, ``tokens_per_sequence`` tokens each;
    ``with_kv=False`` counts the weights alone (bytes and FLOPs)."""
    micro, tokens, work = _work(dep, batch, tokens_per_sequence)
    times = tuple(stage_time(dep, s, work, with_kv) for s in dep.stages(context))
    return assemble(
        dep, times, batch, context, micro, hops(dep, tokens), work.expert_tokens, tokens_per_sequence
    )


def assemble(
    dep: Deployment,
    times: tuple[StageTime, ...],
    batch: int,
    context: int,
    micro: int,
    hop: Traffic,
    expert_tokens: int,
    tokens_per_sequence: int = 1,
) -> Step:
    """The Step of these stage times on ``dep``'s layout (``micro`` micro-batches)."""
    e, k = dep.arch.get("n_experts") or 0, dep.arch.get("top_k") or 0
    return Step(
        gpus=dep.gpus,
        pp=len(times),
        batch=batch,
        context=context,
        tokens_per_sequence=tokens_per_sequence,
        micro_batches=micro,
        stages=times,
        hops=hop,
        bandwidth=dep.bandwidth,
        peak=dep.peak,
        experts_touched=experts_touched(e, k, expert_tokens) if e else None,
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
    """Smallest batch whose step is compute-bound (None: never, within 2^20 sequences); on one
    stage the step's sides are that stage's, so only its reads and FLOPs are computed."""
    stages, peak, bandwidth = dep.stages(context), dep.peak, dep.bandwidth

    def compute(b: int) -> bool:
        if len(stages) == 1:
            w, kv, wf, af = loads(dep, stages[0], _work(dep, b, tokens_per_sequence)[2], with_kv)
            return (wf + af) / peak * 1e3 > (w + kv) / bandwidth * 1e3
        s = step(dep, b, context, tokens_per_sequence, with_kv)
        return s.compute_ms > s.memory_ms

    return first_true(compute)


def layout_notes(dep: Deployment) -> list[str]:
    """What the step model assumes on this layout, in words (one line per mechanism used)."""
    lay, gpu = dep.layout, dep.device
    notes = []
    if lay.gpus > 1 or lay.pp > 1:
        notes.append(
            f"layout {lay.label()} on {lay.gpus} × {gpu.id}: each GPU reads its share of the weights and "
            "of every sequence's KV (cost/layout.py); the step is per GPU"
        )
    if lay.pp > 1:
        notes.append(
            f"pipeline: {lay.pp} stages run in turn for one micro-batch (the step is the sum of the stage "
            f"times plus {lay.pp - 1} hops); with more sequences in flight the batch splits into "
            f"min(batch, {lay.pp}) micro-batches that overlap, and a round takes the longer of one trip "
            "and the busiest stage's time for all of them (it reads its weights once per micro-batch)"
        )
    groups = [("TP all-reduce", lay.tp)] if lay.tp > 1 else []
    if lay.ep and lay.ep_size > 1:
        groups.append(("EP all-to-all", lay.ep_size))
    for what, n in groups:
        link = comm.link_for(gpu, n)
        if link is None:
            continue
        where = "crossing nodes" if n > gpu.domain else f"inside the {gpu.domain}-GPU domain"
        notes.append(
            f"{what} over {n} GPUs on {link.name} ({where}): {link.allreduce_latency_s(n) * 1e6:.1f} µs "
            f"latency each (measured, schemas/gpus.json) + bytes at {link.bytes_per_s / 1e9:,.0f} GB/s, "
            "not overlapped with compute"
        )
    return notes
