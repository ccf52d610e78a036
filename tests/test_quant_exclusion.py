"""Quantization exclusion lists, layer by layer, and NVIDIA ModelOpt checkpoints.

The matcher (schema/exclusion.py) compiles every list into regexes; its semantics are held to
the plain definition written here (a run of whole dotted components, each matched with
``fnmatch.fnmatchcase``). Weight bytes of small Llama configs are worked out by hand.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from slotdiff.analysis.analyze import load
from slotdiff.cost.params import count
from slotdiff.cost.weights import weights_cost
from slotdiff.schema.exclusion import matcher

PUBLISHED = Path(__file__).resolve().parent / "fixtures" / "conformance" / "published"


def _reference(pattern: str, name: str) -> bool:
    """The definition: ``pattern``'s components match a run of ``name``'s whole components."""
    parts, pat = name.split("."), pattern.split(".")
    return any(
        all(fnmatch.fnmatchcase(parts[start + i], p) for i, p in enumerate(pat))
        for start in range(len(parts) - len(pat) + 1)
    )


COMPONENT = st.sampled_from(
    ["model", "layers", "mlp", "gate", "gate_proj", "0", "1", "10", "12", "experts", "q"]
)
GLOB = st.sampled_from(["*", "?", "1*", "*proj", "ga?e", "[01]", "[!1]*", "[a-m]*", "la*s", "[", "x[", "1?"])
NAMES = st.lists(COMPONENT, min_size=1, max_size=6).map(".".join)
PATTERNS = st.lists(st.one_of(COMPONENT, GLOB), min_size=1, max_size=4).map(".".join)


@settings(max_examples=400, deadline=None)
@given(st.lists(PATTERNS, min_size=1, max_size=3), NAMES)
def test_compiled_lists_match_as_the_definition_says(patterns: list[str], name: str) -> None:
    expected = any(_reference(p, name) for p in patterns)
    assert matcher(tuple(patterns))(name) == expected


def test_regex_patterns_match_whole_names() -> None:
    m = matcher((r"re:.*\.mlp\.gate$",))
    assert m("model.layers.3.mlp.gate")
    assert not m("model.layers.3.mlp.gate_proj")


def test_composite_prefixes_read_as_the_text_models() -> None:
    m = matcher(
        (
            "model.language_model.layers.0.mlp*",
            "language_model.lm_head",
            "language_model.model.layers.3.self_attn*",
        )
    )
    assert m("model.layers.0.mlp.gate_proj")
    assert m("lm_head")
    assert m("model.layers.3.self_attn.q_proj")
    assert not m("model.layers.4.self_attn.q_proj")


def test_layers_counted_one_by_one() -> None:
    # "model.layers.1*" names layers 1 and 10-19 (vLLM reads ModelOpt's globs the same way).
    m = matcher(("model.layers.1*",))
    assert m.excluded_layers("model.layers.0.mlp.down_proj", tuple(range(21))) == 11
    assert m.excluded_layers("model.layers.0.mlp.down_proj", (0, 2, 3)) == 0
    # a list naming no layer decides once for every layer
    assert matcher(("lm_head", "mlp.gate")).excluded_layers("model.layers.0.mlp.gate", (0, 1, 2)) == 3


def _llama(layers: int, quant: dict[str, object]) -> dict[str, object]:
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": layers,
        "vocab_size": 1024,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "quantization_config": quant,
    }


NVFP4 = {
    "quant_method": "modelopt",
    "quant_algo": "NVFP4",
    "config_groups": {
        "group_0": {
            "weights": {"num_bits": 4, "type": "float", "group_size": 16},
            "input_activations": {"num_bits": 4, "type": "float", "group_size": 16},
            "targets": ["Linear"],
        }
    },
}
# By hand, bf16 elsewhere: the table and the head 1,024 × 256 × 2 = 524,288 B each; per layer
# two norms 1,024 B; an unquantized layer's linears (4 × 256 × 256 + 3 × 256 × 512) × 2 =
# 1,310,720 B; an NVFP4 layer's: each weight 4 bits plus an FP8 scale per 16 inputs —
# q, k, v, o 4 × (32,768 + 256 × 16) = 147,456, gate and up 2 × (65,536 + 512 × 16) = 147,456,
# down 65,536 + 256 × 32 = 73,728 — 368,640 B, and per quantized tensor two fp32 scalars
# (weight_scale_2, input_scale: 8 B) — 7 × 8 = 56 B: 368,696 B; the final norm 512 B.
TABLE = HEAD = 524_288
PLAIN_LAYER, NVFP4_LAYER, NORMS, FINAL = 1_310_720, 368_696, 1_024, 512


def _bytes(config: dict[str, object]) -> int:
    arch = load(config).arch
    return weights_cost(arch, count(arch)).bytes


def test_modelopt_nvfp4_with_its_first_layer_left_in_bf16() -> None:
    config = _llama(4, {**NVFP4, "ignore": ["lm_head", "model.layers.0*"]})
    assert _bytes(config) == TABLE + HEAD + PLAIN_LAYER + 3 * NVFP4_LAYER + 4 * NORMS + FINAL


def test_an_exclusion_that_names_layers_by_prefix_counts_each() -> None:
    # 12 layers; "model.layers.1*" leaves layers 1, 10 and 11 in bf16.
    config = _llama(12, {**NVFP4, "ignore": ["lm_head", "model.layers.1*"]})
    assert _bytes(config) == TABLE + HEAD + 3 * PLAIN_LAYER + 9 * NVFP4_LAYER + 12 * NORMS + FINAL


def test_one_layers_projections_named_in_a_compressed_tensors_list() -> None:
    # The list names layer 0's MLP only: the other three layers' MLPs stay fp8. The weights
    # state no strategy and no group_size, which compressed-tensors 0.20's QuantizationArgs
    # reads as strategy "tensor": one weight_scale element per tensor, in the dtype the weight
    # was observed in (bf16, 2 B). fp8 linears: q, k, v, o 4 × (65,536 + 2) = 262,152; gate,
    # up 2 × (131,072 + 2) = 262,148; down 131,072 + 2 = 131,074.
    fp8 = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}, "targets": ["Linear"]}},
        "ignore": [
            "lm_head",
            "model.layers.0.mlp.gate_proj",
            "model.layers.0.mlp.up_proj",
            "model.layers.0.mlp.down_proj",
        ],
    }
    attention, mlp = 262_152, 262_148 + 131_074
    plain_mlp = 3 * 256 * 512 * 2
    expected = TABLE + HEAD + 4 * attention + plain_mlp + 3 * mlp + 4 * NORMS + FINAL
    assert _bytes(_llama(4, fp8)) == expected


def test_mixed_precision_exports_are_refused_not_priced_as_one_format() -> None:
    mixed = _llama(2, {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {}})
    arch = load(mixed).arch
    cost = weights_cost(arch, count(arch))
    assert not cost.supported and "not modelled" in cost.detail
    under_fp8 = _llama(2, {"quant_method": "fp8", "quant_algo": "MIXED_PRECISION", "moe_quant_algo": "NVFP4"})
    arch = load(under_fp8).arch
    cost = weights_cost(arch, count(arch))
    assert not cost.supported and "NVFP4" in cost.detail


def test_a_published_modelopt_nvfp4_checkpoint_against_a_model_card() -> None:
    """nvidia/Kimi-K2.5-NVFP4 as published: NVFP4 linears, its ignore list keeping lm_head,
    every layer's self_attn (MLA), the vision tower and the projector in bf16. The same
    architecture quantized with the same split (wafer-ai/Kimi-K2.6-NVFP4's card: "lm_head, all
    *self_attn* projections, *vision_tower*, *mm_projector* ... kept BF16") is stated as
    "~590 GB (550 GiB)"; the card rounds, so 1%."""
    entry = json.loads((PUBLISHED / "nvidia__Kimi-K2.5-NVFP4.json").read_text(encoding="utf-8"))
    got = _bytes(entry["config"])
    assert abs(got - 590e9) / 590e9 < 0.01, got


def _ct_nvfp4(inputs: dict[str, object] | None) -> dict[str, object]:
    group: dict[str, object] = {
        "targets": ["Linear"],
        "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
    }
    if inputs is not None:
        group["input_activations"] = inputs
    return {
        "quant_method": "compressed-tensors",
        "format": "nvfp4-pack-quantized",
        "config_groups": {"group_0": group},
        "ignore": ["lm_head"],
    }


def test_compressed_tensors_nvfp4_counts_its_global_scales() -> None:
    """llm-compressor's NVFP4 (tensor_group strategy): each quantized linear stores, beside its
    packed E2M1 weight and FP8 scale per 16, an fp32 weight_global_scale, and for W4A4 an fp32
    input_global_scale ("local" dynamic inputs keep a global scale, no input_scale);
    compressed-tensors' _initialize_scale_zero_point. By hand from the NVFP4 layer above
    (368,640 B before its scalars, 7 linears): W4A4 368,640 + 7 × 8 = 368,696 B a layer, W4A16
    368,640 + 7 × 4 = 368,668 B; a dynamic=True input keeps no global scale (W4A16's bytes)."""
    w4a4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"}
    rest = TABLE + HEAD + 2 * NORMS + FINAL
    assert _bytes(_llama(2, _ct_nvfp4(w4a4))) == rest + 2 * 368_696
    assert _bytes(_llama(2, _ct_nvfp4(None))) == rest + 2 * 368_668
    assert _bytes(_llama(2, _ct_nvfp4({**w4a4, "dynamic": True}))) == rest + 2 * 368_668
