"""Every counted audio encoder reports in the ``audio`` part, and that part holds what the
conformance oracle attributes to audio (tests/oracle/hf_oracle.py: ``audio_tower``,
``audio_tokenizer``, ``audio_embed``): for each reference row whose transformers build has
audio tensors and which slotdiff counts whole, slotdiff's ``params.by_part.audio`` equals
transformers' ``audio`` part (reference.json, from transformers 5.24 on the meta device)."""

from __future__ import annotations

from pathlib import Path

import pytest

import slotdiff

from conftest import tool

ROOT = Path(__file__).resolve().parents[1]


CONFORMANCE = tool("conformance")
HARNESS = tool("harness")
ROWS = [
    r
    for r in CONFORMANCE.rows(CONFORMANCE.read_json(CONFORMANCE.REFERENCE))
    if r.reference["params"].get("parts", {}).get("audio")
]
# The families whose audio encoders slotdiff counts (schemas/audio_types); all must be present.
COUNTED = {"apertus1p5", "phi4_multimodal", "qwen2_5_omni_thinker", "qwen3_omni_moe_thinker"}


def test_the_reference_attributes_audio_for_every_counted_family() -> None:
    assert {r.model_type for r in ROWS} >= COUNTED


@pytest.mark.parametrize("row", [r for r in ROWS if r.model_type in COUNTED], ids=lambda r: r.id)
def test_audio_part_matches_transformers(row: object) -> None:
    got = HARNESS.slotdiff_figures(row.config)
    assert not got.get("excluded"), got.get("excluded")
    theirs = row.reference["params"]["parts"]
    assert got["by_part"].get("audio") == theirs["audio"]


@pytest.mark.parametrize("model_type", sorted(COUNTED))
def test_the_modality_line_names_the_audio_encoder(model_type: str) -> None:
    """A counted audio encoder is said beside the vision tower, by the model_type its own
    sub-config declares (the config's ``audio_config``, not slotdiff's data)."""
    row = next(r for r in ROWS if r.model_type == model_type)
    declared = next(
        sub["model_type"]
        for key, sub in row.config.items()
        if "audio" in key and isinstance(sub, dict) and sub.get("model_type")
    )
    detail = slotdiff.analyze(row.config).to_dict()["slots"]["modality"]["input"]["detail"]
    assert f"audio encoder {declared}" in detail
