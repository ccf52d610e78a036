"""The CLI end to end in a subprocess: outputs, exit codes, and one-line errors on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import raw

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "100"}


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", *args], capture_output=True, text=True, env=env or ENV, timeout=120
    )


def test_table_fits_100_columns() -> None:
    out = run(str(raw("Qwen/Qwen3-30B-A3B")))
    assert out.returncode == 0, out.stderr
    assert "attention.kv" in out.stdout and "GQA 32/4" in out.stdout
    assert max(len(line) for line in out.stdout.splitlines()) <= 100


def test_json_and_markdown() -> None:
    out = run(str(raw("deepseek-ai/DeepSeek-V3")), "--json")
    data = json.loads(out.stdout)
    assert data["slots"]["attention"]["kv"]["kind"] == "mla"
    md = run(str(raw("deepseek-ai/DeepSeek-V3")), "--markdown").stdout
    assert md.startswith("### ") and "| `attention.kv` |" in md


def test_catalog_offline_says_so() -> None:
    out = run("Qwen/Qwen3-30B-A3B")
    assert out.returncode == 0
    assert "catalog" in out.stdout


def test_against() -> None:
    out = run(
        str(raw("meta-llama/Meta-Llama-3-8B")), "--against", str(raw("meta-llama/Llama-3.1-8B")), "--json"
    )
    data = json.loads(out.stdout)
    changed = [
        f"{s}.{f}"
        for s, facets in data["slots"].items()
        for f, v in facets.items()
        if v["vs_against"] == "changed"
    ]
    assert changed == ["position.encoding"]


BAD = [
    ("missing.json", None, "no such file"),
    ("notjson.json", '{"hidden_size": 4096,', "invalid JSON"),
    ("array.json", "[1, 2]", "not a JSON object"),
    (
        "string_int.json",
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": "4096",
                "num_hidden_layers": 2,
                "vocab_size": 10,
                "num_attention_heads": 2,
            }
        ),
        "hidden_size",
    ),
    (
        "negative.json",
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": -8,
                "num_hidden_layers": 2,
                "vocab_size": 10,
                "num_attention_heads": 2,
            }
        ),
        "hidden_size",
    ),
    ("nan.json", '{"model_type": "llama", "hidden_size": NaN, "num_hidden_layers": 2}', "hidden_size"),
    (
        "layers.json",
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_hidden_layers": 3,
                "vocab_size": 10,
                "num_attention_heads": 2,
                "layer_types": ["full_attention"],
            }
        ),
        "layer_types",
    ),
]


@pytest.mark.parametrize(("name", "text", "needle"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, name: str, text: str | None, needle: str) -> None:
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    out = run(str(path))
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert needle in lines[0]
    assert (name in lines[0]) or ("missing" in name)


def test_unknown_repo_offline_exit_2() -> None:
    out = run("nobody/nothing-here")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1


def test_usage_error_exit_2() -> None:
    out = run(str(raw("openai-community/gpt2")), "--gpu", "nosuchgpu")
    assert out.returncode == 2 and "unknown GPU preset" in out.stderr


def test_help_lists_commands() -> None:
    out = run("--help")
    assert out.returncode == 0 and "diff" in out.stdout and "examples" in out.stdout
