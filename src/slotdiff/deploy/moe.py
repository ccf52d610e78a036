"""MoE traffic at decode: experts a batch touches, weights actually read, all-to-all bytes.

Routing is taken as independent and uniform (seed 06): a batch of T tokens touches
E·[1 − (1 − k/E)^T] of a layer's E routed experts on average, so the weights read per step
grow from the active share toward all of them. Under expert parallelism over P GPUs (E/P
experts each) every token sends its hidden vector to the GPUs of its k experts (dispatch)
and gets k results back (combine); a copy whose expert sits on the token's own GPU stays
local, which happens with probability 1/P. Shared experts run where the token is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import UsageError
from ..cost.context import context_limit
from ..cost.roofline import experts_touched
from ..schema.precision import storage_bits
from .serving import Deployment

DEFAULT_TOKENS = (1, 8, 32, 128, 512, 2048)


@dataclass(frozen=True)
class ExpertsRead:
    """What one decode step over ``tokens`` tokens reads from the expert weights."""

    tokens: int
    experts_touched: float  # per MoE layer, expected, of n_experts
    params_read: float  # every weight read this step (embedding gather excluded)
    bytes_read: float
    fits: bool = True  # this many sequences at the context fit the EP group

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "experts_touched_per_layer": self.experts_touched,
            "params_read": self.params_read,
            "weight_bytes_read": self.bytes_read,
            "fits": self.fits,
        }


def remote_gpus_per_token(n_experts: int, top_k: int, ep: int) -> float:
    """Expected other GPUs holding at least one of a token's k distinct experts (E/P per GPU).

    P(a given GPU holds none of the k) = C(E − E/P, k) / C(E, k) = Π_i (E − E/P − i)/(E − i).
    """
    if ep <= 1:
        return 0.0
    per_gpu = n_experts / ep
    none = 1.0
    for i in range(top_k):
        none *= max(0.0, n_experts - per_gpu - i) / (n_experts - i)
    return (ep - 1) * (1.0 - none)


@dataclass(frozen=True)
class AllToAll:
    """Expert-parallel traffic of one MoE layer for ``tokens`` tokens over ``ep`` GPUs."""

    ep: int
    tokens: int
    d_model: int
    top_k: int
    dispatch_dtype: str
    combine_dtype: str
    dispatch_bytes_per_element: float
    combine_bytes_per_element: float
    remote_copies_per_token: float  # k·(P−1)/P: copies that leave the token's GPU
    remote_gpus_per_token: float  # distinct GPUs, when one copy per GPU is sent (deduplicated)
    moe_layers: int

    @property
    def dispatch_bytes(self) -> float:
        """Dispatch bytes of one layer over the whole group (one copy per routed expert)."""
        return self.tokens * self.remote_copies_per_token * self.d_model * self.dispatch_bytes_per_element

    @property
    def combine_bytes(self) -> float:
        return self.tokens * self.remote_copies_per_token * self.d_model * self.combine_bytes_per_element

    @property
    def dispatch_bytes_dedup(self) -> float:
        """Dispatch if a token goes once to each GPU it needs (DeepEP-style), not once per expert."""
        return self.tokens * self.remote_gpus_per_token * self.d_model * self.dispatch_bytes_per_element

    @property
    def layer_bytes(self) -> float:
        return self.dispatch_bytes + self.combine_bytes

    @property
    def layer_bytes_per_gpu(self) -> float:
        return self.layer_bytes / self.ep

    @property
    def step_bytes(self) -> float:
        return self.layer_bytes * self.moe_layers

    @property
    def tp_allreduce_bytes_per_gpu(self) -> float:
        """For comparison: tensor parallelism instead, two ring all-reduces of T·d per layer."""
        if self.ep <= 1:
            return 0.0
        ring = 2 * (self.ep - 1) / self.ep
        return 2 * ring * self.tokens * self.d_model * self.combine_bytes_per_element

    def to_dict(self) -> dict[str, Any]:
        return {
            "ep": self.ep,
            "tokens": self.tokens,
            "dispatch_dtype": self.dispatch_dtype,
            "combine_dtype": self.combine_dtype,
            "remote_copies_per_token": self.remote_copies_per_token,
            "remote_gpus_per_token_dedup": self.remote_gpus_per_token,
            "dispatch_bytes_per_layer": self.dispatch_bytes,
            "combine_bytes_per_layer": self.combine_bytes,
            "dispatch_bytes_per_layer_dedup": self.dispatch_bytes_dedup,
            "bytes_per_layer": self.layer_bytes,
            "bytes_per_layer_per_gpu": self.layer_bytes_per_gpu,
            "moe_layers": self.moe_layers,
            "bytes_per_step": self.step_bytes,
            "tp_allreduce_bytes_per_layer_per_gpu": self.tp_allreduce_bytes_per_gpu,
        }


@dataclass(frozen=True)
class MoETraffic:
    """Parameters, activated parameters, what a step reads, and the all-to-all, for one MoE model."""

    model: str
    n_experts: int
    top_k: int
    n_shared: int
    moe_layers: int
    n_layers: int
    params_total: int
    params_active: int
    routed_params: int
    weight_bytes: int
    weight_format: str
    rows: tuple[ExpertsRead, ...]
    a2a: AllToAll
    notes: tuple[str, ...]
    layout: str = ""
    context: int = 0
    max_batch: int | None = None  # sequences at the context the EP group holds
    context_warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "n_experts": self.n_experts,
            "top_k": self.top_k,
            "n_shared_experts": self.n_shared,
            "moe_layers": self.moe_layers,
            "n_layers": self.n_layers,
            "params_total": self.params_total,
            "params_active": self.params_active,
            "routed_params": self.routed_params,
            "weight_bytes": self.weight_bytes,
            "weight_format": self.weight_format,
            "read_per_step": [r.to_dict() for r in self.rows],
            "all_to_all": self.a2a.to_dict(),
            "layout": self.layout,
            "context": self.context,
            "max_batch_that_fits": self.max_batch,
            "context_warning": self.context_warning,
            "notes": list(self.notes),
        }


def experts_read(dep: Deployment, tokens: int) -> ExpertsRead:
    """Experts touched, params and bytes read by one step over ``tokens`` tokens."""
    arch = dep.arch
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    touched = experts_touched(e, k, tokens)
    fits = dep.fits(tokens, dep.workload.context)
    return ExpertsRead(tokens, touched, dep.params_read(tokens), dep.weight_bytes_read(tokens), fits)


def moe_traffic(
    dep: Deployment,
    tokens: int,
    ep: int,
    dispatch_dtype: str = "bfloat16",
    combine_dtype: str = "bfloat16",
    table: tuple[int, ...] = DEFAULT_TOKENS,
) -> MoETraffic:
    """MoE decode traffic of ``dep``'s model at ``tokens`` tokens per step, EP over ``ep`` GPUs."""
    arch = dep.arch
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    if not e or not k:
        raise UsageError(f"{arch.name}: not a mixture-of-experts model (no routed experts)")
    if ep < 1:
        raise UsageError(f"--ep must be at least 1, got {ep}")
    moe_layers = sum(1 for s in arch.layers if s.ffn == "moe")
    d = arch.get("d_model") or 0
    a2a = AllToAll(
        ep=ep,
        tokens=tokens,
        d_model=d,
        top_k=k,
        dispatch_dtype=dispatch_dtype,
        combine_dtype=combine_dtype,
        dispatch_bytes_per_element=storage_bits(dispatch_dtype) / 8,
        combine_bytes_per_element=storage_bits(combine_dtype) / 8,
        remote_copies_per_token=k * (ep - 1) / ep,
        remote_gpus_per_token=remote_gpus_per_token(e, k, ep),
        moe_layers=moe_layers,
    )
    rows = tuple(experts_read(dep, t) for t in sorted({*table, tokens}))
    notes = [
        "routing independent and uniform over experts (real routers are skewed: more traffic "
        "on hot experts, fewer experts touched)",
        "params read: the text decoder's (no gathered embedding table, no vision or audio encoder); "
        "weights in " + dep.weights.detail,
        f"all-to-all: {e} experts spread evenly, {e / ep:g} per GPU; a copy stays local with "
        f"probability 1/{ep}; shared experts and dense layers send nothing",
        "dispatch carries the hidden vector in the dispatch dtype (DeepSeek-V3 dispatches fp8 with "
        "scales, left out here), combine returns it in the combine dtype",
        "tokens are the step's whole batch over the EP group; per GPU = group total / EP",
        f"does it fit: {dep.layout.label()} on {dep.gpus} × {dep.device.id}, each batch's sequences at "
        f"{dep.workload.context:,} tokens (10% of each GPU kept for the runtime); rows marked * do not",
    ]
    return MoETraffic(
        model=arch.name,
        n_experts=e,
        top_k=k,
        n_shared=arch.get("n_shared_experts") or 0,
        moe_layers=moe_layers,
        n_layers=arch.n_layers,
        params_total=dep.params.total,
        params_active=dep.params.active,
        routed_params=sum(t.params for t in dep.params.tensors if t.routed),
        weight_bytes=dep.weights.bytes,
        weight_format=dep.weights.detail,
        rows=rows,
        a2a=a2a,
        notes=tuple(notes),
        layout=dep.layout.label(),
        context=dep.workload.context,
        max_batch=dep.max_batch(dep.workload.context),
        context_warning=context_limit(arch).warning(dep.workload.context),
    )
