"""Frozen data passed between stages: resolved values, per-layer specs, the Architecture.

Every value remembers how it was decided (an explicit key, an alias, transformers'
default for the model_type, a fact fixed by the model_type's implementation, a
derivation, or unknown) and the config keys that decided it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from operator import attrgetter
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
    """What one decoder layer holds: its sequence mixer(s) and its FFN(s).

    ``mixer`` is one of: attention (softmax, GQA/MQA/MHA), mla, linear_attention, mamba
    (Mamba-1 selective scan), mamba2, conv (gated short convolution, LFM2), cross_attention,
    or None (an FFN-only layer, e.g. Nemotron-H "E"/"-"). ``variant`` names the flavour of a
    linear_attention layer (gated_deltanet, lightning, kda) or of a conv layer (short_conv).
    ``ffn`` is dense, moe, or None (a mixer-only layer, e.g. Mamba).

    Per-layer cache/state sizes follow from these fields plus the model-wide dims:
    softmax layers (``mixer`` attention/mla, unless ``kv_shared``) keep a KV cache, using
    ``n_kv_heads``/``head_dim`` when set here; mamba/mamba2/linear_attention/conv layers and
    a ``parallel`` mixer keep a fixed-size recurrent (and short-conv) state; a layer with a
    ``shared_block`` also runs that block's softmax attention, so it keeps a KV cache too
    (with the model's n_kv_heads/head_dim unless set here).
    """

    index: int
    mixer: str | None = "attention"
    variant: str | None = None  # linear-attention / conv flavour (gated_deltanet, lightning, kda)
    window: int | None = None  # sliding window in tokens; None = full causal
    chunk: int | None = None  # chunked attention (Llama 4); None = not chunked
    rope: bool = True  # False on NoPE layers
    ffn: str | None = "dense"
    d_ff: int | None = None  # dense FFN width of this layer (None = the model's d_ff)
    n_kv_heads: int | None = None  # per-layer override (Gemma 4 global layers)
    n_heads: int | None = None  # per-layer query heads (Laguna num_attention_heads_per_layer)
    head_dim: int | None = None  # per-layer override
    sparse: bool = False  # DeepSeek sparse attention (DSA) indexer on this layer
    # A DSA layer that reuses an earlier layer's top-k selection (indexer_types "shared"): it
    # attends to index_topk keys like any sparse layer, with no indexer and no indexer keys.
    index_shared: bool = False
    # A second sequence mixer fed the same normed input as ``mixer``, its output summed
    # into the residual (Falcon-H1: mamba2 beside attention); None = none.
    parallel: str | None = None
    # Index of a weight-shared attention+MLP block run at this layer before its mixer
    # (Zamba2 "hybrid" layers); weights count once per distinct index. None = none.
    shared_block: int | None = None
    # A second FFN on this layer (Gemma 4: MoE beside the dense MLP; LongCat-Flash: the
    # shortcut MoE); None = none.
    ffn2: str | None = None
    # The attention reuses K/V computed by an earlier layer (Gemma 4 KV sharing): no k/v
    # projections and no KV cache of its own.
    kv_shared: bool = False
    # The layer runs the weights of an earlier layer (a weight-shared recurrence: HRM runs its
    # two stacks H_cycles × (L_cycles + 1) times): no parameters of its own, but its own KV
    # cache and its own compute.
    tied: bool = False
    # Compressed KV beside the sliding window: one pooled KV entry every ``compress`` tokens
    # (DeepSeek-V4 HCA/CSA layers; with ``sparse`` an indexer over the compressed keys).
    compress: int | None = None
    # Per-layer values of model-wide size fields no attribute above holds, as (canonical field,
    # value) pairs: an MLA layer's own kv_lora_rank, qk_nope_head_dim ... (transformers'
    # per_layer_config, Dots3 Note's sliding layers). Read through :func:`layer_size`.
    sizes: tuple[tuple[str, int], ...] = ()


def layer_size(arch: Architecture, layer: LayerSpec, name: str) -> Any:
    """The value of size field ``name`` on ``layer``: its own (``sizes``), else the model's."""
    for key, value in layer.sizes:
        if key == name:
            return value
    return arch.get(name)


_LAYER_FIELDS = frozenset(f.name for f in fields(LayerSpec))
# Everything that makes two layers cost the same: every field but the index.
_layer_design = attrgetter(*(f.name for f in fields(LayerSpec) if f.name != "index"))


def evolve(spec: LayerSpec, **changes: Any) -> LayerSpec:
    """``dataclasses.replace`` for a LayerSpec, ~5x cheaper: layouts and counterfactuals make
    one per layer per rule. A change to the values the layer already has returns it as is.

    The copy fills the new instance's ``__dict__`` instead of running ``__init__`` (LayerSpec
    has no ``__post_init__``): such an instance reads its attributes a little slower in
    CPython 3.11 (no inline values), which costs less than ``__init__`` would; measured with
    instruction counts on the corpus, the layout and the cost pass both come out ahead.
    """
    same = True
    for name, value in changes.items():
        if name not in _LAYER_FIELDS:
            raise TypeError(f"LayerSpec has no field {name!r}")
        if same:
            old = getattr(spec, name)
            same = type(old) is type(value) and old == value
    if same:
        return spec
    new = object.__new__(LayerSpec)
    state = new.__dict__
    state.update(spec.__dict__)
    state.update(changes)
    return new


def numbered(spec: LayerSpec, n: int) -> list[LayerSpec]:
    """``n`` copies of ``spec`` with indices 0..n-1 (copied as :func:`evolve` copies)."""
    state = {**spec.__dict__, "index": 0}
    out = []
    new = object.__new__
    for i in range(n):
        state["index"] = i  # the copy below takes it: no keyword dict per layer
        layer = new(LayerSpec)
        layer.__dict__.update(state)
        out.append(layer)
    return out


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
    # Keys of the text config that nothing read and that are not known to be structure-free:
    # each may change the structure without slotdiff knowing (the coverage check names them).
    unread_keys: tuple[str, ...] = ()
    # The file's own model_type when the text model is nested (llava for a llama text_config).
    config_model_type: str | None = None
    # The audio encoder's config key and model_type, when the config has one.
    audio: tuple[str, str | None] | None = None
    # Keys of the text config (cited, with the text path) that some resolution or layer rule
    # read, with their values as written: every one is shown in a slot facet's evidence.
    read_keys: tuple[tuple[str, Any], ...] = ()
    # The known model_type whose facts an unknown one was read with (nearest by config keys).
    donor: str | None = None
    # Keys the config repeats that its class derives instead, where the config's value differs
    # from the built one (schema/agreement.py): (cited key, given, built, rule).
    disagreements: tuple[tuple[str, Any, Any, str], ...] = ()
    # ModelOpt's hf_quant_config.json as read beside the config, (quant_algo,
    # kv_cache_quant_algo), even where it quantizes no weights (an engine may still refuse it).
    quant_file: tuple[str | None, str | None] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))
        if self.vision is not None and not isinstance(self.vision, MappingProxyType):
            # A read-only mapping is kept as is: a counterfactual copy shares its model's
            # (vision_tensors remembers its results per mapping).
            object.__setattr__(self, "vision", MappingProxyType(dict(self.vision)))
        # Plain values by name: ``get`` is called hundreds of times per cost pass.
        object.__setattr__(self, "_values", {k: v.value for k, v in self.fields.items()})

    def v(self, name: str) -> Value:
        """The resolved Value of a canonical field (UNKNOWN when never resolved)."""
        return self.fields.get(name, UNKNOWN)

    def get(self, name: str, default: Any = None) -> Any:
        """The plain value of a canonical field, or ``default`` when unknown/None."""
        value = self._values.get(name)
        return default if value is None else value

    def key(self, name: str) -> str:
        """A config key path to cite for ``name`` (prefixed with the text config path)."""
        val = self.fields.get(name)
        if val and val.keys:
            return val.keys[0]
        return name

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @cached_property
    def layer_runs(self) -> tuple[tuple[LayerSpec, int], ...]:
        """Each distinct layer design (index aside) with how many layers have it, in the
        order first seen: per-layer sums become one product per design."""
        return self._designs[0]

    @cached_property
    def run_layers(self) -> tuple[tuple[int, ...], ...]:
        """The indices of the layers of each design of ``layer_runs``, in order (what a
        quantizer's per-layer exclusion list is matched against): each layer's own
        ``LayerSpec.index``, its position in the model, also in a copy that holds some layers
        only (one pipeline stage's, one layer at its own index)."""
        return self._designs[1]

    @cached_property
    def _designs(self) -> tuple[tuple[tuple[LayerSpec, int], ...], tuple[tuple[int, ...], ...]]:
        first: dict[tuple[Any, ...], LayerSpec] = {}
        where: dict[tuple[Any, ...], list[int]] = {}
        for spec in self.layers:
            key = _layer_design(spec)
            at = where.get(key)
            if at is None:
                first[key], where[key] = spec, [spec.index]
            else:
                at.append(spec.index)
        return (
            tuple((first[key], len(at)) for key, at in where.items()),
            tuple(tuple(at) for at in where.values()),
        )


_ARCH_FIELDS = frozenset(f.name for f in fields(Architecture))


def with_layers(arch: Architecture, layers: tuple[LayerSpec, ...], **fields: Value) -> Architecture:
    """``replace(arch, layers=layers)`` with some canonical ``fields`` set, without rerunning
    ``__post_init__``: the cost pass makes one per memory plan, stage and counterfactual.

    The copy shares ``arch``'s read-only field mapping when no field changes, else a new one
    with only the changed values re-read; ``layer_runs`` is kept when ``layers`` is the same
    tuple (the same object), recomputed otherwise (and ``run_layers`` with it).
    """
    new = object.__new__(Architecture)
    state = new.__dict__
    state.update(arch.__dict__)
    state["layers"] = layers
    if layers is not arch.layers:
        for derived in ("layer_runs", "run_layers", "_designs"):
            state.pop(derived, None)
    if fields:
        merged = dict(arch.fields)
        merged.update(fields)
        values = dict(arch.__dict__["_values"])
        values.update((k, v.value) for k, v in fields.items())
        state["fields"] = MappingProxyType(merged)
        state["_values"] = values
    return new


@dataclass(frozen=True)
class Evidence:
    """Config keys that decided a fill, with their values as read."""

    keys: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
