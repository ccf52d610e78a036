"""Speculative decoding (seed 08): tokens per verification, speedup, and where it stops paying.

A draft proposes γ tokens and the target checks them in one forward over γ + 1 positions
per sequence. With each token accepted independently with probability α, a step yields
(1 − α^(γ+1)) / (1 − α) tokens on average. If one draft token costs c of a target decode
step, the speedup over plain decoding is that yield over (γ·c + T_verify / T_decode): the
ratio is ≈ 1 while verification is memory-bound (the extra positions ride on the same
weight read) and grows toward γ + 1 once it is compute-bound, past batch ≈ ridge / (γ + 1).
MTP modules in the config can be the draft: each drafts one token, and its cost is priced
from its own weights (plus the shared head, read again) on the same roofline.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..constructs import latent
from ..core.errors import UsageError
from ..cost.comm import NONE
from ..cost.context import context_limit
from ..cost.deployment import StageCost
from ..cost.flops import attention_flops
from ..cost.inventory.mtp import mtp_tensors
from ..cost.kv import layer_kv_elements, layer_span
from ..cost.layout import kv_share
from ..cost.step import Work, assemble, stage_time
from ..cost.weights import effective_format, tensor_bytes
from ..schema.precision import storage_bits
from .serving import DecodeStep, Deployment, decode_step, first_true

# DeepSeek-V3 technical report, sec. 5.4.3: the second token predicted by its MTP module is
# accepted 85–90% of the time across generation topics. The low end is the default.
MTP_ACCEPTANCE = 0.85
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def expected_tokens(alpha: float, gamma: int) -> float:
    """Expected tokens per verification step: (1 − α^(γ+1)) / (1 − α); γ + 1 when α = 1."""
    if alpha >= 1:
        return float(gamma + 1)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def speedup(alpha: float, gamma: int, draft_cost: float, verify_ratio: float = 1.0) -> float:
    """Speedup over plain decoding: expected tokens / (γ·c + T_verify/T_decode)."""
    return expected_tokens(alpha, gamma) / (gamma * draft_cost + verify_ratio)


@dataclass(frozen=True)
class SpecRow:
    """Plain decoding against one speculative step at one batch."""

    batch: int
    decode_ms: float
    verify_ms: float
    draft_ms: float  # all γ draft tokens
    speedup: float
    verify_bound: str
    speedup_weights_only: float  # KV traffic ignored, as seed 08 reasons
    fits: bool = True  # weights + this batch's KV at the context fit the GPUs

    @property
    def verify_ratio(self) -> float:
        return self.verify_ms / self.decode_ms

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch": self.batch,
            "decode_step_ms": self.decode_ms,
            "verify_step_ms": self.verify_ms,
            "verify_over_decode": self.verify_ratio,
            "verify_bound": self.verify_bound,
            "draft_ms": self.draft_ms,
            "speedup": self.speedup,
            "speedup_weights_only": self.speedup_weights_only,
            "fits": self.fits,
        }


@dataclass(frozen=True)
class SpecDec:
    """Speculative decoding for one model, draft, context and GPU count."""

    model: str
    draft: str  # "external" (a fixed cost fraction) or "mtp" (the config's MTP modules)
    alpha: float
    gamma: int
    draft_cost: float  # one draft token ÷ one target decode step, at batch 1
    context: int
    gpus: int
    gpu: str
    ridge: float
    rows: tuple[SpecRow, ...]
    verify_compute_bound_batch_weights: int | None  # seed's B ≈ ridge/(γ+1): KV ignored
    verify_compute_bound_batch: int | None  # with every sequence's KV at the context
    break_even_batch: int | None  # first batch where speculation is slower than plain decode
    break_even_batch_weights: int | None  # the same with KV traffic ignored
    notes: tuple[str, ...]
    max_batch: int | None = None  # largest batch that fits at the context (None: no limit)
    context_warning: str | None = None
    batch: int = 1  # the workload's batch: the headline is the table's row for it

    @property
    def headline(self) -> SpecRow:
        """The table's row at the workload's batch: the speedup this workload gets."""
        return next(r for r in self.rows if r.batch == self.batch)

    @property
    def expected_tokens(self) -> float:
        return expected_tokens(self.alpha, self.gamma)

    @property
    def ideal_speedup(self) -> float:
        """Speedup while verification costs one decode step (small batch)."""
        return speedup(self.alpha, self.gamma, self.draft_cost)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "draft": self.draft,
            "alpha": self.alpha,
            "gamma": self.gamma,
            "draft_cost": self.draft_cost,
            "batch": self.batch,
            "speedup": self.headline.speedup,
            "expected_tokens_per_step": self.expected_tokens,
            "speedup_when_verification_free": self.ideal_speedup,
            "context": self.context,
            "gpus": self.gpus,
            "gpu": self.gpu,
            "ridge": self.ridge,
            "verify_compute_bound_batch_weights_only": self.verify_compute_bound_batch_weights,
            "verify_compute_bound_batch": self.verify_compute_bound_batch,
            "break_even_batch": self.break_even_batch,
            "break_even_batch_weights_only": self.break_even_batch_weights,
            "by_batch": [r.to_dict() for r in self.rows],
            "max_batch_that_fits": self.max_batch,
            "context_warning": self.context_warning,
            "notes": list(self.notes),
        }


def mtp_stage(dep: Deployment, context: int) -> StageCost:
    """One MTP module on the last stage's GPUs: its weights, the shared head read again, one
    layer's KV and attention, split over TP as the trunk's layers are."""
    arch, lay = dep.arch, dep.layout
    tensors = mtp_tensors(arch)
    if not tensors:
        raise UsageError(f"{arch.name}: the config has no MTP modules")
    modules = arch.get("mtp_layers") or 1
    fmt, _ = effective_format(arch, dep.workload.weight_dtype)
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    dense = experts = flops = expert_flops = 0.0
    for t in tensors:
        b = tensor_bytes(t, fmt) / modules  # one module
        p = t.params / modules
        if t.routed and e:
            experts += b
            expert_flops += 2 * p * k / e if t.matmul else 0
        else:
            dense += b
            flops += 2 * p if t.matmul else 0
    by = dict(dep.weights.by_part)
    dense += by.get("head") or dep.weights.embedding_bytes  # the shared head, read again
    flops += 2 * (arch.get("vocab") or 0) * (arch.get("d_model") or 0)
    last = arch.layers[-1]
    kv = layer_kv_elements(arch, last) * storage_bits(dep.workload.kv_dtype) / 8
    g = last.n_kv_heads or arch.get("n_kv_heads") or 1
    kv *= layer_span(last, context) * (1.0 if latent(last.mixer) else kv_share(g, lay.tp))
    split = lay.ep_size if lay.ep else lay.tp
    return StageCost(
        layers=1,
        moe_layers=1 if last.ffn == "moe" else 0,
        dense_bytes=dense / lay.tp,
        expert_bytes=experts / split,
        kv_bytes=kv,
        state_bytes=0.0,
        dense_flops=flops / lay.tp,
        expert_flops=expert_flops / split,
        attention_flops=attention_flops(replace(arch, layers=(last,)), context) / lay.tp,
    )


def mtp_step(dep: Deployment, batch: int, context: int) -> DecodeStep:
    """One MTP module drafting one token for ``batch`` sequences, on the step model."""
    stage = mtp_stage(dep, context)
    seqs = -(-batch // dep.layout.dp)
    work = Work(seqs, seqs, batch if dep.layout.ep else seqs)
    return assemble(dep, (stage_time(dep, stage, work),), batch, context, 1, NONE, work.expert_tokens)


def _row(
    dep: Deployment, batch: int, context: int, alpha: float, gamma: int, draft: str, c: float
) -> SpecRow:
    tokens = expected_tokens(alpha, gamma)
    result = []
    for with_kv in (True, False):
        plain = decode_step(dep, batch, context, with_kv=with_kv)
        verify = decode_step(dep, batch, context, gamma + 1, with_kv=with_kv)
        one_draft = mtp_step(dep, batch, context).step_ms if draft == "mtp" else c * plain.step_ms
        result.append((plain, verify, gamma * one_draft))
    (plain, verify, draft_ms), (plain_w, verify_w, draft_w) = result
    return SpecRow(
        batch=batch,
        decode_ms=plain.step_ms,
        verify_ms=verify.step_ms,
        draft_ms=draft_ms,
        speedup=tokens * plain.step_ms / (draft_ms + verify.step_ms),
        verify_bound=verify.bound,
        speedup_weights_only=tokens * plain_w.step_ms / (draft_w + verify_w.step_ms),
        fits=dep.fits(batch, context + gamma),
    )


def specdec(
    dep: Deployment,
    alpha: float = 0.8,
    gamma: int = 4,
    draft_cost: float = 0.1,
    draft: str = "external",
    context: int | None = None,
    batches: tuple[int, ...] = DEFAULT_BATCHES,
) -> SpecDec:
    """Speculative decoding of ``dep``'s model with an external draft or its MTP modules."""
    if not 0 <= alpha <= 1:
        raise UsageError(f"--alpha must be in [0, 1], got {alpha}")
    if gamma < 1:
        raise UsageError(f"--gamma must be at least 1, got {gamma}")
    if draft_cost < 0:
        raise UsageError(f"--draft-cost must be ≥ 0, got {draft_cost}")
    ctx = context or dep.workload.context
    if draft == "mtp":
        gamma = dep.arch.get("mtp_layers") or 0
        if not gamma:
            raise UsageError(f"{dep.arch.name}: the config has no MTP modules to draft with")
        draft_cost = mtp_step(dep, 1, ctx).step_ms / decode_step(dep, 1, ctx).step_ms

    def row(b: int) -> SpecRow:
        return _row(dep, b, ctx, alpha, gamma, draft, draft_cost)

    batch = dep.workload.batch
    batches = tuple(sorted({*batches, batch}))

    notes = [
        "acceptance independent per token at rate α; output distribution unchanged (seed 08)",
        f"verification = one forward over γ+1 = {gamma + 1} positions per sequence: weights read "
        "once, each sequence's KV read once",
        f"decode and verification bounds on {dep.gpus} × {dep.device.id} ({dep.layout.label()}) at context "
        f"{ctx:,}, {dep.precision.note()}; TP all-reduce / EP all-to-all over the link added",
        dep.workload.efficiency_note,
        "rows marked * do not fit: weights + that many sequences' KV at the context exceed the GPUs "
        "(10% kept for the runtime)",
    ]
    if dep.arch.get("n_experts"):
        notes.append(
            "MoE: the γ+1 positions of each sequence route to more experts than one token does, so "
            "verification reads more weights and is not free at small batch"
        )
    if draft == "mtp":
        notes.append(
            f"draft: the config's {gamma} MTP module{'s' if gamma > 1 else ''}, each priced as its own "
            "weights plus the shared head read again; α default from DeepSeek-V3's reported "
            "85–90% acceptance"
        )
    else:
        notes.append(f"draft: one draft token costs {draft_cost:g} of a target decode step at the same batch")
    return SpecDec(
        model=dep.arch.name,
        draft=draft,
        alpha=alpha,
        gamma=gamma,
        draft_cost=draft_cost,
        context=ctx,
        gpus=dep.gpus,
        gpu=dep.device.id,
        ridge=dep.ridge,
        rows=tuple(row(b) for b in batches),
        verify_compute_bound_batch_weights=first_true(
            lambda b: decode_step(dep, b, ctx, gamma + 1, with_kv=False).bound == "compute"
        ),
        verify_compute_bound_batch=first_true(
            lambda b: decode_step(dep, b, ctx, gamma + 1).bound == "compute"
        ),
        break_even_batch=first_true(lambda b: row(b).speedup < 1, 1 << 16),
        break_even_batch_weights=first_true(lambda b: row(b).speedup_weights_only < 1, 1 << 16),
        notes=tuple(notes),
        max_batch=dep.max_batch(ctx + gamma),
        context_warning=context_limit(dep.arch).warning(ctx + gamma),
        batch=batch,
    )


@dataclass(frozen=True)
class SpecDecReport:
    """The external-draft analysis and, when the config has MTP modules, the MTP-draft one."""

    external: SpecDec | None
    mtp: SpecDec | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "external": self.external.to_dict() if self.external else None,
            "mtp": self.mtp.to_dict() if self.mtp else None,
        }


def specdec_report(
    dep: Deployment,
    alpha: float = 0.8,
    gamma: int = 4,
    draft_cost: float = 0.1,
    draft: str = "auto",
    mtp_alpha: float = MTP_ACCEPTANCE,
    context: int | None = None,
    batches: tuple[int, ...] = DEFAULT_BATCHES,
) -> SpecDecReport:
    """``draft``: external, mtp, or auto (external, plus MTP when the config has modules)."""
    if draft not in ("auto", "external", "mtp"):
        raise UsageError(f"--draft must be auto, external or mtp, got {draft!r}")
    has_mtp = bool(dep.arch.get("mtp_layers"))
    ext = specdec(dep, alpha, gamma, draft_cost, "external", context, batches) if draft != "mtp" else None
    mtp = None
    if draft == "mtp" or (draft == "auto" and has_mtp):
        mtp = specdec(dep, mtp_alpha, 1, 0.0, "mtp", context, batches)
    return SpecDecReport(ext, mtp)
