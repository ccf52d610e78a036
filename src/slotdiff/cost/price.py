"""The cost pass: pure functions of (Architecture, Workload) giving params, bytes, FLOPs, time.

``cost_of`` prices one architecture; ``price`` also prices every slot change against a
baseline through counterfactuals. Every figure's formula is in the module that computes it
and in docs/COSTS.md.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..constructs import construct
from ..core.errors import SlotdiffError
from ..schema.arch import Architecture
from ..slots.fill import Fills, slot_table
from ..slots.fills import fill_slots
from .active import ActiveHeadline, active_headline
from .compute import Precision
from .context import context_limit
from .counterfactual import TRANSFORMS, Change, rule_text
from .deltas import deltas
from .deployment import Deployment
from .feasibility import Feasibility, feasibility
from .flops import FlopsCost, attention_flops, flops_cost, weight_flops_per_token
from .inventory.mtp import mtp_tensors
from .kv import KVCost, kv_cost
from .params import ParamCount, count
from .roofline import DecodeCost, PrefillCost, decode_cost, prefill_cost
from .step import Step, layout_notes, step
from .weights import WeightsCost, weights_cost
from .workload import Workload

__all__ = ["CostReport", "Workload", "cost_of", "price"]


@dataclass(frozen=True)
class CostReport:
    """Every cost figure of one architecture under one workload."""

    workload: Workload
    params: ParamCount
    weights: WeightsCost
    kv: KVCost
    flops: FlopsCost
    decode: DecodeCost
    prefill: PrefillCost
    assumptions: tuple[str, ...]
    precision: Precision | None = None
    feasibility: Feasibility | None = None  # None for counterfactuals (not searched)
    active: ActiveHeadline | None = None
    decode_bound: DecodeCost | None = None  # at 100% of peak, when the workload's efficiency is below

    def to_dict(self) -> dict[str, Any]:
        p = self.params
        return {
            "workload": self.workload.to_dict(),
            "params": {
                "total": p.total,
                "active": p.active,
                "active_without_embedding": p.active_without_embedding,
                "active_is": "maximum" if p.active_is_maximum else "exact",
                "active_headline": self.active.to_dict() if self.active else None,
                "mtp": p.mtp,
                "by_part": dict(p.by_part),
                "excluded": list(p.excluded),
            },
            "weights": self.weights.to_dict(),
            "kv": self.kv.to_dict(),
            "flops": self.flops.to_dict(),
            "decode": self.decode.to_dict(),
            "decode_bound": self.decode_bound.to_dict() if self.decode_bound else None,
            "prefill": self.prefill.to_dict(),
            "compute": {
                "dtype": self.precision.dtype,
                "dense_peak_flops": self.precision.peak,
                "why": self.precision.why,
                "mfu": self.workload.mfu,
                "mbu": self.workload.mbu,
                "efficiency": self.workload.efficiency_note,
            }
            if self.precision
            else None,
            "feasibility": self.feasibility.to_dict() if self.feasibility else None,
            "assumptions": list(self.assumptions),
        }


ASSUMPTIONS = (
    "bytes are decimal (GB = 1e9) unless written GiB/KiB",
    "decode reads the text decoder's weights once per step: not the embedding table (a gather) unless "
    "tied to the head, not a vision or audio encoder (run at prefill, once per input), not MTP modules",
    "MoE decode reads the expected union of experts E·[1−(1−k/E)^B] per layer (independent uniform routing)",
    "attention FLOPs count q·kᵀ and p·v over the keys each query sees (window/chunk/top-k capped)",
    "roofline bounds are lower bounds at --mbu/--mfu 1.0 (peak bandwidth and dense peak FLOP/s, no "
    "overheads); other values make them estimates",
    "does it fit: weights + every sequence's KV at the context on each GPU of a valid layout, 10% of "
    "each GPU kept for the runtime (slotdiff fit --engine vllm sizes the pool as the engine does)",
)


def cost_of(
    arch: Architecture, workload: Workload | None = None, *, searches: bool = True, bounds: bool = True
) -> CostReport:
    """Price ``arch`` under ``workload`` (default: H100 SXM, batch 1, context 8192, bf16 KV).

    ``searches=False`` skips the compute-bound batch searches (``decode.compute_bound_*``
    are None) and the fit (``price`` prices its counterfactuals through ``counter_cost``,
    the same figures cut to what their deltas read).
    ``bounds=False`` skips only those searches and the at-peak decode bound, keeping the
    fit search: what a scan's figures read.
    """
    wl = workload or Workload()
    mtp = mtp_tensors(arch)
    params = count(arch, mtp)
    weights = weights_cost(arch, params, wl.weight_dtype, mtp)
    kv = kv_cost(arch, wl.context, wl.kv_dtype)
    flops = flops_cost(arch, params, wl.context)
    device = wl.device
    dep = Deployment(arch, params, weights, wl, wl.parallel)
    dep.seed(wl.context, flops, kv)  # the step model reads the same figures: not computed twice
    prec = dep.precision  # the workload's compute precision, as the step model prices it
    peak, bw = prec.peak * wl.mfu, device.bandwidth * wl.mbu
    decode = decode_cost(dep, wl.batch, wl.context, searches and bounds)
    prefill = prefill_cost(arch, weights, kv, flops, device, peak, bw)
    notes = [*ASSUMPTIONS, prec.note(), wl.efficiency_note, *weights.notes, *layout_notes(dep)]
    if not weights.supported:  # the step model still needs bytes: bf16's, and it says so
        notes.append(
            f"weight bytes unknown ({weights.detail}): decode and prefill times read the weights as "
            "bf16, so they are estimates, not bounds; --dtype prices a format slotdiff models"
        )
    fit = None
    if searches and weights.supported:
        fit = feasibility(dep.plan, device, wl.gpus, wl.batch, wl.context, layout=wl.layout)
        warning = context_limit(arch).warning(wl.context)
        if warning:
            notes.append(warning)
    if kv.read_at_context != kv.bytes_at_context:
        notes.append(
            "DSA layers: a decode step reads the indexer keys of every cached token but the latents of "
            "only the index_topk it selects"
        )
    if kv.recurrent_layers:
        notes.append(
            "recurrent (linear-attention / SSM) states are priced in float32 (or the config's "
            "ssm cache dtype), as transformers keeps them; their convolution windows at the KV dtype"
        )
    if params.active_is_maximum:
        notes.append(
            "zero-compute (identity) experts: active parameters, FLOPs per token and the experts a "
            "decode step reads take every top_k choice to be a computing expert, the most a token "
            "uses; a token routed to zero-compute experts uses fewer"
        )
    for mech in dict.fromkeys(m for s in arch.layers if (m := construct(s.mixer))):
        if mech.price_note:
            notes.append(mech.price_note)
    head = active_headline(arch, params) if searches else None
    bound = None
    if searches and bounds and not wl.bound:  # the lower bound beside the estimate, and their ratio
        at_peak = replace(wl, mfu=1.0, mbu=1.0, efficiency=None)
        bound = decode_cost(dep.at_peak(at_peak), wl.batch, wl.context, False)
    return CostReport(wl, params, weights, kv, flops, decode, prefill, tuple(notes), prec, fit, head, bound)


@dataclass(frozen=True)
class CounterCost:
    """The figures a counterfactual's price reads (``deltas``), and no more."""

    params: ParamCount
    weights: WeightsCost
    kv: KVCost
    flops: FlopsCost  # per token only: its prefill fields are 0 (not computed)
    decode: Step  # the decode step (its ``step_ms`` is what DecodeCost gives)


def counter_cost(arch: Architecture, workload: Workload | None = None) -> CounterCost:
    """``cost_of(arch, workload, searches=False)`` cut to what ``deltas`` reads: the same
    parameters, weights, KV, FLOPs per token and decode step, computed the same way, without
    prefill, notes or the precision's wording (a counterfactual shows none of them)."""
    wl = workload or Workload()
    mtp = mtp_tensors(arch)
    params = count(arch, mtp)
    weights = weights_cost(arch, params, wl.weight_dtype, mtp)
    kv = kv_cost(arch, wl.context, wl.kv_dtype)
    flops = FlopsCost(
        wl.context, weight_flops_per_token(arch, params), attention_flops(arch, wl.context), None, 0, 0
    )
    dep = Deployment(arch, params, weights, wl, wl.parallel)
    dep.seed(wl.context, flops, kv)
    return CounterCost(params, weights, kv, flops, step(dep, wl.batch, wl.context))


def price(
    arch: Architecture,
    workload: Workload | None,
    fills: Fills | None,
    baseline_arch: Architecture | None,
    baseline_fills: Fills,
) -> tuple[CostReport | None, tuple[Change, ...]]:
    """Cost of ``arch`` and the price of each facet that differs in design from the baseline
    (its fills decide; ``baseline_arch`` may be None, as for the bundle's precomputed GPT-2)."""
    fills = fills or fill_slots(arch)
    try:
        this = cost_of(arch, workload)
    except SlotdiffError as err:
        return None, (Change("*", "02", "", "", None, {}, note=err.reason),)
    changes = []
    for info, fill, base in zip(slot_table(), fills, baseline_fills, strict=True):
        if fill.design == base.design:
            continue
        transform = TRANSFORMS.get(info.id)
        counter = transform(arch, base) if transform else None
        rule = rule_text(info.id, fill, base)
        if counter is None:
            changes.append(
                Change(
                    info.id,
                    info.article,
                    fill.detail,
                    base.detail,
                    None,
                    {},
                    note=rule or "not priced",
                )
            )
            continue
        # The precision change is priced against the baseline's own format: --dtype re-prices
        # this model, never the counterfactual that sets precision back.
        cf_workload = workload
        if info.id == "precision.weights" and workload is not None:
            cf_workload = replace(workload, weight_dtype=None, compute_dtype=None)
        try:
            other = counter_cost(counter, cf_workload)
        except SlotdiffError as err:
            changes.append(
                Change(
                    info.id,
                    info.article,
                    fill.detail,
                    base.detail,
                    rule,
                    {},
                    note=f"counterfactual not priceable: {err.reason}",
                )
            )
            continue
        changes.append(Change(info.id, info.article, fill.detail, base.detail, rule, deltas(this, other)))
    return this, tuple(changes)
