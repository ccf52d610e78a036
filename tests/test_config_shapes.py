"""Configs as people publish them: keys left to their class default, fields the config class
derives in ``__post_init__`` left out, composites without a ``text_config`` (issue 25, point 2).

Every expected number is transformers' (its config class and a ``meta``-device build of the
same dict, tests/oracle/hf_oracle.py) or hand arithmetic written here; the configs are the
published files under tests/fixtures/conformance/published/.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from transformers import CONFIG_MAPPING

import slotdiff
from slotdiff.analysis.analyze import load

from oracle import hf_oracle

PUBLISHED = Path(__file__).parent / "fixtures" / "conformance" / "published"


def published(name: str) -> dict[str, Any]:
    """The config.json of a published row, verbatim."""
    row = json.loads((PUBLISHED / f"{name}.json").read_text(encoding="utf-8"))
    return row["config"]


def total(config: dict[str, Any]) -> int:
    return slotdiff.analyze(copy.deepcopy(config)).to_dict()["cost"]["params"]["total"]


def class_config(config: dict[str, Any]) -> Any:
    """transformers' config object for ``config`` (its class's defaults and derivations applied)."""
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    return CONFIG_MAPPING[config["model_type"]](**kwargs)


def test_qwen15_moe_takes_qkv_bias_from_its_class() -> None:
    """Qwen1.5-MoE-A2.7B's file has no qkv_bias; Qwen2MoeConfig's default is True."""
    config = published("Qwen__Qwen1.5-MoE-A2.7B-Chat")
    assert "qkv_bias" not in config and class_config(config).qkv_bias is True
    assert total(config) == hf_oracle.param_count(config)["total"]
    # the biases the old answer missed: 24 layers x (q + k + v) = 24 x 3 x 2,048
    assert total(config) - total({**config, "qkv_bias": False}) == 24 * 3 * 2048
    arch = load(config).arch
    assert arch.fields["qkv_bias"].value is True and arch.fields["qkv_bias"].how == "default"


def test_glm5_without_layer_types_indexes_every_layer() -> None:
    """GLM-5's file has no layer_types; GlmMoeDsaConfig derives indexed_attention everywhere,
    each layer with its own DSA indexer (indexer_types derived: all "full")."""
    config = published("zai-org__GLM-5")
    assert "layer_types" not in config and "indexer_types" not in config
    derived = class_config(config)
    assert set(derived.layer_types) == {"indexed_attention"} and set(derived.indexer_types) == {"full"}
    assert total(config) == hf_oracle.param_count(config)["total"]
    layers = load(config).arch.layers
    assert all(s.sparse and not s.index_shared for s in layers)
    # per layer and token: the MLA latent (512) and rope key (64), and the indexer's 128-wide
    # key, in bf16: (512 + 64 + 128) x 2 = 1,408 B; 78 layers
    kv = slotdiff.analyze(config).to_dict()["cost"]["kv"]
    assert kv["bytes_per_token"] == 78 * (512 + 64 + 128) * 2


@pytest.mark.parametrize(
    "extra",
    [
        {"index_topk_freq": 4, "index_skip_topk_offset": 3},
        {"index_topk_pattern": "FFF" + "SSSF" * 18 + "SSS"},
        {"index_topk_freq": 2},
    ],
    ids=["freq-offset", "pattern", "freq"],
)
def test_glm5_derives_indexer_types_as_its_class(extra: dict[str, Any]) -> None:
    """Without indexer_types the class derives it from index_topk_pattern, else from
    index_topk_freq / index_skip_topk_offset (popped kwargs): slotdiff shares the same layers."""
    config = {**published("zai-org__GLM-5"), **extra}
    derived = class_config(config).indexer_types
    layers = load(config).arch.layers
    assert [("shared" if s.index_shared else "full") for s in layers] == derived
    assert total(config) == hf_oracle.param_count(config)["total"]


def test_glm52_lists_match_the_freq_offset_derivation() -> None:
    """GLM-5.2 publishes both index_topk_freq / offset and the indexer_types list; dropping the
    list gives the same model."""
    config = published("zai-org__GLM-5.2")
    dropped = {k: v for k, v in config.items() if k not in ("indexer_types", "layer_types")}
    assert class_config(dropped).indexer_types == config["indexer_types"]
    assert total(dropped) == total(config) == hf_oracle.param_count(config)["total"]


def test_step37_flash_flat_keys_are_ignored_as_by_its_class() -> None:
    """Step-3.7-Flash's hand-written file gives flat text keys and no text_config; Step3p7Config
    ignores them and builds its text model from Step3p5's defaults. slotdiff counts that model
    and does not vouch for it: the ignored keys are named."""
    config = published("stepfun-ai__Step-3.7-Flash")
    assert "text_config" not in config
    theirs = hf_oracle.param_count(config)["total"]
    assert total(config) == theirs
    report = slotdiff.analyze(config).to_dict()
    assert report["coverage"]["status"] == "unverified"
    assert "num_experts" in report["unread_keys"] and "first_k_dense_replace" in report["unread_keys"]


def test_step37_text_config_first_k_dense_replace() -> None:
    """The same keys under text_config are read: the first 3 layers dense, experts on 42."""
    flat = published("stepfun-ai__Step-3.7-Flash")
    text = {k: v for k, v in flat.items() if k not in ("architectures", "model_type", "torch_dtype")}
    config = {"architectures": flat["architectures"], "model_type": "step3p7", "text_config": text}
    derived = class_config(config).text_config
    moe_layers = [i for i in range(45) if derived.mlp_layer_types[i] == "sparse"]
    assert len(moe_layers) == 42 and min(moe_layers) == 3
    arch = load(config).arch
    assert [s.index for s in arch.layers if s.ffn == "moe"] == moe_layers
    assert total(config) == hf_oracle.param_count(config)["total"]


def test_composite_without_text_config_takes_sub_config_defaults() -> None:
    """``{"model_type": "llava"}`` is LLaVA with LlamaConfig's defaults (Llama-2-7B's text model)."""
    config = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"]}
    assert total(config) == hf_oracle.param_count(config)["total"]


def test_deepseek_v4_flash_keeps_three_cache_kinds() -> None:
    """DeepSeek-V4-Flash's compress_ratios give three layer kinds (DeepseekV4Config's
    layer_types); slotdiff keeps each: a window alone, and 1/4 and 1/128 compressed keys."""
    config = published("deepseek-ai__DeepSeek-V4-Flash")
    kinds = Counter(class_config(config).layer_types)
    assert kinds == {
        "compressed_sparse_attention": 21,
        "heavily_compressed_attention": 20,
        "sliding_attention": 2,
    }
    ours = Counter(s.compress for s in load(config).arch.layers)
    assert ours == {4: 21, 128: 20, None: 2}
    assert total(config) == hf_oracle.param_count(config)["total"]
