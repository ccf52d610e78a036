"""Acceptance: the real pre-commit tool runs this repository's hooks on real configs.

The hooks are read from the real ``.pre-commit-hooks.yaml``. pre-commit installs them the way
a user's machine would: it clones a git repository and pip-installs slotdiff from it into a
fresh virtualenv (so a data folder missing from the wheel fails here). The repository it
clones is a snapshot of this working tree (tracked and untracked, not ignored), committed in
a temporary repository, so the tests see uncommitted work too. The project under test is a
temporary git repository holding published corpus configs and broken copies of them.

``pre-commit try-repo`` builds a fresh environment on every call (it keeps its own store in a
temporary folder); ``pre-commit run`` reuses one store (PRE_COMMIT_HOME) for the session, so
the slower try-repo is used twice and everything else goes through ``run``. Installing needs
PyPI for slotdiff's dependencies and for hatchling (CI has it); without it these tests fail
with that reason rather than pass unseen.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slotdiff.lint.engine import CONFIG_FILES, NOT_MODEL_CONFIGS

from conftest import raw

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / ".pre-commit-hooks.yaml"
LINE = re.compile(r"^(?P<path>\S+?):(?P<line>\d+):(?P<col>\d+): (?P<code>SD\d{3}) ", re.MULTILINE)
OFFLINE = re.compile(
    r"(NewConnectionError|Temporary failure in name resolution|Network is unreachable|"
    r"No matching distribution found|Could not find a version that satisfies|ConnectTimeout|ProxyError)"
)


def hooks() -> list[dict]:
    from pre_commit.clientlib import load_manifest

    return load_manifest(str(MANIFEST))


def precommit_exe() -> str:
    exe = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    if not Path(exe).exists():
        pytest.fail("pre-commit is not installed: pip install '.[test]'")
    return exe


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def init_repo(path: Path) -> None:
    git("init", "-q", cwd=path)
    git("config", "user.name", "slotdiff tests", cwd=path)
    git("config", "user.email", "tests@slotdiff.invalid", cwd=path)
    git("config", "commit.gpgsign", "false", cwd=path)


# ---------------------------------------------------------------------- the manifest


def test_manifest_is_what_pre_commit_reads() -> None:
    ids = [h["id"] for h in hooks()]
    assert ids == ["slotdiff-lint", "slotdiff-lint-diff"]
    for hook in hooks():
        assert hook["language"] == "python" and hook["entry"].startswith("slotdiff lint")
        assert hook["files"] == CONFIG_FILES and hook["exclude"] == NOT_MODEL_CONFIGS
    assert "--diff-base HEAD" in hooks()[1]["entry"] and hooks()[1]["verbose"]
    files, exclude = re.compile(CONFIG_FILES), re.compile(NOT_MODEL_CONFIGS)
    runs = [
        p
        for p in ["config.json", "m/config.json", "draft_config.json", "a/model-config-v2.json"]
        if files.search(p) and not exclude.search(p)
    ]
    assert len(runs) == 4
    for skipped in ["m/generation_config.json", "tokenizer_config.json", "configs.yaml", "tsconfig.json"]:
        assert not files.search(skipped) or exclude.search(skipped)


@pytest.mark.parametrize("hook", [h["id"] for h in hooks()])
def test_each_hook_entry_runs_on_the_examples(hook: str, tmp_path: Path) -> None:
    """Run each hook's entry as pre-commit would (entry + args + file names), without installing."""
    spec = next(h for h in hooks() if h["id"] == hook)
    examples = ROOT / "tests" / "example-files"
    init_repo(tmp_path)
    good = tmp_path / "good" / "config.json"
    bad = tmp_path / "bad" / "config.json"
    for dest, src in (
        (good, examples / "positive" / "SD105" / "kv-heads-typo.json"),
        (bad, examples / "negative" / "SD105" / "kv-heads-typo.json"),
    ):
        dest.parent.mkdir(parents=True)
        shutil.copyfile(src, dest)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "configs", cwd=tmp_path)
    cmd = spec["entry"].split()
    assert cmd[0] == "slotdiff"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}

    def run(*files: Path) -> subprocess.CompletedProcess[str]:
        argv = [
            sys.executable,
            "-m",
            "slotdiff",
            *cmd[1:],
            *spec["args"],
            *(str(f.relative_to(tmp_path)) for f in files),
        ]
        return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)

    assert run(good).returncode == 0
    res = run(good, bad)
    assert res.returncode == 1
    assert [m.group("path", "line", "col", "code") for m in LINE.finditer(res.stdout)] == [
        ("bad/config.json", "20", "3", "SD105")
    ]


# ------------------------------------------------------------------- pre-commit itself


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This working tree, committed as it is in a temporary repository: (path, revision)."""
    dest = tmp_path_factory.mktemp("hook-repo")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    init_repo(dest)
    git("add", "-A", cwd=dest)
    git("commit", "-qm", "snapshot of the working tree under test", cwd=dest)
    return dest, git("rev-parse", "HEAD", cwd=dest).strip()


@pytest.fixture(scope="session")
def precommit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def precommit(args: list[str], cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "PRE_COMMIT_COLOR": "never",
        "HF_HUB_OFFLINE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "SKIP": "",
    }
    env.pop("PYTHONPATH", None)  # the hook must work from its own installed environment
    res = subprocess.run(
        [precommit_exe(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    out = res.stdout + res.stderr
    if res.returncode not in (0, 1) or "An unexpected error has occurred" in out:
        if OFFLINE.search(out) or OFFLINE.search(_log(home)):
            pytest.fail("pre-commit could not install the hook: PyPI is not reachable")
        pytest.fail(f"pre-commit {' '.join(args)} failed ({res.returncode}):\n{out}\n{_log(home)}")
    return res


def _log(home: Path) -> str:
    log = home / "pre-commit.log"
    return log.read_text(errors="replace") if log.is_file() else ""


# Published configs (as copied into the corpus) and broken copies of them.
CLEAN = {
    "configs/llama-3.2-1b/config.json": "meta-llama/Llama-3.2-1B",
    "configs/qwen3-30b-a3b/config.json": "Qwen/Qwen3-30B-A3B",
    "configs/deepseek-v3/config.json": "deepseek-ai/DeepSeek-V3",
    "configs/gpt-oss-20b/config.json": "openai/gpt-oss-20b",
    "configs/mistral_7b_config.json": "mistralai/Mistral-7B-v0.1",
}


def broken_copies() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """path → (text, [(needle whose position the diagnostic has, code)])."""
    llama = raw("meta-llama/Llama-3.2-1B").read_text()
    qwen = raw("Qwen/Qwen3-30B-A3B").read_text()
    dsv3 = raw("deepseek-ai/DeepSeek-V3").read_text()
    return {
        "configs/llama-typo/config.json": (
            llama.replace('"num_key_value_heads"', '"num_key_value_head"'),
            [('"num_key_value_head"', "SD105")],
        ),
        "configs/llama-uneven/config.json": (
            llama.replace('"num_key_value_heads": 8', '"num_key_value_heads": 5'),
            [('"num_key_value_heads"', "SD110")],
        ),
        "configs/qwen3-too-few-experts/config.json": (
            qwen.replace('"num_experts": 128', '"num_experts": 6'),
            [('"num_experts_per_tok"', "SD112")],
        ),
        "configs/deepseek_mla_config.json": (
            re.sub(r'\n  "qk_rope_head_dim": 64,', "", dsv3),
            [('"kv_lora_rank"', "SD115")],
        ),
        "configs/llama-comma/config.json": (
            llama.replace('"vocab_size": 128256\n}', '"vocab_size": 128256,\n}'),
            [("\n}", "SD101")],
        ),
    }


def position(text: str, needle: str) -> tuple[str, str]:
    i = text.index(needle) + (1 if needle.startswith("\n") else 0)
    return str(text.count("\n", 0, i) + 1), str(i - (text.rfind("\n", 0, i) + 1) + 1)


@pytest.fixture
def project(tmp_path: Path, hook_repo: tuple[Path, str]) -> Path:
    """A team's repository: clean published configs committed, hooks configured."""
    init_repo(tmp_path)
    for dest, repo_id in CLEAN.items():
        (tmp_path / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(raw(repo_id), tmp_path / dest)
    # tokenizer_config.json matches *config*.json but is not a model config: the hook skips it.
    (tmp_path / "configs" / "llama-3.2-1b" / "tokenizer_config.json").write_text(
        '{"model_max_length": 131072}'
    )
    repo, rev = hook_repo
    hook_ids = "".join(f"      - id: {h['id']}\n" for h in hooks())
    (tmp_path / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {repo}\n    rev: {rev}\n    hooks:\n{hook_ids}"
    )
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "published configs", cwd=tmp_path)
    return tmp_path


def add_broken(project: Path) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    broken = broken_copies()
    for rel, (text, _) in broken.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    git("add", "-A", cwd=project)
    return broken


def reported(output: str) -> set[tuple[str, str, str, str]]:
    return {m.group("path", "line", "col", "code") for m in LINE.finditer(output)}


def test_try_repo_passes_on_clean_configs(
    project: Path, hook_repo: tuple[Path, str], precommit_home: Path
) -> None:
    repo, _ = hook_repo
    res = precommit(["try-repo", str(repo), "slotdiff-lint", "--all-files"], project, precommit_home)
    assert res.returncode == 0, res.stdout
    assert re.search(r"^slotdiff lint\.+Passed$", res.stdout, re.MULTILINE)


def test_try_repo_fails_on_broken_copies_with_codes_and_positions(
    project: Path, hook_repo: tuple[Path, str], precommit_home: Path
) -> None:
    repo, _ = hook_repo
    broken = add_broken(project)
    res = precommit(["try-repo", str(repo), "slotdiff-lint", "--all-files"], project, precommit_home)
    assert res.returncode == 1
    assert re.search(r"^slotdiff lint\.+Failed$", res.stdout, re.MULTILINE)
    want = {
        (rel, *position(text, needle), code)
        for rel, (text, marks) in broken.items()
        for needle, code in marks
    }
    errors = {r for r in reported(res.stdout) if r[3][2] in "13" and r[3] not in ("SD310", "SD311", "SD312")}
    assert errors == want
    assert not [r for r in reported(res.stdout) if r[0] in CLEAN and r[3].startswith("SD1")]


def test_diff_hook_reports_the_slot_change(project: Path, precommit_home: Path) -> None:
    cfg = project / "configs" / "llama-3.2-1b" / "config.json"
    text = cfg.read_text()
    cfg.write_text(text.replace('"num_key_value_heads": 8', '"num_key_value_heads": 4'))
    git("add", "-A", cwd=project)
    res = precommit(
        ["run", "slotdiff-lint-diff", "--files", str(cfg.relative_to(project))], project, precommit_home
    )
    assert res.returncode == 0, res.stdout  # a resize is a report, not an error
    line, col = position(text, '"num_key_value_heads"')
    assert ("configs/llama-3.2-1b/config.json", line, col, "SD311") in reported(res.stdout)
    assert "attention.kv resized vs HEAD" in res.stdout and "Δ KV/token -16 KiB" in res.stdout


def test_git_commit_is_blocked_by_a_forbidden_change_and_a_broken_config(
    project: Path, precommit_home: Path
) -> None:
    """The real flow: pre-commit install, git commit."""
    precommit(["install"], project, precommit_home)
    env = {**os.environ, "PRE_COMMIT_HOME": str(precommit_home), "PRE_COMMIT_COLOR": "never"}
    env.pop("PYTHONPATH", None)

    def commit() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", "commit", "-qm", "change"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    (project / ".slotdiff.toml").write_text('forbid-changes = ["attention.kv"]\n')
    cfg = project / "configs" / "qwen3-30b-a3b" / "config.json"
    data = json.loads(cfg.read_text())
    data["num_key_value_heads"] = 8
    cfg.write_text(json.dumps(data, indent=2) + "\n")
    git("add", "-A", cwd=project)
    res = commit()
    assert res.returncode != 0
    assert "SD315" in res.stdout + res.stderr
    (project / ".slotdiff.toml").write_text('forbid-changes = ["ffn.experts"]\n')
    git("add", "-A", cwd=project)
    res = commit()
    assert res.returncode == 0, res.stdout + res.stderr
    add_broken(project)
    res = commit()
    assert res.returncode != 0 and "SD105" in res.stdout + res.stderr


# ------------------------------------------------- a file name never becomes an option


def plant_option_named_file(project: Path) -> Path:
    """Issue 30.1's pull request: a policy that ignores everything, hidden in a file the hook's
    ``exclude`` skips, an empty file whose name is the option that would load it, and a config
    with no layers (an error the policy would silence)."""
    (project / "tokenizer_config.json").write_text('ignore = ["SD"]\n')
    (project / "--config=tokenizer_config.json").write_text("")
    bad = project / "configs" / "zero-layers" / "config.json"
    bad.parent.mkdir(parents=True)
    data = json.loads(raw("meta-llama/Llama-3.2-1B").read_text())
    bad.write_text(json.dumps({**data, "num_hidden_layers": 0}, indent=2) + "\n")
    git("add", "-A", cwd=project)
    return bad


@pytest.mark.parametrize("hook", [h["id"] for h in hooks()])
def test_a_file_named_like_an_option_is_linted_as_a_file(hook: str, tmp_path: Path) -> None:
    """Each entry as pre-commit builds it (entry + default args + file names, the option-named
    file first): the option-named file is a file (an empty config: SD101), the policy it names
    is never read, and the zero-layer config is an error."""
    spec = next(h for h in hooks() if h["id"] == hook)
    init_repo(tmp_path)
    (tmp_path / "seed.txt").write_text("x")
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "seed", cwd=tmp_path)
    bad = plant_option_named_file(tmp_path)
    files = ["--config=tokenizer_config.json", str(bad.relative_to(tmp_path))]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "slotdiff", *spec["entry"].split()[1:], *spec["args"], *files]
    res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 1, res.stdout + res.stderr
    codes = {(m.group("path"), m.group("code")) for m in LINE.finditer(res.stdout)}
    assert ("--config=tokenizer_config.json", "SD101") in codes
    assert any(p == "configs/zero-layers/config.json" and c.startswith("SD1") for p, c in codes), res.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["lint", "--pre-commit", "--config=tokenizer_config.json", "configs/zero-layers/config.json"],
        ["lint", "--pre-commit", "--ignore", "SD2", "configs/zero-layers/config.json"],
    ],
)
def test_the_hook_mode_refuses_file_names_without_a_separator(argv: list[str], tmp_path: Path) -> None:
    """Args of the user's own that forget the closing ``--``: exit 2 and one line, nothing linted
    and no policy read (the old documented form, args: [--ignore, SD2], lands here too)."""
    init_repo(tmp_path)
    plant_option_named_file(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "slotdiff", *argv], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "must follow '--'" in res.stderr


def test_everything_after_the_separator_is_a_file_even_another_separator(tmp_path: Path) -> None:
    """argparse alone drops a second ``--``; slotdiff keeps it as the file name it is."""
    (tmp_path / "--").write_text("{}")
    (tmp_path / "-v").write_text('{"model_type": "llama", "num_hidden_layers": 0}')
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(
        [sys.executable, "-m", "slotdiff", "lint", "--no-config", "--", "--", "-v"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    paths = {m.group("path") for m in LINE.finditer(res.stdout)}
    assert res.returncode == 1 and paths == {"--", "-v"}, res.stdout + res.stderr
    assert "checking" not in res.stderr  # -v is a file here, not --verbose


def test_pre_commit_itself_lints_the_option_named_file_as_a_file(project: Path, precommit_home: Path) -> None:
    """The real pre-commit, both hooks, on the planted pull request: it fails, and the report
    names the zero-layer config (the policy in tokenizer_config.json was never loaded)."""
    bad = plant_option_named_file(project)
    for hook in [h["id"] for h in hooks()]:
        res = precommit(["run", hook, "--all-files"], project, precommit_home)
        assert res.returncode == 1, res.stdout
        found = reported(res.stdout)
        rel = str(bad.relative_to(project))
        assert any(r[0] == rel and r[3].startswith("SD1") for r in found), res.stdout
        assert any(r[0] == "--config=tokenizer_config.json" and r[3] == "SD101" for r in found), res.stdout
