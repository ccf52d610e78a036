"""What a new user meets in the first ten minutes (issue 17), through the console script.

Every check runs ``python -m slotdiff`` in a subprocess, as a shell or a CI job would: lint
over a folder, errors said once, numbers typed with suffixes, exit codes under --help.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import raw

ROOT = Path(__file__).resolve().parents[1]
ENV = {k: v for k, v in os.environ.items() if k != "COLUMNS"} | {"HF_HUB_OFFLINE": "1"}


def run(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", *args],
        capture_output=True,
        text=True,
        env=ENV | env,
        cwd=cwd,
        timeout=180,
        check=False,
    )


# ------------------------------------------------------------------ 1. lint over a folder


@pytest.fixture
def checkpoint_tree(tmp_path: Path) -> Path:
    """A folder as a user has it: two checkpoints with their companion JSON files."""
    a, b = tmp_path / "models" / "qwen", tmp_path / "models" / "deep" / "gpt2"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    shutil.copyfile(raw("Qwen/Qwen3-8B"), a / "config.json")
    shutil.copyfile(raw("openai-community/gpt2"), b / "my-model.json")  # not named *config*
    (a / "tokenizer_config.json").write_text('{"model_max_length": 32768, "bos_token": null}')
    (a / "generation_config.json").write_text('{"bos_token_id": 1, "eos_token_id": 2}')
    (b / "model.safetensors.index.json").write_text('{"metadata": {}, "weight_map": {}}')
    hidden = tmp_path / "models" / ".cache"
    hidden.mkdir()
    shutil.copyfile(raw("Qwen/Qwen3-8B"), hidden / "config.json")
    return tmp_path / "models"


def test_lint_folder_checks_every_model_config_recursively(checkpoint_tree: Path) -> None:
    res = run("lint", "--no-config", "-v", str(checkpoint_tree))
    assert res.returncode in (0, 1), res.stderr
    checked = sorted(
        Path(line.split(" ")[3]).name for line in res.stderr.splitlines() if " checking " in line
    )
    skipped = sorted(
        Path(line.split(" ")[3]).name for line in res.stderr.splitlines() if " skipping " in line
    )
    # the content decides: my-model.json is a model config, tokenizer_config.json is not;
    # the hidden folder's copy is never walked into
    assert checked == ["config.json", "my-model.json"], res.stderr
    assert skipped == ["generation_config.json", "model.safetensors.index.json", "tokenizer_config.json"]
    assert "(has model_type)" in res.stderr
    summary = res.stderr.strip().splitlines()[-1]
    assert "checked 2 configs, skipped 3 JSON files that are not model configs" in summary, summary
    assert "tokenizer_config.json" in summary
    # the GPT-2 config's vocab (50,257) is not a multiple of 64: its file was really linted
    assert "my-model.json" in res.stdout and "SD203" in res.stdout


def test_lint_folder_without_model_configs_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "tokenizer_config.json").write_text('{"model_max_length": 8}')
    res = run("lint", "--no-config", str(tmp_path))
    assert res.returncode == 2, (res.returncode, res.stderr)
    line = res.stderr.strip()
    assert line.count("\n") == 0 and line.startswith(f"slotdiff: error: {tmp_path}: no model config")
    assert "tokenizer_config.json" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run("lint", "--no-config", str(empty))
    assert res.returncode == 2 and "no *.json file" in res.stderr, res.stderr
    assert "no problems" not in res.stderr


def test_lint_a_broken_config_json_in_a_folder_is_reported_not_skipped(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "llama",')
    res = run("lint", "--no-config", str(tmp_path))
    assert res.returncode == 1, res.stderr
    assert "config.json:1:" in res.stdout and "SD101" in res.stdout


# ------------------------------------------------------------------ 4. numbers with suffixes


def _parsers() -> dict[str, argparse.ArgumentParser]:
    from slotdiff import cli

    out = {}
    for name, module_name in {"": cli.DEFAULT_COMMAND, **cli.COMMANDS}.items():
        module = importlib.import_module(module_name)
        parser = argparse.ArgumentParser(prog=f"slotdiff {name}".strip())
        module.add_arguments(parser)
        out[name or "(analyze)"] = parser
    return out


def test_no_numeric_flag_bypasses_the_shared_parser() -> None:
    """Every flag with a type takes one of commands/options.py's (or a parser built on them)."""
    from slotdiff.commands import options

    shared = {
        options.COUNT,
        options.COUNT0,
        options.TOKENS,
        options.GIB,
        options.GIB0,
        options.POSITIVE,
        options.NONNEGATIVE,
        options.SHARE,
        options.FRACTION,
        options.RESERVE,
        options.SECONDS,
    }
    seen = 0
    for command, parser in _parsers().items():
        for action in parser._actions:
            if action.type is None or action.type in (str, Path):
                continue
            assert action.type not in (int, float), (command, action.option_strings)
            if action.type in shared:
                seen += 1
            else:  # a composite parser: points lists, WIDTHxHEIGHT, codes
                assert action.type.__module__.startswith("slotdiff."), (command, action.option_strings)
    assert seen > 40


def test_help_says_which_suffixes_each_count_and_size_flag_takes() -> None:
    res = run("fit", "--help")
    assert res.returncode == 0
    text = " ".join(res.stdout.split("options:", 1)[1].split())
    for flag in ("--context CONTEXT", "--batch BATCH", "--max-num-seqs MAX_NUM_SEQS", "--gpu-mem GIB"):
        after = text.split(flag, 1)[1][:300]
        assert "takes 8K = 8192" in after or "takes 80 (GiB), 80GiB" in after, (flag, after)
    sweep = " ".join(run("sweep", "--help").stdout.split())
    assert "each point takes 8K = 8192" in sweep


def test_suffixed_numbers_mean_the_same_as_plain_ones() -> None:
    """One flag of each kind, typed both ways: the JSON answers are identical."""
    pairs = [
        (["fit", "meta-llama/Llama-3.1-8B", "--json"], "--batch", "1K", "1024"),
        (["fit", "meta-llama/Llama-3.1-8B", "--json"], "--gpu-mem", "80GiB", "80"),
        (["fit", "meta-llama/Llama-3.1-8B", "--json"], "--gpu-mem", "96GB", str(96e9 / 2**30)),
        (["fit", "meta-llama/Llama-3.1-8B", "--engine", "vllm", "--json"], "--max-model-len", "32K", "32768"),
        (["train", "openai-community/gpt2", "--json"], "--context", "1k", "1000"),
        (["image", "Qwen/Qwen3-VL-30B-A3B-Instruct", "--json"], "--max-pixels", "1m", "1000000"),
        (["sweep", "openai-community/gpt2", "--over", "context", "--json"], "--points", "1K,2K", "1024,2048"),
    ]
    for argv, flag, typed, plain in pairs:
        a, b = run(*argv, flag, typed), run(*argv, flag, plain)
        assert a.returncode in (0, 1) and not a.stderr, (flag, typed, a.stderr)
        assert json.loads(a.stdout) == json.loads(b.stdout), (flag, typed, plain)


# ------------------------------------------------------------------ 5. errors said once


@pytest.mark.parametrize(
    "argv",
    [
        ["--bogus-flag", "x"],
        ["fit", "meta-llama/Llama-3.1-8B", "--gpus", "x"],
        ["lint"],
        ["sweep", "openai-community/gpt2", "--over", "batch", "--points", "1,x"],
        ["Qwen/Qwen3-8B", "--format", "yaml"],
    ],
)
def test_usage_errors_name_slotdiff_once(argv: list[str]) -> None:
    res = run(*argv)
    assert res.returncode == 2, res.stderr
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith("slotdiff: error: "), line
    assert line.count("slotdiff:") == 1 and "error: slotdiff" not in line, line


def test_unknown_model_suggests_the_closest_catalog_entries() -> None:
    res = run("Qwen/Qwen3-8C")
    assert res.returncode == 2
    assert "did you mean Qwen/Qwen3-8B?" in res.stderr, res.stderr
    res = run("fit", "meta-llama/Llama-3.1-8b-instruct")
    assert res.returncode == 2 and "did you mean meta-llama/Llama-3.1-8B?" in res.stderr, res.stderr
    far = run("nobody/nothing-like-it")
    assert far.returncode == 2 and "did you mean" not in far.stderr


@pytest.mark.parametrize("command", ["", "fit", "lint", "scan", "gpus", "sweep", "train", "catalog"])
def test_help_lists_every_exit_code(command: str) -> None:
    res = run(*([command] if command else []), "--help")
    assert res.returncode == 0
    block = res.stdout.split("exit codes:", 1)[1]
    codes = [line.split()[0] for line in block.strip().splitlines()]
    assert codes == ["0", "1", "2", "3", "130"], block
