"""``fit --engine sglang --kv-cache-dtype auto`` on a plain ``quant_method: fp8`` checkpoint that
states ``kv_cache_quant_algo``, read in the PyPI wheels 0.5.17-0.5.23:

* ``configure_kv_cache_dtype`` (mem_cache/kv_cache_dtype.py) takes fp8_e4m3 when
  ``model.quant_config.kv_cache_quant_algo`` is a string equal to "FP8" in any case;
* Fp8Config (``QUANTIZATION_METHODS["fp8"]``, layers/quantization/fp8.py) has that attribute
  from 0.5.18 only: ``from_config`` reads ``get_from_keys_or(config, ["kv_cache_quant_algo"],
  None)``, config.json's flat key, never ``kv_cache_scheme``; 0.5.17's Fp8Config has none, so
  auto keeps the model's dtype there.

Pool figures as in test_sglang_modelopt_kv (``--available-kv-gib 1`` pins 2^30 B): the Llama
cell is 4 KV heads × (64 + 64) × 3 layers × 2 B = 3,072 B in bf16 → 2^30 // 3,072 = 349,525
tokens, 1,536 B in fp8 → 699,050.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from test_sglang_modelopt_kv import LLAMA, LLAMA_BF16, LLAMA_FP8, _fit, _said

# As an FP8 checkpoint's config.json states it (per-tensor FP8 linears, static activations).
FP8: dict[str, Any] = {"quant_method": "fp8", "activation_scheme": "static", "kv_cache_quant_algo": "FP8"}


@pytest.mark.parametrize(
    ("version", "dtype", "tokens"),
    [
        ("0.5.17", "bfloat16", LLAMA_BF16),  # Fp8Config has no kv_cache_quant_algo yet
        ("0.5.18", "float8_e4m3fn", LLAMA_FP8),
        ("0.5.23", "float8_e4m3fn", LLAMA_FP8),
    ],
)
def test_fp8_config_kv_cache_quant_algo_is_taken_from_0_5_18(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, dtype: str, tokens: int
) -> None:
    code, eng = _fit(tmp_path, capsys, {**LLAMA, "quantization_config": FP8}, None, version)
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == (dtype, tokens)
    if dtype == "bfloat16":
        assert _said(eng, "Fp8Config takes config.json's kv_cache_quant_algo from 0.5.18")
    else:
        assert _said(eng, "takes the fp8 checkpoint's FP8 KV")


def test_any_case_counts_and_explicit_bf16_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``kv_cache_quant_algo.upper() == "FP8"``: "fp8" is taken too; --kv-cache-dtype bfloat16 is
    not auto, so the model's dtype stays."""
    lower = {**LLAMA, "quantization_config": {**FP8, "kv_cache_quant_algo": "fp8"}}
    code, eng = _fit(tmp_path, capsys, lower, None, "0.5.18")
    assert code == 0 and (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("float8_e4m3fn", LLAMA_FP8)
    code, eng = _fit(tmp_path, capsys, lower, None, "0.5.18", "--kv-cache-dtype", "bfloat16")
    assert code == 0 and (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16)


def test_a_kv_cache_scheme_is_not_read_by_fp8_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fp8Config reads the flat kv_cache_quant_algo only: an 8-bit float kv_cache_scheme (which
    ModelOptFp8Config would take) leaves auto at the model's dtype."""
    scheme = {k: v for k, v in FP8.items() if k != "kv_cache_quant_algo"}
    scheme["kv_cache_scheme"] = {"dynamic": False, "num_bits": 8, "type": "float"}
    code, eng = _fit(tmp_path, capsys, {**LLAMA, "quantization_config": scheme}, None, "0.5.23")
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16)


def test_a_model_class_not_read_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """auto reads the model object's quant_config: a class not read to keep one (OLMo 2) is
    refused, naming the fp8 checkpoint, where the release would take the FP8 KV."""
    olmo = {**LLAMA, "model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"], "quantization_config": FP8}
    code, err = _fit(tmp_path, capsys, olmo, None, "0.5.18")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "not supported" in err and "fp8 checkpoint" in err and "olmo2" in err, err
    code, eng = _fit(tmp_path, capsys, olmo, None, "0.5.17")  # no attribute yet: the model's dtype
    assert code == 0 and eng["kv_cache_dtype"] == "bfloat16", eng
