"""Parallel layouts an engine accepts (cost/layout.py) and the fewest GPUs of a valid one.

Each case states the rule and the model's sizes that decide it; the sizes are the configs'.
"""

from __future__ import annotations

import json

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.cost.layout import Layout, problems, stage_sizes
from slotdiff.cost.memory import MemoryPlan
from slotdiff.cost.weights import effective_format
from slotdiff.cost.workload import Workload
from slotdiff.deploy.fit import fit

from conftest import FIXTURES, raw

GiB = 2**30


def arch(repo: str):  # type: ignore[no-untyped-def]
    return load(raw(repo)).arch


def why(repo: str, layout: Layout) -> tuple[str, ...]:
    a = arch(repo)
    return problems(a, layout, effective_format(a, None)[0])


def test_tp_must_divide_the_heads() -> None:
    # Llama-3.1-70B: 64 query heads, 8 KV heads, FFN 28,672: TP=3 divides none of them.
    got = why("meta-llama/Llama-3.1-70B", Layout(tp=3))
    assert any("64 attention heads" in w for w in got)
    assert any("8 KV heads" in w for w in got)
    assert not why("meta-llama/Llama-3.1-70B", Layout(tp=8))


def test_kv_heads_replicate_when_tp_is_a_multiple() -> None:
    # Qwen3-30B-A3B: 32 query heads, 4 KV heads: TP=8 is a multiple of 4 (each rank one head).
    assert not why("Qwen/Qwen3-30B-A3B", Layout(tp=8))
    # Qwen3-8B: 32 heads and 8 KV heads; TP=16 replicates each KV head twice and is accepted,
    # TP=32 divides the heads but the FFN width 12,288 too, and KV heads 8 divide 32.
    assert not why("Qwen/Qwen3-8B", Layout(tp=16))


def test_ep_must_divide_the_experts() -> None:
    # Qwen3-30B-A3B has 128 routed experts: EP over 3 GPUs (TP=1 × DP=3) cannot split them.
    got = why("Qwen/Qwen3-30B-A3B", Layout(tp=1, dp=3, ep=True))
    assert got == ("EP=3 does not divide the 128 routed experts",)
    assert not why("Qwen/Qwen3-30B-A3B", Layout(tp=1, dp=8, ep=True))
    assert why("meta-llama/Meta-Llama-3-8B", Layout(tp=1, dp=2, ep=True))  # no experts at all


def test_block_scaled_fp8_shards_stay_whole_blocks() -> None:
    # Qwen3-235B-A22B-FP8: 128×128 weight blocks, expert width 1,536: TP=8 leaves 192 rows per
    # rank, not a whole number of blocks (vLLM refuses it); TP=4 leaves 384 = 3 blocks; with EP
    # the experts stay whole.
    a = load(FIXTURES / "engine_logs" / "configs" / "Qwen__Qwen3-235B-A22B-FP8.json").arch
    fmt = effective_format(a, None)[0]
    assert any("192" in w and "128-row" in w for w in problems(a, Layout(tp=8), fmt))
    assert not problems(a, Layout(tp=4), fmt)
    assert not problems(a, Layout(tp=8, ep=True), fmt)


def test_pipeline_stages_split_as_vllm_does() -> None:
    # get_pp_indices: the remainder goes to the stages before the last.
    assert stage_sizes(27, 2) == [14, 13]
    assert stage_sizes(61, 4) == [15, 15, 16, 15]  # 61 = 4 × 15 + 1: the one to the stage before the last
    assert stage_sizes(80, 5) == [16] * 5
    assert why("meta-llama/Meta-Llama-3-8B", Layout(pp=64))  # 32 layers


def test_fit_refuses_an_invalid_layout_and_recommends(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fit", str(raw("meta-llama/Llama-3.1-70B")), "--tensor-parallel-size", "3"])
    out = capsys.readouterr().out
    assert code == 1
    assert "INVALID LAYOUT" in out and "TP=3 does not divide the 64 attention heads" in out
    # 141.1e9 B of bf16 weights: one H100 holds 77.3e9; two hold 70.6e9 each plus 1.3e9 of KV.
    assert "fewest h100-sxm of a valid layout that hold it: 2 (TP=2)" in " ".join(out.split())  # wrapped
    code = main(["fit", str(raw("meta-llama/Llama-3.1-70B")), "--gpus", "3", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["layout_valid"] is False and data["min_gpus"] == 2
    assert data["min_gpus_layout"]["tensor_parallel_size"] == 2


def test_mla_with_data_parallel_attention_keeps_one_copy_of_the_latent() -> None:
    # DeepSeek-V3 on 8 × H200: TP=8 holds the whole latent cache on every rank (×8); DP=8 with
    # EP=8 keeps each sequence on one rank, so one copy in all.
    a = arch("deepseek-ai/DeepSeek-V3")
    tp = fit(a, Workload(gpu="h200", context=32768), layout=Layout(tp=8))
    dp = fit(a, Workload(gpu="h200", context=32768), layout=Layout(tp=1, dp=8, ep=True))
    assert tp.valid and dp.valid
    assert tp.kv_replication == 8 and dp.kv_replication == 1
    assert dp.kv_per_sequence_per_gpu == tp.kv_per_sequence_per_gpu == 61 * 576 * 2 * 32768


def test_the_search_answers_at_the_layer_cap() -> None:
    # 16,384 Llama-3-8B layers (the key map's cap): 218,103,808 linear params and 8,192 norm
    # params a layer, 3.574e12 params, 7.15e12 B in bf16. TP ≤ 32 (32 heads), PP divides
    # 16,384 (a power of two): TP=16 × PP=8 = 128 GPUs hold 55.9e9 B each plus KV.
    d = json.loads(raw("meta-llama/Meta-Llama-3-8B").read_text(encoding="utf-8"))
    d["num_hidden_layers"] = 16384
    f = fit(load(d).arch, Workload(), gpus=1)
    assert not f.fits
    assert f.min_gpus == 128
    assert f.min_layout is not None and f.min_layout.gpus == 128


def test_pipeline_holds_the_tied_table_again_and_nothing_else() -> None:
    """Gemma 3 (tied embeddings, a SigLIP tower) over two stages: the last holds the table
    again as the head, 262,208 × 2,304 × 4 B in fp32 (no dtype given), and the tower only once,
    on the first stage."""
    arch = load(json.loads((FIXTURES / "corpus" / "transformers-defaults" / "gemma3.json").read_text())).arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    one = sum(w + e for w, e, _, _ in plan.stages(Layout(), 1))
    two = sum(w + e for w, e, _, _ in plan.stages(Layout(pp=2), 1))
    assert two - one == 262_208 * 2_304 * 4
