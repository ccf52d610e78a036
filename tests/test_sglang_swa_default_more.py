"""More sliding-window models SGLang 0.5.11-0.5.23 keep on the default pool (as
test_sglang_swa_default): Exaone4ForCausalLM, PhiMoEForCausalLM, Qwen2MoeForCausalLM,
Qwen3ForCausalLM and Qwen3MoeForCausalLM are served by every wheel 0.5.11-0.5.23 (an EntryClass in
sglang/srt/models) and are in none of the releases' ``is_hybrid_swa_model`` lists (nor
SWA_SINK_ARCHS, MIMO_V2_MODEL_ARCHS), and SGLang has no config class of its own for them that sets
``is_hybrid_swa``: DefaultPoolConfigurator sizes every layer, sliding or not, with the one cell,
KV heads × (head_dim + head_dim) × layers × 2 B.

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
from test_sglang_swa_default import _config

# Phi-3.5-MoE's shape (PhiMoEForCausalLM): 32 layers, all sliding (window 131,072), 8 KV heads,
# head_dim 4,096 / 32 = 128.
PHIMOE: dict[str, Any] = {
    "architectures": ["PhiMoEForCausalLM"],
    "model_type": "phimoe",
    "hidden_size": 4096,
    "intermediate_size": 6400,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "num_local_experts": 16,
    "num_experts_per_tok": 2,
    "sliding_window": 131072,
    "max_position_embeddings": 131072,
    "vocab_size": 32064,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "hidden_act": "silu",
    "attention_bias": True,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}

# (published config or None for PHIMOE, its changes, tokens): tokens = 40,909,563,494 // cell,
# floored to 64.
CASES = [
    # EXAONE 4.0 32B (48 of 64 layers sliding, window 4,096): 8 × (128 + 128) × 64 × 2 = 262,144 B
    # → 156,057 (262,144 × 156,057 = 40,909,406,208, 157,286 B left) → 156,032
    ("LGAI-EXAONE__EXAONE-4.0-32B.json", {}, 156_032),
    # Qwen1.5-MoE-A2.7B with its window on: 16 × (128 + 128) × 24 × 2 = 196,608 B (head_dim
    # 2,048 / 16) → 208,076 (196,608 × 208,076 = 40,909,406,208, 157,286 B left) → 208,064
    ("Qwen__Qwen1.5-MoE-A2.7B-Chat.json", {"use_sliding_window": True}, 208_064),
    # Qwen3 8B with a window on layers 18-35: 8 × 256 × 36 × 2 = 147,456 B → 277,435
    # (147,456 × 277,435 = 40,909,455,360, 108,134 B left) → 277,376
    (
        "Qwen__Qwen3-8B.json",
        {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 18},
        277_376,
    ),
    # Qwen3 30B-A3B with a window on layers 24-47: 4 × 256 × 48 × 2 = 98,304 B → 416,153
    # (98,304 × 416,153 = 40,909,504,512, 58,982 B left) → 416,128
    (
        "Qwen__Qwen3-30B-A3B.json",
        {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 24},
        416_128,
    ),
    # Phi-3.5-MoE's shape: 8 × 256 × 32 × 2 = 131,072 B → 312,115 (40,909,537,280, 26,214 B left)
    # → 312,064
    (None, PHIMOE, 312_064),
]


def _path(tmp_path: Path, name: str | None, changes: dict[str, Any]) -> Path:
    if name is not None:
        return _config(tmp_path, name, changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(changes), encoding="utf-8")
    assert any(s.window for s in load(path).arch.layers)  # slotdiff sees the sliding layers
    return path


@pytest.mark.parametrize("version", RECENT)
@pytest.mark.parametrize(("name", "changes", "tokens"), CASES)
def test_more_sliding_window_models_keep_the_default_pool(
    tmp_path: Path, version: str, name: str | None, changes: dict[str, Any], tokens: int
) -> None:
    path = _path(tmp_path, name, changes)
    f = fit(path, version=version, block_size=64, kv_cache_dtype="bfloat16", **FRACTION)
    assert f.kv_pool_tokens == tokens


def test_opting_in_still_refused(tmp_path: Path) -> None:
    """A Qwen3 config stating is_hybrid_swa goes to HybridSWAPoolConfigurator from 0.5.13."""
    changes = {
        "use_sliding_window": True,
        "sliding_window": 4096,
        "max_window_layers": 18,
        "is_hybrid_swa": True,
    }
    path = _config(tmp_path, "Qwen__Qwen3-8B.json", changes)
    with pytest.raises(SlotdiffError, match=r"SGLang 0.5.13 may size sliding-window"):
        fit(path, version="0.5.13", block_size=64, kv_cache_dtype="bfloat16", **FRACTION)
