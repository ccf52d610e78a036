"""GLM-5.3-Flash (glm5_next) constructs on a small hand-made config, counted by hand below:
KDA linear-attention layers beside DSA MLA layers, a DSA indexer with k-pool compression
(index_kpool: a per-slot position table and a gate projection; each token caches its index
key, its gate score and a validity flag), hyper-connections whose final collapse is a plain
mean (no head mixer) and the GLM-OCR-shaped vision tower with its own merger width.
transformers 5.24 building Glm5NextForConditionalGeneration from the same dims on the meta
device gave the same totals (checked once, outside the repository); the full-size rows are
held by tests/test_conformance.py."""

from __future__ import annotations

from slotdiff.cost.inventory.towers import vision_tensors
from slotdiff.cost.kv import kv_cost
from slotdiff.cost.params import count

from conftest import arch_from

D, H, Q_RANK, KV_RANK, NOPE, HV = 64, 4, 32, 16, 8, 8
IH, IDIM, KPOOL = 2, 8, 4
LH, LHD, KERNEL = 2, 8, 4
HC = 2
TEXT = {
    "model_type": "glm5_next_text",
    "hidden_size": D,
    "num_hidden_layers": 2,
    "num_attention_heads": H,
    "num_key_value_heads": H,
    "head_dim": 0,  # transformers' convention: head_dim = qk_rope_head_dim
    "q_lora_rank": Q_RANK,
    "kv_lora_rank": KV_RANK,
    "qk_nope_head_dim": NOPE,
    "qk_rope_head_dim": 0,
    "v_head_dim": HV,
    "intermediate_size": 96,
    "vocab_size": 100,
    "index_n_heads": IH,
    "index_head_dim": IDIM,
    "index_topk": 16,
    "index_kpool": KPOOL,
    "linear_num_heads": LH,
    "linear_head_dim": LHD,
    "linear_conv_kernel_dim": KERNEL,
    "hc_mult": HC,
    "mlp_layer_types": ["dense", "dense"],
    "layer_types": ["linear_attention", "indexed_attention"],
    "indexer_types": ["full", "full"],
}
VISION = {
    "model_type": "glm5_next_vision",
    "hidden_size": 8,
    "depth": 1,
    "num_heads": 2,
    "intermediate_size": 16,
    "out_hidden_size": 12,
    "projection_intermediate_size": 20,
    "patch_size": 2,
    "temporal_patch_size": 2,
    "in_channels": 3,
    "spatial_merge_size": 2,
    "attention_bias": True,
}
CONFIG = {"model_type": "glm5_next", "text_config": TEXT, "vision_config": VISION}

# Glm5NextTextAttention (no bias, NoPE: kv_a is kv_lora_rank wide)
MLA = Q_RANK * D + Q_RANK + H * NOPE * Q_RANK + KV_RANK * D + KV_RANK + H * (NOPE + HV) * KV_RANK + D * H * HV
# Glm5NextTextIndexer: wq_b, wk, k_norm (LayerNorm), weights_proj, kpool ape, kpool gate
INDEXER = IH * IDIM * Q_RANK + IDIM * D + 2 * IDIM + IH * D + KPOOL * IDIM + IDIM * D
P = LH * LHD
# Glm5NextTextLinearAttention: q/k/v, conv1d over 3P, f_a/f_b, dt_bias, A_log, b_proj, g_a/g_b,
# o_norm, o_proj
KDA = 3 * P * D + 3 * P * KERNEL + LHD * D + P * LHD + P + LH + LH * D + LHD * D + P * LHD + LHD + D * P
# two Glm5NextTextHyperConnection per layer: fn ((2+N)·N × N·d), base, scale (3); no head
HYPER = 2 * 2 * ((2 + HC) * HC * HC * D + (2 + HC) * HC + 3)
REST = 2 * 3 * D * 96 + 2 * 2 * D + D + 2 * 100 * D  # MLPs, layer norms, final norm, embed + head
# Glm5NextVisionModel: Conv3d patch embed (bias); one block (norm1, norm2, qkv+bias, proj+bias,
# q/k norms of head width 4, gated MLP with biases); post norm; Conv2d downsample (bias);
# merger proj (no bias), LayerNorm, gate/up/down of projection_intermediate_size, no bias
VISION_PARAMS = (
    (8 * 3 * 2 * 2 * 2 + 8)
    + (8 + 8 + (24 * 8 + 24) + (8 * 8 + 8) + 4 + 4 + 2 * (16 * 8 + 16) + (8 * 16 + 8))
    + 8
    + (12 * 8 * 2 * 2 + 12)
    + (12 * 12 + 2 * 12 + 3 * 12 * 20)
)


def test_glm5_next_text_and_tower_counted_by_hand() -> None:
    arch = arch_from(CONFIG)
    assert [(s.mixer, s.variant, s.sparse) for s in arch.layers] == [
        ("linear_attention", "kda", False),
        ("mla", None, True),
    ]
    assert arch.get("head_dim") == NOPE  # derived: qk_nope + qk_rope, not the config's 0
    assert sum(t.params for t in vision_tensors(arch) if t.slot == "vision") == VISION_PARAMS == 2228
    params = count(arch)
    assert params.excluded == ()
    assert params.total == KDA + MLA + INDEXER + HYPER + REST + VISION_PARAMS


def test_kpool_indexer_caches_key_gate_score_and_flag() -> None:
    kv = kv_cost(arch_from(CONFIG), 8)
    # the MLA latent (no RoPE key) + the indexer's packed key, gate score and validity flag, bf16
    assert kv.bytes_per_token == (KV_RANK + IDIM + IDIM + 1) * 2
    # the KDA layer: a float32 LH × LHD × LHD recurrent state and a bf16 conv window of
    # 3P channels × the kernel (transformers' cache layout)
    assert kv.state_bytes_per_sequence == LH * LHD * LHD * 4 + 3 * P * KERNEL * 2


def test_without_kpool_the_indexer_is_token_wise() -> None:
    text = {k: v for k, v in TEXT.items() if k != "index_kpool"}
    plain = arch_from({**CONFIG, "text_config": {**text, "index_kpool": 0}})
    assert count(arch_from(CONFIG)).total - count(plain).total == KPOOL * IDIM + IDIM * D
    assert kv_cost(plain, 8).bytes_per_token == (KV_RANK + IDIM) * 2
