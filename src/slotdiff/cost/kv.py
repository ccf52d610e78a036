"""KV cache and recurrent state, per layer kind.

Softmax attention holds K and V per token: 2·g·hd bytes-per-element per layer (V with its
own width when v_head_dim differs); another mechanism caches what its construct module
says (constructs/: MLA's latent and decoupled RoPE key). Sliding and chunked layers never hold more
than their window. Linear-attention and SSM layers hold a fixed state per sequence,
reported apart because it does not grow with context.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..constructs import construct
from ..constructs.attention import kv_head_elements
from ..schema.arch import Architecture, LayerSpec
from ..schema.precision import canonical_dtype, storage_bits


def _b(dtype: str) -> float:
    return storage_bits(dtype) / 8  # block-scaled formats (MXFP4, NVFP4) carry their scales


def layer_kv_elements(arch: Architecture, layer: LayerSpec) -> int:
    """Elements cached per token by one layer (0 for recurrent layers and layers that
    reuse another layer's K/V)."""
    mech = construct(layer.mixer)
    if layer.kv_shared:
        # K/V (or the latent) come from an earlier layer: what the construct still caches
        return mech.shared_kv_elements(arch, layer) if mech else 0
    elems = mech.kv_elements(arch, layer) if mech and mech.softmax else 0
    if layer.shared_block is not None:  # a weight-shared attention block run on this layer
        elems += kv_head_elements(arch, layer)
    return elems


def compressed_kv_elements(arch: Architecture, layer: LayerSpec) -> int:
    """Elements of one compressed KV entry (held once per ``layer.compress`` tokens, beyond
    any window): the pooled K=V head, and with an indexer its compressed key."""
    if not layer.compress:
        return 0
    hd = layer.head_dim or arch.get("head_dim") or 0
    return hd + ((arch.get("index_head_dim") or 0) if layer.sparse else 0)


def layer_span(layer: LayerSpec, context: int) -> int:
    """Tokens a layer keeps in cache at ``context``: capped by its window or chunk."""
    cap = min(x for x in (layer.window, layer.chunk, context) if x)
    return min(context, cap)


def layer_state_elements(arch: Architecture, layer: LayerSpec) -> tuple[int, int]:
    """Fixed per-sequence state of a layer's mixers: (in the state dtype, in the model dtype),
    as each construct says (a recurrence's state; ZAYA's CCA or Inkling's convolutions beside
    softmax attention), with a recurrent mixer run beside the attention (``parallel``)."""
    mech = construct(layer.mixer)
    rec, conv = mech.state_elements(arch, layer) if mech else (0, 0)
    if layer.parallel:
        side = construct(layer.parallel)
        prec, pconv = side.mixer_state(arch, None) if side else (0, 0)
        rec, conv = rec + prec, conv + pconv
    return rec, conv


def state_dtype(arch: Architecture) -> str:
    """dtype of recurrent (SSM / linear-attention) states: the config's own cache dtype, else
    float32, which transformers keeps them in even when the model runs in bf16."""

    return canonical_dtype(arch.get("ssm_state_dtype")) or "float32"


@dataclass(frozen=True)
class KVCost:
    """KV bytes per token (uncapped), at the workload's context, and fixed state."""

    dtype: str
    bytes_per_token: int  # every attention layer, before any window cap
    bytes_at_context: int  # Σ_layers min(context, window) × per-layer bytes, one sequence
    context: int
    state_bytes_per_sequence: int  # recurrent layers, independent of context
    by_kind: tuple[tuple[str, int], ...]  # per-token bytes by layer kind
    attention_layers: int
    recurrent_layers: int
    # What one decode step reads of one sequence's cache at the context: the stored bytes,
    # except DSA layers, whose top-k selection reads the indexer keys over the whole span but
    # the latents of only index_topk tokens.
    read_at_context: int = -1
    bytes_per_token_long: int = -1  # per token past every window and chunk (full layers only)

    def __post_init__(self) -> None:
        if self.read_at_context < 0:
            object.__setattr__(self, "read_at_context", self.bytes_at_context)
        if self.bytes_per_token_long < 0:
            object.__setattr__(self, "bytes_per_token_long", self.bytes_per_token)

    @property
    def windowed(self) -> bool:
        """Some layers cap their cache at a window or chunk, so the rate per token falls with
        the context."""
        return self.bytes_per_token_long != self.bytes_per_token

    def to_dict(self) -> dict[str, object]:
        return {
            "dtype": self.dtype,
            "bytes_per_token": self.bytes_per_token,
            "bytes_at_context": self.bytes_at_context,
            "context": self.context,
            "state_bytes_per_sequence": self.state_bytes_per_sequence,
            "by_kind": dict(self.by_kind),
            "attention_layers": self.attention_layers,
            "recurrent_layers": self.recurrent_layers,
            "read_bytes_at_context": self.read_at_context,
            "bytes_per_token_beyond_windows": self.bytes_per_token_long,
        }


def kv_cost(arch: Architecture, context: int, dtype: str = "bfloat16") -> KVCost:
    """KV cache of one sequence at ``context`` tokens, with ``dtype`` elements.

    Recurrent states are priced at :func:`state_dtype`, convolution windows at ``dtype``.
    """
    b = _b(dtype)
    b_state = _b(state_dtype(arch))
    per_token = 0.0
    at_context = 0.0
    read = 0.0
    long_rate = 0.0
    state = 0.0
    by_kind: dict[str, float] = {}
    n_attn = n_rec = 0
    for layer, n in arch.layer_runs:  # n identical layers at once (sums of exact products)
        elems = layer_kv_elements(arch, layer)
        if elems:
            n_attn += n
            mech = construct(layer.mixer)
            kind = (
                mech.kv_kind(layer)
                if mech
                else "sliding"
                if layer.window
                else "chunked"
                if layer.chunk
                else "full"
            )
            by_kind[kind] = by_kind.get(kind, 0) + elems * b * n
            per_token += elems * b * n
            span = layer_span(layer, context)
            at_context += elems * b * span * n
            # compressed entries beside the window (DeepSeek-V4): held and read at this context
            compressed = (
                compressed_kv_elements(arch, layer) * b * (context // (layer.compress or context)) * n
            )
            at_context += compressed
            selected = mech.selected_read(arch, layer, elems, span) if mech else None
            if selected is not None:  # a top-k selection reads less than the span holds (DSA)
                read += selected * b * n
            else:
                read += elems * b * span * n
            read += compressed
            if not (layer.window or layer.chunk):
                long_rate += elems * b * n
        rec, conv = layer_state_elements(arch, layer)
        if rec or conv:
            n_rec += n
            state += (rec * b_state + conv * b) * n
    return KVCost(
        dtype,
        round(per_token),
        round(at_context),
        context,
        round(state),
        tuple((k, round(v)) for k, v in by_kind.items()),
        n_attn,
        n_rec,
        round(read),
        round(long_rate),
    )
