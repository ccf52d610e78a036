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
