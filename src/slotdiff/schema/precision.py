"""Weight number formats: read torch_dtype and quantization_config into a WeightFormat.

The format says which modules are quantized (and which are left in the checkpoint's dtype),
how many bits each quantized element takes, and the block or group scales stored beside
them, so weight bytes can be counted exactly, module by module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import SlotdiffError
from .arch import Architecture
from .dtypes import canonical_dtype, dtype_bits, dtype_label, formats, storage_bits
from .exclusion import matcher
from .quant_config import MAX_BITS, MAX_GROUP, QuantConfig

# Re-exported: callers read the dtype helpers from here too.
__all__ = [
    "WeightFormat",
    "canonical_dtype",
    "dtype_bits",
    "dtype_label",
    "formats",
    "storage_bits",
    "weight_format",
]


@dataclass(frozen=True)
class WeightFormat:
    """How the checkpoint stores its weights."""

    kind: str  # bf16, fp16, fp32, fp8, fp8-block, mxfp4, nvfp4, int4-awq, int4-gptq, int8, ...
    detail: str
    base_dtype: str | None  # unquantized tensors (None: the config does not say)
    quant_dtype: str | None = None  # element format of quantized linears
    block: tuple[int, int] | None = None  # 2-D scale tile (rows, cols), e.g. fp8 128x128
    group: int | None = None  # scale group along the input dimension
    scale_bits: int = 0
    zero_bits: int = 0
    # Neither block nor group: one weight scale per tensor (True) or one per output row
    # (False: per-channel, and the int formats' row scales).
    per_tensor: bool = False
    # Bits of the scalars stored once per quantized tensor: a static input scale, NVFP4's
    # second-level weight scale (ModelOpt's weight_scale_2, compressed-tensors' global scales)
    tensor_scalar_bits: int = 0
    exclude: tuple[str, ...] = ()
    supported: bool = True  # False: a scheme slotdiff does not model; bytes are not given

    @property
    def quantized(self) -> bool:
        return self.quant_dtype is not None

    def excludes(self, module: str) -> bool:
        """True when ``module`` (an HF-style dotted name) is left unquantized."""
        return bool(self.exclude) and matcher(self.exclude)(module)

    def excluded_layers(self, module: str, layers: tuple[int, ...]) -> int:
        """How many of ``layers`` leave ``module`` (named for layer 0) unquantized."""
        return matcher(self.exclude).excluded_layers(module, layers) if self.exclude else 0

    def linear_bytes(self, rows: int, cols: int, quantized: bool) -> int:
        """Exact bytes of one ``rows × cols`` linear weight (out × in), with its scales."""
        if not quantized or self.quant_dtype is None:
            return rows * cols * dtype_bits(self.base_dtype or "bfloat16") // 8
        bits = rows * cols * dtype_bits(self.quant_dtype)
        if self.block:
            tiles = math.ceil(rows / self.block[0]) * math.ceil(cols / self.block[1])
            bits += tiles * (self.scale_bits + self.zero_bits)
        elif self.group:
            groups = rows * math.ceil(cols / self.group)
            bits += groups * (self.scale_bits + self.zero_bits)
        else:  # one scale for the whole tensor, or one per output row (per-channel)
            bits += (1 if self.per_tensor else rows) * (self.scale_bits + self.zero_bits)
        return math.ceil((bits + self.tensor_scalar_bits) / 8)


def _base(arch: Architecture) -> str | None:
    """The checkpoint dtype the config states; None when it states none (or "auto").

    A dtype that is written but names no format is refused: assuming fp32 for it would
    price the weights from a guess while the config said something else.
    """
    value = arch.get("dtype")
    base = canonical_dtype(value)
    if base is None and value is not None and value != "auto":
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise SlotdiffError(arch.name, f"unknown dtype {shown}", key=arch.key("dtype"))
    return base


def _label(dtype: str | None) -> str:
    return formats()["dtypes"][dtype]["label"] if dtype else "not stated"


def weight_format(arch: Architecture) -> WeightFormat:
    """Read the weight format of ``arch`` from its dtype and quantization_config."""
    base = _base(arch)
    q = arch.get("quantization_config")
    if not isinstance(q, Mapping) or not q:
        if base is None:
            # transformers builds and loads in torch's default dtype (fp32) when the
            # config names none; GPT-2's own checkpoint is fp32.
            return WeightFormat(
                "fp32", "fp32 (assumed: no dtype in the config, transformers' default)", "float32"
            )
        kind = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(base, base)
        return WeightFormat(kind, _label(base), base)
    qr = QuantConfig(arch, q)
    method = str(q.get("quant_method", "")).lower()
    exclude = qr.patterns("modules_to_not_convert") + qr.patterns("ignore")
    keep = f", rest {_label(base)}" if base else ""
    if method == "fp8" and (q.get("quant_algo") or q.get("moe_quant_algo")):
        # ModelOpt's mixed exports under an fp8 method (NVFP4 experts, FP8 elsewhere, module by
        # module in ``quantized_layers``): not one format, so no one size per weight.
        algo = q.get("moe_quant_algo") or q.get("quant_algo")
        return WeightFormat(
            "quantized-mixed",
            f"fp8 with {algo} modules (ModelOpt mixed precision, not modelled)",
            base,
            supported=False,
            exclude=exclude,
        )
    if method == "fp8":
        fmt = canonical_dtype(str(q.get("fmt", "e4m3"))) or "float8_e4m3fn"
        b = qr.block(q, "weight_block_size")
        if b is not None:
            return WeightFormat(
                "fp8-block",
                f"{_label(fmt)} linears with {b[0]}×{b[1]} block scales{keep}",
                base,
                fmt,
                block=b,
                scale_bits=32,
                exclude=exclude + qr.patterns("ignored_layers"),  # vLLM reads it with blocks too
            )
        # No weight_block_size (AutoFP8's exports): vLLM's Fp8LinearMethod makes the weight scale
        # a PerTensorScaleParameter, one fp32 per checkpoint tensor, and a static scheme adds
        # one fp32 input_scale per tensor (transformers' FP8Linear: a scalar weight_scale_inv).
        static = str(q.get("activation_scheme", "dynamic")).lower() == "static"
        return WeightFormat(
            "fp8",
            f"{_label(fmt)} linears, per-tensor scales{' (static input scales)' if static else ''}{keep}",
            base,
            fmt,
            scale_bits=32,
            per_tensor=True,
            tensor_scalar_bits=32 if static else 0,
            exclude=exclude + qr.patterns("ignored_layers"),
        )
    if method == "fbgemm_fp8":
        # transformers' FbgemmFp8Linear and vLLM's FBGEMMFp8LinearMethod: an fp32 weight_scale
        # of (out_features, 1), one per output row; activations scaled per token at run time
        # (activation_scale_ub is a config value, not a stored tensor).
        return WeightFormat(
            "fp8",
            f"fp8 E4M3 linears, per-channel scales (FBGEMM){keep}",
            base,
            "float8_e4m3fn",
            scale_bits=32,
            exclude=exclude,
        )
    if method == "mxfp4":
        return WeightFormat(
            "mxfp4",
            f"MXFP4 (4-bit E2M1, E8M0 scale per 32){keep}",
            base,
            "mxfp4",
            group=32,
            scale_bits=8,
            exclude=exclude,
        )
    if method in ("awq", "gptq"):
        bits = qr.int(q, ["bits", "w_bit"], 4, 1, MAX_BITS) or 4
        group = qr.int(q, ["group_size", "q_group_size"], 128, -1, MAX_GROUP) or 0
        dtype = "int4" if bits == 4 else "int8" if bits == 8 else None
        if dtype is None:
            return WeightFormat(
                f"int{bits}-{method}",
                f"{method.upper()} {bits}-bit (not modelled)",
                base,
                supported=False,
            )
        zero = bits if (q.get("zero_point", True) or method == "gptq") else 0
        g = None if group <= 0 else group
        return WeightFormat(
            f"int{bits}-{method}",
            f"{method.upper()} int{bits}, group {group}, fp16 scales{keep}",
            base,
            dtype,
            group=g,
            scale_bits=16,
            zero_bits=zero,
            exclude=exclude,
        )
    if method == "compressed-tensors":
        return _compressed_tensors(qr, base, exclude, keep)
    if method == "modelopt":
        return _modelopt(qr, base, exclude + qr.patterns("exclude_modules"), keep)
    return WeightFormat(
        f"quantized-{method or 'unknown'}",
        f"quantized with {method or 'an unnamed method'} (not modelled)",
        base,
        supported=False,
        exclude=exclude,
    )


def _compressed_tensors(
    qr: QuantConfig, base: str | None, exclude: tuple[str, ...], keep: str
) -> WeightFormat:
    groups = qr.q.get("config_groups") or {}
    if not isinstance(groups, Mapping):
        raise qr.fail("config_groups", f"expected an object, got {type(groups).__name__}")
    named = [(k, g.get("weights")) for k, g in groups.items() if isinstance(g, Mapping)]
    named = [(k, w) for k, w in named if isinstance(w, Mapping)]
    weights = [w for _, w in named]
    if len(weights) != 1:
        return WeightFormat(
            "quantized-compressed-tensors",
            "compressed-tensors with several groups (not modelled)",
            base,
            supported=False,
            exclude=exclude,
        )
    w = weights[0]
    at = f"config_groups.{named[0][0]}.weights."
    bits = qr.int(w, ["num_bits"], 8, 1, MAX_BITS, at) or 8
    kind = str(w.get("type", "int"))
    group = qr.int(w, ["group_size"], None, -1, MAX_GROUP, at)
    fmt = str(qr.q.get("format", ""))
    if kind == "float" and bits == 4 and group == 32:
        return WeightFormat(
            "mxfp4",
            f"MXFP4 (compressed-tensors {fmt}){keep}",
            base,
            "mxfp4",
            group=32,
            scale_bits=8,
            exclude=exclude,
        )
    if kind == "float" and bits == 4 and group == 16:
        # The tensor_group strategy keeps an fp32 global scale per tensor beside the FP8 group
        # scales, for the weight and for static or "local" input activations alike
        # (compressed-tensors' _initialize_scale_zero_point: weight_global_scale,
        # input_global_scale; a dynamic=True input keeps none).
        g = groups[named[0][0]]
        inputs = g.get("input_activations")
        scalars = sum(
            32
            for args in (w, inputs)
            if isinstance(args, Mapping)
            and str(args.get("strategy", "")).lower() == "tensor_group"
            and args.get("dynamic") is not True
        )
        return WeightFormat(
            "nvfp4",
            f"NVFP4 (compressed-tensors {fmt}){keep}",
            base,
            "nvfp4",
            group=16,
            scale_bits=8,
            tensor_scalar_bits=scalars,
            exclude=exclude,
        )
    if kind == "float" and bits == 8:
        return _compressed_fp8(qr, w, at, base, exclude, f"compressed-tensors {fmt}", keep)
    if kind == "int" and bits in (4, 8):
        g = group if group is not None and group > 0 else None
        zero = 0 if w.get("symmetric", True) else bits
        return WeightFormat(
            f"int{bits}",
            f"int{bits} (compressed-tensors {fmt}){keep}",
            base,
            f"int{bits}",
            group=g,
            scale_bits=16,
            zero_bits=zero,
            exclude=exclude,
        )
    return WeightFormat(
        "quantized-compressed-tensors",
        f"compressed-tensors {kind}{bits} (not modelled)",
        base,
        supported=False,
        exclude=exclude,
    )


def _compressed_fp8(
    qr: QuantConfig,
    w: Mapping[str, Any],
    at: str,
    base: str | None,
    exclude: tuple[str, ...],
    name: str,
    keep: str,
) -> WeightFormat:
    """compressed-tensors' 8-bit float weights. The strategy is the one its QuantizationArgs
    infers (0.20: none stated reads as ``tensor`` without a group_size, ``channel`` with -1):
    ``tensor`` stores a weight_scale of one element, ``channel`` one of (out_features, 1),
    ``block`` one per tile. The scale is kept in the dtype of the weight it was observed on
    (initialize_qparams: ``scale_dtype = observed_dtype``; the naive float8 compressor stores it
    as it is, whatever ``scale_dtype`` says: only the fp4 / mxfp8 compressors cast to it), and a
    static input scheme (``input_activations.dynamic`` false) adds a one-element input_scale."""
    group = qr.int(w, ["group_size"], None, -1, MAX_GROUP, at)
    strategy = w.get("strategy")
    if strategy is None:  # a block_structure alone has always been read as block scales here
        found = qr.block(w, "block_structure", at) is not None
        strategy = "block" if found else "tensor" if group is None else "channel" if group == -1 else "group"
    scale_bits = dtype_bits(base or "bfloat16")
    act = _activations(qr.q)
    static = bool(act) and act.get("dynamic") is False
    inputs = ", static input scales" if static else ""
    common: dict[str, Any] = {"scale_bits": scale_bits, "tensor_scalar_bits": scale_bits if static else 0}
    b = qr.block(w, "block_structure", at) if strategy == "block" else None
    if strategy == "block" and b is not None:
        label = f"fp8 ({name}, {b[0]}×{b[1]} block scales{inputs}){keep}"
        return WeightFormat("fp8-block", label, base, "float8_e4m3fn", block=b, exclude=exclude, **common)
    if strategy in ("tensor", "channel"):
        label = f"fp8 ({name}, per-{strategy} scales{inputs}){keep}"
        return WeightFormat(
            "fp8", label, base, "float8_e4m3fn", per_tensor=strategy == "tensor", exclude=exclude, **common
        )
    return WeightFormat(
        "quantized-compressed-tensors",
        f"{name} fp8 with strategy {str(strategy)[:40]!r} (not modelled)",
        base,
        supported=False,
        exclude=exclude,
    )


def _activations(q: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first config group's ``input_activations`` (None: weight-only)."""
    groups = q.get("config_groups")
    for group in groups.values() if isinstance(groups, Mapping) else ():
        if isinstance(group, Mapping) and isinstance(group.get("input_activations"), Mapping):
            return group["input_activations"]
    return None


def _modelopt(qr: QuantConfig, base: str | None, exclude: tuple[str, ...], keep: str) -> WeightFormat:
    """NVIDIA ModelOpt checkpoints (``quant_method: modelopt``): NVFP4 (E2M1 elements, an FP8
    E4M3 scale per 16 along the input, as vLLM's ModelOptNvFp4Config reads them) or FP8 per
    tensor; a mixed export (``MIXED_PRECISION``: a format per module) is not one format."""
    algo = str(qr.q.get("quant_algo", "")).upper()
    if algo == "NVFP4":
        group = qr.int(qr.q, ["group_size"], 16, 1, MAX_GROUP)
        groups = qr.q.get("config_groups")
        if isinstance(groups, Mapping):
            for name, g in groups.items():
                w = g.get("weights") if isinstance(g, Mapping) else None
                if isinstance(w, Mapping):
                    group = qr.int(w, ["group_size"], group, 1, MAX_GROUP, f"config_groups.{name}.weights.")
        if group == 16:
            # Per quantized tensor also two fp32 scalars: weight_scale_2 (the second-level
            # weight scale) and input_scale (vLLM's ModelOptNvFp4LinearMethod creates both).
            return WeightFormat(
                "nvfp4",
                f"NVFP4 (ModelOpt: E2M1, an FP8 scale per 16, fp32 tensor and input scales){keep}",
                base,
                "nvfp4",
                group=16,
                scale_bits=8,
                tensor_scalar_bits=64,
                exclude=exclude,
            )
    if algo == "FP8":
        # vLLM's KFp8StaticTensor: a PerTensorScaleParameter weight_scale and input_scale,
        # one fp32 each per checkpoint tensor (static W8A8).
        return WeightFormat(
            "fp8",
            f"FP8 E4M3 linears, per-tensor weight and input scales (ModelOpt){keep}",
            base,
            "float8_e4m3fn",
            scale_bits=32,
            per_tensor=True,
            tensor_scalar_bits=32,
            exclude=exclude,
        )
    return WeightFormat(
        f"quantized-modelopt-{algo.lower() or 'unknown'}",
        f"ModelOpt {algo or 'with no quant_algo'} (not modelled)",
        base,
        supported=False,
        exclude=exclude,
    )
