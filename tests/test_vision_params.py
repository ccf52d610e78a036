"""Vision tower + connector parameter counts against transformers' own instantiation.

Every expected number below was produced by transformers 5.24 instantiating the model on
the meta device from that fixture (a throwaway script outside the repository: parameters
grouped by name, summed over the groups under the vision tower, the projector and
embed_vision), not by slotdiff. Kimi-K3 is the exception and says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slotdiff.cost.inventory.tensor import Unsupported
from slotdiff.cost.inventory.towers import vision_model, vision_tensors
from slotdiff.cost.params import count
from slotdiff.schema.arch import Architecture

from conftest import arch_from, arch_of

FIXTURES = Path(__file__).parent / "fixtures" / "vision"


def vision_sum(arch: Architecture) -> int:
    return sum(t.params for t in vision_tensors(arch))


# transformers 5.24, meta device, <Class>(config): sum of the vision-tower, projector and
# embed_vision parameter groups of that fixture.
REFERENCE = {
    # LlavaForConditionalGeneration: CLIP ViT-L/14-336 + 2-layer projector
    "llava-hf__llava-1.5-7b-hf.json": 324_487_168,
    "defaults__llava.json": 324_487_168,
    # Qwen2VLForConditionalGeneration (default embed_dim 1280, merger to hidden_size 3584)
    "defaults__qwen2_vl.json": 675_759_104,
    # Qwen2_5_VLForConditionalGeneration (defaults: vision hidden_size 3584)
    "defaults__qwen2_5_vl.json": 3_083_025_152,
    # Qwen3VLMoeForConditionalGeneration, trimmed published config (3 DeepStack mergers)
    "Qwen__Qwen3-VL-30B-A3B-Instruct.json": 538_631_408,
    # Qwen3_5MoeForConditionalGeneration (deepstack_visual_indexes is [] and unused)
    "Qwen__Qwen3.5-35B-A3B.json": 446_571_248,
    # Gemma3ForConditionalGeneration (defaults: SigLIP with the pooling head)
    "defaults__gemma3.json": 94_654_464,
    # Gemma4ForConditionalGeneration: vision_tower + embed_vision
    "google__gemma-4-26B-A4B.json": 572_792_112,
    # InternVLForConditionalGeneration
    "defaults__internvl.json": 337_509_376,
    # Llama4ForConditionalGeneration: vision_model (with vision_adapter) + projector
    "meta-llama__Llama-4-Scout-17B-16E-Instruct.json": 871_932_416,
    # MllamaForConditionalGeneration(MllamaConfig.from_dict(fixture)) on the meta device.
    # The shared dump built MllamaForCausalLM for this file (its `architectures` is null,
    # so AutoModelForCausalLM was tried first) and has no vision tower; this number comes
    # from the same grouping run on MllamaForConditionalGeneration.
    "defaults__mllama.json": 867_749_395,
}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_vision_plus_connector_equals_transformers(name: str) -> None:
    arch = arch_of(name)
    assert vision_sum(arch) == REFERENCE[name]
    model = vision_model(arch)
    assert model is not None and model.verified


def test_slots_are_vision_and_connector() -> None:
    arch = arch_of("llava-hf__llava-1.5-7b-hf.json")
    c = count(arch)
    # projector: 1024·4096 + 4096 + 4096·4096 + 4096 (linear_1, linear_2 with bias)
    assert c.part("connector") == 1024 * 4096 + 4096 + 4096 * 4096 + 4096
    assert c.part("vision") + c.part("connector") == REFERENCE["llava-hf__llava-1.5-7b-hf.json"]


def test_llava_total_is_transformers_total() -> None:
    # LlavaForConditionalGeneration total, transformers 5.24 meta device
    assert count(arch_of("llava-hf__llava-1.5-7b-hf.json")).total == 7_063_427_072


def test_qwen3_vl_deepstack_mergers() -> None:
    # transformers 5.24: model.visual.deepstack_merger_list.* sums to 92,060,160
    ts = vision_tensors(arch_of("Qwen__Qwen3-VL-30B-A3B-Instruct.json"))
    assert sum(t.params for t in ts if "deepstack" in t.part) == 92_060_160


def test_mllama_cross_attention_layers_and_total() -> None:
    arch = arch_of("defaults__mllama.json")
    cross = [s.index for s in arch.layers if s.mixer == "cross_attention"]
    assert cross == [3, 8, 13, 18, 23, 28, 33, 38]
    c = count(arch)
    # transformers 5.24: model.language_model.layers.N.cross_attn* and cross_attn_*_gate
    # groups sum to 335,546,384 (8 layers: q, k, v, o, q_norm, k_norm, two gates)
    assert sum(t.params for t in c.tensors if t.part.startswith("attention/cross.")) == (335_546_384)
    # MllamaForConditionalGeneration total, transformers 5.24 meta device
    assert c.total == 10_642_941_475


def test_kimi_k3_is_counted_but_unverified() -> None:
    # Not a transformers number: transformers 5.24 has no kimi_k3 model. The structure is
    # Kimi-K3's remote modeling code as transcribed by two independent ports (ROCm/ATOM,
    # alibaba/rtp-llm); the arithmetic follows from the published vision_config:
    patch = 3 * 14 * 14 * 1024  # Conv2d, patch_embed_proj_bias false
    pos = 64 * 64 * 1024  # init_pos_emb_height × width × vt_hidden_size
    block = (
        2 * 1024  # norm0, norm1: RMSNorm weights
        + 1024 * 3 * 1536  # wqkv: hidden → 3·qkv_hidden_size, attn_bias false
        + 1536 * 1024  # wo
        + 2 * 1024 * 4096  # mlp fc0, fc1, linear_bias false
    )
    final = 1024
    projector = 4096 * 4096 + 4096 * 7168 + 7168  # proj.0, proj.2 (no bias), post RMSNorm
    expected = patch + pos + 27 * block + final + projector
    arch = arch_of("moonshotai__Kimi-K3.json")
    assert vision_sum(arch) == expected == 447_358_976
    model = vision_model(arch)
    assert model is not None and not model.verified
    assert "unverified" in model.note


def test_text_only_config_has_no_vision_tensors() -> None:
    arch = arch_from(
        {
            "model_type": "llama",
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "vocab_size": 100,
            "intermediate_size": 128,
        }
    )
    assert vision_tensors(arch) == ()


def test_unknown_tower_is_unsupported_with_a_reason() -> None:
    import json

    data = json.loads((FIXTURES / "llava-hf__llava-1.5-7b-hf.json").read_text())
    data["vision_config"]["model_type"] = "some_new_vit"
    with pytest.raises(Unsupported, match="no tower data"):
        vision_tensors(arch_from(data))
    data["model_type"] = "some_new_vlm"
    with pytest.raises(Unsupported, match="no data for this multimodal model_type"):
        vision_tensors(arch_from(data))


def test_field_provenance_names_defaults() -> None:
    # llava-1.5's config omits multimodal_projector_bias: LlavaConfig's default (True) applies
    vis = arch_of("llava-hf__llava-1.5-7b-hf.json").vision
    assert vis is not None
    assert vis["projector_bias"].value is True
    assert vis["projector_bias"].how == "default"
    # Qwen2-VL's encoder width is embed_dim; vision_config.hidden_size is the merger output
    vis = arch_of("defaults__qwen2_vl.json").vision
    assert vis is not None
    assert (vis["hidden"].value, vis["out_hidden"].value) == (1280, 3584)


def test_data_files_are_consistent() -> None:
    from slotdiff.cost.images import RULES
    from slotdiff.schema.tower_spec import multimodal_types, vision_types

    towers = vision_types()  # loading checks every item's keys
    for name, spec in multimodal_types().items():
        assert spec.get("source"), name
        assert spec.get("tower") is None or spec["tower"] in towers, name
        images = spec.get("images")
        assert images is None or images["rule"] in RULES, name
        assert images is not None or spec.get("images_unsupported"), name
        if images:
            assert all("value" in s and "from" in s for s in images["settings"].values()), name
    for name, spec in towers.items():
        assert spec.get("source") and spec.get("summary"), name
