"""The deployment commands end to end: fit, sweep, moe, specdec, formats (text, JSON, exit codes)."""

from __future__ import annotations

import json

import pytest

from slotdiff.cli import COMMANDS, main

from conftest import raw

LLAMA8 = str(raw("meta-llama/Meta-Llama-3-8B"))
LLAMA70 = str(raw("meta-llama/Llama-3.1-70B"))
DSV3 = str(raw("deepseek-ai/DeepSeek-V3"))
QWEN_HYBRID = str(raw("Qwen/Qwen3.5-35B-A3B"))

CASES = [
    ["fit", LLAMA70, "--gpus", "8", "--context", "131072"],
    ["fit", DSV3, "--gpu", "h200", "--gpus", "8", "--context", "32768", "--kv-dtype", "fp8"],
    ["fit", QWEN_HYBRID, "--gpu", "h100-sxm", "--context", "262144"],
    ["sweep", LLAMA8, "--over", "batch", "--vs", DSV3],
    ["sweep", LLAMA8, "--over", "context", "--points", "8K,32K,128K"],
    ["moe", DSV3, "--batch", "32", "--ep", "8"],
    ["specdec", LLAMA8],
    ["specdec", DSV3, "--gpu", "h200", "--gpus", "8"],
    ["formats", LLAMA8],
    ["formats", DSV3, "--dtype", "mxfp4", "--kv-dtype", "fp8", "--context", "131072"],
]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_commands_are_registered() -> None:
    for name in ("fit", "sweep", "moe", "specdec", "formats"):
        assert COMMANDS[name] == f"slotdiff.commands.{name}"


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(x.rsplit("/", 1)[-1] for x in a))
def test_text_reads_at_100_columns(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*argv, "--width", "100"], capsys)
    assert code == 0, err
    assert out.endswith("\n") and "assumes:" in out
    assert max(len(line) for line in out.splitlines()) <= 100
    # piped without --width or COLUMNS: 120 columns (page.PIPED_WIDTH), not a terminal's 80
    code, wide, err = run(argv, capsys)
    assert max(len(line) for line in wide.splitlines()) <= 120 and len(wide.splitlines()) <= len(
        out.splitlines()
    )


@pytest.mark.parametrize("argv", CASES, ids=lambda a: " ".join(x.rsplit("/", 1)[-1] for x in a))
def test_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*argv, "--json"], capsys)
    assert code == 0, err
    json.loads(out)


def test_fit_text_and_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["fit", LLAMA70, "--context", "8192"], capsys)
    assert code == 1  # does not fit
    assert "DOES NOT FIT" in out and "short 61.92 GiB per GPU" in out and "fewest h100-sxm" in out
    code, out, _ = run(["fit", LLAMA70, "--gpus", "2", "--context", "8192"], capsys)
    assert code == 0
    assert "FITS" in out and "max concurrent sequences at 8,192 tokens: 5" in out
    assert "longest context for one sequence: 41,225 tokens" in out  # test_fit.py works these out
    assert "213.9 tokens/s" in out and "reserve 10%" in out


def test_fit_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["fit", DSV3, "--gpu", "h200", "--gpus", "8", "--context", "131072", "--json"], capsys)
    data = json.loads(out)
    assert data["fits"] is True and data["kv_replication"] == 8
    assert data["reserve_fraction"] == 0.1 and data["decode_at_max_sequences"]["bound"] == "memory"
    assert any("MLA" in a for a in data["assumptions"])


def test_specdec_offers_mtp(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["specdec", DSV3, "--gpu", "h200", "--gpus", "8"], capsys)
    assert "MTP module" in out and "offered as the draft" in out
    _, out, _ = run(["specdec", LLAMA8], capsys)
    assert "MTP" not in out and "= 2.40×" in out and "from batch 60" in out


def test_moe_refuses_a_dense_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["moe", LLAMA8], capsys)
    assert code == 2 and "not a mixture-of-experts" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["sweep", LLAMA8, "--over", "batch", "--points", "1,x"], "bad point"),
        (["sweep", LLAMA8, "--over", "depth"], "invalid choice"),
        (["fit", LLAMA8, "--gpus", "0"], "argument --gpus: '0' must be at least 1"),
        (["fit", LLAMA8, "--reserve", "1.5"], "argument --reserve: '1.5' must be below 1"),
        (["specdec", LLAMA8, "--alpha", "2"], "--alpha"),
        (["moe", DSV3, "--dispatch-dtype", "fp7"], "unknown dtype"),
        (["fit", LLAMA8, "--gpu", "tpu"], "unknown GPU preset"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and needle in err
