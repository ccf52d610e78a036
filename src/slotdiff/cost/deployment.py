"""A model priced once for a workload on a parallel layout, and what each pipeline stage's GPU
reads and computes per token: the per-GPU inputs of the one step model (``cost.step``).

Per stage and per GPU (its TP share, its experts under EP): the weights one forward reads
(the text decoder only: no gathered embedding or position table, no vision or audio tower,
no MTP module unless speculating; the tied table once, as the head), the routed-expert
weights it holds (read in proportion to the experts a batch touches), one sequence's KV and
recurrent state at the context (its heads; MLA's latent whole), and the FLOPs per token of
its weights and of attention. Summed over the stages of a one-GPU layout they equal the cost
pass's totals.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from ..core.errors import UsageError
from ..schema.arch import Architecture, with_layers
from .breakdown import SELECT
from .compute import Precision, compute_precision, explicit_precision
from .feasibility import RESERVE_FRACTION, Feasibility, feasibility
from .flops import FlopsCost, attention_flops, flops_cost
from .gpus import GPU
from .inventory.mtp import mtp_tensors
from .kv import KVCost, kv_cost
from .layout import Layout, stage_sizes
from .memory import MemoryPlan
from .params import ParamCount, count
from .touched import experts_touched
from .weights import WeightsCost, effective_format, weights_cost
from .workload import Workload


@dataclass(frozen=True)
class StageCost:
    """One pipeline stage, per GPU: what a step reads and computes, before the batch."""

    layers: int
    moe_layers: int
    dense_bytes: float  # weights read every step, outside routed experts
    expert_bytes: float  # routed experts this GPU holds (read as the batch touches them)
    kv_bytes: float  # one sequence's KV read at the context
    state_bytes: float  # one sequence's recurrent state
    dense_flops: float  # per token
    expert_flops: float  # per token routed to it (top_k of n_experts, this GPU's share)
    attention_flops: float  # per token at the context


@dataclass(frozen=True)
class Deployment:
    """A model priced once for a workload and a layout; evaluated at any (batch, context)."""

    arch: Architecture
    params: ParamCount
    weights: WeightsCost
    workload: Workload
    layout: Layout = field(default_factory=Layout)
    # caches (fresh in every instance: ``replace(dep, layout=...)`` must not see another layout's)
    _flops: dict[int, FlopsCost] = field(default_factory=dict, init=False, repr=False, compare=False)
    _kv: dict[int, KVCost] = field(default_factory=dict, init=False, repr=False, compare=False)
    _stages: dict[int, tuple[StageCost, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

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
    def format(self):
        return effective_format(self.arch, self.workload.weight_dtype)[0]

    @cached_property
    def plan(self) -> MemoryPlan:
        """What each GPU holds (the memory verdicts)."""
        return MemoryPlan(self.arch, self.format, self.workload.kv_dtype)

    @cached_property
    def read_plan(self) -> MemoryPlan:
        """What each GPU reads in one decode step."""
        return MemoryPlan(self.arch, self.format, self.workload.kv_dtype, select="read")

    @cached_property
    def flops_plan(self) -> MemoryPlan:
        """Matmul weights per GPU, as FLOPs per token."""
        return MemoryPlan(self.arch, self.format, self.workload.kv_dtype, select="flops")

    def at_peak(self, workload: Workload) -> Deployment:
        """This deployment under ``workload``, which differs only in its efficiencies: the
        memory plans and the FLOPs and KV figures are shared, not recomputed."""
        mine = self.workload
        same = (workload.weight_dtype, workload.kv_dtype) == (mine.weight_dtype, mine.kv_dtype)
        other = replace(self, workload=workload)
        if same:
            for name in ("format", "plan", "read_plan", "flops_plan", "_flops_scale"):
                if name in self.__dict__:
                    other.__dict__[name] = self.__dict__[name]
            other._flops.update(self._flops)
            other._kv.update(self._kv)
        return other

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

    def seed(self, context: int, flops: FlopsCost, kv: KVCost) -> None:
        """Remember ``flops_cost`` and ``kv_cost`` of this model at ``context`` (computed by
        the caller with this deployment's arch, params and KV dtype)."""
        self._flops.setdefault(context, flops)
        self._kv.setdefault(context, kv)

    def flops(self, context: int) -> FlopsCost:
        if context not in self._flops:
            self._flops[context] = flops_cost(self.arch, self.params, context)
        return self._flops[context]

    def kv(self, context: int) -> KVCost:
        if context not in self._kv:
            self._kv[context] = kv_cost(self.arch, context, self.workload.kv_dtype)
        return self._kv[context]

    @cached_property
    def _flops_scale(self) -> float:
        """Weight FLOPs per token the cost pass counts ÷ what the plan's tensors give (1 but
        for weight-tied layers that compute again: the per-stage split follows the plan)."""
        one = Layout()
        dense, experts = 0.0, 0.0
        for w, e, _, _ in self.flops_plan.stages(one, 1):
            dense, experts = dense + w, experts + e
        total = dense + experts * self._routed_share
        return self._weights_per_token / total if total else 1.0

    @property
    def _weights_per_token(self) -> float:
        """The cost pass's weight FLOPs per token: the same at every context, so read off any
        FLOPs figure already computed (the cost pass seeds one) before computing one."""
        known = next(iter(self._flops.values()), None)
        return (known or self.flops(1)).weights_per_token

    @cached_property
    def _routed_share(self) -> float:
        e, k = self.arch.get("n_experts") or 0, self.arch.get("top_k") or 0
        return k / e if e else 0.0

    def weight_bytes_read(self, tokens: int) -> float:
        """Weight bytes one forward over ``tokens`` tokens reads, all GPUs together (one copy):
        the decoder's weights outside routed experts, and the experts the tokens touch."""
        dense = experts = 0.0
        for w, e, _, _ in self.read_plan.stages(Layout(), 1):
            dense, experts = dense + w, experts + e
        n, k = self.arch.get("n_experts") or 0, self.arch.get("top_k") or 0
        return dense + (experts * experts_touched(n, k, tokens) / n if n else 0.0)

    def params_read(self, tokens: int) -> float:
        """Parameters behind ``weight_bytes_read``: the same tensors, counted in parameters."""
        keep = SELECT["read"]
        n, k = self.arch.get("n_experts") or 0, self.arch.get("top_k") or 0
        share = experts_touched(n, k, tokens) / n if n else 0.0
        out = 0.0
        for t in self.params.tensors:
            if t.part == "embedding/tokens" and self.arch.get("tie_embeddings"):
                out += t.params  # read as the head
            elif keep(t):
                out += t.params * (share if t.routed else 1.0)
        return out

    def stages(self, context: int) -> tuple[StageCost, ...]:
        """Per pipeline stage, per GPU: the step's inputs at ``context`` (cached)."""
        if context in self._stages:
            return self._stages[context]
        lay = self.layout
        one_rank = lay if lay.dp == 1 else replace(lay, dp=1)
        kv = self.kv(context)
        read_share = kv.read_at_context / kv.bytes_at_context if kv.bytes_at_context else 1.0
        sizes = stage_sizes(self.arch.n_layers, lay.pp)
        out = []
        start = 0
        reads = self.read_plan.stages(one_rank, context)
        flops = self.flops_plan.stages(one_rank, 1)
        for size, (w, e, kv_s, st), (fw, fe, _, _) in zip(sizes, reads, flops, strict=True):
            whole = size == len(self.arch.layers)  # one stage: the model itself
            layers = self.arch.layers if whole else self.arch.layers[start : start + size]
            start += size
            part = self.arch if whole else with_layers(self.arch, layers)
            experts_split = lay.dp if lay.ep else 1  # EP spreads the experts over TP × DP
            out.append(
                StageCost(
                    layers=size,
                    moe_layers=sum(1 for s in layers if s.ffn == "moe" or s.ffn2 == "moe"),
                    dense_bytes=w,
                    expert_bytes=e / experts_split,
                    kv_bytes=kv_s * read_share,
                    state_bytes=st,
                    dense_flops=fw * self._flops_scale,
                    expert_flops=fe / experts_split * self._routed_share * self._flops_scale,
                    attention_flops=(
                        self._flops[context].attention_per_token
                        if whole and context in self._flops  # the same sum, already made
                        else attention_flops(part, context)
                    )
                    / lay.tp,
                )
            )
        self._stages[context] = tuple(out)
        return self._stages[context]


def deployment(
    arch: Architecture, workload: Workload | None = None, gpus: int = 1, layout: Layout | None = None
) -> Deployment:
    """Price ``arch``'s weights once for ``workload`` on ``layout`` (default: the workload's
    layout, else TP over ``gpus``)."""
    if gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    wl = workload or Workload()
    params = count(arch)
    weights = weights_cost(arch, params, wl.weight_dtype, mtp_tensors(arch))
    if not weights.supported:
        raise UsageError(f"{arch.name}: {weights.detail}: weight bytes unknown, pass --dtype")
    if layout is None:
        layout = wl.layout if wl.layout is not None and gpus == 1 else Layout(tp=gpus)
    return Deployment(arch, params, weights, wl, layout)


__all__ = ["RESERVE_FRACTION", "Deployment", "StageCost", "deployment"]
