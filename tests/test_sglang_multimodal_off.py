"""Gemma 3 (Gemma3ForConditionalGeneration) and Llama 4 (Llama4ForConditionalGeneration) are
served as text models by SGLang unless ``--enable-multimodal`` is passed: ModelConfig sets
``enable_multimodal = False`` for an ``architectures[0]`` in ``mm_disabled_models`` (read in the
0.4.9, 0.4.10 and 0.5.2-0.5.23 wheels; 0.5.18+ also asks that model_impl is not transformers,
the default being auto), so ``model_config.is_multimodal`` is False and

* server_args does not scale the default --mem-fraction-static for it (0.4.9's × 0.90, 0.4.10+'s
  ``adjust_mem_fraction_for_vlm``, both under ``if model_config.is_multimodal``);
* from 0.5.18 ``mm_runtime_reservation_gb(is_multimodal=False, ...)`` returns 0.0: no
  SGLANG_VLM_CACHE_SIZE_MB out of the KV budget, so the 0.5.18+ refusal for vision models does not
  apply to them. Gemma 3's class (gemma3_mm.py) still builds and loads the vision tower; Llama
  4's (mllama4.py, from 0.5.1: has_vision = has_vision_weights and enable_multimodal) builds
  neither vision_model nor multi_modal_projector and skips their weights (_should_skip_weight),
  so its weights are its text model's (0.4.9's class has no such gate).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cost.gpus import gpu
from slotdiff.cost.memory import MemoryPlan
from slotdiff.cost.weights import effective_format
from slotdiff.deploy.sglang import sglang_fit
from slotdiff.deploy.vllm import EngineArgs
from test_sglang_pool import fit as pool_fit
from test_sglang_pool import fraction
from test_sglang_recent import FRACTION, RECENT
from test_sglang_recent import fit as recent_fit

from conftest import FIXTURES

PUBLISHED = FIXTURES / "conformance" / "published"


def _config(tmp_path: Path, name: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(json.loads((PUBLISHED / name).read_text(encoding="utf-8"))["config"]))
    return path


# Gemma 3 27B (Gemma3ForConditionalGeneration; text: 62 layers, 16 KV heads × 128, sliding
# layers in full: disable_hybrid_swa_memory), with test_sglang_recent's pins: rest =
# (70 − 20) − 70 × 0.17 = 38.1 GiB → int(38.1 × 2^30) = 40,909,563,494 B; cell 16 × (128 + 128) ×
# 62 × 2 = 507,904 B → 80,545 tokens (507,904 × 80,545 = 40,909,127,680, 435,814 B left) →
# 1,258 pages of 64 = 80,512. No multimodal reserve: the same in 0.5.17 as in 0.5.18-0.5.23.
@pytest.mark.parametrize("version", RECENT)
def test_gemma3_multimodal_keeps_the_text_pool(tmp_path: Path, version: str) -> None:
    path = _config(tmp_path, "google__gemma-3-27b-it.json")
    f = recent_fit(path, version=version, block_size=64, kv_cache_dtype="bfloat16", **FRACTION)
    assert f.kv_pool_tokens == 80_512


@pytest.mark.parametrize(
    "name", ["google__gemma-3-27b-it.json", "meta-llama__Llama-4-Scout-17B-16E-Instruct.json"]
)
@pytest.mark.parametrize(("version", "frac"), [("0.4.9", 0.874), ("0.5.5", 0.834)])
def test_no_vision_fraction_for_models_served_as_text(
    tmp_path: Path, name: str, version: str, frac: float
) -> None:
    """The H100 TP 1 default without the vision factor (worked in test_sglang_pool: 0.4.9: 9.5 +
    0.5 = 10 GiB reserved, 69.22 / 79.22 → 0.874; 0.5.5: 0.834). The factor slotdiff applied
    before, for Gemma 3's SigLIP (27 layers × 1,152²): 0.95 × (1 − 0.1 × (27 × 1,152² /
    (24 × 1,024²) − 1)) = 0.95 × 0.95762 = 0.9097 (0.5.5: 0.7587), is not SGLang's."""
    assert fraction(pool_fit(_config(tmp_path, name), version=version)) == pytest.approx(frac, abs=1e-9)


def _weights(path: Path, version: str) -> float:
    """The weights term SGLang ``version`` estimates on each of 8 TP ranks (no pinned bytes)."""
    arch = load(path).arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    args = EngineArgs(
        engine="sglang", version=version, max_model_len=8192, tensor_parallel_size=8, mem_fraction_static=0.9
    )
    f = sglang_fit(arch, plan, gpu("h100-sxm"), args)
    return next(t.bytes for t in f.stages[0].terms if t.name == "weights")


def test_llama4_served_as_text_loads_only_its_text_model(tmp_path: Path) -> None:
    """From 0.5.1 SGLang's Llama 4 class skips the vision tower and projector when multimodal is
    off: the weights on each of 8 TP ranks are those of the text model alone, priced from its
    own config (Llama4ForCausalLM, the text_config), and 0.4.9 (which builds the tower) holds
    more; Gemma 3 keeps its tower in every release."""
    scout = json.loads((PUBLISHED / "meta-llama__Llama-4-Scout-17B-16E-Instruct.json").read_text())["config"]
    text = {**scout["text_config"], "architectures": ["Llama4ForCausalLM"]}
    text.setdefault("model_type", "llama4_text")
    text.setdefault("torch_dtype", scout.get("torch_dtype"))
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "config.json").write_text(json.dumps(text))
    whole = _config(tmp_path, "meta-llama__Llama-4-Scout-17B-16E-Instruct.json")
    assert _weights(whole, "0.5.5") == _weights(tmp_path / "text" / "config.json", "0.5.5")
    assert _weights(whole, "0.4.9") > _weights(whole, "0.5.5")
    gemma = _config(tmp_path, "google__gemma-3-27b-it.json")
    assert _weights(gemma, "0.4.9") == _weights(gemma, "0.5.5")
