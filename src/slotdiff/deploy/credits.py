"""What bought a recommendation: each serving facet of a model (its KV design, attention
range, mixer, experts) set back to the baseline's fill by the counterfactuals slotdiff
already prices (``cost.counterfactual``, ``schemas/counterfactuals.json``), and that
counterfactual priced on the same target at the same precision.

A credit says what the facet changes in the figure it moves (KV per token, KV at the
context, parameters) and how the model without it would fare on the target: not fit, miss
the budget, or fit too with another decode bound. A facet can cost as well as save (MoE
holds more parameters than a dense FFN of equal active width); a credit says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..constructs import of_fill
from ..core.errors import SlotdiffError
from ..cost.counterfactual import TRANSFORMS, rule_text
from ..cost.kv import kv_cost
from ..cost.memory import MAX_GPUS
from ..cost.params import count
from ..render import fmt
from ..schema.arch import Architecture
from ..slots.fill import Fill, Fills
from .target import Rung, Target, rung_on

# The facets that move memory or decode time on a target, in the order they are listed.
SERVING_FACETS = ("attention.kv", "attention.range", "attention.mixer", "ffn.experts")


@dataclass(frozen=True)
class Credit:
    """One facet's part in a recommendation: this model against its counterfactual."""

    facet: str
    label: str  # the facet as this model fills it, short ("GQA 64/8", "MLA")
    text: str  # what it changes, in one line
    effect: str  # saves | costs | none (in the figure it moves)
    without: str  # how the model without it fares on the target
    decisive: bool  # without it the model would not meet the target
    rule: str | None  # the counterfactual, as schemas/counterfactuals.json words it
    this: dict[str, Any]
    counterfactual: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "facet": self.facet,
            "label": self.label,
            "text": self.text,
            "effect": self.effect,
            "without": self.without,
            "decisive": self.decisive,
            "rule": self.rule,
            "this": self.this,
            "counterfactual": self.counterfactual,
        }


def _figures(arch: Architecture, target: Target, rung: Rung) -> dict[str, Any]:
    wl = target.workload
    kv = kv_cost(arch, wl.context, wl.kv_dtype)
    p = count(arch)
    return {
        "params": p.total,
        "active_params": p.active,
        "weights_bytes": rung.weights_bytes,
        "kv_bytes_per_token": kv.bytes_per_token,
        "kv_bytes_at_context": kv.bytes_at_context,
        "state_bytes_per_sequence": kv.state_bytes_per_sequence,
        "fits": rung.fits,
        "meets_target": rung.meets,
        "min_gpus": rung.min_gpus,
        "layout": rung.layout.label() if rung.layout else None,
        "decode_step_ms": rung.decode.step_ms if rung.decode else None,
        "needed_bytes_per_gpu": rung.needed_per_gpu,
    }


def _label(facet: str, fill: Fill) -> str:
    if facet == "attention.kv":
        mech = of_fill(fill.kind)
        return mech.label if mech else fill.detail.split(",")[0]
    if facet == "ffn.experts":
        return fill.detail.split(",")[0]
    return fill.detail


def _without(this: Rung, other: Rung, target: Target) -> str:
    if not other.fits:
        if other.min_gpus is None or other.min_layout is None:
            return f"without it: does not fit {target.where}, nor any layout of up to {MAX_GPUS:,} GPUs"
        return (
            f"without it: does not fit {target.where} "
            f"(needs ≥ {other.min_gpus} GPUs, {other.min_layout.label()})"
        )
    if other.reason:
        return f"without it: {other.reason}"
    a = fmt.ms(this.decode.step_ms if this.decode else None)
    b = fmt.ms(other.decode.step_ms if other.decode else None)
    return f"without it: fits too, decode {b} instead of {a}"


def _text(
    facet: str, label: str, base: Fill, t: dict[str, Any], o: dict[str, Any], ctx: int
) -> tuple[str, str]:
    """(line, effect) for a facet, in the figure it moves."""
    if facet == "ffn.experts":
        line = (
            f"{label}: {fmt.count(t['active_params'])} active of {fmt.count(t['params'])}; a dense FFN of "
            f"equal active width holds {fmt.count(o['params'])} ({fmt.si_bytes(o['weights_bytes'])} of "
            f"weights instead of {fmt.si_bytes(t['weights_bytes'])})"
        )
        a, b = t["weights_bytes"], o["weights_bytes"]
    elif facet == "attention.kv":
        a, b = t["kv_bytes_per_token"], o["kv_bytes_per_token"]
        line = f"{label}: KV {fmt.bin_bytes(a)}/token instead of {fmt.bin_bytes(b)} ({base.kind.upper()})"
    else:
        a = t["kv_bytes_at_context"] + t["state_bytes_per_sequence"]
        b = o["kv_bytes_at_context"] + o["state_bytes_per_sequence"]
        what = "full context" if facet == "attention.range" else "softmax attention everywhere"
        held = "KV" if facet == "attention.range" else "KV and state"
        if a == b and t["decode_step_ms"] is not None and o["decode_step_ms"] is not None:
            a, b = t["decode_step_ms"], o["decode_step_ms"]  # DSA: the same cache, fewer reads
            line = f"{label}: decode {fmt.ms(a)} instead of {fmt.ms(b)} ({what})"
        else:
            line = (
                f"{label}: {held} {fmt.bin_bytes(a)} per sequence at {ctx:,} instead of "
                f"{fmt.bin_bytes(b)} ({what})"
            )
    effect = "saves" if a < b else "costs" if a > b else "none"
    return line, effect


def credits(arch: Architecture, fills: Fills, target: Target, baseline: Fills, rung: Rung) -> list[Credit]:
    """The serving facets of ``arch`` that differ from ``baseline``, each priced against its
    counterfactual on ``target`` at ``rung``'s precision."""
    out = []
    this = None
    for facet in SERVING_FACETS:
        fill, base = fills[facet], baseline[facet]
        if fill.design == base.design:
            continue
        counter = TRANSFORMS[facet](arch, base)
        if counter is None:
            continue
        this = this or _figures(arch, target, rung)
        label = _label(facet, fill)
        rule = rule_text(facet, fill, base)
        try:
            other_rung = rung_on(counter, target, rung.weight_dtype, rung.label)
            other = _figures(counter, target, other_rung)
        except SlotdiffError as err:
            line = f"{label}: counterfactual not priced"
            out.append(Credit(facet, label, line, "none", err.reason, False, rule, this, {}))
            continue
        line, effect = _text(facet, label, base, this, other, target.workload.context)
        decisive = rung.meets and not other_rung.meets
        if effect == "none" and not decisive:
            continue  # changes nothing at this target (a chunk longer than the context)
        without = _without(rung, other_rung, target)
        out.append(Credit(facet, label, line, effect, without, decisive, rule, this, other))
    return out


def precision_credit(chosen: Rung, first: Rung) -> Credit:
    """The precision rung as a credit: its weights against the widest format tried."""
    text = (
        f"{chosen.label}: weights {fmt.si_bytes(chosen.weights_bytes)} instead of "
        f"{fmt.si_bytes(first.weights_bytes)} at {first.label}"
    )
    return Credit(
        "precision.weights",
        chosen.label,
        text,
        "saves" if (chosen.weights_bytes or 0) < (first.weights_bytes or 0) else "none",
        f"at {first.label}: {first.reason}",
        chosen.meets and not first.meets,
        "weights re-priced as --dtype prices them (cost/weights.py)",
        {"weights_bytes": chosen.weights_bytes, "precision": chosen.label},
        {"weights_bytes": first.weights_bytes, "precision": first.label},
    )
