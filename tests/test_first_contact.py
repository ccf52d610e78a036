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
    """Every flag with a type takes one of commands/argtypes.py's (or a parser built on them)."""
    from slotdiff.commands import argtypes as options

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
        options.COLUMNS,
        options.WHOLE,
        options.WHOLE0,
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


@pytest.mark.parametrize(
    "command", ["", "fit", "lint", "scan", "gpus", "sweep", "train", "catalog", "choose"]
)
def test_help_lists_every_exit_code(command: str) -> None:
    res = run(*([command] if command else []), "--help")
    assert res.returncode == 0
    block = res.stdout.split("exit codes:", 1)[1]
    codes = [line.split()[0] for line in block.strip().splitlines()]
    assert codes == ["0", "1", "2", "3", "130"], block


# ------------------------------------------------------------------ 7. files get the umask


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_written_files_get_the_users_umask(tmp_path: Path, umask: int, mode: int) -> None:
    """A fingerprint file and a scan-style report written by the CLI: 0666 less the umask."""
    code = (
        "import os, sys; os.umask(int(sys.argv[1], 8)); from slotdiff.cli import main; "
        "sys.exit(main(sys.argv[2:]))"
    )
    out = tmp_path / "fp"
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            oct(umask),
            "fingerprint",
            str(raw("Qwen/Qwen3-8B")),
            "--name",
            "Fam",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    written = out / "fam.json"
    assert written.stat().st_mode & 0o777 == mode, oct(written.stat().st_mode)
    # an existing file replaced keeps the rule (the temp file is renamed over it)
    written.chmod(0o600)
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            oct(umask),
            "fingerprint",
            str(raw("Qwen/Qwen3-8B")),
            "--name",
            "Fam",
            "--out",
            str(out),
            "--force",
        ],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0 and written.stat().st_mode & 0o777 == mode


# ------------------------------------------------------------------ 2. piped output


CATALOG_PATH = (
    "ai-dynamo/aiconfigurator:aic-core/src/aiconfigurator_core/model_configs/Qwen--Qwen3-8B_config.json"
)


def _one_line(text: str, *cells: str) -> bool:
    """Whether some line holds every cell, in order (a table row not wrapped)."""
    for line in text.splitlines():
        at = 0
        for c in cells:
            at = line.find(c, at)
            if at < 0:
                break
            at += len(c)
        else:
            return True
    return False


@pytest.mark.parametrize(
    ("how", "limit"), [((), 120), (("--width", "80"), 80), (("COLUMNS=80",), 80), (("--width", "160"), 160)]
)
def test_piped_analysis_keeps_rows_and_paths_whole(how: tuple[str, ...], limit: int) -> None:
    env = dict(h.split("=", 1) for h in how if "=" in h)
    res = run("Qwen/Qwen3-8B", *(h for h in how if "=" not in h), **env)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # the source path is longer than 80 columns: it stands whole on its own line, never cut
    assert CATALOG_PATH in out, out[:600]
    for line in out.splitlines():
        assert len(line) <= limit or CATALOG_PATH in line, (limit, line)
    # rows whose cells fit stay on one line at every width
    assert _one_line(out, "attention.range", "full causal", "full causal", "same", "same", "05")
    assert _one_line(out, "attention.qk_norm", "none", "QK-norm per head", "changed", "changed", "10")
    if limit >= 120:
        assert _one_line(out, "attention.kv", "MHA 12/12, head_dim 64", "GQA 32/8, head_dim 128", "changed")
        assert _one_line(out, "ffn.bias", "bias on the FFN matrices", "no bias", "changed", "same")
    # prose is broken at spaces only: no word of the page is split over two lines
    words = set(" ".join(run("Qwen/Qwen3-8B", "--width", "400").stdout.split()).split())
    for word in out.split():
        assert word in words, (limit, word)


@pytest.mark.parametrize("width", ["80", None])
def test_piped_deploy_tables_never_wrap_a_row(width: str | None) -> None:
    extra = ("--width", width) if width else ()
    res = run("sweep", "meta-llama/Llama-3.1-8B", "--over", "batch", *extra)
    assert res.returncode == 0, res.stderr
    first = [
        (line, line.split()[0].rstrip("*").replace(",", "") if line.split() else "")
        for line in res.stdout.splitlines()
    ]
    body = [line for line, cell in first if cell.isdigit()]  # one row per batch
    assert len(body) >= 10, res.stdout
    for line in body:  # batch, KV, weight FLOP, attn FLOP, bytes, memory, compute, binds, tokens/s
        cells = line.split()
        assert "memory" in cells or "compute" in cells, line
        assert line.count(" ms") + line.count(" µs") >= 2, line
    gpus = run("gpus", *extra).stdout
    for gid, name in (("a100-80gb", "NVIDIA A100 80GB Tensor Core GPU"), ("mi300x", "AMD Instinct MI300X")):
        assert _one_line(gpus, gid, name, "GiB", "TB/s"), gpus


# ------------------------------------------------------------------ 3. --json / --markdown everywhere


VISION = ROOT / "tests" / "fixtures" / "vision"
JSON_CASES = [
    (["Qwen/Qwen3-8B"], "report.schema.json"),
    (["fit", "meta-llama/Llama-3.1-70B", "--gpus", "8", "--context", "128K"], "fit.schema.json"),
    (["fit", "Qwen/Qwen3-30B-A3B", "--engine", "vllm"], "fit.schema.json"),
    (["fit", "meta-llama/Llama-3.1-70B", "--gpus", "3"], "fit.schema.json"),
    (
        ["sweep", "meta-llama/Llama-3.1-8B", "--over", "batch", "--vs", "deepseek-ai/DeepSeek-V3"],
        "sweep.schema.json",
    ),
    (["sweep", "google/gemma-2-9b", "--over", "context"], "sweep.schema.json"),
    (["moe", "deepseek-ai/DeepSeek-V3", "--batch", "32"], "moe.schema.json"),
    (["specdec", "deepseek-ai/DeepSeek-V3", "--gpus", "8"], "specdec.schema.json"),
    (["formats", "openai/gpt-oss-20b", "--gpu", "a100"], "formats-report.schema.json"),
    (["image", "Qwen/Qwen3-VL-30B-A3B-Instruct", "--image", "1920x1080"], "image.schema.json"),
    (["image", str(VISION / "defaults__mllama.json")], "image.schema.json"),
    (["latency", "meta-llama/Llama-3.1-8B", "--concurrency", "4", "--requests", "8"], "latency.schema.json"),
    (["gpus"], "gpus.schema.json"),
    (["catalog"], "catalog.schema.json"),
    (["train", "Qwen/Qwen3-30B-A3B", "--lora-rank", "16"], "train.schema.json"),
    (["diff", "meta-llama/Meta-Llama-3-8B", "deepseek-ai/DeepSeek-V3"], "diff.schema.json"),
    (["fingerprint", "Qwen/Qwen3-8B", "--name", "Qwen3 test"], "fingerprint.schema.json"),
    (
        ["choose", "--candidates", "Qwen/Qwen3-8B,meta-llama/Llama-3.1-70B", "--no-catalog"],
        "choose.schema.json",
    ),
    (
        ["lint", "--no-config", str(raw("openai-community/gpt2")), str(raw("Qwen/Qwen3-8B"))],
        "lint.schema.json",
    ),
]


@pytest.mark.parametrize(("argv", "schema"), JSON_CASES, ids=lambda x: x if isinstance(x, str) else x[0])
def test_every_command_writes_json_its_schema_accepts(argv: list[str], schema: str) -> None:
    import jsonschema

    res = run(*argv, "--json")
    assert res.returncode in (0, 1) and not res.stderr, res.stderr
    data = json.loads(res.stdout)
    spec = json.loads((ROOT / "schemas" / schema).read_text())
    jsonschema.Draft202012Validator.check_schema(spec)
    jsonschema.Draft202012Validator(spec, format_checker=jsonschema.FormatChecker()).validate(data)
    md = run(*argv, "--markdown")
    assert md.returncode in (0, 1) and not md.stderr, md.stderr
    assert md.stdout.startswith(("#", "### ", "## ")), md.stdout[:200]
    if argv[0] not in ("fit", "image"):  # their answers are lines, not tables
        assert "|---" in md.stdout, md.stdout[:400]


def test_every_command_has_json_and_markdown() -> None:
    """Each command's --help offers both, and --width (lint and scan keep their own --format
    beside them), as the README promises."""
    from slotdiff import cli

    readme = (ROOT / "README.md").read_text()
    assert "takes `--json` (each with a schema in `schemas/`),\n`--markdown` and `--width N`" in readme
    for name in ("", *cli.COMMANDS):
        text = run(*([name] if name else []), "--help").stdout
        assert "--json" in text and "--markdown" in text and "--width" in text, name
        if name == "lint":
            assert "--format {text,json,sarif,github,markdown}" in text


def test_markdown_escapes_what_markdown_would_read() -> None:
    md = run("sweep", "meta-llama/Llama-3.1-70B", "--over", "batch", "--gpu", "rtx-4090", "--markdown").stdout
    # rows that do not fit carry a '*': in prose it is escaped, in a cell it is plain text
    assert "\\* does not fit" in md and "| 1\\*" not in md


# ------------------------------------------------------------------ 6. progress on a terminal only


def _with_pty_stderr(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[int, str, bytes]:
    """Run with stderr on a pseudo-terminal (stdout piped): what a user's terminal would get."""
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, env=env, cwd=cwd
    )
    os.close(slave)
    err = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the child closed its end
                    break
                if not chunk:
                    break
                err += chunk
            elif proc.poll() is not None:
                break
        out = proc.stdout.read().decode() if proc.stdout else ""
        proc.wait(timeout=60)
    finally:
        os.close(master)
    return proc.returncode, out, err


def test_long_sweep_shows_progress_on_a_terminal_and_nothing_when_piped() -> None:
    points = ",".join(str(1024 * i) for i in range(1, 120))
    argv = ["sweep", "deepseek-ai/DeepSeek-V3", "--over", "context", "--points", points]
    piped = run(*argv)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    code, out, err = _with_pty_stderr([sys.executable, "-m", "slotdiff", *argv], ENV)
    assert code == 0
    assert b"context sweep of deepseek-ai/DeepSeek-V3" in err and b"\x1b[" in err, err[:200]
    assert out == piped.stdout  # the answer is the same; only stderr differs
    short = _with_pty_stderr(
        [sys.executable, "-m", "slotdiff", "sweep", "openai-community/gpt2", "--over", "batch"], ENV
    )
    assert short[0] == 0 and short[2] == b""  # a few points finish before a bar would show


def test_scan_progress_only_on_a_terminal(tmp_path: Path) -> None:
    from test_scan import LLAMA3, _env, _scan_cmd, config, make_families, repo

    from hubserver import HubServer

    for sub in ("", "again", "log"):  # three scans, each from a fresh state
        make_families(tmp_path / sub / "families")
    repos = [repo(f"org/m{i:02d}", config(LLAMA3, _name_or_path=f"m{i}"), hours=1 + i) for i in range(6)]
    with HubServer(repos, page_size=10) as hub:
        env = _env(hub, tmp_path)
        piped = subprocess.run(
            _scan_cmd(tmp_path, "--json"), env=env, capture_output=True, text=True, timeout=120
        )
        assert piped.returncode == 0, piped.stderr
        assert piped.stderr == ""  # no progress lines when stderr is not a terminal
        code, _, err = _with_pty_stderr(_scan_cmd(tmp_path / "again", "--json"), env)
        assert code == 0, err
        assert b"scan" in err and b"\x1b[" in err
        logged = subprocess.run(
            _scan_cmd(tmp_path / "log", "--json", "--progress-log"),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert logged.returncode == 0 and logged.stderr.count("org/m") == 6, logged.stderr


def test_conformance_report_progress_only_on_a_terminal() -> None:
    """tools/conformance.py's report compares every stored row; a subset shows the same bar."""
    code = (
        "import sys, json; sys.path.insert(0, 'tools'); import conformance as c; "
        "ref = c.read_json(c.REFERENCE); types = dict(sorted(ref['types'].items())[:40]); "
        "rs = c.evaluate({**ref, 'types': types}, progress=True); print(len(rs))"
    )
    argv = [sys.executable, "-c", code]
    piped = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300, check=False)
    assert piped.returncode == 0, piped.stderr
    assert int(piped.stdout) >= 32 and piped.stderr == ""
    rc, _, err = _with_pty_stderr(argv, ENV, cwd=ROOT)
    assert rc == 0 and b"conformance rows" in err


# ------------------------------------------------------------------ 7. no figure shown that is not there


def test_gpus_show_a_dash_and_say_why_for_a_missing_peak() -> None:
    out = run("gpus").stdout
    a100 = next(line for line in out.splitlines() if line.startswith("a100-80gb "))
    cells = a100.split()
    assert "—" in cells and "0" not in cells and "0 T" not in a100, a100
    # the dash is explained: the datasheet lists no fp8 peak for Ampere
    assert "— in fp8 or fp4: the part has no dense tensor-core peak" in " ".join(out.split())
    data = json.loads(run("gpus", "--json").stdout)
    a100_data = next(g for g in data["gpus"] if g["id"] == "a100-80gb")
    assert a100_data["peak_flops"]["fp8"] is None  # the source says none; the table says —


# ------------------------------------------------------------------ 8. the README's first screen


def _readme_blocks() -> list[tuple[str, str]]:
    """(language, text) of each fenced block of the README, in order."""
    out, lang, buf = [], None, []
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, buf = line[3:].strip(), []
            else:
                out.append((lang, "\n".join(buf)))
                lang = None
        elif lang is not None:
            buf.append(line)
    return out


def test_readme_first_screen_answers_the_three_uses() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = _readme_blocks()
    assert blocks[0][1].splitlines() == [
        "pip install . && HF_HUB_OFFLINE=1 slotdiff Qwen/Qwen3-30B-A3B",
        "pip install '.[test]' && python3 -m pytest",
    ]
    first_screen = text[: text.index("## Setting up")]
    assert len(first_screen.splitlines()) <= 60
    read, hook, scan = blocks[1], blocks[2], blocks[3]
    assert read[1].startswith("slotdiff ") and hook[0] == "yaml" and "slotdiff scan" in scan[1]
    for code in ("0", "1", "2", "130"):
        assert f"{code}:" in first_screen.split("Exit status", 1)[1]


def test_readme_hook_snippet_names_a_hook_the_manifest_has() -> None:
    import yaml

    manifest = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    ids = {h["id"] for h in manifest}
    snippet = next(t for lang, t in _readme_blocks() if lang == "yaml" and "hooks:" in t)
    config = yaml.safe_load(snippet)
    named = [h["id"] for r in config["repos"] for h in r["hooks"]]
    assert named and set(named) <= ids, (named, ids)
    assert "slotdiff-lint-diff" in ids  # the README names it in prose too


def test_readme_commands_run_as_pasted(tmp_path: Path) -> None:
    """The read-a-model command answers offline; the scan cron line's command parses."""
    read = _readme_blocks()[1][1].split()
    res = run(*read[1:])
    assert res.returncode == 0 and "Llama-3.1-8B" in res.stdout, res.stderr
    cron = _readme_blocks()[3][1].split("&&", 1)[1].split()
    assert cron[:2] == ["slotdiff", "scan"]
    usage = run(*cron[1:], "--help")
    assert usage.returncode == 0 and "--fail-on-new" in usage.stdout


def test_unknown_repo_on_the_hub_suggests_catalog_entries(tmp_path: Path) -> None:
    """Online, a repo the Hub does not have (404) gets the same "did you mean"."""
    from test_scan import _env

    from hubserver import HubServer

    with HubServer([], page_size=10) as hub:
        res = subprocess.run(
            [sys.executable, "-m", "slotdiff", "meta-llama/Llama-3.1-8b-instruct"],
            env=_env(hub, tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert res.returncode == 2, res.stderr
    line = res.stderr.strip()
    assert "not found" in line and "did you mean meta-llama/Llama-3.1-8B?" in line, line
    assert line.count("\n") == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["diff", "Qwen/Qwen3-VL-30B-A3B-Instruct", "Qwen/Qwen3.5-35B-A3B"],
        ["diff", "meta-llama/Meta-Llama-3-8B", "deepseek-ai/DeepSeek-V3"],
        ["Qwen/Qwen3-Next-80B-A3B-Thinking", "--against", "google/gemma-2-9b"],
    ],
)
def test_rich_tables_never_cut_a_cell(argv: list[str]) -> None:
    """Long config keys (text_config.linear_num_key_heads) and many columns at 80: no cell
    ends in '…' and every word of the wide layout is there whole."""
    whole = set(run(*argv, "--width", "1000").stdout.split())
    for width in ("80", "100", "120"):
        out = run(*argv, "--width", width).stdout
        assert "…" not in out, (width, [line for line in out.splitlines() if "…" in line][:3])
        assert set(out.split()) == whole, (width, set(out.split()) ^ whole)


@pytest.mark.parametrize("width", [40, 80])
def test_lint_explain_keeps_to_width_with_words_whole(width: int) -> None:
    """``lint --width N`` lays --explain out at N columns, splitting no word; --list-rules
    keeps one rule a line (a record, like a diagnostic)."""
    wide = run("lint", "--explain", "SD202", "--width", "10000").stdout
    out = run("lint", "--explain", "SD202", "--width", str(width)).stdout
    assert max(len(line) for line in out.splitlines()) <= width, out
    assert out.split() == wide.split()  # the same words in the same order, none cut
    rules = run("lint", "--list-rules", "--width", str(width)).stdout.splitlines()
    assert [line.split()[0] for line in rules[1:]] == [
        line.split()[0] for line in rules[1:] if line[:2] == "SD"
    ]


def test_lint_markdown_is_a_table_of_the_diagnostics(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(
        raw("meta-llama/Llama-3.2-1B")
        .read_text()
        .replace('"num_key_value_heads": 8', '"num_key_value_heads": 5')
    )
    res = run("lint", "--no-config", "--markdown", str(cfg))
    assert res.returncode == 1 and not res.stderr, res.stderr
    head, *rest = res.stdout.splitlines()
    assert head.startswith("### slotdiff lint: 1 error") and head.endswith("in 1 file")
    row = next(line for line in rest if "SD110" in line)
    assert row.startswith(f"| {cfg}:") and "| error |" in row
    assert (
        run("lint", "--no-config", "--json", str(cfg)).stdout
        == run("lint", "--no-config", "--format", "json", str(cfg)).stdout
    )
