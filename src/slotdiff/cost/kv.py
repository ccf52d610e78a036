"""KV cache and recurrent state, per layer kind.

Softmax attention holds K and V per token: 2·g·hd bytes-per-element per layer (V with its
own width when v_head_dim differs). MLA holds the latent and the decoupled RoPE key:
(kv_lora_rank + qk_rope_head_dim) per layer. Sliding and chunked layers never hold more
than their window. Linear-attention and SSM layers hold a fixed state per sequence,
reported apart because it does not grow with context.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture, LayerSpec
from ..precision import storage_bits


def _b(dtype: str) -> float:
    return storage_bits(dtype) / 8  # block-scaled formats (MXFP4, NVFP4) carry their scales


def layer_kv_elements(arch: Architecture, layer: LayerSpec) -> int:
    """Elements cached per token by one layer (0 for recurrent layers)."""
    if layer.mixer == "attention":
        g = layer.n_kv_heads or arch.get("n_kv_heads") or 0
        hd = layer.head_dim or arch.get("head_dim") or 0
        hv = arch.get("v_head_dim") or hd
        if arch.get("k_eq_v") and layer.window is None:
            return g * hd  # one tensor serves as K and V on these layers
        return g * (hd + hv)
    if layer.mixer == "mla":
        extra = (arch.get("index_head_dim") or 0) if layer.sparse else 0
        return (arch.get("kv_lora_rank") or 0) + (arch.get("qk_rope_head_dim") or 0) + extra
    return 0


def layer_span(layer: LayerSpec, context: int) -> int:
    """Tokens a layer keeps in cache at ``context``: capped by its window or chunk."""
    cap = min(x for x in (layer.window, layer.chunk, context) if x)
    return min(context, cap)


def layer_state_elements(arch: Architecture, layer: LayerSpec) -> int:
    """Fixed per-sequence state of a recurrent layer (SSM / linear attention), in elements."""
    m = layer.mixer
    if m == "linear_attention":
        nk, nv = arch.get("linear_n_k_heads") or 0, arch.get("linear_n_v_heads") or 0
        dk, dv = arch.get("linear_k_head_dim") or 0, arch.get("linear_v_head_dim") or 0
        kernel = arch.get("linear_conv_kernel") or 0
        conv = (2 * nk * dk + nv * dv) * kernel
        return nv * dk * dv + conv
    if m == "mamba2":
        heads, hdim = arch.get("ssm_n_heads") or 0, arch.get("ssm_head_dim") or 0
        groups, state = arch.get("ssm_n_groups") or 0, arch.get("ssm_state") or 0
        kernel = arch.get("ssm_conv_kernel") or 0
        return heads * hdim * state + (heads * hdim + 2 * groups * state) * kernel
    if m == "mamba":
        d = arch.get("d_model") or 0
        inner = int((arch.get("ssm_expand") or 2) * d)
        return inner * (arch.get("ssm_state") or 0) + inner * (arch.get("ssm_conv_kernel") or 0)
    return 0


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
        }


def kv_cost(arch: Architecture, context: int, dtype: str = "bfloat16") -> KVCost:
    """KV cache of one sequence at ``context`` tokens, with ``dtype`` elements."""
    b = _b(dtype)
    per_token = 0.0
    at_context = 0.0
    state = 0.0
    by_kind: dict[str, float] = {}
    n_attn = n_rec = 0
    for layer in arch.layers:
        elems = layer_kv_elements(arch, layer)
        if elems:
            n_attn += 1
            kind = (
                "mla"
                if layer.mixer == "mla"
                else ("sliding" if layer.window else "chunked" if layer.chunk else "full")
            )
            by_kind[kind] = by_kind.get(kind, 0) + elems * b
            per_token += elems * b
            at_context += elems * b * layer_span(layer, context)
        st = layer_state_elements(arch, layer)
        if st:
            n_rec += 1
            state += st * b
    return KVCost(
        dtype,
        round(per_token),
        round(at_context),
        context,
        round(state),
        tuple((k, round(v)) for k, v in by_kind.items()),
        n_attn,
        n_rec,
    )
