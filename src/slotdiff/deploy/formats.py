"""Number formats applied to one model (seed 10): bytes per parameter, weights, KV, what changes.

Each format's facts (bits, exponent/mantissa split, largest value, smallest normal,
machine epsilon, block scales) come from ``schemas/formats.json``. Weights are re-priced the
way ``--dtype`` prices them (quantized formats cover linear layers and carry their scales;
embeddings, norms, router and head stay in the checkpoint's dtype); the KV cache is priced
per element plus any block scale. Training state uses mixed-precision Adam's 16 B/param.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..cost.kv import kv_cost
from ..cost.params import count
from ..cost.weights import effective_format
from ..cost.workload import Workload
from ..schema.arch import Architecture
from ..schema.precision import dtype_label, formats, storage_bits
from .serving import decode_step, deployment

# Formats compared, in the order of seed 10's table (fp64 and tf32 are not storage choices
# for inference weights and are left out of the comparison).
COMPARED = (
    "float32",
    "bfloat16",
    "float16",
    "float8_e4m3fn",
    "float8_e5m2",
    "int8",
    "int4",
    "mxfp4",
    "nvfp4",
)


@dataclass(frozen=True)
class FormatFacts:
    """What one element of a format can hold, from ``schemas/formats.json``."""

    id: str
    label: str
    kind: str  # float | int
    bits: int
    storage_bits: float  # with its share of a block scale
    exponent_bits: int | None
    mantissa_bits: int | None
    max: float | None
    min_normal: float | None
    min_subnormal: float | None
    epsilon: float | None  # gap between 1 and the next number; unit roundoff is half
    group: int | None
    scale_format: str | None
    specials: str
    source: str  # title of the source

    @property
    def unit_roundoff(self) -> float | None:
        return self.epsilon / 2 if self.epsilon else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "label": self.label,
            "kind": self.kind,
            "bits": self.bits,
            "storage_bits": self.storage_bits,
            "exponent_bits": self.exponent_bits,
            "mantissa_bits": self.mantissa_bits,
            "max": self.max,
            "min_normal": self.min_normal,
            "min_subnormal": self.min_subnormal,
            "epsilon": self.epsilon,
            "unit_roundoff": self.unit_roundoff,
            "block": self.group,
            "scale_format": self.scale_format,
            "specials": self.specials,
            "source": self.source,
        }


def format_facts(dtype: str) -> FormatFacts:
    """The facts of ``dtype`` (a canonical name) as the data file states them."""
    data = formats()
    e = data["dtypes"][dtype]
    src = data["sources"].get(e.get("source", ""), {}).get("title", "")
    return FormatFacts(
        id=dtype,
        label=e["label"],
        kind=e.get("kind", "float"),
        bits=e["bits"],
        storage_bits=storage_bits(dtype),
        exponent_bits=e.get("exponent_bits"),
        mantissa_bits=e.get("mantissa_bits"),
        max=e.get("max"),
        min_normal=e.get("min_normal"),
        min_subnormal=e.get("min_subnormal"),
        epsilon=e.get("epsilon"),
        group=e.get("group"),
        scale_format=e.get("scale_format"),
        specials=e.get("specials", ""),
        source=src,
    )


@dataclass(frozen=True)
class FormatRow:
    """This model with its weights, or its KV cache, in one format."""

    facts: FormatFacts
    weight_bytes: int
    weight_bits_per_param: float  # over every parameter, unquantized ones included
    weight_detail: str
    kv_bytes_per_token: int
    kv_bytes_at_context: int
    decode_ms: float  # batch-1 step at the context with weights in this format, KV in --kv-dtype
    peak: int  # dense FLOP/s the GPU offers when computing in this format
    peak_note: str
    fits: bool = True  # these weights + one sequence at the context fit the GPU

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.facts.to_dict(),
            "weight_bytes": self.weight_bytes,
            "weight_bits_per_param": self.weight_bits_per_param,
            "weight_bytes_per_param": self.weight_bits_per_param / 8,
            "weight_detail": self.weight_detail,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_at_context": self.kv_bytes_at_context,
            "decode_step_ms_batch1": self.decode_ms,
            "dense_peak_flops": self.peak,
            "peak_note": self.peak_note,
            "fits_batch1": self.fits,
        }


@dataclass(frozen=True)
class FormatsReport:
    """Every compared format applied to one model, and the chosen (--dtype, --kv-dtype)."""

    model: str
    params: int
    context: int
    gpu: str
    checkpoint_format: str
    weight_dtype: str | None  # --dtype (None: the checkpoint's own)
    kv_dtype: str
    chosen: dict[str, Any]  # weights, KV and decode with the chosen pair
    rows: tuple[FormatRow, ...]
    training_state_bytes_per_param: int
    training_state_parts: dict[str, int]
    training_state_source: str
    notes: tuple[str, ...]

    @property
    def training_state_bytes(self) -> int:
        return self.params * self.training_state_bytes_per_param

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "params": self.params,
            "context": self.context,
            "gpu": self.gpu,
            "checkpoint_format": self.checkpoint_format,
            "weight_dtype": self.weight_dtype,
            "kv_dtype": self.kv_dtype,
            "chosen": self.chosen,
            "formats": [r.to_dict() for r in self.rows],
            "training_state": {
                "bytes_per_param": self.training_state_bytes_per_param,
                "parts": self.training_state_parts,
                "bytes": self.training_state_bytes,
                "source": self.training_state_source,
            },
            "notes": list(self.notes),
        }


def _row(arch: Architecture, wl: Workload, dtype: str) -> FormatRow:
    as_weights = replace(wl, batch=1, weight_dtype=dtype)
    dep = deployment(arch, as_weights)
    kv = kv_cost(arch, wl.context, dtype)
    prec = dep.precision
    return FormatRow(
        facts=format_facts(dtype),
        weight_bytes=dep.weights.bytes,
        weight_bits_per_param=dep.weights.bytes * 8 / dep.params.total,
        weight_detail=effective_format(arch, dtype)[0].detail,
        kv_bytes_per_token=kv.bytes_per_token,
        kv_bytes_at_context=kv.bytes_at_context,
        decode_ms=decode_step(dep, 1, wl.context).step_ms,
        peak=prec.peak,
        peak_note=f"{dtype_label(prec.dtype)} tensor cores"
        + ("" if prec.dtype == dtype or "W8A8" in prec.why else ", weights widened"),
        fits=dep.fits(1, wl.context),
    )


def formats_report(arch: Architecture, workload: Workload | None = None) -> FormatsReport:
    """Compare every format on ``arch``'s weights and KV; price the chosen pair in full."""
    wl = workload or Workload()
    dep = deployment(arch, wl)
    step = decode_step(dep, wl.batch, wl.context)
    kv = kv_cost(arch, wl.context, wl.kv_dtype)
    chosen = {
        "weights": dep.weights.detail,
        "weight_bytes": dep.weights.bytes,
        "weight_bits_per_param": dep.weights.bytes * 8 / dep.params.total,
        "kv_dtype": wl.kv_dtype,
        "kv_bytes_per_token": kv.bytes_per_token,
        "kv_bytes_at_context": kv.bytes_at_context,
        "batch": wl.batch,
        "decode": step.to_dict(),
        "fits": dep.fits(wl.batch, wl.context),
        "max_batch_that_fits": dep.max_batch(wl.context),
        "compute": dep.precision.note(),
        "efficiency": wl.efficiency_note,
    }
    ts = formats()["training_state"]
    parts = dict(ts["bytes_per_param"])
    src = formats()["sources"].get(ts["source"], {}).get("title", ts["source"])
    notes = (
        "quantized formats cover linear layers and carry their scales: fp8 128×128 tiles with fp32 "
        "scales, int8 one fp16 scale per output row, int4 groups of 128 with an fp16 scale and a "
        "4-bit zero point, MXFP4 one E8M0 per 32, NVFP4 one E4M3 per 16; embeddings, norms, "
        "router and head stay in the checkpoint's dtype",
        "bits/param averages over every parameter, unquantized ones included",
        "KV in a format: per element plus block scales (MXFP4, NVFP4); fp8/int8/int4 KV scales "
        "are per tensor and left out",
        f"decode: batch 1 at {wl.context:,} tokens on one {dep.device.id}, KV in {dtype_label(wl.kv_dtype)}; "
        "compute at the peak each format runs in (fp8 and int8 as W8A8, 4-bit formats weight-only); "
        + wl.efficiency_note,
        "rows marked * do not fit one GPU at batch 1 (weights + KV, 10% kept for the runtime)",
        "epsilon = gap between 1 and the next number (2^-mantissa bits); unit roundoff = epsilon/2",
    )
    return FormatsReport(
        model=arch.name,
        params=count(arch).total,
        context=wl.context,
        gpu=dep.device.id,
        checkpoint_format=effective_format(arch, None)[0].detail,
        weight_dtype=wl.weight_dtype,
        kv_dtype=wl.kv_dtype,
        chosen=chosen,
        rows=tuple(_row(arch, wl, d) for d in COMPARED),
        training_state_bytes_per_param=sum(parts.values()),
        training_state_parts=parts,
        training_state_source=src,
        notes=notes,
    )
