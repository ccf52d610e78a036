"""Stored tensors as the logical weights they hold: a packed quantized weight (FP8 with block
scales, MXFP4, NVFP4, GPTQ/AWQ int32 words, bitsandbytes) counts its unpacked elements, and its
scales, zeros and other companions are attributed to the format, not to a slot.

The formats' layouts are data (``schemas/checkpoint_formats.json`` ``quantized``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..read.checkpoint import StoredTensor
from ..schema.arch import Architecture


@dataclass(frozen=True)
class Unpacked:
    """One stored tensor read as a model weight: its logical shape and element count (None when
    only the name is known), or what it is attributed to instead (``attributed``)."""

    tensor: StoredTensor
    shape: tuple[int, ...] | None
    params: int | None
    attributed: str | None = None


def unpack(tensors: tuple[StoredTensor, ...], arch: Architecture) -> tuple[Unpacked, ...]:
    """Each stored tensor as the weight it holds (unquantized tensors as they are)."""
    return tuple(Unpacked(t, t.shape, t.numel) for t in tensors)
