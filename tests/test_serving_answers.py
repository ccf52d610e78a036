"""Serving answers a user can act on (issue #14): does it fit, in every command; one
precision convention; efficiency factors; GPUs beyond the presets; the figures that misled.

Hand arithmetic in each test; H100 SXM: 80 GiB, 3.35e12 B/s, dense bf16 989.4e12 and fp8
1,979e12 FLOP/s; 10% of each GPU kept for the runtime (72 GiB = 77,309,411,328 B usable).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotdiff.analysis.analyze import analyze, load
from slotdiff.cli import main
from slotdiff.cost.gpus import gpu, resolve_gpu
from slotdiff.cost.price import cost_of
from slotdiff.cost.workload import Workload
from slotdiff.deploy.serving import decode_step, deployment
from slotdiff.deploy.sweep import sweep_batch, sweep_context

from conftest import FIXTURES, raw

GiB = 2**30
USABLE = 77_309_411_328
LLAMA8 = raw("meta-llama/Meta-Llama-3-8B")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().out


# ----------------------------------------------------------------------------- feasibility


def test_main_report_says_70b_and_v3_do_not_fit_one_h100(capsys: pytest.CaptureFixture[str]) -> None:
    # 70B bf16: 141.1e9 B > 77.3e9; on two (TP=2) 70.6e9 each + 1.3e9 KV fits.
    _, out = run([str(raw("meta-llama/Llama-3.1-70B"))], capsys)
    assert "does not fit on 1× H100 SXM (SXM5, 80 GB): needs ≥ 2 (TP=2)" in out
    # DeepSeek-V3: 673e9 B; 8 GPUs hold 84e9 each (> 77.3e9); TP=9..15 divide neither 128
    # heads nor keep fp8 blocks; 16 (TP=16) hold 42e9 + replicated MLA projections.
    _, out = run([str(raw("deepseek-ai/DeepSeek-V3")), "--json"], capsys)
    f = json.loads(out)["cost"]["feasibility"]
    assert f["fits"] is False and f["min_gpus"] == 16 and f["min_gpus_layout"]["tensor_parallel_size"] == 16
    assert f["max_batch"] == 0 and f["layout"]["tensor_parallel_size"] == 1


def test_main_report_fits_and_gives_the_largest_batch(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3-8B: 16,060,522,496 B of weights; 1 GiB of KV a sequence at 8K:
    # floor((77,309,411,328 − 16,060,522,496) / 1,073,741,824) = floor(57.04) = 57.
    _, out = run([str(LLAMA8), "--json"], capsys)
    f = json.loads(out)["cost"]["feasibility"]
    assert f["fits"] is True and f["max_batch"] == 57 and f["min_gpus"] == 1
    _, out = run([str(LLAMA8), "--batch", "64"], capsys)
    assert "does not fit on 1× H100 SXM" in out and "(if it fit)" in out


def test_sweep_marks_rows_that_do_not_fit() -> None:
    # At 8K a batch of 1,024 holds 1 TiB of KV: it never fits an 80 GB GPU; 57 is the most.
    s = sweep_batch(deployment(load(LLAMA8).arch, Workload()), 8192)
    by = {r.batch: r for r in s.rows}
    assert s.max_batch == 57 and by[57].fits and not by[64].fits and not by[1024].fits


def test_specdec_moe_and_formats_mark_what_does_not_fit(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(["specdec", str(LLAMA8), "--json"], capsys)
    ext = json.loads(out)["external"]
    # verification holds γ = 4 more tokens: floor(61,248,888,832 / (8,196 × 131,072)) = 57
    assert ext["max_batch_that_fits"] == 57
    rows = {r["batch"]: r["fits"] for r in ext["by_batch"]}
    assert rows[32] is True and rows[64] is False
    # DeepSeek-V3 over EP=8 H100s: each holds 1/8 of the 654e9 B of experts (82e9) before
    # anything else — no batch fits; on H200 (141 GiB) it does.
    _, out = run(["moe", str(raw("deepseek-ai/DeepSeek-V3")), "--ep", "8", "--json"], capsys)
    m = json.loads(out)
    assert m["max_batch_that_fits"] == 0 and not any(r["fits"] for r in m["read_per_step"])
    _, out = run(["moe", str(raw("deepseek-ai/DeepSeek-V3")), "--ep", "8", "--gpu", "h200", "--json"], capsys)
    assert json.loads(out)["max_batch_that_fits"] > 0
    # formats: Llama-3.1-70B in bf16 (141e9 B) does not fit one H100; in int4 (~37e9 B) it does.
    _, out = run(["formats", str(raw("meta-llama/Llama-3.1-70B")), "--json"], capsys)
    rows = {r["format"]["id"]: r["fits_batch1"] for r in json.loads(out)["formats"]}
    assert rows["bfloat16"] is False and rows["int4"] is True


def test_contexts_beyond_the_model_limit_are_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    # Meta-Llama-3-8B declares 8,192 positions; gpt-oss-20b 131,072 (YaRN ×32 of 4,096).
    _, out = run([str(LLAMA8), "--context", "16384", "--json"], capsys)
    f = json.loads(out)["cost"]["feasibility"]
    assert f["beyond_model_context"] is True and f["model_max_context"] == 8192
    s = sweep_context(deployment(load(LLAMA8).arch, Workload()), 1, (8192, 16384))
    assert [r.beyond_model_context for r in s.rows] == [False, True]
    _, out = run(["fit", str(LLAMA8), "--context", "16384"], capsys)
    assert "beyond the model's 8,192-token limit" in out
    a = load(raw("openai/gpt-oss-20b")).arch
    report = cost_of(a, Workload(context=262144))
    assert report.feasibility is not None and report.feasibility.limit.tokens == 131072
    assert any("beyond the model's 131,072-token limit" in n for n in report.assumptions)


# ----------------------------------------------------------------------------- precision


def test_checkpoint_quantization_picks_the_peak() -> None:
    def dtype(path: Path) -> tuple[str, float]:
        c = cost_of(load(path).arch)
        assert c.precision is not None
        return c.precision.dtype, c.precision.peak

    assert dtype(raw("deepseek-ai/DeepSeek-V3")) == ("float8_e4m3fn", 1979e12)  # FP8 W8A8
    assert dtype(raw("openai/gpt-oss-20b")) == ("bfloat16", 989.4e12)  # MXFP4 weight-only
    assert dtype(raw("meta-llama/Meta-Llama-3-8B")) == ("bfloat16", 989.4e12)
    w8a8 = (
        FIXTURES / "engine_logs" / "configs" / "neuralmagic__Meta-Llama-3.1-70B-Instruct-quantized.w8a8.json"
    )
    assert dtype(w8a8) == ("int8", 1979e12)
    gptq = FIXTURES / "engine_logs" / "configs" / "Qwen__Qwen2.5-72B-Instruct-GPTQ-Int4.json"
    assert dtype(gptq) == ("float16", 989.4e12)  # int4 weight-only, fp16 activations
    # An A100 has no fp8: the same checkpoint computes at its bf16 peak (weight-only kernels).
    c = cost_of(load(raw("deepseek-ai/DeepSeek-V3")).arch, Workload(gpu="a100-80gb"))
    assert c.precision is not None and c.precision.peak == 312e12


def test_formats_and_the_main_report_agree_on_the_peak(capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run(["formats", str(raw("deepseek-ai/DeepSeek-V3")), "--json"], capsys)
    rows = {r["format"]["id"]: r for r in json.loads(out)["formats"]}
    main_report = cost_of(load(raw("deepseek-ai/DeepSeek-V3")).arch)
    assert rows["float8_e4m3fn"]["dense_peak_flops"] == main_report.precision.peak  # type: ignore[union-attr]
    assert rows["mxfp4"]["dense_peak_flops"] == 989.4e12  # weight-only: the activations' bf16


def test_dtype_fp8_reprices_the_precision_change() -> None:
    # Llama-3-8B at --dtype fp8 (W8A8, 128×128 blocks), batch 1 at 8K, decode reads:
    #   linears 6,979,321,856 B at 1 B + 13,312 fp32 block scales × 32 layers = 1,703,936 B
    #   + the bf16 head 1,050,673,152 + norms 532,480 + KV 1,073,741,824 = 9,105,973,248 B → 2.7182 ms.
    # The precision facet's counterfactual is GPT-2's fp32: (8,030,261,248 − 525,336,576 gathered
    # embedding) × 4 B + the same KV = 31,093,440,512 B → 9.2816 ms. Δ = −6.563 ms (the issue's
    # ≈ −6.6 ms). Against bf16 it would be 16,083,591,168 B → 4.8011 ms, Δ = −2.083 ms: "half the
    # weight bytes at 3.35 TB/s" is the bf16 comparison, the −6.6 the fp32 one.
    r = analyze(LLAMA8, workload=Workload(weight_dtype="fp8"))
    assert r.cost.decode.memory_ms == pytest.approx(9_105_973_248 / 3.35e9, rel=1e-9)
    ch = next(c for c in r.changes if c.facet == "precision.weights")
    assert ch.deltas["decode_step_ms"] == pytest.approx((9_105_973_248 - 31_093_440_512) / 3.35e9, rel=1e-6)
    bf16 = cost_of(load(LLAMA8).arch)
    assert bf16.decode.memory_ms == pytest.approx(16_083_591_168 / 3.35e9, rel=1e-9)
    assert r.cost.decode.step_ms - bf16.decode.step_ms == pytest.approx(-2.083, abs=0.001)


def test_efficiency_factors_apply_alike_and_are_said(capsys: pytest.CaptureFixture[str]) -> None:
    full = cost_of(load(LLAMA8).arch)
    half = cost_of(load(LLAMA8).arch, Workload(mbu=0.5, mfu=0.6))
    assert half.decode.memory_ms == pytest.approx(2 * full.decode.memory_ms)
    assert half.prefill.compute_ms == pytest.approx(full.prefill.compute_ms / 0.6)
    # the main report and the sweep give one prefill: 140.55e12 / 989.4e12 = 142.06 ms at peak
    s = sweep_context(deployment(load(LLAMA8).arch, Workload()), 1, (8192,))
    assert s.rows[0].prefill_s * 1e3 == pytest.approx(full.prefill.time_ms)
    for argv in (
        [str(LLAMA8), "--mbu", "0.5"],
        ["sweep", str(LLAMA8), "--over", "batch", "--points", "1", "--mbu", "0.5"],
        ["fit", str(LLAMA8), "--mbu", "0.5"],
        ["specdec", str(LLAMA8), "--mbu", "0.5"],
    ):
        _, out = run(argv, capsys)
        assert "50% of peak bandwidth" in out, argv
    code = main([str(LLAMA8), "--mfu", "1.5"])
    assert code == 2


# ----------------------------------------------------------------------------- hardware


def test_h100_is_the_sxm_preset_and_every_listed_preset_exists() -> None:
    assert gpu("h100").id == "h100-sxm" and Workload(gpu="h100").gpu == "h100-sxm"
    for name in (
        "h200",
        "b200",
        "gb200",
        "mi300x",
        "mi325x",
        "mi355x",
        "l40s",
        "a10g",
        "l4",
        "rtx-4090",
        "rtx-5090",
    ):
        g = gpu(name)
        assert g.bandwidth > 0 and g.peak_for("bfloat16") > 0 and g.link_bytes_per_s


def test_gpu_from_flags_and_from_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An H100 NVL-like card: 94 GiB, 3.9 TB/s, same peak; decode of Llama-3-8B reads
    # 16,083,591,168 B → 4.124 ms at 3.9e12 B/s.
    g = resolve_gpu("h100", None, 94, 3.9, None)
    assert (g.memory_bytes, g.bandwidth, g.visible) == (94 * GiB, 3_900_000_000_000, 94 * GiB)
    _, out = run([str(LLAMA8), "--gpu-mem", "94", "--bandwidth", "3.9", "--json"], capsys)
    assert json.loads(out)["cost"]["decode"]["memory_ms"] == pytest.approx(16_083_591_168 / 3.9e9)
    presets = json.loads((Path(__file__).parents[1] / "schemas" / "gpus.json").read_text(encoding="utf-8"))
    mine = dict(presets)
    one = dict(presets["gpus"][0], id="my-card", memory_bytes=48 * GiB)
    mine["gpus"] = [one]
    path = tmp_path / "gpus.json"
    path.write_text(json.dumps(mine), encoding="utf-8")
    _, out = run([str(LLAMA8), "--gpu-file", str(path), "--json"], capsys)
    assert json.loads(out)["cost"]["workload"]["custom_gpu"]["memory_bytes"] == 48 * GiB
    bad = dict(mine, gpus=[dict(one, memory_bytes="lots")])
    path.write_text(json.dumps(bad), encoding="utf-8")
    code = main([str(LLAMA8), "--gpu-file", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "gpus.schema.json" in err
    assert main([str(LLAMA8), "--gpu-mem", "-1"]) == 2


def test_communication_is_added_over_the_link() -> None:
    # Llama-3-8B on 4 × H100 (TP=4), batch 16: two all-reduces per layer of 16 tokens × 4,096
    # × 2 B, a ring sending 2·3/4 of it: 2 × 32 × 1.5 × 131,072 = 12,582,912 B at 450e9 B/s,
    # and each costs the measured small-message latency on NVLink at TP=4, 4.8 µs.
    step = decode_step(deployment(load(LLAMA8).arch, Workload(), 4), 16, 8192)
    assert step.comm_bytes == pytest.approx(12_582_912)
    assert step.comm_ms == pytest.approx(64 * 4.8e-3 + 12_582_912 / 450e9 * 1e3)


# ----------------------------------------------------------------------------- headlines


def test_dsa_decode_reads_indexer_keys_and_top_k_latents() -> None:
    # DeepSeek-V3.2: 61 DSA layers caching 512 + 64 latent and a 128-wide indexer key, bf16.
    # At 131,072 tokens a step reads 61 × (128 × 131,072 + 576 × 2,048) × 2 B, not the
    # 61 × 704 × 131,072 × 2 B stored.
    a = load(raw("deepseek-ai/DeepSeek-V3.2")).arch
    kv = cost_of(a, Workload(context=131072)).kv
    assert kv.bytes_at_context == 61 * 704 * 131072 * 2
    assert kv.read_at_context == 61 * (128 * 131072 + 576 * 2048) * 2


def test_sliding_models_headline_both_rates(capsys: pytest.CaptureFixture[str]) -> None:
    # Gemma-2-9B: 42 layers × 2 × 8 KV heads × 256 × 2 B = 8 KiB each; half are sliding.
    _, out = run([str(raw("google/gemma-2-9b"))], capsys)
    assert "336 KiB/token (bfloat16) within the windows, 168 KiB/token past them" in out


def test_active_params_without_the_embedding_as_owners_count(capsys: pytest.CaptureFixture[str]) -> None:
    # DeepSeek-V3: 129,280 × 7,168 = 926,679,040 gathered embedding params off 37.55B.
    _, out = run([str(raw("deepseek-ai/DeepSeek-V3"))], capsys)
    assert "active 37.55B (36.63B without the embedding table, as DeepSeek counts)" in out
    _, out = run([str(raw("Qwen/Qwen3-30B-A3B")), "--json"], capsys)
    head = json.loads(out)["cost"]["params"]["active_headline"]
    assert head["owner"] == "Qwen" and head["owner_counts_embedding"] is True
