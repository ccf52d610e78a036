"""vLLM 0.33+'s gated-DeltaNet prefill-checkpoint buffer in the profile run, read in the 0.33.0
and 0.34.0 wheels, and where it lands in the KV pool.

Where it is allocated. ``QwenGatedDeltaNetAttention._warmup_prefill_kernels``
(layers/mamba/gdn/qwen_gdn_linear_attn.py) runs when ``_forward_core`` finds no attention
metadata, which is the profile run (``profile_run`` → ``_dummy_run(skip_attn=True,
is_profile=True)``, v1/worker/gpu/model_runner.py); where the layer exports checkpoints
(FlashInfer's prefill in align mode, every mamba layer declaring an alignment) it calls
``current_workspace_manager().get_simultaneous(self._checkpoint_buffer_spec)`` ("Size the
workspace while profiling; it is locked afterwards"): cdiv(max_num_batched_tokens, grid) ×
(num_v_heads / TP) × head_v_dim × head_k_dim float32, grid = ``get_mamba_prefill_checkpoint_grid``
= ``cache_config.mamba_block_size`` (no prefix_match_unit), which align mode sets to the
attention block (platforms/interface.py ``update_block_size_for_backend``). So it is in the
torch peak the profile measures (mem_utils: ``allocated_bytes.all.peak``) and stays allocated.

But the workspace manager (v1/worker/workspace.py) keeps ONE buffer per ubatch and lane: every
``get_simultaneous`` request is a view from its start, and ``_ensure_workspace_size`` grows it
to the largest request, freeing the smaller one first (``del``, ``empty_cache``, then
``torch.empty``). The fused-MoE scratch asks the same manager (``modular_kernel.py``
``get_simultaneous((max_shape_size,), workspace2_shape)``), so a MoE model's workspace is the
larger of the two requests, not their sum.

Qwen3.5-35B-A3B (tests/fixtures/corpus/raw), TP 1, H200 (Hopper: FlashInfer, align mode),
vLLM 0.34 defaults: 8,192 batched tokens, 1,024 sequences; block 1,088 tokens
(tests/test_vllm_gdn_checkpoints.py), pages 1,088 × 2,048 = 2,228,224 B, groups of 10 layers.
  GDN checkpoint buffer: cdiv(8,192, 1,088) = 8 states × 32 v heads × 128 × 128 × 4 B = 16,777,216 B
  fused-MoE scratch (top-k 8, expert width 512, hidden 2,048; fused_moe.workspace_shapes):
    (max(8,192·8·2,048, 8,192·2,048) + 8,192·8·max(1,024, 2,048)) × 2 B = 536,870,912 B
  the workspace: max(536,870,912, 16,777,216) = 536,870,912 B: the buffer adds nothing here.
  sampler (V2 runner, 0.33+: bf16 logits + the warm-up's float32 copy, 6 B): 1,024 × 248,320 × 6
    = 1,525,678,080 B; the forward's hidden states 8,192 × 2,048 × 2 = 33,554,432 B
  activation peak 1,525,678,080 + 33,554,432 + 536,870,912 = 2,096,103,424 B (the forward,
    8,192 × 2 × (2·2,048 + the widest, under 32k) B, is under 0.6 GB: the sampler side is larger)
With --gpu-mem 140, --weights-gib 65, --non-torch-gib 0.5, --cuda-graph-gib 0.5 (the other terms
pinned by flag): requested 140 GiB × 0.9 = 135,291,469,824 B; available 135,291,469,824 −
69,793,218,560 − 536,870,912 − 2,096,103,424 − 536,870,912 = 62,328,406,016 B;
blocks 62,328,406,016 // 2,228,224 // 10 = 27,972 // 10 = 2,797.

A dense Qwen3.5 (the same text config with a dense MLP of 6,144, model_type qwen3_5_text) has no
MoE scratch: the workspace is the checkpoint buffer, 16,777,216 B: activation 1,525,678,080 +
33,554,432 + 16,777,216 = 1,576,009,728 B, available 62,848,499,712 B, blocks
62,848,499,712 // 22,282,240 = 2,820 (2,821 without the buffer).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from slotdiff.cli import main

from conftest import RAW

PINNED = ["--gpu-mem", "140", "--weights-gib", "65", "--non-torch-gib", "0.5", "--cuda-graph-gib", "0.5"]
SAMPLER, HIDDEN = 1_525_678_080, 33_554_432
GDN_BUFFER, MOE_SCRATCH = 16_777_216, 536_870_912


def _moe_config() -> dict[str, Any]:
    return json.loads((RAW / "Qwen__Qwen3.5-35B-A3B.json").read_text(encoding="utf-8"))


def _dense_config() -> dict[str, Any]:
    moe = ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size")
    text = {k: v for k, v in _moe_config()["text_config"].items() if k not in moe and k != "mlp_only_layers"}
    return {**text, "model_type": "qwen3_5_text", "intermediate_size": 6144}


def _fit(tmp_path, capsys, config: dict[str, Any], *flags: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    assert main(["fit", str(path), "--engine", "vllm", "--json", *flags]) == 0
    stage = json.loads(capsys.readouterr().out)["engine"]["stages"][0]
    terms = {t["name"]: t["bytes"] for t in stage["terms"]}
    return {"activation": terms["activation_peak"], "available": terms["available_kv_cache_memory"], **stage}


def test_qwen35_moe_pool_on_an_h200_holds_the_buffer_inside_the_moe_scratch(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    got = _fit(tmp_path, capsys, _moe_config(), "--gpu", "h200", *PINNED)
    assert got["activation"] == SAMPLER + HIDDEN + max(MOE_SCRATCH, GDN_BUFFER) == 2_096_103_424
    assert got["available"] == 62_328_406_016
    assert got["num_blocks"] == 2_797


def test_a_dense_qwen35_pays_the_buffer_in_its_pool(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    got = _fit(tmp_path, capsys, _dense_config(), "--gpu", "h200", *PINNED)
    assert got["activation"] == SAMPLER + HIDDEN + GDN_BUFFER == 1_576_009_728
    assert got["available"] == 62_848_499_712
    assert got["num_blocks"] == 2_820


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        # 16,384 batched tokens: cdiv(16,384, 1,088) = 16 states: 33,554,432 B; hidden 67,108,864 B.
        (["--gpu", "h200", "--max-num-batched-tokens", "16384"], SAMPLER + 67_108_864 + 33_554_432),
        # Ampere: Triton's prefill exports no checkpoint, so no buffer is asked for (the H200's
        # batch set by flag: vLLM's defaults on an A100 are 2,048 tokens and 256 sequences).
        (
            ["--gpu", "a100-80gb", "--max-num-seqs", "1024", "--max-num-batched-tokens", "8192"],
            SAMPLER + HIDDEN,
        ),
        # Without prefix caching there is no align mode: no checkpoint, no buffer.
        (["--gpu", "h200", "--no-enable-prefix-caching"], SAMPLER + HIDDEN),
    ],
)
def test_the_buffer_follows_the_checkpoints(tmp_path, capsys, flags: list[str], expected: int) -> None:  # type: ignore[no-untyped-def]
    got = _fit(tmp_path, capsys, _dense_config(), *flags, "--gpu-mem", "140")
    assert got["activation"] == expected
