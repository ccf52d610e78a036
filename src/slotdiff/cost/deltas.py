"""What one priced model costs more than another: the deltas every slot change, ``diff`` and
``lint --diff`` show.

Its own module, importing nothing of the cost pass, so that lint's diff mode reads the
deltas without importing the pass until a document is priced.
"""

from __future__ import annotations

from typing import Any


def deltas(this: Any, other: Any) -> dict[str, float | int | None]:
    """``this`` minus ``other``, figure by figure (a CostReport, or a counterfactual's
    CounterCost, which carries the same figures)."""
    return {
        "params": this.params.total - other.params.total,
        "active_params": this.params.active - other.params.active,
        "mtp_params": None
        if this.params.mtp is None or other.params.mtp is None
        else this.params.mtp - other.params.mtp,
        "weight_bytes": this.weights.bytes - other.weights.bytes,
        "kv_bytes_per_token": this.kv.bytes_per_token - other.kv.bytes_per_token,
        "kv_bytes_at_context": this.kv.bytes_at_context - other.kv.bytes_at_context,
        "state_bytes_per_sequence": this.kv.state_bytes_per_sequence - other.kv.state_bytes_per_sequence,
        "flops_per_token": this.flops.per_token - other.flops.per_token,
        "decode_step_ms": this.decode.step_ms - other.decode.step_ms,
    }
