"""FLOPs per token (decode at a context) and per prompt (prefill), split weights vs attention.

Weights: 2 × active matmul parameters per token (every linear and convolution; routed
experts at top_k/n_experts; the head included even when tied; the embedding gather
excluded). Attention: per softmax layer, q·kᵀ and p·v over the tokens it sees,
2·h·(d_qk + d_v) per key, with the span capped by the layer's window or chunk. MLA is
counted in the form transformers runs (K/V decompressed per head, not absorbed); the
absorbed form is reported beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture, LayerSpec
from .params import ParamCount


def weight_flops_per_token(arch: Architecture, params: ParamCount) -> int:
    """2 × active matmul params (head included even if tied; embedding gather excluded)."""
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    total = 0
    for t in params.tensors:
        if not t.matmul or t.slot in ("vision", "connector"):
            continue
        n = t.params
        if t.routed and e:
            n = n * k // e
        total += n
    if arch.get("tie_embeddings"):
        total += (arch.get("vocab") or 0) * (arch.get("d_model") or 0)
    return 2 * total


def _qk_v_dims(arch: Architecture, layer: LayerSpec, absorbed: bool = False) -> tuple[int, int, int]:
    """(heads, q·k width, v width) of an attention layer's score and mix products."""
    h = arch.get("n_heads") or 0
    if layer.mixer == "mla":
        rope, nope = arch.get("qk_rope_head_dim") or 0, arch.get("qk_nope_head_dim") or 0
        rank = arch.get("kv_lora_rank") or 0
        if absorbed:
            return h, rank + rope, rank
        return h, nope + rope, arch.get("v_head_dim") or 0
    hd = layer.head_dim or arch.get("head_dim") or 0
    return h, hd, arch.get("v_head_dim") or hd


def _cap(arch: Architecture, layer: LayerSpec) -> int | None:
    """Most keys one query can see on this layer: sliding window or DSA top-k."""
    caps = [c for c in (layer.window, arch.get("index_topk") if layer.sparse else None) if c]
    return min(caps) if caps else None


def attended(arch: Architecture, layer: LayerSpec, position: int) -> int:
    """Keys a query at 1-based ``position`` attends to on this layer."""
    span = position
    if layer.chunk:
        span = (position - 1) % layer.chunk + 1
    cap = _cap(arch, layer)
    return min(span, cap) if cap else span


def _tri_capped(n: int, cap: int | None) -> int:
    """Σ_{p=1..n} min(p, cap)."""
    if cap is None or n <= cap:
        return n * (n + 1) // 2
    return cap * (cap + 1) // 2 + (n - cap) * cap


def _span_sum(arch: Architecture, layer: LayerSpec, s: int) -> int:
    """Σ over positions 1..s of the keys attended (causal prefill), in closed form."""
    cap = _cap(arch, layer)
    if layer.chunk:
        full, rest = divmod(s, layer.chunk)
        return full * _tri_capped(layer.chunk, cap) + _tri_capped(rest, cap)
    return _tri_capped(s, cap)


def attention_flops(arch: Architecture, context: int, absorbed: bool = False) -> int:
    """Attention FLOPs of one decode token at position ``context`` (score + mix)."""
    total = 0
    for layer in arch.layers:
        if layer.mixer not in ("attention", "mla"):
            continue
        h, dqk, dv = _qk_v_dims(arch, layer, absorbed)
        total += 2 * h * (dqk + dv) * attended(arch, layer, context)
        if layer.sparse:
            total += 2 * (arch.get("index_n_heads") or 0) * (arch.get("index_head_dim") or 0) * context
    return total


def prefill_attention_flops(arch: Architecture, s: int, causal: bool = True) -> int:
    """Attention FLOPs of a whole ``s``-token prompt; ``causal=False`` counts the full s×s."""
    total = 0
    for layer in arch.layers:
        if layer.mixer not in ("attention", "mla"):
            continue
        h, dqk, dv = _qk_v_dims(arch, layer)
        keys = _span_sum(arch, layer, s) if causal else s * s
        total += 2 * h * (dqk + dv) * keys
        if layer.sparse:
            idx = (arch.get("index_n_heads") or 0) * (arch.get("index_head_dim") or 0)
            total += 2 * idx * (s * (s + 1) // 2 if causal else s * s)
    return total


@dataclass(frozen=True)
class FlopsCost:
    """FLOPs per decode token at the context, and for a whole prompt of that length."""

    context: int
    weights_per_token: int
    attention_per_token: int
    attention_per_token_absorbed: int | None  # MLA only
    prefill: int  # causal, whole prompt of `context` tokens
    prefill_no_mask: int  # if the masked half is computed anyway

    @property
    def per_token(self) -> int:
        return self.weights_per_token + self.attention_per_token

    def to_dict(self) -> dict[str, object]:
        return {
            "per_token": self.per_token,
            "weights_per_token": self.weights_per_token,
            "attention_per_token": self.attention_per_token,
            "attention_per_token_absorbed": self.attention_per_token_absorbed,
            "mla_form": "decompressed (as transformers runs it)"
            if self.attention_per_token_absorbed is not None
            else None,
            "context": self.context,
            "prefill": self.prefill,
            "prefill_no_mask": self.prefill_no_mask,
        }


def flops_cost(arch: Architecture, params: ParamCount, context: int) -> FlopsCost:
    """Per-token and prefill FLOPs at ``context``."""
    w = weight_flops_per_token(arch, params)
    mla = any(layer.mixer == "mla" for layer in arch.layers)
    return FlopsCost(
        context=context,
        weights_per_token=w,
        attention_per_token=attention_flops(arch, context),
        attention_per_token_absorbed=attention_flops(arch, context, absorbed=True) if mla else None,
        prefill=w * context + prefill_attention_flops(arch, context),
        prefill_no_mask=w * context + prefill_attention_flops(arch, context, causal=False),
    )
