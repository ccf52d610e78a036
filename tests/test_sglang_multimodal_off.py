"""Gemma 3 (Gemma3ForConditionalGeneration) and Llama 4 (Llama4ForConditionalGeneration) are
served as text models by SGLang unless ``--enable-multimodal`` is passed: ModelConfig sets
``enable_multimodal = False`` for an ``architectures[0]`` in ``mm_disabled_models`` (read in the
0.4.9, 0.4.10 and 0.5.2-0.5.23 wheels; 0.5.18+ also asks that model_impl is not transformers,
the default being auto), so ``model_config.is_multimodal`` is False and

* server_args does not scale the default --mem-fraction-static for it (0.4.9's × 0.90, 0.4.10+'s
  ``adjust_mem_fraction_for_vlm``, both under ``if model_config.is_multimodal``);
* from 0.5.18 ``mm_runtime_reservation_gb(is_multimodal=False, ...)`` returns 0.0: no
  SGLANG_VLM_CACHE_SIZE_MB out of the KV budget, so the 0.5.18+ refusal for vision models does not
  apply to them. (The vision tower is still built and loaded: the weights are the checkpoint's.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
