"""``fit --engine sglang --kv-cache-dtype auto`` on a ModelOpt checkpoint takes its FP8 KV
where SGLang does, read in the PyPI wheels 0.5.2-0.5.23:

* ``configure_kv_cache_dtype`` (model_runner.py from 0.5.3; mem_cache/kv_cache_dtype.py from
  0.5.16; absent in 0.5.2): fp8_e4m3 when ``model.quant_config.kv_cache_quant_algo`` is "FP8"
  in any case, else the model's dtype (an NVFP4 KV keeps it);
* ModelOptFp8Config stores the field as ``kv_cache_quant_method`` in 0.5.3 (not read), as
  ``kv_cache_quant_algo`` from 0.5.4 (ModelOptQuantConfig); ModelOptFp4Config always;
* hf_quant_config.json: ``quantization.kv_cache_quant_algo``; config.json (flat): an 8-bit float
  ``kv_cache_scheme`` dict, ModelOptFp8Config from 0.5.15 also a flat ``kv_cache_quant_algo``
  when there is no scheme dict;
* config.json ``quant_method: modelopt`` builds ModelOptFp8Config until 0.5.10 routes it by
  quant_algo (ModelOptFp8Config.from_config refuses NVFP4).

``--available-kv-gib 1`` pins the pool at 2^30 = 1,073,741,824 B, so tokens = 2^30 // cell
(page 1), the cell worked by hand below; an fp8 cache is 1 B an element where bf16 is 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.core.errors import SlotdiffError
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.sglang_kv import sglang_auto_kv
from test_hf_quant_config import CONFIG as DEEPSEEK
from test_hf_quant_config import SIDECAR as NVFP4_SIDECAR

# A Llama shrunk: 3 layers, 4 KV heads of head_dim 64 (SGLang's MHA cell, profile_max_num_token /
# get_cell_size_per_token: KV heads × (head_dim + v_head_dim = head_dim) × layers × bytes).
LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 1024,
    "intermediate_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "head_dim": 64,
    "num_hidden_layers": 3,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# bf16: 4 × (64 + 64) × 3 × 2 = 3,072 B; 2^30 // 3,072 = 349,525 (3,072 × 349,525 =
# 1,073,740,800, 1,024 B left). fp8: 1,536 B; 2^30 // 1,536 = 699,050 (the same 1,024 B left).
LLAMA_BF16, LLAMA_FP8 = 349_525, 699_050
# DeepSeek-V3 shrunk (test_hf_quant_config), MLA: (kv_lora_rank 32 + rope 16) × 3 layers × 2 =
# 288 B; 2^30 // 288 = 3,728,270 (288 × 3,728,270 = 1,073,741,760, 64 B left). fp8: 144 B;
# 2^30 // 144 = 7,456,540 (144 × 7,456,540 = 1,073,741,760).
DEEPSEEK_BF16, DEEPSEEK_FP8 = 3_728_270, 7_456_540

# As nvidia/Llama-3.1-8B-Instruct-FP8's hf_quant_config.json reads (FP8 weights, FP8 KV).
FP8_SIDECAR: dict[str, Any] = {
    "producer": {"name": "modelopt", "version": "0.17.0"},
    "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]},
}
# The same scheme as ModelOpt 0.31+ writes it into config.json.
FP8_CONFIG_JSON: dict[str, Any] = {
    "quant_method": "modelopt",
    "quant_algo": "FP8",
    "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
    "ignore": ["lm_head"],
    "producer": {"name": "modelopt", "version": "0.37.0"},
}
FRACTION = ("--mem-fraction-static", "0.85")  # 0.5.10+ refuse their default (a CUDA-graph reserve)


def _fit(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    config: dict[str, Any],
    sidecar: dict[str, Any] | None,
    version: str,
    *argv: str,
) -> tuple[int, Any]:
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    side = folder / "hf_quant_config.json"
    if sidecar is not None:
        side.write_text(json.dumps(sidecar), encoding="utf-8")
    elif side.exists():
        side.unlink()
    fixed = ("--available-kv-gib", "1", "--max-model-len", "4096", *FRACTION)
    code = main(
        [
            "fit",
            str(folder),
            "--engine",
            "sglang",
            "--gpu",
            "h100",
            "--engine-version",
            version,
            "--json",
            *fixed,
            *argv,
        ]
    )
    out, err = capsys.readouterr()
    return code, (json.loads(out)["engine"] if code in (0, 1) else err)


def _said(eng: dict[str, Any], text: str) -> bool:
    return any(text in n for n in eng["notes"])


@pytest.mark.parametrize(
    ("version", "dtype", "tokens", "why"),
    [
        ("0.5.2", "bfloat16", LLAMA_BF16, "taken from 0.5.3"),  # no configure step: the model's dtype
        ("0.5.3", "bfloat16", LLAMA_BF16, "kv_cache_quant_method"),  # ModelOptFp8Config's name then
        ("0.5.4", "float8_e4m3fn", LLAMA_FP8, "quantization.kv_cache_quant_algo"),
        ("0.5.15", "float8_e4m3fn", LLAMA_FP8, "quantization.kv_cache_quant_algo"),
        ("0.5.23", "float8_e4m3fn", LLAMA_FP8, "quantization.kv_cache_quant_algo"),
    ],
)
def test_fp8_weights_in_hf_quant_config_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, dtype: str, tokens: int, why: str
) -> None:
    code, eng = _fit(tmp_path, capsys, LLAMA, FP8_SIDECAR, version)
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == (dtype, tokens)
    assert _said(eng, why)
    assert _said(eng, "takes the ModelOpt checkpoint's FP8 KV") == (dtype != "bfloat16")


@pytest.mark.parametrize(
    ("version", "dtype", "tokens"),
    [
        ("0.5.3", "bfloat16", LLAMA_BF16),  # ModelOptFp8Config: kv_cache_quant_method, not read
        ("0.5.4", "float8_e4m3fn", LLAMA_FP8),  # the 8-bit float kv_cache_scheme → "FP8"
        ("0.5.9", "float8_e4m3fn", LLAMA_FP8),  # (a dict only from 0.5.9)
        ("0.5.23", "float8_e4m3fn", LLAMA_FP8),
    ],
)
def test_fp8_weights_in_config_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, dtype: str, tokens: int
) -> None:
    code, eng = _fit(tmp_path, capsys, {**LLAMA, "quantization_config": FP8_CONFIG_JSON}, None, version)
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == (dtype, tokens)
    assert _said(eng, "config.json's KV scheme") == (dtype != "bfloat16")


@pytest.mark.parametrize(
    ("version", "dtype", "tokens"),
    [("0.5.14", "bfloat16", LLAMA_BF16), ("0.5.15", "float8_e4m3fn", LLAMA_FP8)],
)
def test_a_flat_kv_cache_quant_algo_is_read_by_the_fp8_config_from_0_5_15(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, dtype: str, tokens: int
) -> None:
    """No kv_cache_scheme: ModelOptFp8Config reads the flat kv_cache_quant_algo only from 0.5.15
    (``else: kv_cache_quant_method = config.get("kv_cache_quant_algo")``)."""
    flat = {k: v for k, v in FP8_CONFIG_JSON.items() if k != "kv_cache_scheme"}
    code, eng = _fit(
        tmp_path,
        capsys,
        {**LLAMA, "quantization_config": {**flat, "kv_cache_quant_algo": "FP8"}},
        None,
        version,
    )
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == (dtype, tokens)


def test_explicit_bf16_and_an_unquantized_model_keep_the_model_dtype(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, eng = _fit(tmp_path, capsys, LLAMA, FP8_SIDECAR, "0.5.4", "--kv-cache-dtype", "bfloat16")
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16)
    _, eng = _fit(tmp_path, capsys, LLAMA, None, "0.5.4")
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16)
    assert not _said(eng, "--kv-cache-dtype auto")


@pytest.mark.parametrize(
    ("version", "dtype", "tokens"),
    [("0.5.2", "bfloat16", DEEPSEEK_BF16), ("0.5.3", "float8_e4m3fn", DEEPSEEK_FP8)],
)
def test_nvfp4_weights_take_fp8_kv_from_0_5_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, dtype: str, tokens: int
) -> None:
    """ModelOptFp4Config (hf_quant_config.json's quant_algo holds FP4) has kv_cache_quant_algo
    from 0.5.3: the MLA cell halves."""
    code, eng = _fit(tmp_path, capsys, DEEPSEEK, NVFP4_SIDECAR, version)
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == (dtype, tokens)


def test_nvfp4_kv_keeps_the_model_dtype(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """auto takes "FP8" only: kv_cache_quant_algo NVFP4 leaves the pool in bf16 (and says so)."""
    fp4 = {**NVFP4_SIDECAR, "quantization": {**NVFP4_SIDECAR["quantization"], "kv_cache_quant_algo": "NVFP4"}}
    code, eng = _fit(tmp_path, capsys, DEEPSEEK, fp4, "0.5.9")
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", DEEPSEEK_BF16)
    assert _said(eng, "keeps the model's dtype for the checkpoint's NVFP4 KV scheme")


def test_config_json_nvfp4_under_modelopt_before_0_5_10_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """quant_method "modelopt" is ModelOptFp8Config until 0.5.10, which refuses quant_algo NVFP4:
    refused (one line, the algorithm named); from 0.5.10 ModelOptFp4Config takes the FP8 scheme."""
    q = {**FP8_CONFIG_JSON, "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head", "*self_attn*"]}
    code, err = _fit(tmp_path, capsys, {**DEEPSEEK, "quantization_config": q}, None, "0.5.9")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert (
        "not supported" in err
        and "ModelOptFp8Config" in err
        and "'NVFP4'" in err
        and "--kv-cache-dtype" in err
    )
    code, eng = _fit(tmp_path, capsys, {**DEEPSEEK, "quantization_config": q}, None, "0.5.10")
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("float8_e4m3fn", DEEPSEEK_FP8)


@pytest.mark.parametrize("algo", ["MIXED_PRECISION", "W4A8_AWQ"])
def test_a_scheme_not_modelled_is_refused(tmp_path: Path, algo: str) -> None:
    """FP8 KV stated beside a weight scheme whose SGLang route is not modelled (a mixed export:
    w4afp8 / ModelOptMixedPrecisionConfig by release; W4A8_AWQ: ModelOptFp8Config refuses it in
    0.5.4-0.5.8, the file is ignored from 0.5.9): refused naming it. (fit refuses these
    checkpoints' weights first, so the rule is asked directly.)"""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA), encoding="utf-8")
    side = {**FP8_SIDECAR, "quantization": {**FP8_SIDECAR["quantization"], "quant_algo": algo}}
    (folder / "hf_quant_config.json").write_text(json.dumps(side), encoding="utf-8")
    arch = load(str(folder)).arch
    with pytest.raises(SlotdiffError) as caught:
        sglang_auto_kv(arch, parse_version("0.5.15"))
    err = str(caught.value)
    assert len(err.splitlines()) == 1 and "not supported" in err and algo in err and "--kv-cache-dtype" in err
    assert sglang_auto_kv(arch, parse_version("0.5.2"))[0] is None  # before the rule: the model's dtype


def test_a_model_class_not_read_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """auto reads the model object's quant_config: a model_type whose SGLang class was not read
    to keep one (OLMo 2 here) is refused rather than guessed."""
    olmo = {**LLAMA, "model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"]}
    code, err = _fit(tmp_path, capsys, olmo, FP8_SIDECAR, "0.5.4")
    assert code == 2 and "not supported" in err and "olmo2" in err and "quant_config" in err, err
