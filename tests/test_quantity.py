"""Numbers typed the way people type them: one parser for every count, size and rate flag.

Expected values are the conventions themselves (vLLM's human-readable counts: 1k = 1,000,
1K = 1,024; GiB binary, GB decimal), not the parser's own output.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotdiff.core.errors import UsageError
from slotdiff.core.quantity import parse_count, parse_gib, parse_real

from conftest import budget

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "100"}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8192", 8192),
        ("128K", 131_072),
        ("1M", 1_048_576),
        ("1k", 1_000),
        ("25.6k", 25_600),
        ("2G", 2**30 * 2),
        (" 32 ", 32),
        ("1e3", 1_000),
    ],
)
def test_counts(text: str, value: int) -> None:
    assert parse_count(text) == value


@pytest.mark.parametrize(
    "text", ["nan", "inf", "-inf", "-1", "1.5", "0.0001k", "12X", "", "K", "1KK", "0x10"]
)
def test_counts_refused(text: str) -> None:
    with pytest.raises(UsageError):
        parse_count(text, minimum=1)


@pytest.mark.parametrize(
    ("text", "gib"),
    [
        ("80", 80.0),
        ("80GiB", 80.0),
        ("80gib", 80.0),
        ("96GB", 96e9 / 2**30),
        ("512MiB", 0.5),
        ("1TiB", 1024.0),
    ],
)
def test_sizes(text: str, gib: float) -> None:
    assert parse_gib(text) == pytest.approx(gib, rel=1e-12)


@pytest.mark.parametrize("text", ["nan", "inf", "-80", "0", "80GX", "80 parsecs"])
def test_sizes_refused(text: str) -> None:
    with pytest.raises(UsageError):
        parse_gib(text)


@given(st.floats(allow_nan=True, allow_infinity=True))
@budget(200)
def test_reals_are_finite_and_bounded(x: float) -> None:
    """Whatever a user types, a real that comes back is finite and within [0, 1]."""
    try:
        value = parse_real(repr(x), maximum=1.0)
    except UsageError:
        assert not math.isfinite(x) or x < 0 or x > 1
    else:
        assert math.isfinite(value) and 0 <= value <= 1


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", *args], capture_output=True, text=True, env=ENV, timeout=120
    )


def test_context_suffix_on_every_command() -> None:
    """``--context 128K`` means 131,072 tokens wherever a context is asked."""
    plain = run("meta-llama/Llama-3.1-8B", "--context", "131072", "--json")
    typed = run("meta-llama/Llama-3.1-8B", "--context", "128K", "--json")
    assert plain.returncode == 0, plain.stderr
    assert typed.stdout == plain.stdout
    for command in ("fit", "sweep", "moe", "specdec", "formats", "train"):
        extra = ["--over", "batch"] if command == "sweep" else []
        model = "Qwen/Qwen3-30B-A3B" if command == "moe" else "meta-llama/Llama-3.1-8B"
        out = run(command, model, "--context", "128K", *extra)
        # train exits 1 when the run does not fit the GPUs: an answer, not a refusal
        assert out.returncode in (0, 1) and not out.stderr, (command, out.returncode, out.stderr)


@pytest.mark.parametrize(
    "argv",
    [
        ["meta-llama/Llama-3.1-8B", "--context", "nan"],
        ["meta-llama/Llama-3.1-8B", "--batch", "-4"],
        ["meta-llama/Llama-3.1-8B", "--mfu", "inf"],
        ["meta-llama/Llama-3.1-8B", "--gpu-mem", "-80GiB"],
        ["fit", "meta-llama/Llama-3.1-8B", "--gpu-memory-utilization", "1.5"],
        ["fit", "meta-llama/Llama-3.1-8B", "--tensor-parallel-size", "0"],
        ["specdec", "meta-llama/Llama-3.1-8B", "--draft-cost", "nan"],
        ["specdec", "meta-llama/Llama-3.1-8B", "--alpha", "-0.5"],
        ["scan", "--timeout", "nan"],
        ["scan", "--deadline", "-1"],
        ["scan", "--list-timeout", "inf"],
        ["image", "Qwen/Qwen3-VL-30B-A3B-Instruct", "--min-pixels", "-1"],
        ["train", "meta-llama/Llama-3.1-8B", "--lora-rank", "0"],
    ],
)
def test_bad_numbers_exit_2_naming_the_flag(argv: list[str]) -> None:
    out = run(*argv)
    assert out.returncode == 2, (argv, out.returncode, out.stderr)
    flag = next(a for a in argv if a.startswith("--"))
    assert flag in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
