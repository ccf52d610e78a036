"""Weight bytes of the checkpoint, tensor by tensor, in its own number format.

Quantized formats cover linear layers only; embeddings, norms, biases, convolutions,
routers and the output head stay in the checkpoint's dtype (transformers' quantizers keep
the head and non-Linear modules unconverted), and the config's exclusion list
(``modules_to_not_convert`` / ``ignore``) leaves more modules unquantized.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..schema.arch import Architecture
from ..schema.precision import WeightFormat, dtype_bits, weight_format
from .inventory.tensor import Tensor
from .params import ParamCount

# Never quantized by the weight-only schemes slotdiff models.
UNQUANTIZED_SLOTS = frozenset({"router", "head", "embedding", "position", "norms"})
QUANT_OVERRIDES = {
    "int4": dict(kind="int4", quant_dtype="int4", group=128, scale_bits=16, zero_bits=4),
    "mxfp4": dict(kind="mxfp4", quant_dtype="mxfp4", group=32, scale_bits=8),
    "nvfp4": dict(kind="nvfp4", quant_dtype="nvfp4", group=16, scale_bits=8),
    "float8_e4m3fn": dict(kind="fp8-block", quant_dtype="float8_e4m3fn", block=(128, 128), scale_bits=32),
    "float8_e5m2": dict(kind="fp8-block", quant_dtype="float8_e5m2", block=(128, 128), scale_bits=32),
    "int8": dict(kind="int8", quant_dtype="int8", scale_bits=16),
}


def effective_format(arch: Architecture, override: str | None) -> tuple[WeightFormat, list[str]]:
    """The format to price: the checkpoint's, or ``override`` applied to its linears."""
    fmt = weight_format(arch)
    notes: list[str] = []
    if override is None:
        if fmt.base_dtype is None:
            fmt = replace(fmt, base_dtype="bfloat16")
            notes.append("the config states no dtype for unquantized tensors: priced as bf16")
        return fmt, notes
    if override in QUANT_OVERRIDES:
        spec = dict(QUANT_OVERRIDES[override])
        kind = spec.pop("kind")
        base = fmt.base_dtype or "bfloat16"
        notes.append(
            f"weights re-priced as {kind} linears (group/block scales included), "
            f"embeddings, norms, router and head in {base}"
        )
        return WeightFormat(kind, kind, base, exclude=fmt.exclude, **spec), notes
    notes.append(f"weights re-priced as {override} throughout")
    return WeightFormat(override, override, override), notes


def tensor_bytes(t: Tensor, fmt: WeightFormat) -> int:
    """Bytes of ``t`` (all ``count`` copies) in ``fmt``: a per-layer row's layers each as the
    exclusion list says of that layer."""
    base = dtype_bits(fmt.base_dtype or "bfloat16")
    if not (fmt.quantized and t.kind == "linear" and t.slot not in UNQUANTIZED_SLOTS):
        return t.params * base // 8
    n = len(t.layers)
    if n and fmt.exclude and t.count % n == 0:
        plain = fmt.excluded_layers(t.module, t.layers)  # layers that leave it unquantized
        per = t.count // n
        quantized = fmt.linear_bytes(t.rows, t.cols, True) * per * (n - plain)
        return quantized + t.rows * t.cols * per * plain * base // 8
    if fmt.excludes(t.module):
        return t.params * base // 8
    return fmt.linear_bytes(t.rows, t.cols, True) * t.count


@dataclass(frozen=True)
class WeightsCost:
    """Checkpoint weight bytes and how they split."""

    bytes: int
    format: str
    detail: str
    by_part: tuple[tuple[str, int], ...]
    routed_bytes: int  # routed experts (read partially per decode step)
    embedding_bytes: int  # token embedding table (a gather, unless tied to the head)
    position_bytes: int  # learned position table (a gather)
    mtp_bytes: int
    supported: bool
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "bytes": self.bytes if self.supported else None,
            "format": self.format,
            "detail": self.detail,
            "by_part": dict(self.by_part),
            "routed_experts_bytes": self.routed_bytes,
            "mtp_bytes": self.mtp_bytes,
            "notes": list(self.notes),
        }


def weights_cost(
    arch: Architecture,
    params: ParamCount,
    override: str | None = None,
    mtp: tuple[Tensor, ...] = (),
) -> WeightsCost:
    """Weight bytes of ``arch`` in its own format (or ``override``)."""
    fmt, notes = effective_format(arch, override)
    by: dict[str, int] = {}
    routed = embedding = position = 0
    base_bits = None if fmt.quantized else dtype_bits(fmt.base_dtype or "bfloat16")
    for t in params.tensors:
        # Unquantized: every tensor at the base dtype (what tensor_bytes gives, looked up once).
        n = tensor_bytes(t, fmt) if base_bits is None else t.params * base_bits // 8
        by[t.slot] = by.get(t.slot, 0) + n
        if t.routed:
            routed += n
        if t.part == "embedding/tokens":
            embedding += n
        if t.slot == "position":
            position += n
    if not fmt.supported:
        notes.append(f"{fmt.detail}: weight bytes not given")
    mtp_bytes = sum(tensor_bytes(t, fmt) for t in mtp)
    return WeightsCost(
        sum(by.values()),
        fmt.kind,
        fmt.detail,
        tuple(by.items()),
        routed,
        embedding,
        position,
        mtp_bytes,
        fmt.supported,
        tuple(notes),
    )
