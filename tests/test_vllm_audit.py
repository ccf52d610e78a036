"""slotdiff's vLLM pool model against vLLM's own code, release by release (the 2026-12 audit).

Every expected figure is worked by hand in the comment above its test from the vLLM formula
named there (file, function, release read from the released wheel), never taken from
slotdiff's output.
"""

from __future__ import annotations

import json

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.kvspec import kv_layout

from conftest import RAW


def _gemma2(sliding: int, full: int):  # type: ignore[no-untyped-def]
    config = json.loads((RAW / "google__gemma-2-2b.json").read_text())
    config |= {
        "num_hidden_layers": sliding + full,
        "layer_types": ["sliding_attention"] * sliding + ["full_attention"] * full,
    }
    return load(config).arch


# vLLM v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size (0.9-0.11:
# _get_kv_cache_config_uniform_page_size): the group size is the smallest type's layer count,
# except that from 0.12 the largest type's count is taken when it is under 1.25× the smallest,
# and from 0.18 under 1.5×. Each type is cut into cdiv(n, size) groups; the last one is padded.
#   7 sliding + 6 full: ≤0.11 size 6 → sliding 2 groups (pad 5), full 1 → 3 groups, 5 padding;
#                       0.12 on: 7 < 7.5 → size 7 → 1 + 1 groups, full padded by 1.
#   8 sliding + 6 full: ≤0.17 size 6 (8 ≥ 7.5) → 2 + 1 groups, sliding padded by 4;
#                       0.18 on: 8 < 9 → size 8 → 1 + 1 groups, full padded by 2.
@pytest.mark.parametrize(
    ("sliding", "full", "version", "expected"),
    [
        (7, 6, "0.11.2", (6, 3, 5)),
        (7, 6, "0.12.0", (7, 2, 1)),
        (8, 6, "0.17.1", (6, 3, 4)),
        (8, 6, "0.18.0", (8, 2, 2)),
        (8, 6, "0.34.0", (8, 2, 2)),
    ],
)
def test_vllm_group_size_ratio_by_release(sliding: int, full: int, version: str, expected: tuple) -> None:
    arch = _gemma2(sliding, full)
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", parse_version(version), None, 16)
    assert (kv.group_size, kv.num_groups, kv.padded_layers) == expected


# vLLM v1/core/kv_cache_utils.py _report_kv_cache_config: from 0.20.1 the token line is
# int(max_concurrency × max_model_len); up to 0.20.0 it is num_blocks // groups × block.
# Llama-3.1-8B (one full group), block 16, max_model_len 10,001, 1,000 blocks:
#   blocks per request cdiv(10,001, 16) = 626; concurrency 1,000 / 626;
#   0.20.1: int(1,000 × 10,001 / 626) = int(15,976.04) = 15,976; 0.20.0: 1,000 × 16 = 16,000.
@pytest.mark.parametrize(("version", "tokens"), [("0.20.0", 16_000), ("0.20.1", 15_976), ("0.34.0", 15_976)])
def test_vllm_token_line_is_concurrency_times_length_from_0_20_1(version: str, tokens: int) -> None:
    arch = load(json.loads((RAW / "meta-llama__Llama-3.1-8B.json").read_text())).arch
    v = parse_version(version)
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", v, None, 16)
    conc = kv.concurrency(1000, 10_001, 8192, v)
    assert conc == pytest.approx(1000 / 626)
    assert kv.tokens_line(1000, conc, 10_001, v) == tokens
