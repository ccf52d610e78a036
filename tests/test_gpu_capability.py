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
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.gpus import gpu, gpus, resolve_gpu
from slotdiff.cost.memory import MemoryPlan
from slotdiff.cost.weights import effective_format
from slotdiff.deploy.engine_terms import compute_capability, parse_version, vllm_block_size
from slotdiff.deploy.sglang import sglang_fit
from slotdiff.deploy.vllm import EngineArgs, vllm_fit

from conftest import RAW

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
    # A file that leaves it out gets its architecture's where that settles it: every Hopper
    # part is sm90, every Ada part sm89; Ampere (8.0 / 8.6) and Blackwell (10.0 / 12.0) do not.
    assert compute_capability(resolve_gpu("other", path)) == (9, 0)
    for preset, settled in (("l40s", (8, 9)), ("a100-80gb", None), ("b200", None), ("mi300x", None)):
        entry = next(g for g in data["gpus"] if g["id"] == preset)
        path.write_text(
            json.dumps({**data, "gpus": [{k: v for k, v in entry.items() if k != "compute_capability"}]})
        )
        assert compute_capability(resolve_gpu(preset, path)) == settled, preset


def _file_gpu(tmp_path: Path, preset: str) -> Any:
    """``preset``'s own entry in a user's GPU file, without the compute_capability field (a
    file written before the field existed), under the preset's own id."""
    data = json.loads((ROOT / "schemas" / "gpus.json").read_text(encoding="utf-8"))
    entry = next(g for g in data["gpus"] if g["id"] == preset)
    path = tmp_path / f"{preset}.json"
    path.write_text(
        json.dumps({**data, "gpus": [{k: v for k, v in entry.items() if k != "compute_capability"}]})
    )
    return resolve_gpu(preset, path)


def test_an_h100_file_without_the_field_gets_flashmla_blocks(tmp_path: Path) -> None:
    """vLLM 0.11.0 on Hopper runs an MLA model on FlashMLA with 64-token blocks (from 0.7.3);
    an H100 described in a file is sm90 like the preset, not Triton MLA's 16."""
    arch = load(RAW / "deepseek-ai__DeepSeek-V2-Lite.json").arch
    version = parse_version("0.11.0")
    assert vllm_block_size(arch, version, gpu("h100-sxm")) == (64, "64 (FlashMLA on Hopper)")
    assert vllm_block_size(arch, version, _file_gpu(tmp_path, "h100-sxm")) == (64, "64 (FlashMLA on Hopper)")


def test_a_blackwell_file_without_the_field_asks_for_it(tmp_path: Path) -> None:
    """On Blackwell vLLM's MLA block is 128 on sm100 (CUTLASS MLA) and 16 elsewhere: a file that
    does not say which part is refused for an MLA model unless --block-size gives the block."""
    arch = load(RAW / "deepseek-ai__DeepSeek-V2-Lite.json").arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    b200 = _file_gpu(tmp_path, "b200")
    engine = EngineArgs(version="0.11.0", max_model_len=8_192, available_kv_gib=10.0)
    with pytest.raises(SlotdiffError, match=r"not supported: .*compute_capability"):
        vllm_fit(arch, plan, b200, engine)
    # 10 GiB over 128-token blocks of 27 layers × 576 × 2 B = 31,104 B a token: 10,737,418,240 //
    # (128 × 31,104) = 2,696 blocks, 345,088 tokens
    given = vllm_fit(arch, plan, b200, replace(engine, block_size=128))
    assert (given.block_size, given.kv_pool_tokens) == (128, 2_696 * 128)


def test_sglang_dsa_on_a_blackwell_file_takes_the_fp8_cache(tmp_path: Path) -> None:
    """SGLang 0.5.5 gives a DSA model an fp8_e4m3 cache on Blackwell (sm100 and sm120 alike):
    (576 + 132) B × 61 layers = 43,188 B a token; 50 GiB = 53,687,091,200 B // 43,188 =
    1,243,101 → 1,243,072 on 64-token pages, as for the b200 preset (tests/test_sglang_pool.py)."""
    arch = load(RAW / "deepseek-ai__DeepSeek-V3.2.json").arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    args = EngineArgs(
        engine="sglang",
        version="0.5.5",
        max_model_len=32_768,
        mem_fraction_static=0.9,
        tensor_parallel_size=8,
        available_kv_gib=50,
    )
    f = sglang_fit(arch, plan, _file_gpu(tmp_path, "b200"), args)
    assert (f.kv_pool_tokens, f.kv_cache_dtype) == (1_243_072, "float8_e4m3fn")
