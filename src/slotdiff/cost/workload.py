"""The Workload a cost is computed for (GPU, dtypes, batch, context) and the GPU presets.

GPU presets are data (``schemas/gpus.json``, every figure with its source). Defaults:
H100 SXM, the checkpoint's own weight format, bf16 KV cache, batch 1, context 8192.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..core.errors import UsageError
from ..core.resources import load_schema_file
from ..schema.precision import canonical_dtype


@dataclass(frozen=True)
class GPU:
    """One GPU preset: memory, bandwidth and dense peak FLOP/s per dtype."""

    id: str
    name: str
    memory_bytes: int
    bandwidth: int  # bytes/s
    peak: Mapping[str, int | None]  # dtype → dense FLOP/s

    def peak_for(self, dtype: str) -> int:
        """Dense tensor peak for a compute dtype (bf16 peak for fp32-stored weights)."""
        key = {
            "bfloat16": "bf16",
            "float16": "fp16",
            "float32": "bf16",
            "float8_e4m3fn": "fp8",
            "float8_e5m2": "fp8",
            "int8": "int8",
            "int4": "bf16",
            "mxfp4": "bf16",
            "nvfp4": "bf16",
        }.get(dtype, "bf16")
        value = self.peak.get(key) or self.peak.get("bf16")
        if not value:
            raise UsageError(f"GPU preset {self.id} has no dense {key} peak")
        return int(value)


@cache
def gpus() -> dict[str, GPU]:
    """All GPU presets by id."""
    data = load_schema_file("gpus.json")
    return {
        g["id"]: GPU(
            g["id"],
            g["name"],
            int(g["memory_bytes"]),
            int(g["hbm_bandwidth_bytes_per_s"]),
            dict(g["peak_flops"]),
        )
        for g in data["gpus"]
    }


def gpu(preset: str) -> GPU:
    """Look a preset up by id, with a clear error listing the choices."""
    table = gpus()
    if preset not in table:
        raise UsageError(f"unknown GPU preset {preset!r}; choose from {', '.join(sorted(table))}")
    return table[preset]


# Far beyond any deployment, and small enough that every product of sizes stays exact in a
# float (2^40 per factor: a handful of them multiply to well under 2^1024).
MAX_BATCH = 2**40
MAX_CONTEXT = 2**40


def _short(n: int) -> str:
    text = str(n)
    return text if len(text) <= 24 else f"a {len(text)}-digit number"


@dataclass(frozen=True)
class Workload:
    """What the cost is computed for."""

    gpu: str = "h100-sxm"
    batch: int = 1
    context: int = 8192
    kv_dtype: str = "bfloat16"
    weight_dtype: str | None = None  # None: the checkpoint's own format
    compute_dtype: str = "bfloat16"  # which dense peak the FLOP side uses

    def __post_init__(self) -> None:
        if not 1 <= self.batch <= MAX_BATCH:
            raise UsageError(f"--batch must be 1..{MAX_BATCH:,}, got {_short(self.batch)}")
        if not 1 <= self.context <= MAX_CONTEXT:
            raise UsageError(f"--context must be 1..{MAX_CONTEXT:,}, got {_short(self.context)}")
        for name in ("kv_dtype", "compute_dtype"):
            value = canonical_dtype(getattr(self, name))
            if value is None:
                raise UsageError(f"unknown dtype {getattr(self, name)!r} for {name}")
            object.__setattr__(self, name, value)
        if self.weight_dtype is not None:
            value = canonical_dtype(self.weight_dtype)
            if value is None:
                raise UsageError(f"unknown weight dtype {self.weight_dtype!r}")
            object.__setattr__(self, "weight_dtype", value)
        gpu(self.gpu)

    @property
    def device(self) -> GPU:
        return gpu(self.gpu)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "gpu_name": self.device.name,
            "batch": self.batch,
            "context": self.context,
            "kv_dtype": self.kv_dtype,
            "weight_dtype": self.weight_dtype,
            "compute_dtype": self.compute_dtype,
        }
