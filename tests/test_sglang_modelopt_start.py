"""ModelOpt checkpoints SGLang does not start on (or loads as no ModelOpt scheme) are refused,
whatever ``--kv-cache-dtype``, not priced; read in the PyPI wheels 0.5.2-0.5.23:

* hf_quant_config.json with ``quantization.quant_algo: null``: 0.5.2-0.5.3.post3 make it
  ``quant_method: modelopt`` and 0.5.4 ``modelopt_fp8`` (``_parse_modelopt_quant_config``'s
  default), and ``get_quant_config`` raises ``ValueError("Invalid quant_config ...")`` for every
  architecture but the draft-only LlamaForCausalLMEagle3 (0.5.3.post3: ModelOptFp8Config.from_config
  raises "Cannot find 'quant_algo'"). From 0.5.5 ``_parse_modelopt_quant_config`` returns None for
  it: no quantization, the model's dtype, so the bf16 pool below is SGLang's.
* from 0.5.18 ``ModelOptFp8Config.from_config`` raises when ``quant_method != "FP8"``
  (through 0.5.17: ``"FP8" not in quant_method``), and ``_parse_modelopt_quant_config`` routes
  only ``quant_algo == "FP8"`` to modelopt_fp8 (MXFP8 to the native mxfp8 method, the rest to
  None): config.json's ``quant_method: modelopt`` with FP8_PER_CHANNEL_PER_TOKEN fails to start
  (``QUANTIZATION_METHODS["modelopt"]`` is ModelOptFp8Config); hf_quant_config.json with it is
  ignored and the FP8 checkpoint loaded unquantized (not modelled): both refused.

The pool figures are test_sglang_modelopt_kv's: ``--available-kv-gib 1`` pins 2^30 B; the Llama
cell is 4 KV heads × (64 + 64) × 3 layers × 2 B = 3,072 B in bf16 (2^30 // 3,072 = 349,525) and
1,536 B in fp8 (2^30 // 1,536 = 699,050).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import SlotdiffError
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.sglang_kv import sglang_auto_kv
from test_sglang_modelopt_kv import FP8_CONFIG_JSON, FP8_SIDECAR, LLAMA, LLAMA_BF16, LLAMA_FP8, _fit

NULL_ALGO: dict[str, Any] = {
    **FP8_SIDECAR,
    "quantization": {**FP8_SIDECAR["quantization"], "quant_algo": None},
}
VARIANT = "FP8_PER_CHANNEL_PER_TOKEN"
VARIANT_SIDECAR: dict[str, Any] = {
    **FP8_SIDECAR,
    "quantization": {**FP8_SIDECAR["quantization"], "quant_algo": VARIANT},
}
FP8_WEIGHTS = ("--dtype", "fp8")  # slotdiff does not price the variant's weights: re-priced as FP8


@pytest.mark.parametrize("version", ["0.5.2", "0.5.3", "0.5.3.post3", "0.5.4"])
@pytest.mark.parametrize("kv", ["auto", "bfloat16"])
def test_null_quant_algo_in_hf_quant_config_json_fails_to_start_through_0_5_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, kv: str
) -> None:
    code, err = _fit(tmp_path, capsys, LLAMA, NULL_ALGO, version, "--kv-cache-dtype", kv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "not supported" in err and f"SGLang {version} " in err, err
    assert "hf_quant_config.json" in err and "quant_algo null" in err and "0.5.5" in err, err


@pytest.mark.parametrize("version", ["0.5.5", "0.5.8", "0.5.18", "0.5.23"])
def test_null_quant_algo_loads_unquantized_from_0_5_5(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    """``_parse_modelopt_quant_config`` → None: no quant_config, auto keeps bf16 (3,072 B cell)."""
    code, eng = _fit(tmp_path, capsys, LLAMA, NULL_ALGO, version)
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16)


@pytest.mark.parametrize("version", ["0.5.18", "0.5.23"])
def test_an_fp8_variant_in_hf_quant_config_json_is_refused_from_0_5_18(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str
) -> None:
    code, err = _fit(tmp_path, capsys, LLAMA, VARIANT_SIDECAR, version, *FP8_WEIGHTS)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"SGLang {version} " in err and VARIANT in err and "exactly 'FP8'" in err, err
    assert "quantization.quant_algo" in err, err


def test_an_fp8_variant_in_hf_quant_config_json_takes_fp8_kv_in_0_5_17(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.5.17: "FP8" in quant_algo → modelopt_fp8 → ModelOptFp8Config, whose nested
    kv_cache_quant_algo FP8 auto takes: the 1,536 B cell."""
    code, eng = _fit(tmp_path, capsys, LLAMA, VARIANT_SIDECAR, "0.5.17", *FP8_WEIGHTS)
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("float8_e4m3fn", LLAMA_FP8)


@pytest.mark.parametrize(("version", "kv"), [("0.5.18", "auto"), ("0.5.18", "bfloat16"), ("0.5.23", "auto")])
def test_an_fp8_variant_in_config_json_fails_to_start_from_0_5_18(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, kv: str
) -> None:
    q = {**FP8_CONFIG_JSON, "quant_algo": VARIANT}
    code, err = _fit(
        tmp_path,
        capsys,
        {**LLAMA, "quantization_config": q},
        None,
        version,
        "--kv-cache-dtype",
        kv,
        *FP8_WEIGHTS,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "fails to start" in err and "ModelOptFp8Config" in err and VARIANT in err, err
    assert f"SGLang {version} " in err and "quantization_config.quant_algo" in err, err
    code, eng = _fit(tmp_path, capsys, {**LLAMA, "quantization_config": q}, None, "0.5.17", *FP8_WEIGHTS)
    assert code == 0, eng  # 0.5.17: routed by "FP8" in quant_algo; the 8-bit float scheme → FP8
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("float8_e4m3fn", LLAMA_FP8)


def test_mxfp8_goes_to_the_native_method_from_0_5_18(tmp_path: Path) -> None:
    """quant_algo MXFP8: ModelOptFp8Config through 0.5.17 ("FP8" in it: the FP8 KV is taken),
    the native mxfp8 method from 0.5.18, whose KV rule is not modelled: refused."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA), encoding="utf-8")
    side = {**FP8_SIDECAR, "quantization": {**FP8_SIDECAR["quantization"], "quant_algo": "MXFP8"}}
    (folder / "hf_quant_config.json").write_text(json.dumps(side), encoding="utf-8")
    arch = load(str(folder)).arch
    assert sglang_auto_kv(arch, parse_version("0.5.17"))[0] == "fp8_e4m3"
    with pytest.raises(SlotdiffError, match=r"not supported.*MXFP8.*--kv-cache-dtype"):
        sglang_auto_kv(arch, parse_version("0.5.18"))
