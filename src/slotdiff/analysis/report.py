"""The Report: one result type between the pipeline and every output format.

Reports are frozen; ``to_dict`` gives the stable JSON shape that
``schemas/report.schema.json`` validates (field names are a promise to scripts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..read.jsonpos import strict
from ..schema.arch import Architecture
from ..slots.fill import FacetInfo, Fill, articles
from .coverage import Coverage

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class FacetReport:
    """One facet: this model's fill, GPT-2's and Llama-3-8B's, and how they compare."""

    info: FacetInfo
    fill: Fill
    gpt2: Fill
    llama: Fill
    vs_gpt2: str
    vs_llama: str
    against: Fill | None = None
    vs_against: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.fill.kind,
            "detail": self.fill.detail,
            "attrs": _jsonable(dict(self.fill.attrs)),
            "sizes": _jsonable(dict(self.fill.sizes)),
            "evidence": _jsonable(dict(self.fill.evidence)),
            "notes": list(self.fill.notes),
            "article": self.info.article,
            "article_title": articles()[self.info.article]["title"],
            "gpt2": {"kind": self.gpt2.kind, "detail": self.gpt2.detail},
            "llama": {"kind": self.llama.kind, "detail": self.llama.detail},
            "vs_gpt2": self.vs_gpt2,
            "vs_llama": self.vs_llama,
            "vs_against": self.vs_against,
        }
        if self.against is not None:
            out["against"] = {"kind": self.against.kind, "detail": self.against.detail}
        return out


@dataclass(frozen=True)
class SourceInfo:
    """Where the config came from."""

    name: str
    origin: str  # file | hub | hf-cache | catalog
    location: str
    repo_id: str | None = None
    revision: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Shape:
    """The model's depth and longest context, and its KV cache at that context (one sequence)
    beside the workload's: what the slot table's sizes add up to."""

    layers: int
    max_context: int | None  # None: the config states no limit
    max_context_source: str
    kv_bytes_at_max_context: int | None = None  # None: no limit, or the cost pass did not run
    state_bytes_per_sequence: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "layers": self.layers,
            "max_context": {"tokens": self.max_context, "source": self.max_context_source},
            "kv_bytes_at_max_context": self.kv_bytes_at_max_context,
            "state_bytes_per_sequence": self.state_bytes_per_sequence,
        }


@dataclass(frozen=True)
class Report:
    """Everything slotdiff says about one model."""

    model: str
    source: SourceInfo
    arch: Architecture
    facets: tuple[FacetReport, ...]
    baselines: dict[str, str | None]
    classification: Any = None  # classify.Classification
    cost: Any = None  # cost.CostReport
    changes: tuple[Any, ...] = ()  # cost.counterfactual.Change
    notes: tuple[str, ...] = field(default_factory=tuple)
    coverage: Coverage | None = None  # how sure the answer is (None: not judged)
    shape: Shape | None = None  # layers, longest context, KV there
    checkpoint: Any = None  # reconcile.Checkpoint: the stored tensors against the count (None: not read)

    @property
    def model_type(self) -> str:
        return self.arch.model_type

    def facet(self, facet_id: str) -> FacetReport:
        for f in self.facets:
            if f.fill.id == facet_id:
                return f
        raise KeyError(facet_id)

    def changed(self, versus: str = "gpt2") -> tuple[FacetReport, ...]:
        """Facets whose design differs from the baseline ``gpt2`` / ``llama`` / ``against``."""
        attr = {"gpt2": "vs_gpt2", "llama": "vs_llama", "against": "vs_against"}[versus]
        return tuple(f for f in self.facets if getattr(f, attr) == "changed")

    def to_dict(self) -> dict[str, Any]:
        slots: dict[str, dict[str, Any]] = {}
        for f in self.facets:
            slots.setdefault(f.info.slot, {})[f.info.facet] = f.to_dict()
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "model_type": self.model_type,
            "known_model_type": self.arch.known_model_type,
            "source": self.source.to_dict(),
            "baselines": dict(self.baselines),
            "slots": slots,
            "layers": _layer_summary(self.arch),
            "unknown_keys": list(self.arch.unknown_keys),
            "unread_keys": list(self.arch.unread_keys),
            "notes": list(self.arch.notes) + list(self.notes),
        }
        if self.coverage is not None:
            out["coverage"] = self.coverage.to_dict()
        if self.shape is not None:
            out["shape"] = self.shape.to_dict()
        if self.checkpoint is not None:
            out["checkpoint"] = self.checkpoint.to_dict()
        if self.classification is not None:
            out["class"] = self.classification.to_dict()
        if self.cost is not None:
            out["cost"] = self.cost.to_dict()
            out["changes"] = [c.to_dict() for c in self.changes]
        elif self.changes:  # the cost pass ran but could not price this model
            out["cost"] = None
            out["cost_note"] = "; ".join(c.note or "" for c in self.changes if c.facet == "*")
        return _jsonable(out)


def _layer_summary(arch: Architecture) -> list[dict[str, Any]]:
    """Runs of identical consecutive layers: compact but exact."""
    runs: list[dict[str, Any]] = []
    for spec in arch.layers:
        row = {
            "mixer": spec.mixer,
            "variant": spec.variant,
            "window": spec.window,
            "chunk": spec.chunk,
            "rope": spec.rope,
            "ffn": spec.ffn,
            "sparse": spec.sparse,
        }
        if runs and {k: v for k, v in runs[-1].items() if k not in ("first", "count")} == row:
            runs[-1]["count"] += 1
        else:
            runs.append({"first": spec.index, "count": 1, **row})
    return runs


def _jsonable(value: Any) -> Any:
    return strict(value)  # NaN and Infinity never reach JSON as bare tokens
