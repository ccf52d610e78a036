"""Failures the command sweep (tools/sweep_commands.py) found, each held as its class with the
real config that exposed it: bad input is one line and exit 2, a good config a finite number."""

from __future__ import annotations

import json

import pytest

from slotdiff.cli import main
from slotdiff.core.errors import SlotdiffError
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.kvspec import kv_layout
from slotdiff.read.source import from_file
from slotdiff.schema.build import build

from conftest import DEFAULTS


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------- a recurrent page that sized to 0 bytes


def test_lightning_attention_state_page_is_vllms(capsys: pytest.CaptureFixture[str]) -> None:
    """MiniMax-01's lightning layers sized as a gated DeltaNet's keys read 0 bytes, so vLLM's
    block size came out 0 and ``fit --engine vllm`` divided by it. vLLM's
    ``MambaStateShapeCalculator.linear_attention_state_shape`` is (heads // TP, head_dim,
    head_dim) in the model dtype (``linear_attention_state_dtype``, bf16 here): 32 · 128 · 128 ·
    2 = 1 MiB. An attention token is 2 · 8 KV heads · 128 · 2 = 4 KiB, so the block is raised to
    16 · ceil(1 MiB / (16 · 4 KiB)) = 256 tokens, and one request at 131,072 tokens needs 16
    attention layers × 512 blocks × 1 MiB + 16 lightning layers × 1 MiB."""
    # vLLM serves MiniMax-Text-01 until 0.23 (its registry's _PREVIOUSLY_SUPPORTED_MODELS), and
    # keeps one page a request before 0.26's prefix caching for hybrids: 0.22.1 here.
    code, out, err = run(
        capsys,
        "fit",
        str(DEFAULTS / "minimax.json"),
        *("--engine", "vllm", "--engine-version", "0.22.1"),
        "--json",
    )
    assert code in (0, 1), err
    engine = json.loads(out)["engine"]
    assert engine["block_size"] == 256
    assert engine["needed_bytes_for_max_model_len"] == 16 * 512 * 2**20 + 16 * 2**20


def test_lightning_attention_page_splits_over_tp(capsys: pytest.CaptureFixture[str]) -> None:
    """At TP=8 a rank holds 32 // 8 = 4 lightning heads (128 KiB) and 8 // 8 = 1 KV head (512 B
    a token): block 16 · ceil(128 Ki / (16 · 512)) = 256 tokens again."""
    code, out, err = run(
        capsys,
        "fit",
        str(DEFAULTS / "minimax.json"),
        *("--engine", "vllm", "--engine-version", "0.22.1", "-tp", "8", "--json"),
    )
    assert code in (0, 1), err
    engine = json.loads(out)["engine"]
    assert engine["block_size"] == 256
    assert engine["needed_bytes_for_max_model_len"] == 16 * 512 * 256 * 512 + 16 * 4 * 128 * 128 * 2


def test_a_page_that_sizes_to_zero_is_refused_not_divided_by() -> None:
    """The same class on a pure-recurrent model, where no block size is raised: Mamba's
    defaults (2 · 768 = 1,536 inner channels) spread over 2,048 TP ranks leave each rank 0
    channels, so its page is 0 bytes, and the pool's ``available // page`` divided by it."""
    arch = build(from_file(DEFAULTS / "mamba.json"))
    assert (arch.get("ssm_inner") or 2 * arch.get("d_model")) == 1536
    with pytest.raises(SlotdiffError, match="sizes to 0 bytes"):
        kv_layout(arch, arch.layers, 2048, "bfloat16", parse_version("0.10.1"), None, 16)


def test_a_release_that_no_longer_serves_the_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM's registry says MiniMaxText01ForCausalLM was served until 0.23.0 and refuses it
    after: at the default release (0.34) slotdiff refuses too, naming the last one."""
    code, _, err = run(capsys, "fit", str(DEFAULTS / "minimax.json"), "--engine", "vllm")
    assert code == 2
    assert "does not serve minimax models (served until 0.23.0)" in err
    later = ("--engine", "vllm", "--engine-version", "0.23.1")
    code, _, err = run(capsys, "fit", str(DEFAULTS / "minimax.json"), *later)
    assert code in (0, 1), err
