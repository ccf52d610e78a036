"""The numbers a scan entry carries, read off the analysis pipeline's Report (never re-derived).

Params, active params, weight bytes and KV bytes per token are the cost pass's figures under
the default workload (H100 SXM, batch 1, context 8192, the checkpoint's own weight format,
bf16 KV); the fit is the cost pass's feasibility on one default GPU (and the fewest GPUs
that serve it); the trust level is ``analysis.coverage``'s status with its reasons.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..analysis.report import Report


@dataclass(frozen=True)
class Figures:
    """One model's headline numbers (None where the cost pass could not price it)."""

    params: int | None = None
    active_params: int | None = None
    active_is: str = "exact"  # maximum: zero-compute experts among the router's picks (cost.params)
    weight_bytes: int | None = None
    kv_bytes_per_token: float | None = None
    trust: str | None = None  # verified | unverified (analysis.coverage)
    trust_reasons: tuple[str, ...] = ()
    gpu: str | None = None  # the GPU preset the fit is judged on (the default workload's)
    fits: bool | None = None  # batch 1 at the default context on one such GPU
    min_gpus: int | None = None  # fewest such GPUs that serve it (None: none found)
    note: str | None = None  # why figures are missing
    mtp_params: int | None = None  # MTP modules, stored beside the model (cost.params.mtp)
    quantized: bool = False  # a quantization_config: the Hub's stored count is of packed elements
    source_note: str | None = None  # where the quantization came from when not config.json

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["trust_reasons"] = list(self.trust_reasons)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Figures | None:
        if not data:
            return None
        kw = {k: data.get(k) for k in cls.__dataclass_fields__ if k in data}
        kw["trust_reasons"] = tuple(kw.get("trust_reasons") or ())
        kw["active_is"] = kw.get("active_is") or "exact"  # records from before the field
        kw["quantized"] = bool(kw.get("quantized"))
        return cls(**kw)


def _int(x: Any) -> int | None:
    return None if x is None else int(x)


def figures_of(report: Report) -> Figures:
    """The figures of one analyzed model (its Report, priced under the default workload)."""
    trust = report.coverage
    status = trust.status if trust else None
    reasons = tuple(trust.reasons) if trust else ()
    cost = report.cost
    quantized = bool(report.arch.get("quantization_config"))
    if cost is None:
        note = "; ".join(c.note or "" for c in report.changes if c.facet == "*") or "not priced"
        return Figures(
            trust=status,
            trust_reasons=reasons,
            note=note,
            quantized=quantized,
            source_note=report.source.note,
        )
    fit = cost.feasibility
    kv = cost.kv.bytes_per_token
    return Figures(
        params=_int(cost.params.total),
        active_params=_int(cost.params.active),
        active_is="maximum" if cost.params.active_is_maximum else "exact",
        weight_bytes=_int(cost.weights.bytes) if cost.weights.supported else None,
        kv_bytes_per_token=float(kv) if kv is not None else None,
        trust=status,
        trust_reasons=reasons,
        gpu=fit.gpu if fit else cost.workload.gpu,
        fits=fit.fits if fit else None,
        min_gpus=fit.min_gpus if fit else None,
        note=None if fit else "fit not searched (weights in a format slotdiff cannot size)",
        mtp_params=_int(cost.params.mtp),
        quantized=quantized,
        source_note=report.source.note,
    )
