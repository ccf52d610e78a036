"""The Workload a cost is computed for (GPU, dtypes, batch, context, efficiency) and the
GPU presets (``cost.gpus``).

Defaults: H100 SXM, the checkpoint's own weight format and compute precision, bf16 KV
cache, batch 1, context 8192, efficiency 1.0 (the roofline's lower bound on time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..core.errors import UsageError
from ..schema.precision import canonical_dtype
from .gpus import GPU, gpu, gpus, resolve_gpu
from .layout import Layout

__all__ = ["GPU", "MAX_BATCH", "MAX_CONTEXT", "Workload", "gpu", "gpus", "resolve_gpu"]

# Far beyond any deployment, and small enough that every product of sizes stays exact in a
# float (2^40 per factor: a handful of them multiply to well under 2^1024).
MAX_BATCH = 2**40
MAX_CONTEXT = 2**40
MAX_GPUS = 1 << 16


def _short(n: int) -> str:
    text = str(n)
    return text if len(text) <= 24 else f"a {len(text)}-digit number"


def _efficiency(value: Any, flag: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{flag} must be a number in (0, 1], got {value!r}")
    if not 0 < value <= 1:
        raise UsageError(f"{flag} must be in (0, 1], got {value:g}")
    return float(value)


@dataclass(frozen=True)
class Workload:
    """What the cost is computed for.

    ``compute_dtype`` None: math at the precision the checkpoint's quantization runs in
    (``cost.compute.compute_precision``); ``mfu`` and ``mbu`` scale the dense peak and the
    bandwidth (1.0: the roofline's lower bound on time); ``device`` is a GPU the user built
    from flags or a file (None: the preset ``gpu``); ``gpus`` is how many of them serve.
    """

    gpu: str = "h100-sxm"
    batch: int = 1
    context: int = 8192
    kv_dtype: str = "bfloat16"
    weight_dtype: str | None = None  # None: the checkpoint's own format
    compute_dtype: str | None = None  # None: as the checkpoint's quantization runs
    mfu: float = 1.0
    mbu: float = 1.0
    gpus: int = 1
    custom_device: GPU | None = None
    layout: Layout | None = None  # TP × PP × DP (× EP); None: tensor parallel over ``gpus``
    efficiency: str | None = None  # the preset --mbu / --mfu came from (None: the flags)

    def __post_init__(self) -> None:
        for name, limit in (("batch", MAX_BATCH), ("context", MAX_CONTEXT), ("gpus", MAX_GPUS)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                shown = _short(value) if isinstance(value, int) else repr(value)
                raise UsageError(f"--{name} must be 1..{limit:,}, got {shown}")
        value = canonical_dtype(self.kv_dtype)
        if value is None:
            raise UsageError(f"unknown dtype {self.kv_dtype!r} for kv_dtype")
        object.__setattr__(self, "kv_dtype", value)
        for name in ("compute_dtype", "weight_dtype"):
            raw = getattr(self, name)
            if raw is None:
                continue
            value = canonical_dtype(raw)
            if value is None:
                label = "weight dtype" if name == "weight_dtype" else f"dtype for {name}"
                raise UsageError(f"unknown {label} {raw!r}")
            object.__setattr__(self, name, value)
        if self.layout is not None:
            if self.gpus not in (1, self.layout.gpus):
                raise UsageError(
                    f"--gpus {self.gpus} but the layout {self.layout.label()} uses {self.layout.gpus}"
                )
            object.__setattr__(self, "gpus", self.layout.gpus)
        object.__setattr__(self, "mfu", _efficiency(self.mfu, "--mfu"))
        object.__setattr__(self, "mbu", _efficiency(self.mbu, "--mbu"))
        if self.custom_device is None:
            object.__setattr__(self, "gpu", gpu(self.gpu).id)  # an alias becomes the preset's id

    @cached_property  # read by every step of the decode model's searches
    def device(self) -> GPU:
        return self.custom_device or gpu(self.gpu)

    @property
    def parallel(self) -> Layout:
        """The layout the workload runs on (tensor parallel over ``gpus`` when none was given)."""
        return self.layout or Layout(tp=self.gpus)

    @property
    def bound(self) -> bool:
        """True when the times are lower bounds (100% of peak bandwidth and FLOP/s)."""
        return self.mfu == 1 and self.mbu == 1

    @property
    def efficiency_note(self) -> str:
        """Which efficiency the time figures assume, in words."""
        if self.mfu == 1 and self.mbu == 1:
            return "times at 100% of peak bandwidth and dense peak FLOP/s (lower bounds; --mbu, --mfu)"
        if self.efficiency:
            return (
                f"times at {self.mbu:.0%} of peak bandwidth and {self.mfu:.0%} of the dense peak, the "
                f"measured efficiency of preset {self.efficiency} (--efficiency): estimates, not bounds"
            )
        return (
            f"times at {self.mbu:.0%} of peak bandwidth (--mbu) and {self.mfu:.0%} of the dense peak "
            "(--mfu): estimates, not bounds"
        )

    def to_dict(self) -> dict[str, Any]:
        d = self.device
        return {
            "gpu": d.id,
            "gpu_name": d.name,
            "gpus": self.gpus,
            "layout": self.parallel.to_dict(),
            "efficiency_preset": self.efficiency,
            "batch": self.batch,
            "context": self.context,
            "kv_dtype": self.kv_dtype,
            "weight_dtype": self.weight_dtype,
            "compute_dtype": self.compute_dtype,
            "mfu": self.mfu,
            "mbu": self.mbu,
            "custom_gpu": d.to_dict() if d.custom else None,
        }
