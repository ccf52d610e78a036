"""``--kv-cache-dtype auto`` and the other SGLang quantization classes that set
``kv_cache_quant_algo`` (read in the PyPI wheels 0.5.2-0.5.23; ``configure_kv_cache_dtype``
takes fp8_e4m3 when it is "FP8" in any case):

* ``QUANTIZATION_METHODS["mxfp8"]`` is Fp8Config (0.5.17-0.5.23 ``layers/quantization/__init__.py``),
  whose ``from_config`` reads the flat ``kv_cache_quant_algo`` whatever the quant_method (0.5.18
  fp8.py lines 326-328; 0.5.17 keeps no such attribute): an ``mxfp8`` config.json is taken as a
  plain ``fp8`` one is;
* MiniMaxM3Nvfp4Config (0.5.23 ``minimax_m3_nvfp4.py``) defaults ``kv_cache_quant_algo`` to "FP8"
  and raises unless it is, with a KV layout of its own: refused under auto;
* PetitNvFp4Config (``petit.py``) claims a parsed quant config with quant_method "modelopt" on
  ROCm only (``_is_hip and quant_method == "modelopt"``): on an AMD GPU a ModelOpt checkpoint that
  states an FP8 KV (hf_quant_config.json, or config.json ``quant_method: modelopt``) is refused
  under auto; config.json's explicit ``modelopt_fp8`` never matches that test.

Pool figures as in test_sglang_modelopt_kv: 2^30 B // 3,072 B (bf16 Llama cell) = 349,525 tokens,
// 1,536 B (fp8) = 699,050.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from test_sglang_modelopt_kv import FP8_CONFIG_JSON, FP8_SIDECAR, LLAMA, LLAMA_BF16, LLAMA_FP8, _fit, _said

# MXFP8 weights are not priced by slotdiff (weight bytes unknown): --dtype stands in for them.
# (The last --gpu given wins: _fit passes h100 first.)
WEIGHTS = ("--dtype", "bfloat16")
MXFP8: dict[str, Any] = {
    "quant_method": "mxfp8",
    "activation_scheme": "dynamic",
    "weight_block_size": [1, 32],
    "kv_cache_quant_algo": "FP8",
}


@pytest.mark.parametrize(
    ("version", "dtype", "tokens"),
    [
        ("0.5.17", "bfloat16", LLAMA_BF16),  # Fp8Config has no kv_cache_quant_algo yet
        ("0.5.18", "float8_e4m3fn", LLAMA_FP8),
        ("0.5.23", "float8_e4m3fn", LLAMA_FP8),
    ],
)
def test_mxfp8_config_json_is_fp8_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, dtype: str, tokens: int
) -> None:
    cfg = {**LLAMA, "quantization_config": MXFP8}
    code, eng = _fit(tmp_path, capsys, cfg, None, version, *WEIGHTS)
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == (dtype, tokens)
    assert _said(eng, "takes the mxfp8 checkpoint's FP8 KV") == (dtype != "bfloat16")


def test_minimax_m3_nvfp4_is_refused_under_auto(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """0.5.23's MiniMaxM3Nvfp4Config always takes FP8 KV in a layout of its own: auto is refused
    (even with no kv_cache_quant_algo written: its default is FP8); an explicit fp8_e4m3 is priced."""
    cfg = {
        **LLAMA,
        "quantization_config": {"quant_method": "minimax_m3_nvfp4", "activation_scheme": "dynamic"},
    }
    code, err = _fit(tmp_path, capsys, cfg, None, "0.5.23", *WEIGHTS)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "not supported" in err and "minimax_m3_nvfp4" in err, err
    code, eng = _fit(tmp_path, capsys, cfg, None, "0.5.23", *WEIGHTS, "--kv-cache-dtype", "fp8_e4m3")
    assert code == 0 and eng["kv_pool_tokens"] == LLAMA_FP8, eng


def test_modelopt_fp8_kv_on_rocm_where_petit_claims_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """hf_quant_config.json with kv_cache_quant_algo FP8: on an H100 taken (699,050 tokens). On an
    MI300X PetitNvFp4Config claims a parsed quant config named exactly 'modelopt': the sidecar
    keeps that name through 0.5.3 (model_config.py sets {"quant_method": "modelopt"}), so its KV is
    refused there; from 0.5.4 _parse_modelopt_quant_config names it modelopt_fp8, which petit
    does not claim, and the MI300X takes the FP8 KV as the H100 does."""
    code, eng = _fit(tmp_path, capsys, LLAMA, FP8_SIDECAR, "0.5.23")
    assert code == 0 and eng["kv_pool_tokens"] == LLAMA_FP8, eng
    code, err = _fit(tmp_path, capsys, LLAMA, FP8_SIDECAR, "0.5.3", "--gpu", "mi300x")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "not supported" in err and "PetitNvFp4Config" in err, err
    for version in ("0.5.4", "0.5.23"):
        code, eng = _fit(tmp_path, capsys, LLAMA, FP8_SIDECAR, version, "--gpu", "mi300x")
        assert code == 0, eng
        assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("float8_e4m3fn", LLAMA_FP8), eng


def test_rocm_cases_petit_does_not_claim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On an MI300X: config.json quant_method modelopt_fp8 (not 'modelopt') is taken as on CUDA
    (ModelOptFp8Config from 0.5.4: an 8-bit float kv_cache_scheme → FP8, 699,050 tokens; its
    weights are not priced by slotdiff, --dtype stands in). A config.json quant_method 'modelopt'
    keeps that name until 0.5.10 routes it by quant_algo: before, petit claims it and its
    from_config (get_from_keys(config, ['quantization'])) fails on a config.json, so SGLang does
    not start, whatever the KV flag; from 0.5.10 it is taken as on CUDA. 0.5.2 reads no KV rule
    at all (bf16, 349,525); a ModelOpt checkpoint stating no FP8 KV keeps bf16 without refusal."""
    explicit = {**LLAMA, "quantization_config": {**FP8_CONFIG_JSON, "quant_method": "modelopt_fp8"}}
    code, eng = _fit(tmp_path, capsys, explicit, None, "0.5.23", "--gpu", "mi300x", *WEIGHTS)
    assert code == 0 and (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("float8_e4m3fn", LLAMA_FP8), eng
    plain = {**LLAMA, "quantization_config": FP8_CONFIG_JSON}
    for flags in ((), ("--kv-cache-dtype", "bfloat16")):
        code, err = _fit(tmp_path, capsys, plain, None, "0.5.5", "--gpu", "mi300x", *WEIGHTS, *flags)
        assert code == 2 and "fails to start" in err and "PetitNvFp4Config" in err, err
    code, on_h100 = _fit(tmp_path, capsys, plain, None, "0.5.23", *WEIGHTS)
    code, eng = _fit(tmp_path, capsys, plain, None, "0.5.23", "--gpu", "mi300x", *WEIGHTS)
    assert code == 0 and eng["kv_pool_tokens"] == on_h100["kv_pool_tokens"] == LLAMA_FP8, eng
    code, eng = _fit(tmp_path, capsys, LLAMA, FP8_SIDECAR, "0.5.2", "--gpu", "mi300x")
    assert code == 0 and (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16), eng
    no_kv = {**FP8_SIDECAR, "quantization": {"quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    code, eng = _fit(tmp_path, capsys, LLAMA, no_kv, "0.5.23", "--gpu", "mi300x")
    assert code == 0 and (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16), eng
