"""Stored tensors as the logical weights they hold: a packed quantized weight (FP8 with block
scales, MXFP4, NVFP4, GPTQ/AWQ int32 words, compressed-tensors, bitsandbytes) counts its
unpacked elements under its logical name, and its scales, zeros and other companions are
attributed to the format, not to a slot.

The formats' layouts are data (``schemas/checkpoint_formats.json`` ``quantized``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from ..read.checkpoint import StoredTensor
from ..schema.arch import Architecture
from ..schema.precision import dtype_bits, weight_format

COMPANIONS = "quantization scales and zeros"


@dataclass(frozen=True)
class Unpacked:
    """One stored tensor read as a model weight: its logical name, shape and element count
    (None when only the name is known), or what it is attributed to instead."""

    tensor: StoredTensor
    name: str
    shape: tuple[int, ...] | None
    params: int | None
    attributed: str | None = None


@cache
def _table() -> Mapping[str, Any]:
    return load_schema_file("checkpoint_formats.json")


def _method(arch: Architecture) -> tuple[str, Mapping[str, Any]] | None:
    q = arch.get("quantization_config")
    if not isinstance(q, Mapping):
        return None
    method = str(q.get("quant_method", "")).lower()
    return (method, q) if method in _table()["quantized"] else None


def _bits(arch: Architecture, entry: Mapping[str, Any], q: Mapping[str, Any]) -> int:
    """Bits of one logical element: slotdiff's weight format's, else the format's flag or default."""
    for flag, bits in entry.get("bits_by_flag", {}).items():
        if q.get(flag) is True:
            return int(bits)
    try:
        fmt = weight_format(arch)
    except SlotdiffError:
        fmt = None
    if fmt is not None and fmt.supported and fmt.quant_dtype:
        return dtype_bits(fmt.quant_dtype)
    return int(entry["bits"])


def unpack(tensors: tuple[StoredTensor, ...], arch: Architecture) -> tuple[Unpacked, ...]:
    """Each stored tensor as the weight it holds (unquantized tensors as they are)."""
    found = _method(arch)
    if found is None:
        return tuple(Unpacked(t, t.name, t.shape, t.numel) for t in tensors)
    method, q = found
    entry = _table()["quantized"][method]
    bits = _bits(arch, entry, q)
    stored_bits = _table()["safetensors_bits"]
    companions = tuple(entry["companions"])
    out = []
    for t in tensors:
        if t.name.endswith(companions):
            out.append(Unpacked(t, t.name, t.shape, t.numel, COMPANIONS))
            continue
        rule = _rule(entry, t)
        if rule is None:
            out.append(Unpacked(t, t.name, t.shape, t.numel))
            continue
        name = t.name[: len(t.name) - len(rule["suffix"])] + rule["weight"]
        if t.shape is None or t.dtype not in stored_bits:  # names only: the logical name still counts
            out.append(Unpacked(t, name, None, None))
            continue
        per = max(1, stored_bits[t.dtype] // bits)
        shape = (*t.shape[:-1], t.shape[-1] * per) if t.shape else t.shape
        out.append(Unpacked(t, name, shape, (t.numel or 0) * per))
    return tuple(out)


def _rule(entry: Mapping[str, Any], t: StoredTensor) -> Mapping[str, Any] | None:
    """The packing rule ``t`` falls under (by name suffix, and dtype where the rule names some)."""
    for r in entry["packed"]:
        if t.name.endswith(r["suffix"]) and (t.dtype is None or t.dtype in r.get("dtypes", (t.dtype,))):
            return r
    return None
