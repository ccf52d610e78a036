"""FP8 checkpoints without block scales: what each format stores beside its fp8 weights, one
scale per tensor or one per output row, and the label that says which.

Read from the formats' own code (vLLM 0.34.0, transformers 5.24, compressed-tensors 0.20.1):

* ``quant_method: fp8`` without ``weight_block_size`` (AutoFP8's exports): vLLM's
  Fp8LinearMethod.create_weights registers ``weight_scale`` as a PerTensorScaleParameter
  (``torch.empty(len(output_partition_sizes), float32)``: one fp32 per checkpoint tensor), and
  with ``activation_scheme: static`` an ``input_scale`` the same way (create_fp8_input_scale);
  transformers' FP8Linear with no block size holds a scalar fp32 ``weight_scale_inv``. vLLM
  reads the exclusion list from ``ignored_layers`` (else ``modules_to_not_convert``).
* ``fbgemm_fp8``: transformers' FbgemmFp8Linear holds ``weight_scale`` of ``(out_features, 1)``
  fp32 (its ``input_scale_ub`` is a non-persistent buffer); vLLM's FBGEMMFp8LinearMethod a
  ChannelQuantScaleParameter of ``(sum(output_partition_sizes), 1)`` fp32: one per output row.
* compressed-tensors float8: QuantizationArgs infers the strategy (none stated and no
  group_size: ``tensor``; group_size -1: ``channel``); initialize_qparams gives ``tensor`` a
  ``(1,)`` scale, ``channel`` an ``(out_features, 1)`` one, both in the observed weight's dtype
  (``scale_dtype = observed_dtype``: bf16 here), and a static input scheme a ``(1,)``
  input_scale; symmetric weights store no zero point (NaiveQuantizationCompressor).
* ModelOpt ``FP8``: vLLM's KFp8StaticTensor registers ``weight_scale`` and ``input_scale`` as
  PerTensorScaleParameters (static per-tensor W8A8): two fp32 per tensor.

The model: a 2-layer Llama (hidden 256, MLP 512, 4 heads, vocab 1,024, untied, bf16). By hand,
per layer its linears hold q, k, v, o 4 × 256 × 256 + gate, up, down 3 × 256 × 512 = 655,360
elements (1 B each in fp8) in 7 tensors with 4 × 256 + 2 × 512 + 256 = 2,304 output rows; the
rest stays bf16: table and head 2 × 1,024 × 256 × 2 = 1,048,576 B, two norms a layer 1,024 B,
the final norm 512 B, so REST = 1,048,576 + 2 × 1,024 + 512 = 1,051,136 B.
"""

from __future__ import annotations

from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cost.compute import compute_precision
from slotdiff.cost.gpus import gpu
from slotdiff.cost.params import count
from slotdiff.cost.weights import weights_cost

REST = 1_051_136
FP8_LAYER = 655_360  # elements = bytes in fp8
TENSORS, ROWS = 7, 2_304


def _llama(quant: dict[str, Any]) -> dict[str, Any]:
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": 2,
        "vocab_size": 1024,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "quantization_config": quant,
    }


def _ct(weights: dict[str, Any], inputs: dict[str, Any] | None) -> dict[str, Any]:
    group: dict[str, Any] = {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", **weights}}
    if inputs is not None:
        group["input_activations"] = {"num_bits": 8, "type": "float", **inputs}
    return {
        "quant_method": "compressed-tensors",
        "format": "float-quantized",
        "config_groups": {"group_0": group},
        "ignore": ["lm_head"],
    }


DYNAMIC_TOKEN = {"strategy": "token", "dynamic": True, "symmetric": True}
STATIC_TENSOR = {"strategy": "tensor", "dynamic": False, "symmetric": True}

CASES = {
    # 2 × (655,360 + 7 × 4) = 1,310,776: one fp32 weight scale per tensor.
    "autofp8-dynamic": ({"quant_method": "fp8", "activation_scheme": "dynamic"}, 1_310_776, "per-tensor"),
    # 2 × (655,360 + 7 × (4 + 4)) = 1,310,832: and one fp32 input scale per tensor.
    "autofp8-static": ({"quant_method": "fp8", "activation_scheme": "static"}, 1_310_832, "static input"),
    # 2 × (655,360 + 2,304 × 4) = 1,329,152: one fp32 per output row.
    "fbgemm": (
        {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]},
        1_329_152,
        "per-channel",
    ),
    # FP8-dynamic (channel strategy): 2 × (655,360 + 2,304 × 2) = 1,319,936, bf16 row scales.
    "ct-channel": (_ct({"strategy": "channel", "dynamic": False}, DYNAMIC_TOKEN), 1_319_936, "per-channel"),
    # W8A8 static per-tensor: 2 × (655,360 + 7 × (2 + 2)) = 1,310,776, bf16 scales.
    "ct-tensor-static": (
        _ct({"strategy": "tensor", "dynamic": False}, STATIC_TENSOR),
        1_310_776,
        "per-tensor",
    ),
    # Weight-only, no strategy and no group_size (tensor): 2 × (655,360 + 7 × 2) = 1,310,748.
    "ct-tensor-weight-only": (_ct({}, None), 1_310_748, "per-tensor"),
    # An fp32 scale_dtype changes nothing: the naive float8 compressor stores the scale as
    # observed, bf16 (compressed-tensors 0.20.1 initialize.py: scale_dtype = observed_dtype;
    # only the nvfp4 / mxfp4 / mxfp8 compressors cast to scale_dtype): 2 × (655,360 + 2,304 × 2)
    # = 1,319,936.
    "ct-channel-fp32": (
        _ct({"strategy": "channel", "scale_dtype": "torch.float32"}, None),
        1_319_936,
        "per-channel",
    ),
    # ModelOpt FP8: 2 × (655,360 + 7 × (4 + 4)) = 1,310,832.
    "modelopt": ({"quant_method": "modelopt", "quant_algo": "FP8"}, 1_310_832, "per-tensor"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bytes_and_label_agree_with_what_the_format_stores(name: str) -> None:
    quant, linears, said = CASES[name]
    arch = load(_llama(quant)).arch
    cost = weights_cost(arch, count(arch))
    assert cost.supported and cost.format == "fp8"
    assert cost.bytes == REST + linears, cost.bytes - REST
    assert said in cost.detail, cost.detail
    other = "per-channel" if "per-tensor" in cost.detail else "per-tensor"
    assert other not in cost.detail


def test_the_per_tensor_and_per_row_sums_by_hand() -> None:
    # The table's numbers from the stated shapes, so a slip in one is caught by the other.
    assert 2 * FP8_LAYER == 2 * (4 * 256 * 256 + 3 * 256 * 512)
    assert ROWS == 4 * 256 + 2 * 512 + 256 and TENSORS == 4 + 3
    assert CASES["autofp8-dynamic"][1] == 2 * (FP8_LAYER + TENSORS * 4)
    assert CASES["fbgemm"][1] == 2 * (FP8_LAYER + ROWS * 4)


def test_autofp8s_ignored_layers_are_read_as_vllm_reads_them() -> None:
    # Layer 0's down_proj left in bf16: 256 × 512 × 2 = 262,144 B instead of 131,072 + 4.
    quant = {
        "quant_method": "fp8",
        "activation_scheme": "dynamic",
        "ignored_layers": ["model.layers.0.mlp.down_proj"],
    }
    arch = load(_llama(quant)).arch
    assert weights_cost(arch, count(arch)).bytes == REST + 1_310_776 - (131_072 + 4) + 262_144


def test_block_fp8s_ignored_layers_are_read_too() -> None:
    # vLLM's Fp8Config reads ignored_layers with weight_block_size as without (fp8.py): layer 0's
    # down_proj in bf16, 262,144 B, instead of 131,072 B of fp8 and 2 × 4 = 8 128×128 fp32
    # block scales (256 rows × 512 inputs: 2 × 4 tiles), 32 B: 131,104 B.
    quant = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    blocks = weights_cost(arch := load(_llama(quant)).arch, count(arch)).bytes
    quant["ignored_layers"] = ["model.layers.0.mlp.down_proj"]
    arch = load(_llama(quant)).arch
    assert weights_cost(arch, count(arch)).bytes == blocks - 131_104 + 262_144


def test_a_strategy_slotdiff_does_not_model_is_refused() -> None:
    arch = load(_llama(_ct({"strategy": "group", "group_size": 128}, None))).arch
    cost = weights_cost(arch, count(arch))
    assert not cost.supported and "not modelled" in cost.detail and cost.to_dict()["bytes"] is None


@pytest.mark.parametrize(("name", "scales"), [("fbgemm", "dynamic"), ("autofp8-static", "static")])
def test_fp8_checkpoints_run_their_matmuls_in_fp8(name: str, scales: str) -> None:
    # Both quantize the activations (FbgemmFp8Linear: quantize_fp8_per_row on every input;
    # AutoFP8 static: the stored input_scale), so the H100's fp8 peak applies, not bf16's.
    precision = compute_precision(load(_llama(CASES[name][0])).arch, None, gpu("h100-sxm"))
    assert precision.dtype == "float8_e4m3fn" and f"({scales} activation scales)" in precision.why
