"""The hierarchical patch MLP (HMLP) construct of Inkling's vision encoder, by hand: the scale
plan ``hmlp_scales`` (transformers' ``plan_out_scales``) and the tower built from it.

The plan for a 2-pixel patch side, a temporal patch of 2, one channel and 4 layers: the
candidate scales are pixels (1, 1, 1, 1), the spatial patch (1, 2, 2, 64: 2²·1 channels
rounded up to 64) and the temporal one (2, 2, 2, 512: 2²·1·2·64, as transformers writes it);
log block sizes 0, log 4, log 8 against log-even steps 0, log8/4, 2·log8/4, 3·log8/4, log 8
pick scales 0, 0, 1, 1, 2. transformers 5.24's plan_out_scales gives the same list, and the
tower below has the same 6,546 parameters in its InklingVisionModel. hmlp_scales and
plan_out_scales agree on all 1,902 configurations of temporal patch 2-4, patch side 2-48,
1-32 layers and 1 or 3 channels that hmlp_scales answers; it refuses the 402 others there
(fewer layers than scales, or a near tie) and every temporal patch of 1, which transformers
cannot build.
"""

from __future__ import annotations

import pytest

from slotdiff.cost.inventory.towers import vision_tensors
from slotdiff.schema.hmlp import hmlp_scales

from conftest import arch_from

D = 16


def test_scale_plan_by_hand() -> None:
    assert hmlp_scales(2, 2, 4, 1) == [
        [1, 1, 1, 1],
        [1, 1, 1, 1],
        [1, 2, 2, 64],
        [1, 2, 2, 64],
        [2, 2, 2, 512],
    ]
    # Inkling's defaults: patch 40 (factors 5, 2, 2, 2 from the largest), temporal 2, RGB.
    plan = hmlp_scales(2, 40, 24, 3)
    assert plan[0] == [1, 1, 1, 3] and plan[-1] == [2, 40, 40, 40 * 40 * 3 * 2 * 64]
    assert [1, 5, 5, 128] in plan and [1, 10, 10, 320] in plan and [1, 20, 20, 1216] in plan


def test_fewer_layers_than_scales_is_refused() -> None:
    with pytest.raises(ValueError, match="linear_sum_assignment"):
        hmlp_scales(2, 2, 2, 1)  # 3 scales, 2 layers: transformers uses scipy's assignment
    with pytest.raises(ValueError, match="above 1"):
        hmlp_scales(1, 4, 8, 1)  # no temporal factor: transformers cannot build the layers


def test_hmlp_tower_and_mel_token_audio_by_hand() -> None:
    cfg = {
        "model_type": "inkling_mm_model",
        "text_config": {"model_type": "inkling_text", "hidden_size": D},
        "vision_config": {
            "model_type": "inkling_vision",
            "n_layers": 4,
            "patch_size": 2,
            "temporal_patch_size": 2,
            "num_channels": 1,
        },
        "audio_config": {"model_type": "inkling_audio", "n_mel_bins": 2, "mel_vocab_size": 4},
    }
    ts = vision_tensors(arch_from(cfg))
    vision = sum(t.params for t in ts if t.slot == "vision")
    assert (
        vision
        == (
            1 * 1
            + 1  # layer 0: scale 0 → scale 0, no fold (1 → 1), RMSNorm
            + (1 * 4) * 64
            + 64  # layer 1 folds 2×2 pixels (4 inputs) → 64, RMSNorm
            + 64 * 64
            + 64  # layer 2: scale 1 → scale 1, RMSNorm
            + (64 * 2) * D  # layer 3 folds 2 frames of scale 1 → the text width, no norm
            + D  # final_norm
        )
        == 6546
    )
    assert sum(t.params for t in ts if t.slot == "audio") == 2 * 4 * D + D  # table, RMSNorm
