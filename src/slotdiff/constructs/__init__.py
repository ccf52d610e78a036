"""Sequence-mixing mechanisms, one construct module each (its tensors, KV cache, FLOPs, saved
activations and slot fill), registered in the one table below, keyed by ``LayerSpec.mixer``.
A new mechanism is a module here and a line in CONSTRUCTS: the stages above ask the table
(docs/ARCHITECTURE.md, "Where a new thing goes")."""

from __future__ import annotations

from .attention import ATTENTION
from .base import Construct
from .conv import SHORT_CONV
from .cross_attention import CROSS_ATTENTION
from .linear_attention import LINEAR_ATTENTION
from .mamba import MAMBA, MAMBA2
from .mla import MLA_CONSTRUCT

CONSTRUCTS: dict[str, Construct] = {
    c.name: c
    for c in (ATTENTION, MLA_CONSTRUCT, LINEAR_ATTENTION, MAMBA, MAMBA2, SHORT_CONV, CROSS_ATTENTION)
}
PLAIN: Construct = ATTENTION  # plain softmax attention: what a counterfactual turns the others into


def construct(mixer: str | None) -> Construct | None:
    """The construct of a layer's mixer; None for a mixer no construct owns (or no mixer)."""
    return CONSTRUCTS.get(mixer) if mixer else None


def softmax(mixer: str | None) -> bool:
    """A mixer that runs softmax attention over a KV cache."""
    mech = construct(mixer)
    return bool(mech and mech.softmax)


def recurrent(mixer: str | None) -> bool:
    """A mixer with a fixed state per sequence instead of a KV cache (linear attention, SSM,
    short convolution)."""
    mech = construct(mixer)
    return bool(mech and mech.recurrent)


def is_cross(mixer: str | None) -> bool:
    """A cross-attention mixer: attends to image states, caches none of its own tokens."""
    mech = construct(mixer)
    return bool(mech and mech.cross)


def latent(mixer: str | None) -> bool:
    """A mixer whose cache has no heads for tensor parallelism to split (MLA's latent)."""
    mech = construct(mixer)
    return bool(mech and mech.latent_kv)


def of_fill(kind: str) -> Construct | None:
    """The construct an attention.kv fill of ``kind`` names (its kind is the construct's name)."""
    return CONSTRUCTS.get(kind)


__all__ = [
    "CONSTRUCTS",
    "PLAIN",
    "Construct",
    "construct",
    "is_cross",
    "latent",
    "of_fill",
    "recurrent",
    "softmax",
]
