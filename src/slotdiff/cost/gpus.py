"""GPU presets (``schemas/gpus.json``, every figure with its source), their aliases, a user's
own GPU file, and a GPU built from flags (``--gpu-mem``, ``--bandwidth``, ``--tflops``).

A preset holds the vendor's nominal memory, peak DRAM bandwidth, dense peak FLOP/s per
element type and the scale-up link (NVLink, Infinity Fabric, PCIe) as the vendor states it.
Two derived figures serve the serving model: ``visible_bytes``, the total the CUDA/ROCm
runtime reports (what vLLM logs as ``total_gpu_memory``), and ``link_bandwidth``, one
direction of the link (half the bidirectional figure vendors print).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from ..core.errors import SlotdiffError, UsageError
from ..core.files import read_capped
from ..core.resources import data_dir, load_schema_file

# Short names people type; each maps to the preset it means.
# A user's GPU file lists a few GPUs; gpus.json itself is a few KiB.
GPU_FILE_CAP = 4 * 1024 * 1024
ALIASES = {"h100": "h100-sxm", "a100": "a100-80gb", "4090": "rtx-4090", "5090": "rtx-5090"}

NVLINK_CLASS = 300e9  # a link this fast (bidirectional B/s) is NVLink-class, not PCIe

# Where a preset gives no driver-visible total: the runtime keeps about 1% of an HBM part
# (H100 SXM: 79.22 of 80 GiB as vLLM logs it), more of a GDDR part with ECC.
VISIBLE_FRACTION = 79.22 / 80

_PEAK_KEYS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
_PEAK_OF_DTYPE = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "float32": "tf32",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "int8": "int8",
    "mxfp4": "fp4",
    "nvfp4": "fp4",
}


@dataclass(frozen=True)
class GPU:
    """One GPU: memory, bandwidth, dense peak FLOP/s per type, and its scale-up link."""

    id: str
    name: str
    memory_bytes: int
    bandwidth: int  # bytes/s
    peak: Mapping[str, int | None]  # type (bf16, fp8, ...) → dense FLOP/s
    vendor: str = "NVIDIA"
    visible_bytes: int | None = None  # what the runtime reports as total; None: estimated
    link_bytes_per_s: int | None = None  # scale-up link, bidirectional, as the vendor prints it
    link: str = ""
    custom: tuple[str, ...] = ()  # fields a user set (flags or their own file)
    architecture: str | None = None  # chip generation (hopper, ampere ...): engines pick kernels by it
    compute_capability: tuple[int, int] | None = None  # CUDA's (9, 0) for sm90; None: ROCm or unknown
    link_kind: str | None = None  # nvlink | infinity-fabric | pcie (gpus.json's links); None: inferred
    scale_up_gpus: int | None = None  # GPUs sharing the scale-up link (one NVLink domain, one host)

    def peak_for(self, dtype: str) -> int:
        """Dense peak for math in ``dtype`` (a canonical name): bf16, fp16, fp8, int8, fp4,
        tf32 for fp32; a type the part lacks falls back to its bf16 peak."""
        key = _PEAK_OF_DTYPE.get(dtype, "bf16")
        value = self.peak.get(key) or self.peak.get("bf16") or self.peak.get("fp16")
        if not value:
            raise UsageError(f"GPU {self.id} has no dense {key} or bf16 peak: pass --tflops")
        return int(value)

    def has_peak(self, dtype: str) -> bool:
        return bool(self.peak.get(_PEAK_OF_DTYPE.get(dtype, "bf16")))

    @property
    def visible(self) -> int:
        """Total memory as the runtime reports it (estimated when the preset gives none)."""
        return self.visible_bytes or int(self.memory_bytes * VISIBLE_FRACTION)

    @property
    def link_bandwidth(self) -> float:
        """One direction of the scale-up link, bytes/s (0: none stated)."""
        return (self.link_bytes_per_s or 0) / 2

    @property
    def link_type(self) -> str:
        """The scale-up link kind: the preset's, else inferred from the vendor and link speed
        (AMD: Infinity Fabric; NVLink-class at ≥ 300 GB/s bidirectional; else PCIe)."""
        if self.link_kind:
            return self.link_kind
        if self.vendor == "AMD":
            return "infinity-fabric"
        return "nvlink" if (self.link_bytes_per_s or 0) >= NVLINK_CLASS else "pcie"

    @property
    def domain(self) -> int:
        """GPUs that share the scale-up link (8, one HGX board or host, when not stated)."""
        return self.scale_up_gpus or 8

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "memory_bytes": self.memory_bytes,
            "visible_memory_bytes": self.visible,
            "bandwidth_bytes_per_s": self.bandwidth,
            "peak_flops": dict(self.peak),
            "interconnect_bytes_per_s": self.link_bytes_per_s,
            "link": self.link_type,
            "scale_up_gpus": self.domain,
            "custom": list(self.custom),
        }


def _capability(value: Any) -> tuple[int, int] | None:
    """gpus.json's ``[major, minor]`` (validated by gpus.schema.json) as a tuple; None as None."""
    return None if value is None else (int(value[0]), int(value[1]))


def _from_entry(g: Mapping[str, Any]) -> GPU:
    return GPU(
        id=g["id"],
        name=g["name"],
        memory_bytes=int(g["memory_bytes"]),
        bandwidth=int(g["hbm_bandwidth_bytes_per_s"]),
        peak=dict(g["peak_flops"]),
        vendor=g.get("vendor", "NVIDIA"),
        visible_bytes=g.get("visible_memory_bytes"),
        link_bytes_per_s=g.get("interconnect_bytes_per_s"),
        link=g.get("interconnect", ""),
        architecture=g.get("architecture"),
        compute_capability=_capability(g.get("compute_capability")),
        link_kind=g.get("link"),
        scale_up_gpus=g.get("scale_up_gpus"),
    )


@cache
def gpus() -> dict[str, GPU]:
    """All GPU presets by id."""
    return {g["id"]: _from_entry(g) for g in load_schema_file("gpus.json")["gpus"]}


def gpu(preset: str) -> GPU:
    """Look a preset up by id or alias, with a clear error listing the choices."""
    table = gpus()
    key = ALIASES.get(preset.lower(), preset.lower()) if isinstance(preset, str) else preset
    if key not in table:
        names = ", ".join(sorted(table))
        aliases = ", ".join(f"{a} = {b}" for a, b in sorted(ALIASES.items()))
        raise UsageError(f"unknown GPU preset {preset!r}; choose from {names} (aliases: {aliases})")
    return table[key]


# The least memory, bandwidth or peak a GPU of the user's may have (in GiB, TB/s, TFLOP/s):
# far below any real one, and far enough above 0 that no price divides by zero or overflows.
FLOOR = 1e-3


def _positive(value: float | None, flag: str, unit: str, limit: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number of {unit}, got {value!r}")
    if not FLOOR <= value <= limit:
        raise UsageError(f"{flag} must be in [{FLOOR:g}, {limit:g}] {unit}, got {value:g}")
    return float(value)


def customized(
    base: GPU,
    memory_gib: float | None = None,
    bandwidth_tb_s: float | None = None,
    tflops: float | None = None,
) -> GPU:
    """``base`` with the user's memory (GiB, also taken as the runtime-visible total),
    bandwidth (TB/s, decimal) and dense bf16/fp16 peak (TFLOP/s); the other peaks scale
    with bf16 when the base has them."""
    mem = _positive(memory_gib, "--gpu-mem", "GiB", 1 << 20)
    bw = _positive(bandwidth_tb_s, "--bandwidth", "TB/s", 1e6)
    tf = _positive(tflops, "--tflops", "TFLOP/s", 1e9)
    if mem is None and bw is None and tf is None:
        return base
    changes: dict[str, Any] = {}
    custom = list(base.custom)
    if mem is not None:
        changes["memory_bytes"] = changes["visible_bytes"] = int(mem * 2**30)
        custom.append("memory")
    if bw is not None:
        changes["bandwidth"] = int(bw * 1e12)
        custom.append("bandwidth")
    if tf is not None:
        old = base.peak.get("bf16") or base.peak.get("fp16")
        ratio = tf * 1e12 / old if old else None
        peak = {
            k: (int(v * ratio) if ratio and v else None)
            for k, v in base.peak.items()
            if k not in ("bf16", "fp16")
        }
        peak.update(bf16=int(tf * 1e12), fp16=int(tf * 1e12))
        changes["peak"] = peak
        custom.append("peak")
    name = base.name + " (" + ", ".join(custom) + " set by flags)"
    return replace(base, id=f"{base.id}*", name=name, custom=tuple(custom), **changes)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def user_gpus(path: str | Path) -> dict[str, GPU]:
    """The GPUs of a user's file in the presets' format, validated by ``gpus.schema.json``."""
    import jsonschema  # lazy: heavy, and only a user's own file needs it

    p = Path(path)
    try:
        # NaN, Infinity and 1e999 are not numbers a GPU has: refused, never priced.
        text = read_capped(p, f"--gpu-file {p}", GPU_FILE_CAP).decode("utf-8")
        data = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except SlotdiffError as err:
        raise UsageError(f"--gpu-file {p}: cannot read it ({err.reason})") from err
    except UnicodeDecodeError as err:
        raise UsageError(f"--gpu-file {p}: cannot read it (not UTF-8: {err.reason})") from err
    except json.JSONDecodeError as err:
        raise UsageError(f"--gpu-file {p}: not JSON ({err.msg} at line {err.lineno})") from err
    except ValueError as err:
        raise UsageError(f"--gpu-file {p}: {err}") from err
    schema = json.loads((data_dir("schemas") / "gpus.schema.json").read_text(encoding="utf-8"))
    if isinstance(data, dict) and "$schema" in data:
        data = {**data, "$schema": "./gpus.schema.json"}
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(x) for x in first.path) or "top level"
        raise UsageError(f"--gpu-file {p}: {where}: {first.message[:200]} (gpus.schema.json)")
    return {g["id"]: replace(_settled(_from_entry(g)), custom=("file",)) for g in data["gpus"]}


def settled_capability(architecture: str | None) -> tuple[int, int] | None:
    """The compute capability a chip generation settles on its own (``gpus.json``'s
    ``capability_by_architecture``: every Hopper part is sm90, every Ada part sm89), else None."""
    known = load_schema_file("gpus.json").get("capability_by_architecture", {})
    return _capability(known.get(architecture or ""))


def _settled(g: GPU) -> GPU:
    """A user's GPU with no stated compute capability, given its architecture's where that
    settles it."""
    if g.compute_capability is not None or g.vendor != "NVIDIA":
        return g
    return replace(g, compute_capability=settled_capability(g.architecture))


def resolve_gpu(
    preset: str = "h100-sxm",
    gpu_file: str | Path | None = None,
    memory_gib: float | None = None,
    bandwidth_tb_s: float | None = None,
    tflops: float | None = None,
) -> GPU:
    """The GPU a command runs on: a preset (or the user's file's entry), then the flags."""
    if gpu_file is not None:
        table = user_gpus(gpu_file)
        if preset in table:
            base = table[preset]
        elif len(table) == 1:
            base = next(iter(table.values()))
        else:
            raise UsageError(f"--gpu-file {gpu_file} holds {', '.join(sorted(table))}: pick one with --gpu")
    else:
        base = gpu(preset)
    return customized(base, memory_gib, bandwidth_tb_s, tflops)


PEAK_KEYS = _PEAK_KEYS
