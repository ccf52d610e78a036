"""``slotdiff lint`` end to end: formats, exit codes, policy, diff mode with git, start-up cost."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slotdiff.cli import main

from conftest import EXAMPLES, raw

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
SRC = str(Path(__file__).resolve().parent.parent / "src")
GOOD = EXAMPLES / "positive" / "SD110" / "uneven-gqa.json"  # Llama-3.2-1B, transformers-5 spelling
BAD = EXAMPLES / "negative" / "SD110" / "uneven-gqa.json"  # 32 heads over 5 KV heads (20:3)
TYPO = EXAMPLES / "negative" / "SD105" / "kv-heads-typo.json"  # SD105 at 20:3
LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>SD\d{3}) (?P<msg>.+)$")


def lint(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**ENV, "PYTHONPATH": SRC + os.pathsep + ENV.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", "lint", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def parsed(stdout: str) -> list[tuple[str, int, int, str]]:
    out = []
    for line in stdout.splitlines():
        m = LINE.match(line)
        assert m, f"not path:line:col: CODE message: {line!r}"
        out.append((m["path"], int(m["line"]), int(m["col"]), m["code"]))
    return out


def copy(src: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    return dest


# ------------------------------------------------------------------ output and exit codes


def test_clean_file_exits_0_and_prints_nothing() -> None:
    res = lint("--no-config", str(GOOD))
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""
    assert "no problems; checked 1 config" in res.stderr


def test_errors_exit_1_one_line_each_every_file_named() -> None:
    res = lint("--no-config", str(BAD), str(TYPO), str(GOOD))
    assert res.returncode == 1
    assert parsed(res.stdout) == [(str(BAD), 20, 3, "SD110"), (str(TYPO), 20, 3, "SD105")]


def test_warnings_alone_exit_0() -> None:
    res = lint("--no-config", str(raw("openai-community/gpt2")))
    assert res.returncode == 0
    assert [c for *_, c in parsed(res.stdout)] == ["SD203"]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--format", "xml", "x.json"], "invalid choice"),
        (["--select", "SD9", str(GOOD)], "names no rule"),
        (["--ignore", "XX1", str(GOOD)], "names no rule"),
        (["/no/such/config.json"], "no such file"),
        ([], "name config files"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args: list[str], needle: str) -> None:
    res = lint("--no-config", *args)
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and needle in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_broken_json_points_where_the_parser_stopped(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{\n  "model_type": "llama",\n  "hidden_size": 4096,\n}\n')
    res = lint("--no-config", str(bad))
    assert res.returncode == 1
    assert parsed(res.stdout) == [(str(bad), 4, 1, "SD101")]
    bad.write_bytes(b'{"model_type": "\xff"}')
    assert parsed(lint("--no-config", str(bad)).stdout) == [(str(bad), 1, 1, "SD101")]
    bad.write_text("[1, 2]")
    assert parsed(lint("--no-config", str(bad)).stdout) == [(str(bad), 1, 1, "SD101")]


def test_json_format(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--no-config", "--format", "json", str(BAD), str(GOOD)]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["files"] == 2 and data["exit_code"] == 1
    assert data["summary"] == {"error": 1, "warning": 0, "info": 0}
    (d,) = data["diagnostics"]
    assert (d["path"], d["line"], d["col"], d["code"]) == (str(BAD), 20, 3, "SD110")
    assert d["severity"] == "error" and d["name"] == "kv-heads-divisor" and d["key"] == "num_key_value_heads"


def test_sarif_format(capsys: pytest.CaptureFixture[str]) -> None:
    from slotdiff.lint.registry import table

    assert main(["lint", "--no-config", "--format", "sarif", str(BAD), str(TYPO)]) == 1
    sarif = json.loads(capsys.readouterr().out)
    assert sarif["version"] == "2.1.0"
    (run,) = sarif["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in table()]
    got = []
    for res in run["results"]:
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"] and res["level"] == "error"
        loc = res["locations"][0]["physicalLocation"]
        got.append((loc["artifactLocation"]["uri"], loc["region"]["startLine"], loc["region"]["startColumn"]))
    assert got == [(BAD.as_uri(), 20, 3), (TYPO.as_uri(), 20, 3)]


def test_github_format(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    copy(BAD, tmp_path / "a" / "config.json")
    copy(raw("openai-community/gpt2"), tmp_path / "gpt2_config.json")
    assert main(["lint", "--no-config", "--format", "github", "a/config.json", "gpt2_config.json"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("::error file=a/config.json,line=20,col=3,title=SD110 kv-heads-divisor::")
    assert lines[1].startswith("::warning file=gpt2_config.json,line=30,col=3,title=SD203 tensor-core-size::")


def test_folders_expand_to_model_configs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    copy(BAD, tmp_path / "m" / "config.json")
    copy(TYPO, tmp_path / "m" / "draft_config.json")
    (tmp_path / "m" / "tokenizer_config.json").write_text('{"model_max_length": "huge"}')
    (tmp_path / "m" / "generation_config.json").write_text("{}")
    (tmp_path / "m" / "weights.json").write_text("[]")
    (tmp_path / ".git").mkdir()
    copy(BAD, tmp_path / ".git" / "config.json")
    from slotdiff.lint.engine import iter_config_files

    assert iter_config_files(["."]) == [
        os.path.join(".", "m", "config.json"),
        os.path.join(".", "m", "draft_config.json"),
    ]


# ---------------------------------------------------------------------------- selection


def test_select_and_ignore_by_prefix() -> None:
    gpt2 = str(raw("openai-community/gpt2"))
    assert parsed(lint("--no-config", "--ignore", "SD2", gpt2).stdout) == []
    assert parsed(lint("--no-config", "--ignore", "SD2", "--select", "SD,SD203", gpt2).stdout)
    assert parsed(lint("--no-config", "--select", "SD1", str(BAD)).stdout)
    assert parsed(lint("--no-config", "--select", "SD105", str(BAD)).stdout) == []


# ------------------------------------------------------------------------------ policy


def test_policy_from_pyproject_upward(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "team-models"\n\n[tool.slotdiff]\nignore = ["SD110"]\n\n'
        '[tool.slotdiff.per-file-ignores]\n"legacy/*" = ["SD1"]\n'
    )
    copy(BAD, tmp_path / "configs" / "config.json")
    copy(TYPO, tmp_path / "legacy" / "old" / "config.json")
    copy(TYPO, tmp_path / "configs" / "typo_config.json")
    sub = tmp_path / "configs"
    res = lint("config.json", "typo_config.json", "../legacy/old/config.json", cwd=sub)
    assert parsed(res.stdout) == [("typo_config.json", 20, 3, "SD105")]
    assert lint("--no-config", "config.json", cwd=sub).returncode == 1  # the policy is what ignored it


def test_slotdiff_toml_wins_and_cli_overrides(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.slotdiff]\nignore = ["SD110"]\n')
    (tmp_path / ".slotdiff.toml").write_text('select = ["SD105"]\n')
    copy(BAD, tmp_path / "config.json")
    assert lint("config.json", cwd=tmp_path).returncode == 0  # .slotdiff.toml: only SD105 runs
    assert lint("--select", "SD1", "config.json", cwd=tmp_path).returncode == 1
    assert lint("--config", str(tmp_path / "pyproject.toml"), "config.json", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(
    "policy,needle",
    [
        ('[tool.slotdiff]\nselekt = ["SD1"]\n', "unknown policy key 'selekt'"),
        ("[tool.slotdiff.budgets]\nmax-kv = 10\n", "unknown policy key 'budgets.max-kv'"),
        ('[tool.slotdiff]\nignore = ["SD777"]\n', "names no rule"),
        ('[tool.slotdiff]\nforbid-changes = ["attention.kvv"]\n', "not a slot facet"),
        ('[tool.slotdiff.workload]\ngpu = "h1000"\n', "unknown GPU preset"),
        ('[tool.slotdiff.budgets]\nmax-total-params = "9 bananas"\n', "max-total-params"),
        ("[tool.slotdiff]\nselect = [\n", "not valid TOML"),
        ('[tool.slotdiff]\nbaseline = "nobody/nothing"\n', "baseline"),
    ],
)
def test_bad_policy_is_a_usage_error(tmp_path: Path, policy: str, needle: str) -> None:
    (tmp_path / "pyproject.toml").write_text(policy)
    copy(GOOD, tmp_path / "config.json")
    res = lint("config.json", cwd=tmp_path)
    assert res.returncode == 2, res.stdout
    assert needle in res.stderr and "pyproject.toml" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_quantities_in_budgets() -> None:
    from slotdiff.lint.policy import from_mapping

    p = from_mapping(
        {
            "budgets": {
                "max-kv-bytes-per-token": "160 KiB",
                "max-total-params": "9.5B",
                "max-active-params": 3e9,
            }
        },
        "test",
        Path("."),
    )
    assert p.budgets.max_kv_bytes_per_token == 163840
    assert p.budgets.max_total_params == 9_500_000_000 and p.budgets.max_active_params == 3_000_000_000


def test_baseline_from_the_catalog(tmp_path: Path) -> None:
    (tmp_path / ".slotdiff.toml").write_text(
        'baseline = "meta-llama/Llama-3.2-1B"\nforbid-changes = ["dims"]\n'
    )
    copy(raw("meta-llama/Llama-3.2-3B"), tmp_path / "config.json")
    res = lint("--format", "json", "config.json", cwd=tmp_path)
    data = json.loads(res.stdout)
    facets = {(d["code"], d["facet"]) for d in data["diagnostics"] if d["code"].startswith("SD31")}
    assert ("SD315", "dims") in facets  # 3B is wider and deeper than 1B
    assert all(d["base"] == "baseline meta-llama/Llama-3.2-1B" for d in data["diagnostics"] if d.get("base"))
    assert res.returncode == 1


# ----------------------------------------------------------------------------- diff mode


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git("init", "-q", cwd=tmp_path)
    git("config", "user.name", "slotdiff tests", cwd=tmp_path)
    git("config", "user.email", "tests@slotdiff.invalid", cwd=tmp_path)
    git("config", "commit.gpgsign", "false", cwd=tmp_path)
    copy(GOOD, tmp_path / "configs" / "small" / "config.json")
    copy(raw("Qwen/Qwen3-30B-A3B"), tmp_path / "configs" / "moe" / "config.json")
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "configs", cwd=tmp_path)
    return tmp_path


def edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=2) + "\n")


def test_diff_mode_reports_each_slot_change_with_its_own_delta(repo: Path) -> None:
    cfg = repo / "configs" / "moe" / "config.json"
    edit(cfg, num_key_value_heads=8, moe_intermediate_size=1024)
    res = lint("--no-config", "--format", "json", "--diff-base", "HEAD", "configs/moe/config.json", cwd=repo)
    assert res.returncode == 0, res.stderr
    diags = json.loads(res.stdout)["diagnostics"]
    changes = {d["facet"]: d for d in diags if d["code"] in ("SD310", "SD311")}
    # ffn.activation's width is the expert width when every layer is MoE: it resizes too,
    # with no key of its own, so its price is the whole change's.
    assert set(changes) == {"attention.kv", "ffn.experts", "ffn.activation"}
    assert changes["ffn.activation"]["deltas_of"] == "whole change"
    kv, ffn = changes["attention.kv"], changes["ffn.experts"]
    assert kv["code"] == "SD311" and kv["deltas_of"] == "this facet" and kv["base"] == "HEAD"
    assert ffn["deltas_of"] == "this facet"
    # 4 → 8 KV heads of width 128 on 48 layers, bf16: +2·48·4·128·2 bytes per token
    assert kv["deltas"]["kv_bytes_per_token"] == 2 * 48 * 4 * 128 * 2
    assert ffn["deltas"]["kv_bytes_per_token"] == 0 and ffn["deltas"]["params"] > 0
    text = json.loads(res.stdout)
    assert text["summary"]["error"] == 0
    lines = cfg.read_text().splitlines()
    at = next(i for i, text in enumerate(lines, 1) if text.startswith('  "num_key_value_heads"'))
    assert (kv["line"], kv["col"]) == (at, 3)


def test_diff_mode_forbidden_facet_is_an_error(repo: Path) -> None:
    (repo / ".slotdiff.toml").write_text('forbid-changes = ["attention.kv"]\n')
    edit(repo / "configs" / "small" / "config.json", num_key_value_heads=4)
    res = lint("--diff-base", "HEAD", "configs/small/config.json", cwd=repo)
    assert res.returncode == 1
    assert [c for *_, c in parsed(res.stdout)] == ["SD315"]
    assert "Δ KV/token -16 KiB" in res.stdout


def test_diff_mode_new_file_has_no_base(repo: Path) -> None:
    copy(GOOD, repo / "configs" / "new" / "config.json")
    res = lint("--no-config", "--diff-base", "HEAD", "configs/new/config.json", cwd=repo)
    assert res.returncode == 0 and res.stdout == ""


def test_diff_mode_without_paths_lints_changed_configs(repo: Path) -> None:
    edit(repo / "configs" / "small" / "config.json", num_hidden_layers=20)
    (repo / "notes.json").write_text("{}")
    res = lint("--no-config", "--diff-base", "HEAD", cwd=repo)
    assert parsed(res.stdout) == [(os.path.join("configs", "small", "config.json"), 19, 3, "SD312")]


def test_diff_mode_errors(repo: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    res = lint("--no-config", "--diff-base", "no-such-rev", "configs/small/config.json", cwd=repo)
    assert res.returncode == 2 and "unknown revision" in res.stderr
    outside = tmp_path_factory.mktemp("nogit")
    copy(GOOD, outside / "config.json")
    res = lint("--no-config", "--diff-base", "HEAD", "config.json", cwd=outside)
    assert res.returncode == 2 and "not inside a git repository" in res.stderr


def test_diff_mode_on_the_first_commit(tmp_path: Path) -> None:
    git("init", "-q", cwd=tmp_path)
    copy(GOOD, tmp_path / "config.json")
    res = lint("--no-config", "--diff-base", "HEAD", "config.json", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == ""


# --------------------------------------------------------------------------- start-up cost

PROBE = """
import sys
from slotdiff.cli import main
code = main(sys.argv[1:])
heavy = sorted(m for m in ("huggingface_hub", "deepdiff", "matplotlib", "rich", "torch", "transformers")
               if m in sys.modules)
print(code, ",".join(heavy))
"""


def _probe(*args: str, cwd: Path | None = None) -> tuple[int, list[str]]:
    env = {**ENV, "PYTHONPATH": SRC}
    res = subprocess.run(
        [sys.executable, "-c", PROBE, "lint", "-q", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=True,
    )
    code, _, heavy = res.stdout.strip().splitlines()[-1].partition(" ")
    return int(code), [m for m in heavy.split(",") if m]


def test_lint_imports_no_heavy_modules() -> None:
    code, heavy = _probe("--no-config", str(BAD), str(GOOD), str(raw("deepseek-ai/DeepSeek-V3")))
    assert code == 1 and heavy == []


def test_diff_mode_imports_no_heavy_modules(repo: Path) -> None:
    """The key diff is slotdiff's own (slots/keydiff.py, linear time): deepdiff is no longer
    a dependency, and diff mode loads nothing heavy."""
    edit(repo / "configs" / "small" / "config.json", num_key_value_heads=4)
    code, heavy = _probe("--no-config", "--diff-base", "HEAD", "configs/small/config.json", cwd=repo)
    assert code == 0 and heavy == []


def test_absurd_sizes_are_reported_not_crashed_on(tmp_path: Path) -> None:
    """A 1e308-wide model is refused by the key map's bounds (SD102), never priced; the hook
    still answers with diagnostics."""
    data = json.loads(GOOD.read_text())
    data.update(hidden_size=1e308, num_key_value_heads=2**40)
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(data))
    (tmp_path / ".slotdiff.toml").write_text(
        '[budgets]\nmax-total-params = "9B"\nmax-kv-bytes-per-token = "1 MiB"\n'
    )
    res = lint("config.json", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert {"SD102", "SD110"} <= {c for *_, c in parsed(res.stdout)}
    assert any("SD102 hidden_size" in line for line in res.stdout.splitlines())


def test_budget_messages_carry_figures_that_match_the_closed_forms(tmp_path: Path) -> None:
    """Llama-3.2-1B at 16 KV heads and a 10240-wide FFN, priced by hand (DESIGN.md's formulas)."""
    V, d, L, h, g, hd, f = 128256, 2048, 16, 32, 16, 64, 10240
    kv = 2 * L * g * hd * 2  # K and V, bf16
    params = V * d + L * (d * h * hd + 2 * d * g * hd + h * hd * d + 3 * d * f + 2 * d) + d  # tied head
    data = json.loads(GOOD.read_text())
    data.update(num_key_value_heads=g, intermediate_size=f)
    (tmp_path / "config.json").write_text(json.dumps(data, indent=2))
    (tmp_path / ".slotdiff.toml").write_text(
        '[budgets]\nmax-kv-bytes-per-token = "32 KiB"\nmax-total-params = "1B"\n'
    )
    res = lint("config.json", cwd=tmp_path)
    assert f"({kv:,} B, bfloat16) exceeds the budget of 32 KiB (32,768 B)" in res.stdout
    assert f"parameters ({params:,}) exceed the budget of 1.00B (1,000,000,000)" in res.stdout
