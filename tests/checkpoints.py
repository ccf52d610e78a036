"""Checkpoint fixtures for the tests: the tensors transformers' ``save_pretrained`` would write
for a config (built on the meta device, weight conversions reverted), written as header-only
safetensors files (the 8-byte length and the JSON header the format defines, no tensor data),
optionally sharded with a ``model.safetensors.index.json``."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "U8": 1, "I8": 1, "I32": 4, "F8_E8M0": 1}
QUANTIZATION = {
    "gptq": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True},
    "awq": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"},
    "nvfp4": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16},
    "bnb4": {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
    "fbgemm": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0},
}


def stored_layout(config: dict[str, Any]) -> dict[str, list[int]]:
    """Name → shape of every tensor ``save_pretrained`` writes for ``config`` (tied aliases once)."""
    import torch  # noqa: F401 - the oracle needs it loaded
    from transformers.core_model_loading import revert_weight_conversion

    from oracle import hf_oracle

    model, _config = hf_oracle.build_meta(config)
    first: dict[int, str] = {}
    tied = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if first.setdefault(id(param), name) != name:
            tied.add(name)
    state = {k: v for k, v in model.state_dict().items() if k not in tied}
    return {name: list(t.shape) for name, t in revert_weight_conversion(model, state).items()}


def header(tensors: dict[str, tuple[str, list[int]]]) -> tuple[bytes, int]:
    """A safetensors header for ``tensors`` (name → (dtype, shape)) and the data size it announces."""
    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = DTYPE_BYTES[dtype]
        for d in shape:
            n *= d
        entries[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    body = json.dumps(entries).encode()
    return struct.pack("<Q", len(body)) + body, offset


def write_checkpoint(
    folder: Path,
    tensors: dict[str, tuple[str, list[int]]],
    shards: int = 1,
    index: bool | None = None,
    headers: bool = True,
) -> dict[str, bytes]:
    """Write ``tensors`` into ``folder`` as ``shards`` header-only files (and the index JSON when
    sharded or ``index``); ``headers=False`` writes the index JSON alone. Returns file → bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    names = list(tensors)
    files: dict[str, bytes] = {}
    weight_map: dict[str, str] = {}
    total = 0
    per = -(-len(names) // shards)
    for i in range(shards):
        part = names[i * per : (i + 1) * per]
        fname = "model.safetensors" if shards == 1 else f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        data, size = header({n: tensors[n] for n in part})
        total += size
        files[fname] = data
        weight_map.update(dict.fromkeys(part, fname))
    if shards > 1 or index:
        files["model.safetensors.index.json"] = json.dumps(
            {"metadata": {"total_size": total}, "weight_map": weight_map}
        ).encode()
    for fname, data in files.items():
        if headers or not fname.endswith(".safetensors"):
            (folder / fname).write_bytes(data)
    return files


def _quantized_linear(name: str, shape: list[int]) -> bool:
    """A Linear weight the quantizers convert: 2-D, outside the embedding, head, router and norms
    (the oracle's part table, transformers' side)."""
    from oracle import hf_oracle

    return (
        len(shape) == 2
        and name.endswith(".weight")
        and hf_oracle.classify(name)
        in (
            "attention",
            "ffn",
            "experts",
            "shared_experts",
        )
    )


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def quantize(layout: dict[str, list[int]], kind: str) -> dict[str, tuple[str, list[int]]]:
    """``layout`` (name → shape, bf16) stored in a quantized format's published layout."""
    out: dict[str, tuple[str, list[int]]] = {}
    for name, shape in layout.items():
        stem = name.removesuffix(".weight")
        if (
            kind == "mxfp4"
            and len(shape) == 3
            and name.endswith(("experts.gate_up_proj", "experts.down_proj"))
        ):
            e, n_in, n_out = shape  # transformers keeps [E, in, out]; gpt-oss stores [E, out, in/32, 16]
            out[name + "_blocks"] = ("U8", [e, n_out, n_in // 32, 16])
            out[name + "_scales"] = ("U8", [e, n_out, n_in // 32])
        elif kind == "mxfp4" or not _quantized_linear(name, shape):
            out[name] = ("BF16", shape)
        elif kind == "fp8":  # DeepSeek-V3: F8_E4M3 weight + F32 scale per 128×128 block
            out[name] = ("F8_E4M3", shape)
            out[stem + ".weight_scale_inv"] = ("F32", [_ceil(shape[0], 128), _ceil(shape[1], 128)])
        elif kind == "fbgemm":  # transformers' FbgemmFp8Linear: F8_E4M3 weight + F32 scale per row
            out[name] = ("F8_E4M3", shape)
            out[stem + ".weight_scale"] = ("F32", [shape[0], 1])
        elif kind == "gptq":  # AutoGPTQ 4-bit, group 128: [in/8, out] int32 words
            rows, cols = shape
            out[stem + ".qweight"] = ("I32", [cols // 8, rows])
            out[stem + ".qzeros"] = ("I32", [cols // 128, rows // 8])
            out[stem + ".scales"] = ("F16", [cols // 128, rows])
            out[stem + ".g_idx"] = ("I32", [cols])
        elif kind == "awq":  # AutoAWQ GEMM 4-bit, group 128: [in, out/8] int32 words
            rows, cols = shape
            out[stem + ".qweight"] = ("I32", [cols, rows // 8])
            out[stem + ".qzeros"] = ("I32", [cols // 128, rows // 8])
            out[stem + ".scales"] = ("F16", [cols // 128, rows])
        elif kind == "nvfp4":  # ModelOpt NVFP4: two E2M1 per byte, an E4M3 scale per 16
            rows, cols = shape
            out[name] = ("U8", [rows, cols // 2])
            out[stem + ".weight_scale"] = ("F8_E4M3", [rows, cols // 16])
            out[stem + ".weight_scale_2"] = ("F32", [])
            out[stem + ".input_scale"] = ("F32", [])
        elif kind == "bnb4":  # bitsandbytes NF4: packed bytes [n/2, 1], absmax per 64
            n = shape[0] * shape[1]
            out[name] = ("U8", [n // 2, 1])
            out[name + ".absmax"] = ("F32", [n // 64])
            out[name + ".quant_map"] = ("F32", [16])
            out[name + ".quant_state.bitsandbytes__nf4"] = ("U8", [120])
        else:
            raise ValueError(kind)
    return out
