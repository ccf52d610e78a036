"""The deployment and step model the serving commands share, under the names they use.

The model itself lives in the cost pass (``cost.deployment``: what each stage's GPU reads and
computes; ``cost.step``: one step on the layout), so the main report, its counterfactuals and
every serving command (fit, sweep, specdec, moe, formats, latency, choose) price a decode step
the same way.
"""

from __future__ import annotations

from ..cost.deployment import RESERVE_FRACTION, Deployment, deployment
from ..cost.layout import kv_share
from ..cost.step import Step, compute_bound_batch, first_true, step

CONTEXT_LIMIT = 1 << 30  # searches stop here: beyond it memory does not bind
DecodeStep = Step
decode_step = step

__all__ = [
    "CONTEXT_LIMIT",
    "RESERVE_FRACTION",
    "DecodeStep",
    "Deployment",
    "compute_bound_batch",
    "decode_step",
    "deployment",
    "first_true",
    "kv_share",
]
