"""Dropout probabilities from the raw config: the keys families use for attention, residual
and embedding dropout. A key the family does not have means no dropout of that kind (Llama
and its descendants have only ``attention_dropout``, 0.0 in every published config)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .setup import Dropout

# In the order looked up: the first key present decides.
ATTENTION_KEYS = ("attention_dropout", "attn_pdrop", "attention_probs_dropout_prob", "attn_dropout")
RESIDUAL_KEYS = ("resid_pdrop", "hidden_dropout", "hidden_dropout_prob", "resid_dropout", "dropout")
EMBEDDING_KEYS = ("embd_pdrop", "embed_dropout", "emb_pdrop", "embedding_dropout")


def _text_config(data: Mapping[str, Any], text_path: Sequence[str]) -> Mapping[str, Any]:
    node: Any = data
    for key in text_path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else data


def _probability(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    p = float(value)
    return p if 0.0 <= p < 1.0 else None


def dropout_of(data: Mapping[str, Any], text_path: Sequence[str] = ()) -> Dropout:
    """The text model's dropout probabilities (0.0 where the config sets none)."""
    text = _text_config(data, text_path)
    found: dict[str, float] = {}
    keys: dict[str, str] = {}
    for kind, names in (
        ("attention", ATTENTION_KEYS),
        ("residual", RESIDUAL_KEYS),
        ("embedding", EMBEDDING_KEYS),
    ):
        for name in names:
            p = _probability(text.get(name))
            if p is not None:
                found[kind] = p
                keys[kind] = ".".join([*text_path, name])
                break
    return Dropout(
        attention=found.get("attention", 0.0),
        residual=found.get("residual", 0.0),
        embedding=found.get("embedding", 0.0),
        keys=keys,
    )
