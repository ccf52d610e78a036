"""Experts a batch touches: E·[1 − (1 − k/E)^T] per MoE layer under independent, uniform routing."""

from __future__ import annotations


def experts_touched(n_experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts ``tokens`` tokens route to, per MoE layer (independent,
    uniform routing): E·[1 − (1 − k/E)^T]."""
    if n_experts <= 0:
        return 0.0
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)
