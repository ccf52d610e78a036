"""FLOPs per token (decode at a context) and per prompt (prefill), split weights vs attention.

Weights: 2 × active matmul parameters per token (every linear and convolution; routed
experts at top_k/n_experts; the head included even when tied; the embedding gather
excluded). Attention: per softmax layer, q·kᵀ and p·v over the tokens it sees,
2·h·(d_qk + d_v) per key, with the span capped by the layer's window or chunk.

A construct's widths are its own (constructs/): MLA decode is counted in the absorbed form
inference engines run; where transformers runs another form (MLA re-expands every cached
latent at each step) that form is reported beside it (``attention_per_token_transformers``)
and is what the FLOP-counter oracle checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..constructs import construct, indexer
from ..schema.arch import Architecture, LayerSpec
from .params import ParamCount


def weight_flops_per_token(arch: Architecture, params: ParamCount) -> int:
    """2 × active matmul params (head included even if tied; embedding gather excluded)."""
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    total = 0
    for t in params.tensors + params.reused:  # reused: weight-tied layers compute again
        if not t.matmul or t.slot in ("vision", "connector", "audio"):
            continue
        n = t.params
        if t.routed and e:
            n = n * k // e
        total += n
    if arch.get("tie_embeddings"):
        total += (arch.get("vocab") or 0) * (arch.get("d_model") or 0)
    return 2 * total


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


def attention_flops(arch: Architecture, context: int, form: str = "absorbed") -> int:
    """Attention FLOPs of one decode token at position ``context`` (score + mix).

    ``form`` matters for MLA only: ``absorbed`` (engines), ``decompressed`` (per-head K/V
    already expanded), ``transformers`` (decompressed, plus re-expanding the other
    ``context − 1`` cached latents through kv_b_proj, as transformers does each step).
    """
    total = 0
    for layer, n in arch.layer_runs:  # n identical layers at once
        mech = construct(layer.mixer)
        if mech is None or not mech.softmax:  # no softmax attention on this layer
            continue
        h, dqk, dv = mech.qk_v_dims(arch, layer, absorbed=form == "absorbed")
        keys = attended(arch, layer, context)
        flops = 2 * h * (dqk + dv) * keys
        if form == "transformers":
            flops += mech.reexpand_flops(arch, layer, keys)
        flops += indexer.decode_flops(arch, layer, context)  # a shared layer reuses another's scores
        total += n * flops
    return total


def prefill_attention_flops(arch: Architecture, s: int, causal: bool = True) -> int:
    """Attention FLOPs of a whole ``s``-token prompt; ``causal=False`` counts the full s×s."""
    total = 0
    for layer, n in arch.layer_runs:  # n identical layers at once
        mech = construct(layer.mixer)
        if mech is None or not mech.softmax:
            continue
        h, dqk, dv = mech.qk_v_dims(arch, layer, absorbed=False)
        keys = _span_sum(arch, layer, s) if causal else s * s
        flops = 2 * h * (dqk + dv) * keys
        flops += indexer.prefill_flops(arch, layer, s, causal)
        total += n * flops
    return total


@dataclass(frozen=True)
class FlopsCost:
    """FLOPs per decode token at the context, and for a whole prompt of that length."""

    context: int
    weights_per_token: int
    attention_per_token: int
    attention_per_token_transformers: int | None  # MLA only: transformers' re-expanding form
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
            "attention_per_token_transformers": self.attention_per_token_transformers,
            "mla_form": "absorbed (decode as engines run it); attention_per_token_transformers "
            "re-expands the cached latents each step as transformers does"
            if self.attention_per_token_transformers is not None
            else None,
            "context": self.context,
            "prefill": self.prefill,
            "prefill_no_mask": self.prefill_no_mask,
        }


def flops_cost(arch: Architecture, params: ParamCount, context: int) -> FlopsCost:
    """Per-token and prefill FLOPs at ``context``."""
    w = weight_flops_per_token(arch, params)
    other_form = any((m := construct(layer.mixer)) and m.transformers_form for layer in arch.layers)
    return FlopsCost(
        context=context,
        weights_per_token=w,
        attention_per_token=attention_flops(arch, context),
        attention_per_token_transformers=attention_flops(arch, context, "transformers")
        if other_form
        else None,
        prefill=w * context + prefill_attention_flops(arch, context),
        prefill_no_mask=w * context + prefill_attention_flops(arch, context, causal=False),
    )
