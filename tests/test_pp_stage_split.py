"""Per pipeline stage weights where the layers of one design are not all alike: each stage
holds exactly the layers vLLM's pipeline partition gives it, not an even share of the model.

vLLM 0.34.0 ``distributed/utils.py`` ``get_pp_indices``: ``num_hidden_layers // pp_size``
layers per stage, and a remainder ``r`` adds one layer to each of the ``r`` stages just
before the last (``for i in range(2, r + 2): partitions[-i] += 1``). So 3 layers over PP=2 are
[2, 1]: layers 0 and 1 on the first stage, layer 2 on the last.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cost.layout import Layout, stage_sizes
from slotdiff.cost.memory import MemoryPlan
from slotdiff.schema.precision import weight_format
from test_hf_quant_config import CONFIG, SIDECAR


@pytest.mark.parametrize(
    ("layers", "pp", "sizes"),
    [
        (3, 2, [2, 1]),  # 1 each, remainder 1 to the stage before the last
        (10, 4, [2, 3, 3, 2]),  # 2 each, remainder 2 to the two stages before the last
        (61, 4, [15, 15, 16, 15]),  # DeepSeek-V3's 61 layers
        (8, 4, [2, 2, 2, 2]),
    ],
)
def test_the_partition_is_vllms(layers: int, pp: int, sizes: list[int]) -> None:
    assert stage_sizes(layers, pp) == sizes


def stages(
    folder: Path, config: dict[str, Any], sidecar: dict[str, Any] | None, pp: int
) -> list[tuple[float, ...]]:
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if sidecar is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(sidecar), encoding="utf-8")
    arch = load(str(folder)).arch
    plan = MemoryPlan(arch, weight_format(arch), "bfloat16")
    assert not plan.even
    return [tuple(s) for s in plan.stages(Layout(tp=1, pp=pp), 1)]


def test_an_exclusion_list_that_names_one_layer(tmp_path: Path) -> None:
    """ModelOpt's NVFP4 with only layer 0's attention (and the head) left in bf16, on
    tests/test_hf_quant_config.py's DeepSeek-V3 at small sizes (3 layers: layer 0 dense, 1 and 2
    MoE). Its figures, by hand there: table and head 524,288 B each (bf16), final norm 512 B;
    per layer two norms 1,024 B; MLA in bf16 164,032 B; the dense MLP in NVFP4 221,184 B; an MoE
    layer's router 2,048 B, shared expert 55,296 B, four routed experts 4 × 55,296 = 221,184 B;
    and 8 B of fp32 scalars per NVFP4 tensor (weight_scale_2, input_scale): the dense MLP
    221,208 B, the shared expert 55,320 B, the routed experts 221,280 B.
    MLA in NVFP4 (layers 1, 2): its linears' 81,920 parameters at 9/16 B = 46,080 B, 5 × 8 B of
    scalars, and its two norms' 96 parameters in bf16 192 B: 46,312 B.

    Stage 0 (embedding, layers 0 and 1): 524,288 + (1,024 + 164,032 + 221,208) + (1,024 +
    46,312 + 2,048 + 55,320) = 524,288 + 386,264 + 104,704 = 1,015,256 B, routed 221,280 B.
    Stage 1 (layer 2, final norm, head): 104,704 + 512 + 524,288 = 629,504 B, routed 221,280 B.
    (They add up to the model: 2,322,760 − 2 × (164,032 − 46,312) = 2,087,320 B.)
    An even spread of the layers gave 921,301 and 723,307 B, with 294,912 and 147,456 B routed.
    """
    side = copy.deepcopy(SIDECAR)
    side["quantization"]["exclude_modules"] = ["lm_head", "model.layers.0.self_attn*"]
    got = stages(tmp_path, CONFIG, side, 2)
    assert [(w, e) for w, e, _, _ in got] == [(1_015_256, 221_280), (629_504, 221_280)]
    assert sum(w + e for w, e, _, _ in got) == 2_087_320


def test_mlp_only_layers_were_already_exact(tmp_path: Path) -> None:
    """A layer list in the config itself (Qwen3-MoE's mlp_only_layers: layer 1 a dense MLP among
    MoE layers) makes its own layer design, so the stages were exact before (kept here).

    hidden 64, 4 heads and 2 KV heads of 16, bf16 (2 B a parameter), vocabulary 100, untied:
    attention q 64 × 64 + k 32 × 64 + v 32 × 64 + o 64 × 64 = 12,288, q_norm and k_norm 16 each,
    two layer norms 128: 12,448 a layer; an MoE layer's router 4 × 64 = 256, its four experts
    4 × 3 × 32 × 64 = 24,576 (routed); the dense MLP 3 × 128 × 64 = 24,576; table and head
    6,400 each, final norm 64.
    Stage 0 (layers 0, MoE, and 1, dense): 6,400 + (12,448 + 256) + (12,448 + 24,576) = 56,128
    parameters = 112,256 B, routed 24,576 = 49,152 B; KV per token 2 layers × (K + V) × 2
    heads × 16 × 2 B = 256 B. Stage 1 (layer 2, MoE): 12,704 + 64 + 6,400 = 19,168 = 38,336 B,
    routed 49,152 B, KV 128 B a token.
    """
    config = {
        "model_type": "qwen3_moe",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 3,
        "mlp_only_layers": [1],
        "decoder_sparse_step": 1,
        "vocab_size": 100,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 4096,
    }
    got = stages(tmp_path, config, None, 2)
    assert [(w, e, kv) for w, e, kv, _ in got] == [(112_256, 49_152, 256), (38_336, 49_152, 128)]
