"""A vision tower with its own routed experts, block by block (Dots3 Note's pyramid), and the
per-layer override tables its sizes read; every expected number by hand.

The construct: a tower ``param`` item with ``routed`` (``experts``, ``top_k``) is counted in
full but active at top_k / experts, whatever the decoder's own n_experts / top_k; the
``layer_override`` / ``overrides_only`` expression functions read transformers'
``per_layer_config`` (layer index → the attributes that differ there, keys as to_dict
writes them: ``"2"`` or ``"02"``). The real family's defaults are held to transformers' own
counts by tests/test_conformance.py; the tiny configs below were also built by transformers
5.24 on the meta device (Dots3NoteVisionModel: 3,472 parameters, blocks 1 and 2 routing 2 of 4
and 1 of 2 experts; with pyramid_num_routed [-1, 4, 2], 2 of 4 and 2 of 2; Dots3NoteAudioModel:
640), agreeing with the arithmetic.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from slotdiff.cost.inventory.towers import vision_inactive, vision_tensors
from slotdiff.cost.params import count
from slotdiff.schema.layer_tables import layer_override, overrides_only

from conftest import arch_from

D = 16  # text width
TEXT = {
    "model_type": "dots3_note_text",
    "hidden_size": D,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 32,
    "vocab_size": 64,
    "q_lora_rank": 8,
    "kv_lora_rank": 8,
    "qk_rope_head_dim": 4,
    "qk_nope_head_dim": 4,
    "v_head_dim": 4,
    "head_dim": 8,
    "layer_types": ["sliding_attention"],
    "mlp_layer_types": ["dense"],  # no decoder experts: every inactive parameter is the tower's
    "sliding_window": 16,
}
# Vision: width 8, 2 heads (head_dim 4), 2×2 patches, 3 blocks: dense, 4 experts, 2 experts.
VISION = {
    "model_type": "dots3_note_vision_encoder",
    "hidden_size": 8,
    "num_attention_heads": 2,
    "num_hidden_layers": 3,
    "intermediate_size": 12,
    "moe_intermediate_size": 4,
    "num_channels": 3,
    "patch_size": 2,
    "mlp_layer_types": ["dense", "sparse", "sparse"],
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "per_layer_config": {
        "01": {"num_local_experts": 4},
        "2": {"num_local_experts": 2, "num_experts_per_tok": 1},
    },
    "adapter_in_dim": 8,
    "adapter_out_dim": D,
    "adapter_merge_size": 2,
    "spatial_merge_size": 2,
}
AUDIO = {
    "model_type": "dots3_note_audio_encoder",
    "hidden_size": 4,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "intermediate_size": 6,
    "feature_size": 8,
    "downsample_hidden_size": 2,
    "adapter_input_size": 4,
    "adapter_out_dim": D,
}
BLOCK = 8 + 8 * 24 + 8 * 8 + 4 + 4 + 8  # norm1, qkv and proj (no bias), q/k norms, norm2
DENSE = 3 * 8 * 12  # gate, up, down without bias
EXPERTS_4 = 4 * 8 + 4 * 2 * 4 * 8 + 4 * 8 * 4  # router 4×8, gate_up [4, 8, 8], down [4, 8, 4]
EXPERTS_2 = 2 * 8 + 2 * 2 * 4 * 8 + 2 * 8 * 4
MERGER = 2 * 8 + (32 * 32 + 32) + (32 * D + D)  # LayerNorm, mlp.0, mlp.2 (2×2 merge: 32 wide)
TOWER = (8 * 3 * 2 * 2 + 8) + 8 + 3 * BLOCK + DENSE + EXPERTS_4 + EXPERTS_2 + 8 + MERGER
# Block 1 routes 2 of its 4 experts (the global top-2), block 2 one of 2 (its own override).
IDLE = (256 + 128) // 2 + (128 + 64) // 2


def _cfg(**vision: Any) -> dict[str, Any]:
    v = {**copy.deepcopy(VISION), **vision}
    v = {k: x for k, x in v.items() if x is not None}
    return {"model_type": "dots3_note", "text_config": TEXT, "vision_config": v, "audio_config": AUDIO}


def test_layer_override_reads_per_layer_config_keys_as_to_dict_writes_them() -> None:
    table = {"02": {"num_local_experts": 4}, "3": {"num_experts_per_tok": 1}}
    assert layer_override(table, 2, "num_local_experts", 64) == 4
    assert layer_override(table, 3, "num_local_experts", 64) == 64  # that layer overrides another key
    assert layer_override(table, 3, "num_experts_per_tok", 2) == 1
    assert layer_override({}, 0, "num_local_experts", 64) == 64
    assert overrides_only(table, ["num_local_experts", "num_experts_per_tok"])
    assert not overrides_only({"1": {"hidden_size": 4}}, ["num_local_experts"])
    with pytest.raises(ValueError):
        layer_override([4, 8], 0, "num_local_experts", 64)


def test_tower_experts_counted_in_full_and_active_at_each_blocks_top_k() -> None:
    arch = arch_from(_cfg())
    vision = sum(t.params for t in vision_tensors(arch) if t.slot == "vision")
    assert vision == TOWER == 3472
    assert vision_inactive(arch) == IDLE == 288
    c = count(arch)
    assert c.excluded == ()
    assert c.total - c.active == IDLE  # the dense decoder leaves nothing else idle


def test_pyramid_num_routed_sets_the_block_types_and_expert_counts() -> None:
    # The released checkpoints' key: -1 a dense block, n > 0 a block of n experts at
    # top-min(num_experts_per_tok, n). Block 2's two experts are then both active.
    arch = arch_from(_cfg(mlp_layer_types=None, per_layer_config=None, pyramid_num_routed=[-1, 4, 2]))
    assert sum(t.params for t in vision_tensors(arch) if t.slot == "vision") == TOWER
    assert vision_inactive(arch) == (256 + 128) // 2


def test_an_override_of_another_attribute_is_refused_not_guessed() -> None:
    c = count(arch_from(_cfg(per_layer_config={"1": {"hidden_size": 4}})))
    assert any("per_layer_config" in e for e in c.excluded)


def test_dots3_note_audio_encoder_by_hand() -> None:
    c = count(arch_from(_cfg()))
    audio = sum(t.params for t in c.tensors if t.slot == "audio")
    expected = (
        (2 * 9 + 2)
        + 2 * (2 * 2 * 9 + 2)  # three 3×3 convs with bias: 1 → 2 → 2 → 2 channels
        + 2 * ((8 + 7) // 8) * 4  # conv_out: downsample·⌈mel/8⌉ → width, no bias
        + 4  # input_layernorm
        + (16 + 4)
        + 16
        + (16 + 4)
        + (16 + 4)  # q, k (no bias), v, o
        + 4  # post_attention_layernorm
        + (4 * 12 + 12)
        + (6 * 4 + 4)  # gate_up_proj, down_proj with bias
        + 4  # final RMSNorm
        + 2 * 4
        + (4 * D + D)
        + (D * D + D)  # adapter: LayerNorm, fc1, fc2
    )
    assert audio == expected == 640
