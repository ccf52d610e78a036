"""Policy rules (SD301-SD305): the team's budgets and allowed fills, priced by the cost pass.

Budgets are checked on the policy's workload (``[tool.slotdiff.workload]``: GPU preset,
batch, context, KV dtype); each message carries the figure, the budget and the workload.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.errors import SlotdiffError
from ..render import fmt
from .document import KeyPath, key_path
from .registry import Hit, rule

# What the cost pass raises on configs it cannot price: SlotdiffError when it refuses one,
# ArithmeticError / ValueError when absurd sizes (2**40 heads) overflow.
COST_FAILURES = (SlotdiffError, ArithmeticError, ValueError)


def _over(cx: Any, name: str, budget: float | None, measure: Any) -> tuple[Any, Hit | None]:
    """(cost report, None) when ``measure(cost)`` exceeds ``budget``; (None, Hit) when the
    config cannot be priced (a budget it cannot check is reported, never passed); else (None, None).
    """
    if budget is None:
        return None, None
    try:
        cost = cx.doc.cost(cx.workload)
    except COST_FAILURES as err:
        reason = getattr(err, "reason", None) or str(err) or type(err).__name__
        return None, Hit((), f"cannot check {name}: the cost pass cannot price this config ({reason})")
    return (cost if measure(cost) > budget else None), None


def _first_key(cx: Any, *fields: str) -> KeyPath:
    for f in fields:
        path = cx.doc.key_of(f)
        if path:
            return path
    return ()


@rule("SD301", needs="arch")
def kv_budget(cx: Any) -> Iterator[Hit]:
    """KV cache per token within budget."""
    budget = cx.policy.budgets.max_kv_bytes_per_token
    cost, problem = _over(cx, "max-kv-bytes-per-token", budget, lambda c: c.kv.bytes_per_token)
    if problem:
        yield problem
    if cost is None:
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
    cost, problem = _over(cx, "max-decode-ms", budget, lambda c: c.decode.step_ms)
    if problem:
        yield problem
    if cost is None:
        return
    d, w = cost.decode, cx.workload
    yield Hit(
        _first_key(cx, "n_layers", "d_model"),
        f"decode step bound {d.step_ms:.2f} ms ({d.bound}-bound) on {w.gpu}, batch {w.batch}, "
        f"context {w.context:,} exceeds the budget of {budget:g} ms",
    )


def _params_hit(cx: Any, name: str, budget: int | None, which: str, where: tuple[str, ...]) -> Iterator[Hit]:
    cost, problem = _over(cx, name, budget, lambda c: getattr(c.params, which))
    if problem:
        yield problem
    if cost is None:
        return
    n = getattr(cost.params, which)
    what = "parameters" if which == "total" else "active parameters per token"
    yield Hit(
        _first_key(cx, *where),
        f"{fmt.count(n)} {what} ({n:,}) exceed the budget of {fmt.count(budget)} ({budget:,})",
    )


@rule("SD303", needs="arch")
def params_budget(cx: Any) -> Iterator[Hit]:
    """Total parameters within budget."""
    budget = cx.policy.budgets.max_total_params
    yield from _params_hit(cx, "max-total-params", budget, "total", ("n_layers", "d_model"))


@rule("SD304", needs="arch")
def active_params_budget(cx: Any) -> Iterator[Hit]:
    """Active parameters per token within budget."""
    budget = cx.policy.budgets.max_active_params
    where = ("top_k", "n_experts", "n_layers", "d_model")
    yield from _params_hit(cx, "max-active-params", budget, "active", where)


@rule("SD305", needs="arch")
def fill_not_allowed(cx: Any) -> Iterator[Hit]:
    """Every facet the policy constrains is filled with an allowed kind."""

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
