"""Does a workload fit its GPUs: weights + KV (+ a runtime reserve) per GPU of a valid
layout, the largest batch that does, and the fewest GPUs of any valid layout.

Every figure that assumes a batch and a context carries this verdict (the main report,
sweep, specdec, moe, formats, fit), so a decode bound is never shown for a deployment that
cannot be loaded without saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .context import ContextLimit, context_limit
from .gpus import GPU
from .layout import Layout, problems
from .memory import MemoryPlan, Need, _divisors

# vLLM's gpu_memory_utilization defaults to 0.9: the other 10% holds the CUDA context,
# activations of the largest forward and allocator slack. The one place it is set.
RESERVE_FRACTION = 0.10


@dataclass(frozen=True)
class Feasibility:
    """The verdict for ``batch`` sequences at ``context`` on ``gpus`` GPUs of one kind."""

    gpu: str
    gpu_name: str
    gpus: int
    batch: int
    context: int
    reserve: float
    usable_per_gpu: float
    need: Need | None  # None: no valid layout on exactly this many GPUs
    layout_problems: tuple[str, ...]  # why TP = gpus is refused (empty: it is valid)
    fewest: tuple[int, Need] | None
    limit: ContextLimit

    @property
    def fits(self) -> bool:
        return self.need is not None and self.need.fits

    @property
    def layout(self) -> Layout | None:
        return self.need.layout if self.need else None

    @property
    def max_batch(self) -> int | None:
        """Largest batch that fits on these GPUs at the context (None: sequences are free)."""
        return self.need.max_batch if self.need else 0

    @property
    def min_gpus(self) -> int | None:
        return self.fewest[0] if self.fewest else None

    def line(self, name: str | None = None) -> str:
        """One sentence: fits, or does not and what would (``name``: the GPU as shown)."""
        where = f"{self.gpus}× {name or self.gpu_name}"
        if self.fits:
            return f"fits on {where} ({self.layout.label() if self.layout else ''})"
        fewest = (
            f"needs ≥ {self.fewest[0]} ({self.fewest[1].layout.label()})"
            if self.fewest
            else "no layout of up to 65,536 of them holds it"
        )
        return f"does not fit on {where}: {fewest}"

    def to_dict(self) -> dict[str, Any]:
        n = self.need
        fewest = self.fewest
        return {
            "fits": self.fits,
            "gpus": self.gpus,
            "batch": self.batch,
            "context": self.context,
            "layout": n.layout.to_dict() if n else None,
            "layout_problems": list(self.layout_problems),
            "reserve_fraction": self.reserve,
            "usable_bytes_per_gpu": self.usable_per_gpu,
            "needed_bytes_per_gpu": n.needed if n else None,
            "weights_bytes_per_gpu": n.weights if n else None,
            "kv_bytes_per_sequence_per_gpu": n.per_sequence if n else None,
            "max_batch": self.max_batch,
            "min_gpus": self.min_gpus,
            "min_gpus_layout": fewest[1].layout.to_dict() if fewest else None,
            "model_max_context": self.limit.tokens,
            "beyond_model_context": self.limit.beyond(self.context),
        }


def layout_on(plan: MemoryPlan, gpus: int) -> tuple[Layout | None, tuple[str, ...]]:
    """The layout to price ``gpus`` GPUs with: tensor parallel over all of them when valid,
    else the valid layout of exactly that many GPUs with the most TP (then PP, then DP);
    with the reasons TP = ``gpus`` is refused."""
    arch, fmt = plan.arch, plan.fmt
    wanted = Layout(tp=gpus)
    why = problems(arch, wanted, fmt)
    if not why:
        return wanted, ()
    for tp in sorted(_divisors(gpus), reverse=True):
        for pp in _divisors(gpus // tp):
            dp = gpus // tp // pp
            for ep in (False, True):
                cand = Layout(tp, pp, dp, ep)
                if pp <= arch.n_layers and not problems(arch, cand, fmt):
                    return cand, why
    return None, why


def feasibility(
    plan: MemoryPlan,
    gpu: GPU,
    gpus: int,
    batch: int,
    context: int,
    reserve: float = RESERVE_FRACTION,
    layout: Layout | None = None,
    search: bool = True,
) -> Feasibility:
    """The memory verdict on ``gpus`` × ``gpu`` (``layout`` when the caller fixes one)."""
    usable = gpu.memory_bytes * (1 - reserve)
    if layout is None:
        layout, why = layout_on(plan, gpus)
    else:
        why = problems(plan.arch, layout, plan.fmt)
        layout = None if why else layout
    need = plan.need(layout, batch, context, usable) if layout else None
    if need is not None and need.fits and gpus == 1:
        fewest: tuple[int, Need] | None = (1, need)
    else:
        fewest = plan.fewest(batch, context, usable) if search else None
    return Feasibility(
        gpu=gpu.id,
        gpu_name=gpu.name,
        gpus=gpus,
        batch=batch,
        context=context,
        reserve=reserve,
        usable_per_gpu=usable,
        need=need,
        layout_problems=why,
        fewest=fewest,
        limit=context_limit(plan.arch),
    )
