"""Price each slot change: the same model with one facet set back to the baseline's fill.

For every facet whose design differs from the baseline (GPT-2 unless ``--against``), a
counterfactual Architecture keeps this model's sizes and swaps that one facet; the change's
price is this model minus the counterfactual (params, KV/token, FLOPs/token, decode step).
The rule used for each facet is written in ``schemas/counterfactuals.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from ..constructs import PLAIN, construct, is_cross, softmax
from ..core.resources import load_schema_file
from ..schema.arch import Architecture, LayerSpec, Value, evolve, with_layers
from ..slots.fill import Fill


@cache
def rules() -> dict[str, dict[str, str]]:
    """Facet → {to_kind: rule text} from schemas/counterfactuals.json."""
    return load_schema_file("counterfactuals.json")["rules"]


def with_fields(
    arch: Architecture, layers: tuple[LayerSpec, ...] | None = None, **fields: Any
) -> Architecture:
    """A copy of ``arch`` with some canonical fields (and optionally layers) replaced."""
    new = {name: Value(value, "derived", (), "counterfactual") for name, value in fields.items()}
    return with_layers(arch, arch.layers if layers is None else layers, **new)


def _kv(arch: Architecture, base: Fill) -> Architecture | None:
    h = arch.get("n_heads") or 0
    mech = next((m for s in arch.layers if (m := construct(s.mixer)) and m.softmax and not m.plain), None)
    if arch.layers and mech:  # another mechanism (MLA) as plain attention with the base's sharing
        layers = tuple(
            evolve(s, mixer=PLAIN.name) if (m := construct(s.mixer)) and m.softmax and not m.plain else s
            for s in arch.layers
        )
        g = (
            h
            if base.kind == "mha"
            else max(1, h // max(1, (base.size("n_heads") or 1) // max(1, base.size("n_kv_heads") or 1)))
        )
        return with_fields(arch, layers, **mech.as_attention(arch, g))
    if base.kind == "mha":
        return with_fields(arch, tuple(evolve(s, n_kv_heads=None) for s in arch.layers), n_kv_heads=h)
    if base.kind in ("gqa", "mqa"):
        ratio = max(1, (base.size("n_heads") or 1) // max(1, base.size("n_kv_heads") or 1))
        g = 1 if base.kind == "mqa" else max(1, h // ratio)
        while h % g:
            g -= 1
        return with_fields(arch, tuple(evolve(s, n_kv_heads=None) for s in arch.layers), n_kv_heads=g)
    return None


def _range(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind != "full":
        return None
    layers = tuple(evolve(s, window=None, chunk=None, sparse=False) for s in arch.layers)
    return with_fields(arch, layers, sinks=False)


def _mixer(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind != "softmax":
        return None
    attn = next((s for s in arch.layers if softmax(s.mixer)), None)
    mixer = attn.mixer if attn else "attention"
    layers = tuple(
        evolve(s, mixer=mixer, variant=None)
        if s.mixer is not None and not is_cross(s.mixer) and s.mixer != mixer
        else s
        for s in arch.layers
    )
    fields: dict[str, Any] = {}
    if attn is None:
        h = arch.get("ssm_n_heads") or max(1, (arch.get("d_model") or 64) // 64)
        fields.update(n_heads=h, n_kv_heads=h, head_dim=(arch.get("d_model") or 64) // h)
    return with_fields(arch, layers, **fields)


def _qk_norm(arch: Architecture, base: Fill) -> Architecture | None:
    return with_fields(arch, qk_norm=False) if base.kind == "none" else None


def _gate(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind != "none":
        return None
    return with_fields(arch, attn_output_gate=False, attn_gate="none", mla_q_gate=False)


def _scores(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind != "plain":
        return None
    return with_fields(
        arch, attn_softcap=None, query_scale=None, attn_temperature=False, softmax_scaling=False
    )


def _router(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind == "none":
        return None  # no router without experts: ffn.experts prices the MoE as a whole
    return with_fields(
        arch,
        router_bias=bool(base.attr("bias")),
        router_score_bias=bool(base.attr("aux_free")) and bool(arch.get("router_score_bias")),
    )


def _residual(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind != "single":
        return None
    return with_fields(arch, hc_mult=None, attn_res_block=None, full_qkv_inputs=False, laurel_rank=None)


def _attn_bias(arch: Architecture, base: Fill) -> Architecture | None:
    qkv = base.kind in ("qkv+out", "qkv")
    out = base.kind in ("qkv+out", "out")
    return with_fields(arch, qkv_bias=qkv, o_bias=out)


def _activation(arch: Architecture, base: Fill) -> Architecture | None:
    gated = bool(base.attr("gated"))
    if gated == bool(arch.get("ffn_gated")):
        return None
    # Equal parameters: a gated FFN of width f has 3·d·f weights, an ungated one 2·d·f'.
    factor = (3, 2) if not gated else (2, 3)
    layers = tuple(evolve(s, d_ff=(s.d_ff * factor[0] // factor[1]) if s.d_ff else None) for s in arch.layers)
    fields: dict[str, Any] = {"ffn_gated": gated}
    for name in ("d_ff", "d_ff_expert", "d_ff_shared"):
        if arch.get(name):
            fields[name] = arch.get(name) * factor[0] // factor[1]
    return with_fields(arch, layers, **fields)


def _experts(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind != "dense":
        return None
    k = arch.get("top_k") or 0
    width = k * (arch.get("d_ff_expert") or 0)
    shared = arch.get("d_ff_shared") or (arch.get("n_shared_experts") or 0) * (arch.get("d_ff_expert") or 0)
    width += shared
    d_ff = arch.get("d_ff") or 0

    def dense(s: LayerSpec) -> LayerSpec:
        if s.ffn == "moe":
            return evolve(s, ffn="dense", d_ff=width)
        if s.ffn2 == "moe":
            # Experts beside a dense FFN (Gemma 4): one dense FFN as wide as both together.
            return evolve(s, ffn2=None, d_ff=(s.d_ff or d_ff) + width)
        return s

    layers = tuple(dense(s) for s in arch.layers)
    return with_fields(arch, layers, n_experts=0, top_k=None, n_shared_experts=0, d_ff_shared=None)


def _ffn_bias(arch: Architecture, base: Fill) -> Architecture | None:
    return with_fields(arch, ffn_bias=base.kind == "bias", expert_bias=base.kind == "bias")


def _norm(arch: Architecture, base: Fill) -> Architecture | None:
    return with_fields(
        arch,
        norm=base.kind,
        norm_bias=bool(base.attr("bias")),
        norm_placement=base.attr("placement") or "pre",
    )


def _head(arch: Architecture, base: Fill) -> Architecture | None:
    return with_fields(arch, tie_embeddings=base.kind == "tied", final_softcap=None)


def _position(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind == "learned":
        return with_fields(
            arch,
            position="learned",
            position_offset=0,
            rel_bias_rows=0,  # the scheme replaced: no relative-position bias table either
            max_positions=arch.get("max_positions") or 2048,
        )
    if base.kind in ("rope", "mrope"):
        return with_fields(
            arch, position="rope", rel_bias_rows=0, layers=tuple(evolve(s, rope=True) for s in arch.layers)
        )
    return None


def _objective(arch: Architecture, base: Fill) -> Architecture | None:
    return with_fields(arch, mtp_layers=0) if base.kind == "next-token" else None


def _precision(arch: Architecture, base: Fill) -> Architecture | None:
    dtype = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}.get(base.kind)
    if dtype is None:
        return None
    return with_fields(arch, dtype=dtype, quantization_config=None)


def _modality(arch: Architecture, base: Fill) -> Architecture | None:
    if base.kind != "text":
        return None
    layers = tuple(s for s in arch.layers if not is_cross(s.mixer))
    layers = tuple(evolve(s, index=i) for i, s in enumerate(layers))
    return replace(arch, vision=None, layers=layers)


TRANSFORMS: dict[str, Callable[[Architecture, Fill], Architecture | None]] = {
    "attention.kv": _kv,
    "attention.range": _range,
    "attention.mixer": _mixer,
    "attention.qk_norm": _qk_norm,
    "attention.gate": _gate,
    "attention.scores": _scores,
    "attention.bias": _attn_bias,
    "ffn.activation": _activation,
    "ffn.experts": _experts,
    "ffn.router": _router,
    "ffn.bias": _ffn_bias,
    "norm.kind": _norm,
    "norm.residual": _residual,
    "head.tying": _head,
    "position.encoding": _position,
    "objective.target": _objective,
    "precision.weights": _precision,
    "modality.input": _modality,
}


@dataclass(frozen=True)
class Change:
    """One facet that differs from the baseline, and what it costs (this model − counterfactual)."""

    facet: str
    article: str
    this: str  # this model's fill (detail)
    baseline: str  # the baseline's fill (detail)
    rule: str | None  # the counterfactual rule, or None when the change is not priced
    deltas: dict[str, float | int | None]
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "facet": self.facet,
            "article": self.article,
            "this": self.this,
            "baseline": self.baseline,
            "rule": self.rule,
            "deltas": self.deltas,
            "note": self.note,
        }


def rule_text(facet: str, this: Fill, base: Fill) -> str | None:
    table = rules().get(facet, {})
    return table.get(f"{this.kind}->{base.kind}") or table.get(f"*->{base.kind}") or table.get("*")
