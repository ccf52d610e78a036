"""SGLang 0.5.11-0.5.23 keep sliding-window models whose architecture is in none of
``is_hybrid_swa_model``'s lists on the default pool (read in every wheel 0.5.11-0.5.23,
``configs/model_config.py``): ``model_runner.is_hybrid_swa = model_config.is_hybrid_swa`` is the
only switch to HybridSWAPoolConfigurator, and it is true only for the listed architectures
(Llama 4, gpt-oss, MiMo-V2, Step-3.5, Gemma 4, and from later releases DeepSeek-V4, Laguna,
Mellum, Granite SWA, ...) or, from 0.5.13, for a config with a truthy ``is_hybrid_swa``.
MistralForCausalLM, MixtralForCausalLM, Phi3ForCausalLM, Olmo3ForCausalLM (SGLang's Olmo3Config
renames it Olmo2ForCausalLM, for which it also sets disable_hybrid_swa_memory),
Cohere2ForCausalLM, Qwen2ForCausalLM and Starcoder2ForCausalLM never are: DefaultPoolConfigurator
sizes every layer, sliding or not, with the one cell, KV heads × (head_dim + v_head_dim) ×
layers × 2 B.

Free 70 GiB, weights 20 GiB, --mem-fraction-static 0.83 (test_sglang_recent's pins): rest =
(70 − 20) − 70 × 0.17 = 38.1 GiB; int(38.1 × 2^30) = 40,909,563,494 B; page 64.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import SlotdiffError
from test_sglang_recent import FRACTION, RECENT, fit

from conftest import FIXTURES

PUBLISHED = FIXTURES / "conformance" / "published"

# Command R7B's shape (Cohere2ForCausalLM): 32 layers, 3 of 4 sliding (window 4,096), 8 KV heads,
# head_dim 4,096 / 32 = 128.
COHERE2: dict[str, Any] = {
    "architectures": ["Cohere2ForCausalLM"],
    "model_type": "cohere2",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "sliding_window": 4096,
    "sliding_window_pattern": 4,
    "vocab_size": 256000,
    "max_position_embeddings": 8192,
    "layer_norm_eps": 1e-5,
    "logit_scale": 0.25,
    "rope_theta": 50000.0,
    "attention_bias": False,
    "use_qk_norm": False,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}

# (config, its changes, tokens): cell = KV heads × (head_dim + head_dim) × layers × 2 B;
# tokens = 40,909,563,494 // cell, floored to 64.
CASES = [
    # Mistral 7B v0.1 (window 4,096 on every layer): 8 × 256 × 32 × 2 = 131,072 B → 312,115
    # (131,072 × 312,115 = 40,909,537,280, 26,214 B left) → 312,064
    ("mistralai__Mistral-7B-v0.1.json", {}, 312_064),
    # Phi-3 mini 4k (window 2,047): 32 KV heads × (96 + 96) × 32 × 2 = 393,216 B (head_dim
    # 3,072 / 32 = 96) → 104,038 (40,909,406,208, 157,286 B left) → 104,000
    ("microsoft__Phi-3-mini-4k-instruct.json", {}, 104_000),
    ("microsoft__Phi-3.5-mini-instruct.json", {}, 104_000),  # the same shape, window 262,144
    # Olmo 3.1 32B (3 of 4 layers sliding, window 4,096): 8 × (128 + 128) × 64 × 2 = 262,144 B
    # (head_dim 5,120 / 40) → 156,057 (40,909,406,208, 157,286 B left) → 156,032
    ("allenai__Olmo-3.1-32B-Instruct.json", {}, 156_032),
    # StarCoder2 7B (window 4,096): 4 × (128 + 128) × 32 × 2 = 65,536 B (4,608 / 36) → 624,230 → 624,192
    ("bigcode__starcoder2-7b.json", {}, 624_192),
    # Mixtral 8x7B given a window: 8 × 256 × 32 × 2 = 131,072 B → 312,064 as Mistral
    ("mistralai__Mixtral-8x7B-v0.1.json", {"sliding_window": 4096}, 312_064),
    # Qwen2 7B with its sliding window switched on: 4 × (128 + 128) × 28 × 2 = 57,344 B (3,584 / 28)
    # → 713,406 (40,909,553,664, 9,830 B left) → 713,344
    (
        "Qwen__Qwen2-7B-Instruct.json",
        {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 14},
        713_344,
    ),
    # Command R7B's shape: 8 × 256 × 32 × 2 = 131,072 B → 312,064
    (None, {}, 312_064),
]


def _config(tmp_path: Path, name: str | None, changes: dict[str, Any]) -> Path:
    base = COHERE2 if name is None else json.loads((PUBLISHED / name).read_text(encoding="utf-8"))["config"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, **changes}), encoding="utf-8")
    assert any(s.window for s in load(path).arch.layers)  # slotdiff sees the sliding layers
    return path


@pytest.mark.parametrize("version", RECENT)
@pytest.mark.parametrize(("name", "changes", "tokens"), CASES)
def test_sliding_window_models_off_the_hybrid_list_keep_the_default_pool(
    tmp_path: Path, version: str, name: str | None, changes: dict[str, Any], tokens: int
) -> None:
    path = _config(tmp_path, name, changes)
    f = fit(path, version=version, block_size=64, kv_cache_dtype="bfloat16", **FRACTION)
    assert f.kv_pool_tokens == tokens


@pytest.mark.parametrize(
    ("version", "priced"), [("0.5.11", True), ("0.5.12", True), ("0.5.13", False), ("0.5.23", False)]
)
def test_a_config_opting_in_is_refused_from_0_5_13(tmp_path: Path, version: str, priced: bool) -> None:
    """From 0.5.13 ``getattr(hf_text_config, "is_hybrid_swa", False)`` makes any model hybrid:
    a config stating it goes to HybridSWAPoolConfigurator (not modelled); 0.5.11-0.5.12 ignore it."""
    path = _config(tmp_path, "mistralai__Mistral-7B-v0.1.json", {"is_hybrid_swa": True})
    if priced:
        f = fit(path, version=version, block_size=64, kv_cache_dtype="bfloat16", **FRACTION)
        assert f.kv_pool_tokens == 312_064
    else:
        with pytest.raises(SlotdiffError, match=rf"SGLang {version} may size sliding-window"):
            fit(path, version=version, block_size=64, kv_cache_dtype="bfloat16", **FRACTION)
