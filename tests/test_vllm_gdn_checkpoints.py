"""vLLM 0.33+ prices a Qwen gated DeltaNet hybrid in prefix caching's align mode by GPU, as its
code picks the GDN prefill kernel (read in the 0.33.0 and 0.34.0 wheels).

``layers/mamba/gdn/qwen_gdn_linear_attn.py``: ``_resolve_gdn_prefill_backend`` runs FlashInfer's
prefill on Hopper (SM90, no other condition), on Blackwell only with d_k 128 and a CUDA 13
runtime, Triton elsewhere; with FlashInfer in align mode the layer declares a 64-token
checkpoint alignment (``FLASHINFER_GDN_CHECKPOINT_ALIGNMENT``, v1/attention/backends/gdn_attn.py)
and, when every mamba layer declares one (``get_mamba_prefill_checkpoint_alignment``), its spec
gets ``num_prefill_checkpoint_blocks=1``. ``MambaSpec.max_memory_usage_bytes`` in align mode is
page × (2 + that). ``platforms/interface.py`` (``update_block_size_for_backend``) takes the
attention block's alignment to lcm(kernel alignment, the checkpoint alignment) in align mode.

Qwen3.5-35B-A3B (tests/fixtures/corpus/raw), TP 1, bf16 KV, ``mamba_ssm_dtype`` float32:
  GDN conv window (2·16·128 + 32·128) · (4 − 1) = 24,576 elements · 2 B = 49,152 B
  GDN state 32 · 128 · 128 = 524,288 elements · 4 B = 2,097,152 B → page 2,146,304 B
  attention 2 · 2 KV heads · 256 · 2 B = 2,048 B a token
  Hopper, 0.33+: alignment lcm(16, 64) = 64 → block 64 · cdiv(2,146,304, 64 · 2,048) = 64 · 17 = 1,088
  Ampere, or before 0.33: alignment 16 → block 16 · cdiv(2,146,304, 16 · 2,048) = 16 · 66 = 1,056
  40 layers: 10 attention, 30 GDN → groups of 10 (1 attention + 3 mamba)
  blocks a request at 8,192 tokens: attention cdiv(8,192, block) = 8 either way;
  mamba 3 groups · 3 pages = 9 (Hopper) or 3 · 2 = 6 → 17 or 14.
"""

from __future__ import annotations

import json

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.core.errors import SlotdiffError
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.kvspec import kv_layout

from conftest import RAW


def _qwen35():  # type: ignore[no-untyped-def]
    return load(json.loads((RAW / "Qwen__Qwen3.5-35B-A3B.json").read_text())).arch


@pytest.mark.parametrize(
    ("version", "chip", "block", "mamba_pages", "per_request"),
    [
        ("0.34.0", "hopper", 1_088, 3, 17),
        ("0.33.0", "hopper", 1_088, 3, 17),
        ("0.34.0", "ampere", 1_056, 2, 14),
        ("0.34.0", "ada", 1_056, 2, 14),
        ("0.34.0", "cdna3", 1_056, 2, 14),  # ROCm: AITER FlyDSL or Triton, neither exports
        ("0.32.0", "hopper", 1_056, 2, 14),  # before 0.33 no GDN checkpoint
    ],
)
def test_vllm_qwen_gdn_checkpoint_page_by_gpu(
    version: str, chip: str, block: int, mamba_pages: int, per_request: int
) -> None:
    arch = _qwen35()
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", parse_version(version), None, 16, chip=chip)
    assert kv.block_size == block
    assert (kv.group_size, kv.num_groups) == (10, 4)
    mamba = [s for s in kv.specs if s.kind == "mamba"]
    assert len(mamba) == 30 and {s.pages for s in mamba} == {mamba_pages}
    assert {s.page_bytes for s in kv.specs} == {block * 2_048}
    assert kv.blocks_per_request(8_192, 8_192) == per_request


def test_vllm_qwen_gdn_refused_where_the_kernel_is_not_knowable() -> None:
    """Blackwell with d_k 128: FlashInfer only under a CUDA 13 runtime; a GPU with no
    architecture, or one slotdiff has no kernel rule for: unknown. All are refused with the
    flag that sizes it without checkpoints, and that flag still sizes it (one page a request)."""
    arch = _qwen35()
    v = parse_version("0.34.0")
    for chip, why in (("blackwell", "CUDA 13 runtime"), (None, "not stated"), ("rdna4", "rdna4")):
        with pytest.raises(SlotdiffError, match=why):
            kv_layout(arch, arch.layers, 1, "bfloat16", v, None, 16, chip=chip)
        kv = kv_layout(arch, arch.layers, 1, "bfloat16", v, None, 16, prefix_caching=False, chip=chip)
        assert {s.pages for s in kv.specs if s.kind == "mamba"} == {1}


def test_vllm_olmo_gdn_exports_no_checkpoint() -> None:
    """OLMo Hybrid's gated DeltaNet is vLLM's olmo_gdn_linear_attn, which declares no checkpoint
    alignment: 2 pages a request on Hopper too, and no 64-token alignment (its class defaults)."""
    arch = load({"model_type": "olmo_hybrid"}).arch
    assert any(s.variant == "gated_deltanet" for s in arch.layers)
    v = parse_version("0.34.0")
    kv = kv_layout(arch, arch.layers, 1, "bfloat16", v, None, 16, chip="hopper")
    assert {s.pages for s in kv.specs if s.kind == "mamba"} == {2}
    assert kv_layout(arch, arch.layers, 1, "bfloat16", v, None, 16, chip="ampere").block_size == kv.block_size


def test_fit_prices_qwen35_at_the_default_vllm_on_hopper(capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI: the default release (0.34) sizes Qwen3.5 on an H200 (was refused), with the
    1,088-token block; on a B200 it is refused in one line naming the flag."""
    path = str(RAW / "Qwen__Qwen3.5-35B-A3B.json")
    assert main(["fit", path, "--engine", "vllm", "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    assert "attention block size raised to 1088 tokens" in out
    assert main(["fit", path, "--engine", "vllm", "--gpu", "b200"]) == 2
    err = capsys.readouterr().err
    assert (
        "--no-enable-prefix-caching" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    )
