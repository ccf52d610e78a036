"""Which quantization_config a composite config (one with a ``text_config``) is priced from,
and whether ModelOpt's hf_quant_config.json is read beside it: as vLLM 0.34.0 does.

vLLM 0.34.0, read from its wheel:
* ``transformers_utils/config.py`` ``get_config``: ``quantization_config =
  config_dict.get("quantization_config", None)`` (the raw top level only), and where that is
  None and ``hf_quant_config.json`` exists, the file is read and set as
  ``config.quantization_config`` (the top level). A text_config's copy does not stop it.
* ``transformers_utils/model_arch_config_convertor.py`` ``get_quantization_config``: the top
  level's quantization_config, and only where that is None the text_config's.

The model is a small LLaVA (its text model a Llama: hidden 256, 4 heads of 64, 4 KV heads,
FFN 512, 2 layers, vocabulary 1,024; bf16), so the decoder's linears are worked by hand:
* attention per layer: q, k, v, o each 256 × 256 = 65,536 parameters, 262,144 a layer,
  524,288 over the 2 layers; FFN per layer gate and up 512 × 256, down 256 × 512 = 393,216,
  786,432 over the 2 layers.
* bf16: attention 524,288 × 2 = 1,048,576 B, FFN 786,432 × 2 = 1,572,864 B.
* NVFP4 (E2M1, half a byte a weight, plus a one-byte FP8 scale per 16 weights: 9/16 B a
  weight): attention 524,288 × 9 / 16 = 294,912 B, FFN 786,432 × 9 / 16 = 442,368 B; and per
  quantized tensor two fp32 scalars (weight_scale_2, input_scale: 8 B): attention 4 × 2 tensors
  + 64 B = 294,976 B, FFN 3 × 2 tensors + 48 B = 442,416 B.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cli import main
from slotdiff.read.source import states_quantization
from slotdiff.scan.examine import wants_quant_file
from slotdiff.scan.listing import Listed

TEXT: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
}
VISION = {
    "model_type": "clip_vision_model",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": 32,
    "patch_size": 16,
    "projection_dim": 64,
}
FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic"}
SIDECAR = {
    "producer": {"name": "modelopt", "version": "0.23.0"},
    "quantization": {
        "quant_algo": "NVFP4",
        "group_size": 16,
        "exclude_modules": ["lm_head", "vision_tower*", "multi_modal_projector*"],
    },
}
ABSENT = object()
BF16 = (1_048_576, 1_572_864)  # (attention, FFN) bytes, by hand above
NVFP4 = (294_976, 442_416)


def llava(top: Any = ABSENT, text: Any = ABSENT) -> dict[str, Any]:
    t = dict(TEXT)
    if text is not ABSENT:
        t["quantization_config"] = text
    config: dict[str, Any] = {
        "model_type": "llava",
        "architectures": ["LlavaForConditionalGeneration"],
        "torch_dtype": "bfloat16",
        "text_config": t,
        "vision_config": VISION,
        "image_token_index": 1000,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -2,
        "vision_feature_select_strategy": "default",
    }
    if top is not ABSENT:
        config["quantization_config"] = top
    return config


def priced(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], sidecar: bool) -> Any:
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if sidecar:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(SIDECAR), encoding="utf-8")
    code = main([str(tmp_path), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


@pytest.mark.parametrize(
    ("top", "text", "sidecar", "fmt", "parts"),
    [
        # The text config's scheme does not stop vLLM reading the file, which then wins (top).
        (ABSENT, FP8, True, "nvfp4", NVFP4),
        (None, FP8, True, "nvfp4", NVFP4),  # a null top level states nothing either
        # No file: the text config's scheme, vLLM's fallback.
        (ABSENT, FP8, False, "fp8", None),
        (None, FP8, False, "fp8", None),
        # The top level's scheme: the file is not read, and a null text copy changes nothing.
        (FP8, ABSENT, True, "fp8", None),
        (FP8, None, False, "fp8", None),
        # Nothing stated anywhere, no file: bf16.
        (ABSENT, ABSENT, False, "bf16", BF16),
        (ABSENT, None, False, "bf16", BF16),
    ],
)
def test_the_scheme_vllm_reads(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    top: Any,
    text: Any,
    sidecar: bool,
    fmt: str,
    parts: tuple[int, int] | None,
) -> None:
    data = priced(tmp_path, capsys, llava(top, text), sidecar)
    weights = data["cost"]["weights"]
    assert weights["format"] == fmt
    if parts is not None:
        assert (weights["by_part"]["attention"], weights["by_part"]["ffn"]) == parts
    read_file = fmt == "nvfp4"
    assert ("hf_quant_config.json" in (data["source"]["note"] or "")) is read_file


def test_only_the_top_level_states_a_scheme() -> None:
    assert not states_quantization(llava(text=FP8))
    assert not states_quantization(llava(top=None, text=FP8))
    assert states_quantization(llava(top=FP8))
    assert states_quantization({"quantization_config": {}})  # vLLM: `is None`, so {} states one


def test_the_scan_asks_for_the_file_beside_a_text_config_scheme() -> None:
    """The scan's check on config.json's bytes gives the same answer (the listing stores U8:
    a packed checkpoint, so the file may hold its scheme)."""
    packed = Listed("org/m", safetensors=(("U8", 100), ("BF16", 10)))

    def wants(config: dict[str, Any], spaced: bool = False) -> bool:
        return wants_quant_file(packed, json.dumps(config, indent=2 if spaced else None).encode())

    assert wants(llava(text=FP8)) and wants(llava(text=FP8), spaced=True)
    assert wants(llava(top=None, text=FP8))
    assert wants(llava())
    assert not wants(llava(top=FP8)) and not wants(llava(top=FP8, text=None), spaced=True)
    assert not wants_quant_file(Listed("org/m", safetensors=(("BF16", 10),)), json.dumps(llava()).encode())
