"""Tensors of decoder cross-attention layers (Mllama). A self-attention mechanism's tensors
are its construct's (constructs/: plain attention's in attention_tensors.py, MLA's in mla.py)."""

from __future__ import annotations

from ...schema.arch import LayerSpec
from .tensor import Builder, need_int


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
