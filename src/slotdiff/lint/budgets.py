"""Policy rules (SD301-SD305): the team's budgets and allowed fills, priced by the cost pass.

Budgets are checked on the policy's workload (``[tool.slotdiff.workload]``: GPU preset,
batch, context, KV dtype); each message carries the figure, the budget and the workload.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..errors import SlotdiffError
from ..render import fmt
from .document import KeyPath
from .registry import Hit, rule

# The cost pass refuses some configs (SlotdiffError) and overflows on absurd sizes (2**40
# heads); a linter must report either, not crash on it.
COST_FAILURES = (SlotdiffError, ArithmeticError, ValueError)


def _cost(cx: Any) -> Any:
    """This file's cost on the policy's workload, or the reason it cannot be priced."""
    try:
        return cx.doc.cost(cx.workload)
    except COST_FAILURES as err:
        return _Unpriced(getattr(err, "reason", None) or str(err) or type(err).__name__)


class _Unpriced(str):
    """Why a config has no cost (a budget rule says so instead of passing silently)."""


def _unpriced(cost: Any, budget: str) -> Iterator[Hit]:
    yield Hit((), f"cannot check {budget}: the cost pass cannot price this config ({cost})")


def _first_key(cx: Any, *fields: str) -> KeyPath:
    for f in fields:
        path = cx.doc.key_of(f)
        if path:
            return path
    return ()


def _on(cx: Any) -> str:
    w = cx.workload
    return f"{w.gpu}, batch {w.batch}, context {w.context:,}"


@rule("SD301", needs="arch")
def kv_budget(cx: Any) -> Iterator[Hit]:
    """KV cache per token within budget."""
    budget = cx.policy.budgets.max_kv_bytes_per_token
    cost = _cost(cx) if budget is not None else None
    if isinstance(cost, _Unpriced):
        yield from _unpriced(cost, "max-kv-bytes-per-token")
        return
    if cost is None or cost.kv.bytes_per_token <= budget:
        return
    kv = cost.kv.bytes_per_token
    yield Hit(
        _first_key(cx, "kv_lora_rank", "n_kv_heads", "head_dim", "n_layers"),
        f"KV cache {fmt.bin_bytes(kv)} per token ({kv:,} B, {cost.kv.dtype}) exceeds the budget of "
        f"{fmt.bin_bytes(budget)} ({budget:,} B)",
    )


@rule("SD302", needs="arch")
def decode_budget(cx: Any) -> Iterator[Hit]:
    """Decode-step roofline bound within budget."""
    budget = cx.policy.budgets.max_decode_ms
    cost = _cost(cx) if budget is not None else None
    if isinstance(cost, _Unpriced):
        yield from _unpriced(cost, "max-decode-ms")
        return
    if cost is None or cost.decode.step_ms <= budget:
        return
    d = cost.decode
    yield Hit(
        _first_key(cx, "n_layers", "d_model"),
        f"decode step bound {d.step_ms:.2f} ms ({d.bound}-bound) on {_on(cx)} exceeds the budget of "
        f"{budget:g} ms",
    )


@rule("SD303", needs="arch")
def params_budget(cx: Any) -> Iterator[Hit]:
    """Total parameters within budget."""
    budget = cx.policy.budgets.max_total_params
    cost = _cost(cx) if budget is not None else None
    if isinstance(cost, _Unpriced):
        yield from _unpriced(cost, "max-total-params")
        return
    if cost is None or cost.params.total <= budget:
        return
    n = cost.params.total
    yield Hit(
        _first_key(cx, "n_layers", "d_model"),
        f"{fmt.count(n)} parameters ({n:,}) exceed the budget of {fmt.count(budget)} ({budget:,})",
    )


@rule("SD304", needs="arch")
def active_params_budget(cx: Any) -> Iterator[Hit]:
    """Active parameters per token within budget."""
    budget = cx.policy.budgets.max_active_params
    cost = _cost(cx) if budget is not None else None
    if isinstance(cost, _Unpriced):
        yield from _unpriced(cost, "max-active-params")
        return
    if cost is None or cost.params.active <= budget:
        return
    n = cost.params.active
    yield Hit(
        _first_key(cx, "top_k", "n_experts", "n_layers", "d_model"),
        f"{fmt.count(n)} active parameters per token ({n:,}) exceed the budget of "
        f"{fmt.count(budget)} ({budget:,})",
    )


@rule("SD305", needs="arch")
def fill_not_allowed(cx: Any) -> Iterator[Hit]:
    """Every facet the policy constrains is filled with an allowed kind."""
    from .document import key_path

    for facet, kinds in cx.policy.allowed_fills.items():
        fill = cx.doc.fills[facet]
        if fill.kind in kinds:
            continue
        where = next((key_path(k) for k, _ in fill.evidence if key_path(k) in cx.doc.parsed.positions), ())
        yield Hit(
            where,
            f"{facet} is {fill.detail} ({fill.kind}); the policy allows {', '.join(kinds)}",
            {"facet": facet},
        )
