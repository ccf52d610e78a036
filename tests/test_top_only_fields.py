"""A composite whose own config decides a field alone (the multimodal file's ``top_only``).

transformers ties the head of Step3p7ForConditionalGeneration and
MuseGlimmerForConditionalGeneration by ``getattr(top-level config, "tie_word_embeddings",
False)`` (PreTrainedModel.get_expanded_tied_weights_keys); neither composite config class has
that attribute, so a ``tie_word_embeddings`` set only inside ``text_config`` ties nothing. The
head is ``vocab × hidden`` = 50 × 16 = 800 parameters here, counted by hand.
"""

from __future__ import annotations

import pytest

from slotdiff.cost.params import count

from conftest import arch_from

TEXT = {
    "model_type": "muse_glimmer_text",
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "vocab_size": 50,
    "layer_types": ["full_attention", "full_attention"],
}
VISION = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16}


def _config(top: dict, text: dict) -> dict:
    return {"model_type": "muse_glimmer", "text_config": {**TEXT, **text}, "vision_config": VISION, **top}


@pytest.mark.parametrize(
    ("top", "text", "tied"),
    [
        ({}, {"tie_word_embeddings": True}, False),  # the text copy has no effect
        ({"tie_word_embeddings": True}, {}, True),
        ({"tie_word_embeddings": True}, {"tie_word_embeddings": False}, True),
        ({"tie_word_embeddings": False}, {"tie_word_embeddings": True}, False),
        ({}, {}, False),
    ],
)
def test_the_top_level_alone_ties_the_head(top: dict, text: dict, tied: bool) -> None:
    arch = arch_from(_config(top, text))
    assert arch.get("tie_embeddings") is tied
    untied = count(arch_from(_config({}, {})))
    assert untied.total - count(arch).total == (800 if tied else 0)


def test_the_text_copy_counts_as_read() -> None:
    arch = arch_from(_config({}, {"tie_word_embeddings": True}))
    assert "tie_word_embeddings" not in arch.unread_keys
