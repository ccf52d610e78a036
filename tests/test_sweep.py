"""Sweeps over batch and context (seeds 02 and 05), and the charts they draw."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.cost.workload import Workload
from slotdiff.deploy.serving import deployment
from slotdiff.deploy.sweep import attention_overtakes, sweep_batch, sweep_context

from conftest import raw

GiB = 1024**3
LLAMA8 = str(raw("meta-llama/Meta-Llama-3-8B"))
DSV3 = str(raw("deepseek-ai/DeepSeek-V3"))


def dep(repo: str, **wl):  # type: ignore[no-untyped-def]
    return deployment(load(raw(repo)).arch, Workload(**wl))


def test_seed_05_llama3_8b_at_128k() -> None:
    # Seed 05: "8B at 128K: ~16 GiB KV, prefill 6.5 PFLOP, ~11 s on one GPU at 60% MFU".
    # Prefill = 15.01 GFLOP × 131,072 + 524,288 FLOP per key × 131,072 × 131,073 / 2
    # = 1.967e15 + 4.504e15 = 6.47e15; 6.47e15 / (0.6 × 989.4e12) = 10.9 s. The seed's 60%
    # is --mfu 0.6; the default 1.0 gives the lower bound 6.47e15 / 989.4e12 = 6.54 s.
    s = sweep_context(dep("meta-llama/Meta-Llama-3-8B", mfu=0.6), 1, (8192, 131072))
    row = s.rows[-1]
    assert row.kv_bytes_per_sequence == 16 * GiB
    assert row.prefill_flops / 1e15 == pytest.approx(6.5, abs=0.05)
    assert s.mfu == 0.6
    assert row.prefill_s == pytest.approx(11, abs=0.2)
    bound = sweep_context(dep("meta-llama/Meta-Llama-3-8B"), 1, (131072,)).rows[0]
    assert bound.prefill_s == pytest.approx(row.prefill_flops / 989.4e12, rel=1e-3)
    # Seed 02: attention 4.3 GFLOP per token at 8K and 68.7 at 128K, weights ~15 GFLOP.
    assert round(s.rows[0].attention_flops_per_token / 1e9, 1) == 4.3
    assert round(row.attention_flops_per_token / 1e9, 1) == 68.7
    assert row.attention_share == pytest.approx(68.7 / (68.7 + 15.0), abs=0.01)


def test_attention_overtakes_weights() -> None:
    # Per decode token, 32 layers × 2 × 32 heads × (128 + 128) = 524,288 FLOPs per key;
    # weights 15,009,316,864 FLOPs; 15,009,316,864 / 524,288 = 28,627.9 → from 28,628 tokens.
    s = sweep_context(dep("meta-llama/Meta-Llama-3-8B"), 1)
    assert s.attention_overtakes_context == 28_628
    assert 28_628 in [r.context for r in s.rows]  # the default points include the crossover
    # Mistral-7B slides over 4,096 tokens on every layer: at most 4,096 × 524,288 = 2.1 GFLOP
    # of attention against ~14 GFLOP of weights — never.
    mistral = load(raw("mistralai/Mistral-7B-v0.1")).arch
    assert attention_overtakes(mistral, dep("mistralai/Mistral-7B-v0.1").flops(1).weights_per_token) is None


def test_batch_sweep_marks_compute_bound() -> None:
    # Seed 02: weights alone turn compute-bound near batch ≈ ridge ≈ 295 (bf16, 2 FLOPs and
    # 2 bytes per parameter); with each sequence's 1 GiB of KV at 8K read too, intensity tends
    # to (15.0 + 4.3) GFLOP / 1.07 GB ≈ 18 FLOP/byte < 295: never.
    s = sweep_batch(dep("meta-llama/Meta-Llama-3-8B"), 8192)
    assert s.compute_bound_batch_weights == pytest.approx(295, abs=2)
    assert s.compute_bound_batch is None
    assert all(r.step.bound == "memory" for r in s.rows)
    assert s.compute_bound_batch_weights in [r.batch for r in s.rows]
    # At 1K the KV is 8× smaller: intensity tends to (15.0 + 0.54) / 0.134 ≈ 116 — still never.
    short = sweep_batch(dep("meta-llama/Meta-Llama-3-8B"), 1024)
    assert short.compute_bound_batch is None
    tps = [r.step.tokens_per_s for r in s.rows]
    assert tps == sorted(tps)


def test_moe_needs_a_larger_batch() -> None:
    # DeepSeek-V3 reads a growing union of experts but computes only top-8 per token: the
    # weights-only compute-bound batch is an order of magnitude above the dense ridge.
    s = sweep_batch(dep("deepseek-ai/DeepSeek-V3"), 8192, (1, 32, 128))
    assert s.compute_bound_batch_weights > 2000
    assert [round(r.step.experts_touched) for r in s.rows] == [8, 163, 252]


@pytest.mark.parametrize("over", ["batch", "context"])
@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plots_are_written(
    tmp_path: Path, over: str, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / f"sweep-{over}{suffix}"
    assert main(["sweep", LLAMA8, "--over", over, "--vs", DSV3, "--plot", str(out)]) == 0
    assert out.stat().st_size > 10_000
    head = out.read_bytes()[:200]
    if suffix == ".png":
        assert head.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        text = out.read_text()
        assert "<svg" in text
        # Text stays text in the SVG: the axes say their units and the marks are there.
        if over == "batch":
            assert "FLOP / byte" in text and "tokens/s" in text and "compute-bound from B=296" in text
        else:
            assert "context (tokens)" in text and "GFLOP" in text and "from 28,628 tokens" in text
        assert "Meta-Llama-3-8B" in text and "DeepSeek-V3" in text
    assert f"wrote {out}" in capsys.readouterr().out


def test_plot_without_matplotlib_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    out = tmp_path / "x.png"
    assert main(["sweep", LLAMA8, "--over", "batch", "--plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'slotdiff[plot]'" in err
    assert not out.exists()


def test_plot_suffix_is_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", LLAMA8, "--over", "batch", "--plot", str(tmp_path / "x.pdf")]) == 2
    assert ".png or .svg" in capsys.readouterr().err
