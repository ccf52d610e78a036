"""Fill the ten GPT-2 slots from an Architecture: one Fill per facet, with its evidence.

A fill has a categorical ``kind`` and ``attrs`` (the design: what fingerprints and diffs
compare) and ``sizes`` (numbers that differ between checkpoints of one design). The slot
table itself (facets, GPT-2's fill, article pointers) is data in ``schemas/slots.json``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..schema.arch import Architecture
from .attention import attention_bias, attention_kv, attention_mixer, attention_qk_norm, attention_range
from .conventions import decoding_steps, modality_input, objective_target, precision_weights
from .evidence import place_keys
from .ffn import ffn_activation, ffn_bias, ffn_experts
from .fill import Fill, Fills, slot_table
from .norm import norm_kind, norm_residual
from .position import position_encoding
from .router import ffn_router
from .scores import attention_gate, attention_scores
from .tokens import embedding_table, head_tying

FACET_RULES: dict[str, Callable[[Architecture], Fill]] = {
    "embedding.table": embedding_table,
    "position.encoding": position_encoding,
    "attention.kv": attention_kv,
    "attention.range": attention_range,
    "attention.mixer": attention_mixer,
    "attention.qk_norm": attention_qk_norm,
    "attention.gate": attention_gate,
    "attention.scores": attention_scores,
    "attention.bias": attention_bias,
    "ffn.activation": ffn_activation,
    "ffn.experts": ffn_experts,
    "ffn.router": ffn_router,
    "ffn.bias": ffn_bias,
    "norm.kind": norm_kind,
    "norm.residual": norm_residual,
    "head.tying": head_tying,
    "objective.target": objective_target,
    "decoding.steps": decoding_steps,
    "precision.weights": precision_weights,
    "modality.input": modality_input,
}


def fill_slots(arch: Architecture) -> Fills:
    """Compute every facet's fill for ``arch``, every config key it read in some facet's evidence."""
    fills, unplaced, refused = place_keys(arch, tuple(FACET_RULES[info.id](arch) for info in slot_table()))
    return Fills(fills, unplaced, refused)
