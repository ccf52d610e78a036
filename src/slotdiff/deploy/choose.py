"""Choose a model for a deployment target: every candidate's verdict on the target's GPUs,
the widest precision that fits (bf16 → fp8 → int4), its layout, its decode bound, ranked
by what the user optimises, with the slot facets that bought it (``deploy.credits``).

Nothing here is new arithmetic: each precision is ``--dtype`` re-pricing
(``cost.weights``), the verdict is ``cost.feasibility`` on the target's GPUs and the
fewest GPUs of a valid layout (``cost.memory``), the decode bound is ``deploy.serving``'s
step on that layout. The ranking uses only what a config determines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import SlotdiffError
from ..cost.context import context_limit
from ..cost.kv import kv_cost
from ..cost.params import count
from ..schema.arch import Architecture
from ..slots.fill import Fills
from .credits import Credit, credits, precision_credit
from .target import Rung, Target, ladder, rung_on, short_label, unpriced

VERDICTS = ("fits", "too_slow", "no_fit", "short_context", "not_priced")  # best first
RANKED_BY = (
    "ranked only by what a config determines (memory on the target, the decode bound, KV, "
    "parameter counts); capability on a task is not in a config: read the model's evaluations "
    "before choosing"
)


@dataclass(frozen=True)
class Candidate:
    """One model offered to ``choose``: read (``arch``, ``fills``) or not (``error``)."""

    name: str
    origin: str  # catalog | file | hub | hf-cache | unread
    arch: Architecture | None = None
    fills: Fills | None = None
    trust: dict[str, Any] | None = None  # {"status", "reasons"} from analysis.coverage
    error: str | None = None
    named: bool = False  # the user named it (--candidates)
    trimmed: bool = False  # a trimmed catalog copy: some keys missing


@dataclass(frozen=True)
class Choice:
    """One candidate's verdict on the target, with the rung chosen and what bought it."""

    candidate: Candidate
    verdict: str  # one of VERDICTS
    why: str
    rung: Rung | None = None  # the chosen precision (fits / too_slow / short_context)
    rungs: tuple[Rung, ...] = ()
    skipped: tuple[str, ...] = ()  # precisions not tried, with why
    params_total: int | None = None
    params_active: int | None = None
    kv_bytes_per_token: int | None = None
    kv_bytes_at_context: int | None = None
    state_bytes_per_sequence: int | None = None
    model_max_context: int | None = None
    credits: tuple[Credit, ...] = ()
    rank: int = 0

    def to_dict(self) -> dict[str, Any]:
        c, r = self.candidate, self.rung
        return {
            "rank": self.rank,
            "name": c.name,
            "origin": c.origin,
            "named": c.named,
            "trimmed_copy": c.trimmed,
            "trust": c.trust,
            "verdict": self.verdict,
            "why": self.why,
            "precision": r.label if r else None,
            "weight_dtype": r.weight_dtype if r else None,
            "layout": r.layout.to_dict() if r and r.layout else None,
            "min_gpus": r.min_gpus if r else None,
            "decode": r.decode.to_dict() if r and r.decode else None,
            "max_batch": r.max_batch if r else None,
            "params": {"total": self.params_total, "active": self.params_active},
            "kv": {
                "bytes_per_token": self.kv_bytes_per_token,
                "bytes_at_context": self.kv_bytes_at_context,
                "state_bytes_per_sequence": self.state_bytes_per_sequence,
            },
            "model_max_context": self.model_max_context,
            "rungs": [x.to_dict() for x in self.rungs],
            "skipped_precisions": list(self.skipped),
            "credits": [x.to_dict() for x in self.credits],
        }


def _rung(arch: Architecture, target: Target, dtype: str | None, label: str) -> Rung:
    try:
        return rung_on(arch, target, dtype, label)
    except SlotdiffError as err:  # this precision cannot be priced; the others may be
        return unpriced(dtype, label, err.reason)


def evaluate(c: Candidate, target: Target, baseline: Fills) -> Choice:
    """One candidate's verdict on ``target``: each precision tried, the first that meets the
    target chosen (else the fastest that fits, else none), and what bought it."""
    if c.arch is None or c.fills is None:
        return Choice(c, "not_priced", c.error or "not read")
    arch, wl = c.arch, target.workload
    try:
        params = count(arch)
        kv = kv_cost(arch, wl.context, wl.kv_dtype)
        tried, skipped = ladder(arch, target.precisions)
    except SlotdiffError as err:
        return Choice(c, "not_priced", f"cost not computed: {err.reason}")
    rungs = tuple(_rung(arch, target, d, label) for d, label in tried)
    limit = context_limit(arch)
    out = Choice(
        c,
        "no_fit",
        "",
        rungs=rungs,
        skipped=tuple(skipped),
        params_total=params.total,
        params_active=params.active,
        kv_bytes_per_token=kv.bytes_per_token,
        kv_bytes_at_context=kv.bytes_at_context,
        state_bytes_per_sequence=kv.state_bytes_per_sequence,
        model_max_context=limit.tokens,
    )
    if not rungs:
        return replace(out, verdict="not_priced", why="no precision to try: " + "; ".join(skipped))
    chosen: Rung | None = next((r for r in rungs if r.meets), None)
    fitting = [r for r in rungs if r.fits]
    labels = ", ".join(r.label for r in rungs)
    if chosen is not None:
        verdict = "fits"
        why = f"fits {target.where} at {chosen.label} ({chosen.layout.label() if chosen.layout else ''})"
    elif fitting:
        chosen = min(fitting, key=lambda r: r.decode.step_ms if r.decode else float("inf"))
        verdict = "too_slow"
        why = f"fits {target.where} but misses the budget: " + "; ".join(
            f"{r.label}: {r.reason}" for r in fitting
        )
    else:
        verdict = "no_fit"
        why = f"does not fit {target.where} at {labels}: " + "; ".join(
            f"{r.label}: {r.reason}" for r in rungs
        )
    if limit.beyond(wl.context):
        verdict = "short_context"
        beyond = f"context {wl.context:,} is beyond the model's {limit.tokens:,}-token limit"
        why = f"{beyond} ({limit.source}); {why}"
    out = replace(out, verdict=verdict, why=why, rung=chosen)
    if chosen is not None and verdict in ("fits", "too_slow"):
        bought = credits(arch, c.fills, target, baseline, chosen)
        if chosen is not rungs[0]:
            bought.insert(0, precision_credit(chosen, rungs[0]))
        out = replace(out, credits=tuple(bought))
    return out


def _key(optimise: str) -> Callable[[Choice], tuple[Any, ...]]:
    """Sort key within a verdict group: the optimised figure (for candidates that fit nowhere,
    the fewest GPUs any precision needs), then the decode step, then the name."""

    def key(ch: Choice) -> tuple[Any, ...]:
        r = ch.rung
        step = r.decode.step_ms if r and r.decode else float("inf")
        figure: float
        if ch.verdict == "no_fit":  # closest to fitting first: the fewest GPUs any precision needs
            figure = float(min((x.min_gpus for x in ch.rungs if x.min_gpus), default=float("inf")))
        elif optimise in ("tokens-per-s", "decode-ms"):
            figure = step  # at one batch, tokens/s = batch / step: the same order
        elif optimise == "gpus":
            figure = float(r.min_gpus) if r and r.min_gpus else float("inf")
        elif optimise == "params":
            figure = -(ch.params_total or 0)
        elif optimise == "kv":
            kv = ch.kv_bytes_at_context
            figure = float("inf") if kv is None else kv + (ch.state_bytes_per_sequence or 0)
        else:  # max-batch: no memory bound at all sorts first
            figure = float("-inf") if r and r.max_batch is None else -(r.max_batch if r else 0)
        return (VERDICTS.index(ch.verdict), figure, step, ch.candidate.name.lower())

    return key


@dataclass(frozen=True)
class ChooseReport:
    """Every candidate's verdict on one target, best first."""

    target: Target
    choices: tuple[Choice, ...]
    excluded: tuple[tuple[str, str], ...]  # (name, why) left out by --modality
    assumptions: tuple[str, ...]

    @property
    def any_fits(self) -> bool:
        return any(c.verdict == "fits" for c in self.choices)

    def to_dict(self) -> dict[str, Any]:
        counts = {v: sum(1 for c in self.choices if c.verdict == v) for v in VERDICTS}
        return {
            "schema_version": 1,
            "target": self.target.to_dict(),
            "ranked_by": RANKED_BY,
            "counts": counts,
            "candidates": [c.to_dict() for c in self.choices],
            "excluded": [{"name": n, "why": w} for n, w in self.excluded],
            "assumptions": list(self.assumptions),
        }


def _has_image_input(c: Candidate) -> bool:
    return c.arch is not None and c.arch.vision is not None


def choose(candidates: Sequence[Candidate], target: Target, baseline: Fills) -> ChooseReport:
    """Judge every candidate on ``target`` and rank them (``baseline``: the fills the slot
    facets are priced against, GPT-2's)."""
    excluded: list[tuple[str, str]] = []
    kept = []
    for c in candidates:
        if target.modality == "image" and c.arch is not None and not _has_image_input(c):
            excluded.append((c.name, "no vision tower in its config (--modality image)"))
        else:
            kept.append(c)
    judged = sorted((evaluate(c, target, baseline) for c in kept), key=_key(target.optimise))
    ranked = tuple(replace(ch, rank=i) for i, ch in enumerate(judged, 1))
    return ChooseReport(target, ranked, tuple(excluded), assumptions(target))


def assumptions(target: Target) -> tuple[str, ...]:
    wl = target.workload
    return (
        RANKED_BY,
        f"fits: weights + {wl.batch:,} sequence(s) × KV at {wl.context:,} tokens on each GPU of a valid "
        f"layout of at most {wl.gpus} GPU(s), {target.reserve:.0%} of each kept for the runtime "
        "(cost/feasibility.py; slotdiff fit --engine sizes the pool as an engine does)",
        "layout: tensor parallel over the target's GPUs when valid, else the valid layout of that many "
        "with the most TP, else the fewest GPUs that hold it (cost/layout.py)",
        "precision: the first of " + ", ".join(short_label(d) for d in target.precisions) + " that meets "
        "the target, each re-priced as --dtype prices it (quantized formats cover linear layers with "
        "their scales; fp8 as W8A8 at the fp8 peak, int4 weight-only); a quantized checkpoint is tried "
        "as shipped, then only narrower formats",
        f"decode: the roofline bound of one step at batch {wl.batch:,} and context {wl.context:,} on "
        "that layout, communication over the GPU's link not overlapped; " + wl.efficiency_note,
        "a context past the model's declared limit is not recommended (short_context)",
        "what bought it: each serving facet set back to GPT-2's design (cost/counterfactual.py, "
        "schemas/counterfactuals.json) and priced on the same target at the chosen precision",
    )
