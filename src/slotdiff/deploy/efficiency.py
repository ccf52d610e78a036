"""Efficiency presets: what an engine really reaches, from published measurements.

Each preset (``schemas/efficiency.json``) is one published figure: an engine serving a named
model on a named GPU at a stated concurrency, with its source. slotdiff prices that same
workload with its own step model at 100% of peak (the lower bound) and takes bound ÷ measured
as the share of peak bandwidth the engine reached. ``--efficiency NAME`` applies that share
as ``--mbu`` (the measurements are at one request, memory-bound: ``--mfu`` stays 1.0), so a
user sees "what would vLLM on an H100 really do" beside the bound, and the ratio between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from ..core.errors import UsageError
from ..core.resources import load_schema_file
from ..cost.deployment import deployment
from ..cost.step import step
from ..cost.workload import Workload
from ..read.source import from_catalog
from ..schema.build import build


@dataclass(frozen=True)
class Preset:
    """One published measurement and the workload it was taken at."""

    id: str
    engine: str
    engine_version: str
    gpu: str
    gpus: int
    model: str
    config: str
    concurrency: int
    context: int
    metric: str
    value: float
    url: str
    quote: str

    @property
    def measured_ms(self) -> float:
        """Time per output token of one request, as measured (ms)."""
        return 1e3 / self.value if self.metric == "tokens_per_s_per_user" else self.value


@cache
def presets() -> dict[str, Preset]:
    """The presets of ``schemas/efficiency.json`` by id."""
    out = {}
    for p in load_schema_file("efficiency.json")["presets"]:
        m = p["measured"]
        out[p["id"]] = Preset(
            p["id"],
            p["engine"],
            p["engine_version"],
            p["gpu"],
            p["gpus"],
            p["model"],
            p["config"],
            p["concurrency"],
            p["context"],
            m["metric"],
            float(m["value"]),
            p["source"]["url"],
            p["source"]["quote"],
        )
    return out


@dataclass(frozen=True)
class Calibration:
    """A preset's measurement beside slotdiff's bound for the same workload."""

    preset: Preset
    bound_ms: float

    @property
    def ratio(self) -> float:
        """Bound ÷ measured: the share of peak bandwidth the engine reached (≤ 1)."""
        return min(1.0, self.bound_ms / self.preset.measured_ms)

    def to_dict(self) -> dict[str, Any]:
        p = self.preset
        return {
            "id": p.id,
            "engine": p.engine,
            "engine_version": p.engine_version,
            "gpu": p.gpu,
            "model": p.model,
            "concurrency": p.concurrency,
            "context": p.context,
            "measured_ms_per_token": p.measured_ms,
            "bound_ms_per_token": self.bound_ms,
            "ratio": self.ratio,
            "source": p.url,
        }


@cache
def calibrate(name: str) -> Calibration:
    """Price preset ``name``'s workload at 100% of peak; the ratio to its measurement."""
    table = presets()
    if name not in table:
        raise UsageError(f"unknown efficiency preset {name!r}; choose from {', '.join(sorted(table))}")
    p = table[name]
    arch = build(from_catalog(p.config))
    dep = deployment(arch, Workload(gpu=p.gpu, context=p.context), p.gpus)
    return Calibration(p, step(dep, p.concurrency, p.context).step_ms)


def efficiency_of(name: str, mbu: float | None = None, mfu: float | None = None) -> tuple[float, float, str]:
    """(--mbu, --mfu, preset id) for ``--efficiency name``; explicit flags win."""
    cal = calibrate(name)
    return (cal.ratio if mbu is None else mbu), (1.0 if mfu is None else mfu), name
