"""The router facet: how an MoE layer scores its experts (softmax or sigmoid), how it picks them
(a per-expert correction bias for auxiliary-loss-free balancing, group-limited top-k) and how
it weighs the chosen ones (renormalised top-k, a routed scaling factor).

What a config states decides; where it is silent, the family's implementation in transformers
does (schemas/routers.json, read from each router class by tools/gen_routers.py); where that
is unknown too, softmax is assumed and the fill says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from ..core.resources import load_schema_file
from ..schema.arch import Architecture
from ..schema.keymap import model_type_spec
from .fill import Collector, Fill

SCORES = {"softmax": "softmax", "sigmoid": "sigmoid"}


@cache
def _routers() -> Mapping[str, Mapping[str, Any]]:
    return load_schema_file("routers.json").get("model_types", {})


def router_facts(model_type: str) -> Mapping[str, Any]:
    """What the family's router class does in transformers (its parents' when it has none)."""
    seen: set[str] = set()
    while model_type and model_type not in seen:
        seen.add(model_type)
        facts = _routers().get(model_type)
        if facts:
            return facts
        model_type = str((model_type_spec(model_type) or {}).get("extends", ""))
    return {}


def _implementation(arch: Architecture) -> str:
    return arch.donor or arch.model_type


def ffn_router(arch: Architecture) -> Fill:
    ev = Collector(arch)
    if not any(s.ffn == "moe" or s.ffn2 == "moe" for s in arch.layers):
        return ev.fill("ffn.router", "none", "no router: no MoE layer")
    facts = router_facts(_implementation(arch))
    where = f"as transformers' {_implementation(arch)} router does"
    stated = ev.use("router_score")
    score = str(stated).lower() if stated else None
    if score is None and facts.get("score") in SCORES:
        score = facts["score"]
        ev.notes.append(f"scores: {score}, {where} (schemas/routers.json)")
    if score is None:
        score = "softmax"
        ev.notes.append("scores: softmax assumed (neither the config nor the family's data says)")
    method = ev.use("router_topk_method")
    aux = ev.use("router_aux_free")
    if aux is None:
        aux = method == "noaux_tc" if method else bool(facts.get("aux_free"))
    aux = bool(aux) or bool(ev.use("router_score_bias"))
    groups, picked = ev.use("router_groups"), ev.use("router_topk_groups")
    switch = ev.use("router_grouped")
    grouped_by = method in ("group_limited_greedy", "noaux_tc") or bool(facts.get("grouped")) or bool(switch)
    grouped = (
        grouped_by
        and switch is not False
        and isinstance(groups, int)
        and groups > 1
        and isinstance(picked, int)
        and picked < groups
    )
    norm = ev.use("router_norm_topk")
    if norm is None and facts.get("renormalize") in (True, False):
        norm = facts["renormalize"]
    scale = ev.use("router_scale")
    bias = bool(ev.use("router_bias"))
    k = arch.get("top_k")
    detail = f"{score} scores"
    if aux:
        detail += ", experts picked through a per-expert correction bias (auxiliary-loss-free balancing)"
    if grouped:
        detail += f", {groups} groups of which each token uses {picked}"
    detail += f", top-{k}" if k else ""
    if norm:
        detail += " weights renormalised to sum to 1"
    if isinstance(scale, (int, float)) and scale != 1:
        detail += f", routed output ×{scale:g}"
    if bias:
        detail += ", router with a bias"
    return ev.fill(
        "ffn.router",
        score,
        detail,
        {
            "aux_free": aux,
            "grouped": grouped,
            "renormalized": bool(norm),
            "scaled": isinstance(scale, (int, float)) and scale != 1,
            "bias": bias,
        },
        {"groups": groups if grouped else None, "topk_groups": picked if grouped else None, "scale": scale},
    )
