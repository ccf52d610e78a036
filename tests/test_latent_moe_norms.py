"""Two decoder constructs of Muse Spark's text model, on a hand-made config, every number by
hand: ``scaleless_norms`` (a placement norm without a learned scale: the sandwich
post-attention norm) and ``moe_latent_norms`` (norms of the latent width around experts that
work in ``moe_latent``), beside the residual gates read as ``layer_scales``. The same config
built by transformers 5.24 on the meta device (MuseSparkTextModel plus its 64 × 16 head) has
6,392 parameters, 5,440 with every layer sparse.
"""

from __future__ import annotations

import copy

from slotdiff.cost.params import count

from conftest import arch_from

CFG = {
    "model_type": "muse_spark_text",
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 8,
    "intermediate_size": 32,
    "vocab_size": 64,
    "mlp_layer_types": ["dense", "sparse"],
    "layer_types": ["sliding_attention", "full_attention"],
    "sliding_window": 8,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 8,
    "moe_hidden_size": 4,
    "tie_word_embeddings": False,
}
EMBED = HEAD = 64 * 16
ATTN = 2 * (16 * 16 + 16 * 8 + 16 * 8 + 16 * 16 + 16 * 16)  # q, k, v, o and the gate_proj
DENSE = 3 * 16 * 32  # layer 0: SwiGLU gate, up, down
EXPERTS = 4 * 2 * 8 * 4 + 4 * 4 * 8  # gate_up [4, 16, 4], down [4, 4, 8] in the latent width
MOE = 4 * 16 + 16 * 4 + 4 * 16 + EXPERTS + 2 * 4  # router, pre/post_expert_proj, 2 latent norms
# Three scaled norms a layer (input, pre- and post-feedforward; the post-attention one has
# none), two residual gates a layer, the final norm.
NORMS = 2 * 3 * 16 + 2 * 2 * 16 + 16


def test_latent_moe_norms_and_scaleless_post_attention_norm_by_hand() -> None:
    c = count(arch_from(copy.deepcopy(CFG)))
    assert c.total == EMBED + HEAD + ATTN + DENSE + MOE + NORMS == 6392
    assert c.total - c.active == EXPERTS // 2  # top-2 of 4 experts


def test_every_layer_sparse_by_default() -> None:
    cfg = {k: v for k, v in CFG.items() if k != "mlp_layer_types"}
    c = count(arch_from(cfg))
    assert c.total == EMBED + HEAD + ATTN + 2 * MOE + NORMS
