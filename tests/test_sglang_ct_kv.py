"""``fit --engine sglang --kv-cache-dtype auto`` on a compressed-tensors checkpoint with a
``kv_cache_scheme`` (llm-compressor's "FP8 KV" export), read in the PyPI wheels 0.5.18-0.5.23:

* ``configure_kv_cache_dtype`` (mem_cache/kv_cache_dtype.py) takes fp8_e4m3 when
  ``getattr(model.quant_config, "kv_cache_quant_algo", None)`` is a string equal to "FP8" in any
  case, else the model's dtype;
* CompressedTensorsConfig (``QUANTIZATION_METHODS["compressed-tensors"]``) has that attribute
  from 0.5.19 only, a property (compressed_tensors.py, 0.5.19 lines 137-146): "FP8" when
  ``kv_cache_scheme is not None and CompressedTensorsKVCacheMethod.is_supported_scheme(it)``, else
  None. ``is_supported_scheme`` (the same text in 0.5.19-0.5.23)::

      kv_cache_scheme.get("type") == "float"
      and kv_cache_scheme.get("num_bits") == 8
      and kv_cache_scheme.get("strategy") == "tensor"
      and kv_cache_scheme.get("symmetric", True)
      and not kv_cache_scheme.get("dynamic", False)

  0.5.18's CompressedTensorsConfig keeps ``kv_cache_scheme`` but defines no ``kv_cache_quant_algo``
  (nor does QuantizationConfig), so auto keeps the model's dtype there.

Pool figures as in test_sglang_modelopt_kv (``--available-kv-gib 1`` pins 2^30 B): the Llama
cell is 4 KV heads × (64 + 64) × 3 layers × 2 B = 3,072 B in bf16 → 2^30 // 3,072 = 349,525
tokens, 1,536 B in fp8 → 2^30 // 1,536 = 699,050.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from test_sglang_modelopt_kv import LLAMA, LLAMA_BF16, LLAMA_FP8, _fit, _said

# As RedHatAI's FP8-dynamic + FP8-KV exports (llm-compressor) write config.json's
# quantization_config: QuantizationArgs dumped in full, the KV scheme static per-tensor.
ARGS: dict[str, Any] = {
    "actorder": None,
    "block_structure": None,
    "dynamic": False,
    "group_size": None,
    "num_bits": 8,
    "observer": "minmax",
    "observer_kwargs": {},
    "strategy": "tensor",
    "symmetric": True,
    "type": "float",
}
CT: dict[str, Any] = {
    "config_groups": {
        "group_0": {
            "input_activations": {**ARGS, "dynamic": True, "observer": None, "strategy": "token"},
            "weights": {**ARGS, "strategy": "channel"},
            "targets": ["Linear"],
        }
    },
    "format": "float-quantized",
    "ignore": ["lm_head"],
    "kv_cache_scheme": ARGS,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}


def _with(scheme: Any) -> dict[str, Any]:
    return {**LLAMA, "quantization_config": {**CT, "kv_cache_scheme": scheme}}


@pytest.mark.parametrize(
    ("version", "dtype", "tokens"),
    [
        ("0.5.18", "bfloat16", LLAMA_BF16),  # no kv_cache_quant_algo on CompressedTensorsConfig yet
        ("0.5.19", "float8_e4m3fn", LLAMA_FP8),  # the property first appears
        ("0.5.23", "float8_e4m3fn", LLAMA_FP8),
    ],
)
def test_static_per_tensor_fp8_kv_scheme_is_taken_from_0_5_19(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, dtype: str, tokens: int
) -> None:
    code, eng = _fit(tmp_path, capsys, _with(ARGS), None, version)
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == (dtype, tokens)
    if dtype == "bfloat16":
        assert _said(eng, "takes a static symmetric per-tensor FP8 kv_cache_scheme from 0.5.19")
    else:
        assert _said(eng, "takes the compressed-tensors checkpoint's FP8 KV")


@pytest.mark.parametrize(
    ("scheme", "dtype", "tokens"),
    [
        # The fewest keys: symmetric defaults to True, dynamic to False → supported.
        ({"type": "float", "num_bits": 8, "strategy": "tensor"}, "float8_e4m3fn", LLAMA_FP8),
        ({**ARGS, "dynamic": True}, "bfloat16", LLAMA_BF16),  # not static
        ({**ARGS, "dynamic": "local"}, "bfloat16", LLAMA_BF16),  # a truthy string: not static
        ({**ARGS, "dynamic": None}, "float8_e4m3fn", LLAMA_FP8),  # None is falsy: static
        ({**ARGS, "strategy": "channel"}, "bfloat16", LLAMA_BF16),  # per-channel
        ({**ARGS, "strategy": "head"}, "bfloat16", LLAMA_BF16),  # per-head
        ({**ARGS, "symmetric": False}, "bfloat16", LLAMA_BF16),  # asymmetric
        ({**ARGS, "symmetric": None}, "bfloat16", LLAMA_BF16),  # get returns None: falsy
        ({**ARGS, "num_bits": 4}, "bfloat16", LLAMA_BF16),  # 4-bit float (an FP4 KV)
        ({**ARGS, "type": "int"}, "bfloat16", LLAMA_BF16),  # int8 KV
        ({}, "bfloat16", LLAMA_BF16),  # an empty dict is not None, but type is missing
    ],
)
def test_is_supported_scheme_term_by_term(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scheme: dict[str, Any], dtype: str, tokens: int
) -> None:
    code, eng = _fit(tmp_path, capsys, _with(scheme), None, "0.5.23")
    assert code == 0, eng
    assert (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == (dtype, tokens)


def test_an_unsupported_8_bit_float_scheme_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dynamic 8-bit float KV scheme is logged and ignored by SGLang: the note says why bf16."""
    code, eng = _fit(tmp_path, capsys, _with({**ARGS, "dynamic": True}), None, "0.5.19")
    assert code == 0 and eng["kv_cache_dtype"] == "bfloat16", eng
    assert _said(eng, "takes only a static symmetric per-tensor FP8 kv_cache_scheme")


def test_no_scheme_and_explicit_bf16(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """kv_cache_scheme null: the property returns None → the model's dtype; --kv-cache-dtype
    bfloat16 is not auto, so the scheme is not taken either."""
    code, eng = _fit(tmp_path, capsys, _with(None), None, "0.5.23")
    assert code == 0 and (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16)
    code, eng = _fit(tmp_path, capsys, _with(ARGS), None, "0.5.23", "--kv-cache-dtype", "bfloat16")
    assert code == 0 and (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16)


def test_a_model_class_not_read_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """auto reads the model object's quant_config: a class not read to keep one (OLMo 2) is
    refused where the release would take the FP8 KV, priced bf16 where it would not (0.5.18)."""
    olmo = {**_with(ARGS), "model_type": "olmo2", "architectures": ["Olmo2ForCausalLM"]}
    code, err = _fit(tmp_path, capsys, olmo, None, "0.5.19")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "not supported" in err and "compressed-tensors checkpoint" in err and "olmo2" in err, err
    code, eng = _fit(tmp_path, capsys, olmo, None, "0.5.18")
    assert code == 0 and eng["kv_cache_dtype"] == "bfloat16", eng


def test_a_scheme_that_is_not_a_mapping_fails_to_load_from_0_5_19(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0.5.19+ get_quant_method calls is_supported_scheme(kv_cache_scheme) for each RadixAttention
    when it is not None: a string has no .get, so the model does not load, whatever the KV flag.
    0.5.18 never reads it (the model's dtype)."""
    for argv in ((), ("--kv-cache-dtype", "fp8_e4m3")):
        code, err = _fit(tmp_path, capsys, _with("fp8"), None, "0.5.19", *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "not supported" in err and "kv_cache_scheme" in err, err
    code, eng = _fit(tmp_path, capsys, _with("fp8"), None, "0.5.18")
    assert code == 0 and (eng["kv_cache_dtype"], eng["kv_pool_tokens"]) == ("bfloat16", LLAMA_BF16)
