"""Which dense peak the FLOP side of a roofline uses: one convention for every command.

The math runs at the precision of the activations the checkpoint's scheme feeds the
tensor cores:

* FP8 W8A8 (``quant_method: fp8``, which engines run with dynamic per-token activation
  scales; compressed-tensors float8 with ``input_activations``) → the fp8 peak;
* int8 W8A8 (compressed-tensors int8 with ``input_activations``) → the int8 peak;
* NVFP4 W4A4 (compressed-tensors float4 with 4-bit ``input_activations``) → the fp4 peak;
* weight-only schemes (AWQ/GPTQ int4, MXFP4 as gpt-oss ships it, fp8 or int8 without
  activation quantization) → the activation dtype's peak (the checkpoint's bf16/fp16);
* unquantized → the checkpoint's dtype (fp32 → the tf32 tensor-core peak).

``--dtype`` re-prices the weights and follows the same rule: fp8 and int8 as W8A8, int4,
MXFP4 and NVFP4 weight-only. A GPU without the peak (fp8 on an A100) computes in its bf16
peak, as engines run such weights through a weight-only kernel (Marlin).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..schema.arch import Architecture
from ..schema.precision import dtype_label, weight_format
from .gpus import GPU

W8A8 = {"float8_e4m3fn", "float8_e5m2", "int8"}


@dataclass(frozen=True)
class Precision:
    """The element type the math runs in, the peak it gets on a GPU, and why."""

    dtype: str
    peak: int  # dense FLOP/s on the GPU (before --mfu)
    why: str

    def note(self) -> str:
        return f"compute at the dense {dtype_label(self.dtype)} peak ({self.why})"


def _activations(q: Mapping[str, object]) -> Mapping[str, object] | None:
    """The one config group's ``input_activations`` of a compressed-tensors scheme."""
    groups = q.get("config_groups")
    if not isinstance(groups, Mapping):
        return None
    for group in groups.values():
        if isinstance(group, Mapping) and isinstance(group.get("input_activations"), Mapping):
            return group["input_activations"]  # type: ignore[return-value]
    return None


def _checkpoint(arch: Architecture) -> tuple[str, str]:
    fmt = weight_format(arch)
    base = fmt.base_dtype or "bfloat16"
    if not fmt.quantized:
        return base, f"unquantized {dtype_label(base)} checkpoint"
    q = arch.get("quantization_config") or {}
    method = str(q.get("quant_method", "")).lower() if isinstance(q, Mapping) else ""
    if method in ("fp8", "fbgemm_fp8"):  # fbgemm_fp8: activations quantized per token at run time
        scales = "static" if str(q.get("activation_scheme", "")).lower() == "static" else "dynamic"
        return fmt.quant_dtype or "float8_e4m3fn", f"FP8 W8A8 checkpoint ({scales} activation scales)"
    if method == "compressed-tensors":
        act = _activations(q)
        if act is not None and fmt.quant_dtype in W8A8:
            return fmt.quant_dtype or "int8", f"{fmt.kind} W8A8 checkpoint (activations quantized too)"
        if act is not None and fmt.quant_dtype == "nvfp4" and act.get("num_bits") == 4:
            return "nvfp4", "NVFP4 W4A4 checkpoint"
    return base, f"{fmt.kind} weight-only checkpoint: activations stay {dtype_label(base)}"


def compute_precision(arch: Architecture, weight_dtype: str | None, gpu: GPU) -> Precision:
    """The precision decode and prefill math run in for ``arch`` (re-priced as
    ``weight_dtype`` when given) on ``gpu``."""
    if weight_dtype is None:
        dtype, why = _checkpoint(arch)
    elif weight_dtype in W8A8:
        dtype, why = weight_dtype, f"--dtype {dtype_label(weight_dtype)} priced as W8A8"
    elif weight_dtype in ("int4", "mxfp4", "nvfp4"):
        base = weight_format(arch).base_dtype or "bfloat16"
        base = "bfloat16" if base == "float32" else base
        dtype, why = (
            base,
            f"--dtype {dtype_label(weight_dtype)} priced weight-only, activations {dtype_label(base)}",
        )
    else:
        dtype, why = weight_dtype, f"--dtype {dtype_label(weight_dtype)} throughout"
    if not gpu.has_peak(dtype):
        why += f"; {gpu.id} has no {dtype_label(dtype)} peak, so its bf16 peak"
        dtype = "bfloat16"
    return Precision(dtype, gpu.peak_for(dtype), why)


def explicit_precision(dtype: str, gpu: GPU) -> Precision:
    """A compute dtype the caller chose (``Workload.compute_dtype``)."""
    return Precision(dtype, gpu.peak_for(dtype), "chosen")
