"""Decoder cross-attention layers (Mllama): text queries attend to image states already
projected to the text width. K and V run per image state, not per text token, so the layer
caches no text-token KV and holds no recurrent state; vLLM's V0 engine sizes it like any
full-attention layer. Its image-state cache is priced with the image costs (cost/images)."""

from __future__ import annotations

from ..schema.arch import LayerSpec
from .base import Construct
from .tensor import Builder, need_int


class CrossAttention(Construct):
    """Cross-attention to image states."""

    name = "cross_attention"
    label = "cross_attention"
    softmax = False  # no text-token cache, no decode-time attention FLOPs of its own here
    cross = True
    vllm_kind = "full"  # V0 only; the V1 engine keeps no page for it

    def tensors(self, b: Builder, n: int, layer: LayerSpec) -> None:
        """q from the text, k and v from the image states, o, and Mllama's norms and gates."""
        cross_attention(b, n, layer)


CROSS_ATTENTION = CrossAttention()


def cross_attention(b: Builder, n: int, layer: LayerSpec) -> None:
    """Decoder cross-attention to image states already projected to the text width (Mllama).

    q reads text tokens; k and v read the image states, so they run per image state, not per
    text token, and the layer caches no text-token KV.
    """
    a = b.arch
    d, h = need_int(a, "d_model"), need_int(a, "n_heads")
    g = layer.n_kv_heads or need_int(a, "n_kv_heads")
    hd = layer.head_dim or need_int(a, "head_dim")
    mod = "model.layers.0.cross_attn"
    b.add("attention/cross.q", h * hd, d, n, "linear", f"{mod}.q_proj")
    b.add("attention/cross.k", g * hd, d, n, "linear", f"{mod}.k_proj")
    b.add("attention/cross.v", g * hd, d, n, "linear", f"{mod}.v_proj")
    b.add("attention/cross.o", d, h * hd, n, "linear", f"{mod}.o_proj")
    if a.get("cross_attn_qk_norm"):
        b.add("attention/cross.q_norm", hd, 1, n, "vector", f"{mod}.q_norm")
        b.add("attention/cross.k_norm", hd, 1, n, "vector", f"{mod}.k_norm")
    gates = a.get("cross_attn_gates") or 0
    b.add("attention/cross.gates", 1, 1, gates * n, "vector", "model.layers.0.cross_attn_attn_gate")
