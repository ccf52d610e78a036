"""``fit --engine vllm --kv-cache-dtype auto`` on a ModelOpt checkpoint takes its KV scheme, as
vLLM does from 0.14 (``resolve_kv_cache_dtype_string`` → ``get_kv_cache_quant_algo_string`` in
utils/torch_utils.py, read in 0.14.1 and 0.33.0; absent in 0.13.0):

* quant_method starting "modelopt" (hf_quant_config.json becomes one), then ``kv_cache_scheme``
  (a dict: 8-bit float, not dynamic → fp8) or ``kv_cache_quant_algo`` (FP8 → fp8_e4m3);
* MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP gains nvfp4 in 0.20 (before: auto);
* anything else falls back to auto, the model's dtype.

The model is test_hf_quant_config's (DeepSeek-V3 shrunk, NVFP4 weights, FP8 KV): an fp8 cache
is 1 B an element where bf16 is 2, so the same pool holds twice the tokens (the page halves).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cli import main
from test_hf_quant_config import CONFIG, SIDECAR


def _fit(tmp_path: Path, capsys: pytest.CaptureFixture[str], sidecar: dict[str, Any], *argv: str) -> Any:
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    (folder / "hf_quant_config.json").write_text(json.dumps(sidecar), encoding="utf-8")
    code = main(["fit", str(folder), "--engine", "vllm", "--gpu", "h100", "--json", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out)["engine"] if code in (0, 1) else err)


@pytest.mark.parametrize(
    ("version", "dtype"), [("0.34.0", "float8_e4m3fn"), ("0.14.1", "float8_e4m3fn"), ("0.13.0", "bfloat16")]
)
def test_auto_takes_the_modelopt_fp8_kv_scheme_from_0_14(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, dtype: str
) -> None:
    _, eng = _fit(tmp_path, capsys, SIDECAR, "--engine-version", version)
    assert eng["kv_cache_dtype"] == dtype
    said = any("KV scheme (fp8_e4m3)" in n for n in eng["notes"])
    assert said == (dtype != "bfloat16")


def test_the_fp8_pool_holds_twice_the_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, auto = _fit(tmp_path, capsys, SIDECAR)
    _, bf16 = _fit(tmp_path, capsys, SIDECAR, "--kv-cache-dtype", "bfloat16")
    assert auto["kv_pool_bytes"] == pytest.approx(bf16["kv_pool_bytes"])
    assert auto["kv_pool_tokens"] == pytest.approx(2 * bf16["kv_pool_tokens"], rel=1e-3)


def test_nvfp4_kv_is_refused_from_0_20_and_auto_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fp4 = {**SIDECAR, "quantization": {**SIDECAR["quantization"], "kv_cache_quant_algo": "NVFP4"}}
    code, err = _fit(tmp_path, capsys, fp4)
    assert code == 2 and "nvfp4" in err and "--kv-cache-dtype" in err and len(err.strip().splitlines()) == 1
    _, eng = _fit(tmp_path, capsys, fp4, "--engine-version", "0.19.0")
    assert eng["kv_cache_dtype"] == "bfloat16"
    assert any("falls back to auto" in n for n in eng["notes"])
