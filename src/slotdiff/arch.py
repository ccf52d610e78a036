"""Frozen data passed between stages: resolved values, per-layer specs, the Architecture.

Every value remembers how it was decided (an explicit key, an alias, transformers'
default for the model_type, a fact fixed by the model_type's implementation, a
derivation, or unknown) and the config keys that decided it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# How a value was decided; the order is also the order of trust.
HOW = ("explicit", "alias", "model_type", "default", "derived", "assumed", "unknown")


@dataclass(frozen=True)
class Value:
    """One canonical field's value with its provenance."""

    value: Any
    how: str  # one of HOW
    keys: tuple[str, ...] = ()  # dotted config keys that decided it
    note: str = ""

    @property
    def known(self) -> bool:
        return self.how != "unknown"


UNKNOWN = Value(None, "unknown")


@dataclass(frozen=True)
class LayerSpec:
    """What one decoder layer holds: its sequence mixer and its FFN.

    ``mixer`` is one of: attention (softmax, GQA/MQA/MHA), mla, linear_attention, mamba,
    mamba2, conv, cross_attention, or None (an FFN-only layer, e.g. Nemotron-H "E"/"-").
    ``ffn`` is dense, moe, or None (a mixer-only layer, e.g. Mamba).
    """

    index: int
    mixer: str | None = "attention"
    variant: str | None = None  # linear-attention flavour (gated_deltanet, lightning, kda)
    window: int | None = None  # sliding window in tokens; None = full causal
    chunk: int | None = None  # chunked attention (Llama 4); None = not chunked
    rope: bool = True  # False on NoPE layers
    ffn: str | None = "dense"
    d_ff: int | None = None  # dense FFN width of this layer (None = the model's d_ff)
    n_kv_heads: int | None = None  # per-layer override (Gemma 4 global layers)
    head_dim: int | None = None  # per-layer override
    sparse: bool = False  # DeepSeek sparse attention (DSA) indexer on this layer


@dataclass(frozen=True)
class Architecture:
    """A config read into canonical fields and per-layer specs, with its provenance."""

    name: str
    model_type: str
    fields: Mapping[str, Value]
    layers: tuple[LayerSpec, ...]
    text_path: tuple[str, ...] = ()
    vision: Mapping[str, Value] | None = None
    unknown_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    known_model_type: bool = True
    origin_note: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))
        if self.vision is not None:
            object.__setattr__(self, "vision", MappingProxyType(dict(self.vision)))

    def v(self, name: str) -> Value:
        """The resolved Value of a canonical field (UNKNOWN when never resolved)."""
        return self.fields.get(name, UNKNOWN)

    def get(self, name: str, default: Any = None) -> Any:
        """The plain value of a canonical field, or ``default`` when unknown/None."""
        val = self.fields.get(name)
        return default if val is None or val.value is None else val.value

    def key(self, name: str) -> str:
        """A config key path to cite for ``name`` (prefixed with the text config path)."""
        val = self.fields.get(name)
        if val and val.keys:
            return val.keys[0]
        return name

    @property
    def n_layers(self) -> int:
        return len(self.layers)


@dataclass(frozen=True)
class Evidence:
    """Config keys that decided a fill, with their values as read."""

    keys: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
