"""Each GPU preset's CUDA compute capability is data (schemas/gpus.json, beside its
architecture), and agrees with that architecture and with NVIDIA's list.

Expected values from NVIDIA's "CUDA GPUs - Compute Capability" list
(https://developer.nvidia.com/cuda-gpus): H100 and H200 9.0; A100 8.0; A10 / A10G 8.6; L40S,
L4 and GeForce RTX 4090 8.9; B200 and GB200 10.0; GeForce RTX 5090 12.0. AMD's Instinct parts
are not CUDA devices (ROCm: no compute capability).

By architecture (the same list, and the CUDA programming guide's table of compute
capabilities): Ampere is 8.0 (GA100), 8.6 (GA10x) or 8.7 (Orin); Ada Lovelace 8.9; Hopper 9.0;
Blackwell 10.x (B200, GB200, B300), 11.0 (Thor) or 12.x (GeForce RTX 50, DGX Spark).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cost.gpus import gpus, resolve_gpu
from slotdiff.deploy.engine_terms import compute_capability

ROOT = Path(__file__).resolve().parent.parent

NVIDIA_LIST = {
    "h100-sxm": (9, 0),
    "h100-pcie": (9, 0),
    "h200": (9, 0),
    "a100-80gb": (8, 0),
    "a100-40gb": (8, 0),
    "a10g": (8, 6),
    "l40s": (8, 9),
    "l4": (8, 9),
    "rtx-4090": (8, 9),
    "b200": (10, 0),
    "gb200": (10, 0),
    "rtx-5090": (12, 0),
}
BY_ARCHITECTURE: dict[str, set[tuple[int, int]] | None] = {
    "ampere": {(8, 0), (8, 6), (8, 7)},
    "ada": {(8, 9)},
    "hopper": {(9, 0)},
    "blackwell": {(10, 0), (10, 3), (11, 0), (12, 0), (12, 1)},
    "cdna3": None,
    "cdna4": None,
}


def presets() -> list[dict[str, Any]]:
    return json.loads((ROOT / "schemas" / "gpus.json").read_text(encoding="utf-8"))["gpus"]


@pytest.mark.parametrize("entry", presets(), ids=lambda e: e["id"])
def test_every_preset_states_a_capability_its_architecture_allows(entry: dict[str, Any]) -> None:
    assert "compute_capability" in entry, f"{entry['id']}: no compute_capability in gpus.json"
    allowed = BY_ARCHITECTURE[entry["architecture"]]
    cc = entry["compute_capability"]
    if allowed is None:
        assert cc is None and entry["vendor"] == "AMD"
    else:
        assert entry["vendor"] == "NVIDIA" and tuple(cc) in allowed, (entry["id"], cc)


def test_each_preset_has_nvidias_figure() -> None:
    got = {g.id: compute_capability(g) for g in gpus().values()}
    assert {k: v for k, v in got.items() if v is not None} == NVIDIA_LIST
    assert {k for k, v in got.items() if v is None} == {g["id"] for g in presets() if g["vendor"] == "AMD"}


def test_a_gpu_changed_by_flags_or_read_from_a_file(tmp_path: Path) -> None:
    # --gpu-mem on an H100 is still an sm90 part; so is a file that copies the preset's entry.
    assert compute_capability(resolve_gpu("h100", None, 94, None, None)) == (9, 0)
    data = json.loads((ROOT / "schemas" / "gpus.json").read_text(encoding="utf-8"))
    h100 = next(g for g in data["gpus"] if g["id"] == "h100-sxm")
    unsaid = {k: v for k, v in h100.items() if k != "compute_capability"}
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps({**data, "gpus": [dict(h100, id="mine"), dict(unsaid, id="other")]}))
    assert compute_capability(resolve_gpu("mine", path)) == (9, 0)
    assert compute_capability(resolve_gpu("other", path)) is None  # the file does not say
