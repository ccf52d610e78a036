"""Issue 18's non-scan attacks, each held as a class, not as the one input that found it.

- git argv: whatever --diff-base says, git never reads it as an option, and every git call
  in the source ends options before revisions and paths;
- control characters: a path or message holding a newline, ESC, DEL, C1 or bidi marks
  never splits a lint record or reaches a terminal raw, in any format; a config's SGR is
  escaped on a colour terminal while slotdiff's own colours stay;
- regexes that check input are anchored at the very end (\\Z or fullmatch, never ``$``);
- lone surrogates and DEL/C1 anywhere in a config: every output format still writes, and
  every JSON output is strict JSON that reads back the same string;
- policy errors (NaN/inf budgets, a table of the wrong type, an empty select, a broken
  baseline) are exit 2 naming the file and key, never a silent default;
- impossible sizes (top-0 routing, zero experts, a zero or negative vision size, a [h, w]
  field given one item) are refused naming the key, in analysis and lint alike.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cli import main
from slotdiff.read.hub_errors import looks_like_repo_id

from conftest import FIXTURES, raw

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "slotdiff"
LLAMA = json.loads(raw("meta-llama/Llama-3.2-1B").read_text())
MIXTRAL = json.loads(raw("mistralai/Mixtral-8x7B-v0.1").read_text())
DEEPSEEK = json.loads(raw("deepseek-ai/DeepSeek-V3").read_text())
QWEN_VL = json.loads((FIXTURES / "vision" / "Qwen__Qwen3-VL-30B-A3B-Instruct.json").read_text())
KIMI_VL = json.loads((FIXTURES / "vision" / "moonshotai__Kimi-K3.json").read_text())
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- git argv


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git("init", "-q", cwd=tmp_path)
    git("config", "user.name", "t", cwd=tmp_path)
    git("config", "user.email", "t@slotdiff.invalid", cwd=tmp_path)
    git("config", "commit.gpgsign", "false", cwd=tmp_path)
    write(tmp_path / "config.json", LLAMA)
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "c", cwd=tmp_path)
    return tmp_path


OPTION_REVISIONS = [
    "--output={out}",
    "--output {out}",
    "-o{out}",
    "--ext-diff",
    "--upload-pack=touch {out}",
    "-",
    "--",
    "HEAD --output={out}",
    "HEAD\n--output={out}",
]


@pytest.mark.parametrize("rev", OPTION_REVISIONS)
@pytest.mark.parametrize("with_paths", [True, False])
def test_a_revision_is_never_an_option_to_git(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    rev: str,
    with_paths: bool,
) -> None:
    out = repo / "pwned"
    monkeypatch.chdir(repo)
    paths = ["config.json"] if with_paths else []
    code, _, err = run(capsys, "lint", "--no-config", f"--diff-base={rev.format(out=out)}", *paths)
    assert code == 2 and err.count("\n") == 1, err
    assert not out.exists()


BASES = {
    "lfs-pointer": "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 1123\n".format("4d" * 32),
    "broken-json": '{"model_type": "llama", "hidden_size": 2048,',
    "symlink": None,  # a symlink blob: git stores its target path, not a config
    "unbuildable": json.dumps({**LLAMA, "hidden_size": -1}),
}


@pytest.mark.parametrize("kind", sorted(BASES))
@pytest.mark.parametrize("frozen", [False, True])
def test_a_base_that_is_no_config_is_reported_never_skipped(tmp_path: Path, kind: str, frozen: bool) -> None:
    """Issue 30.2: lint --diff-base against a base that is an LFS pointer, a symlink blob,
    broken JSON or an impossible config: SD313 says so (a warning); with forbid-changes in
    the policy it is an SD315 error, so a frozen slot cannot change through such a base."""
    git("init", "-q", cwd=tmp_path)
    git("config", "user.name", "t", cwd=tmp_path)
    git("config", "user.email", "t@slotdiff.invalid", cwd=tmp_path)
    git("config", "commit.gpgsign", "false", cwd=tmp_path)
    cfg = tmp_path / "config.json"
    if kind == "symlink":
        write(tmp_path / "other.json", LLAMA)
        cfg.symlink_to("other.json")
    else:
        cfg.write_text(BASES[kind])
    if frozen:
        (tmp_path / ".slotdiff.toml").write_text('forbid-changes = ["attention.kv"]\n')
    git("add", "-A", cwd=tmp_path)
    git("commit", "-qm", "base", cwd=tmp_path)
    cfg.unlink()
    write(cfg, {**LLAMA, "num_key_value_heads": LLAMA["num_key_value_heads"] // 2})  # a frozen slot changes
    env = {"PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    res = subprocess.run(
        [sys.executable, "-m", "slotdiff", "lint", "--diff-base", "HEAD", "-v", "config.json"],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    codes = re.findall(r"^config\.json:\d+:\d+: (SD\d{3}) ", res.stdout, re.MULTILINE)
    assert "SD313" in codes and "the base at HEAD is" in res.stdout, (res.stdout, res.stderr)
    if frozen:
        assert res.returncode == 1 and "SD315" in codes and "cannot be checked" in res.stdout
    else:
        assert res.returncode == 0 and "SD315" not in codes and "warning" in res.stderr, res.stderr


def test_every_git_call_ends_options_before_user_text() -> None:
    """In every ``_git([...])`` list in the source, anything not a constant (a revision, a
    spec, a path) comes after ``--end-of-options`` (or ``--``)."""
    tree = ast.parse((SRC / "lint" / "diffmode.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "_git"]
    assert len(calls) >= 5
    for call in calls:
        argv = call.args[0]
        assert isinstance(argv, ast.List)
        ended = False
        for item in argv.elts:
            if isinstance(item, ast.Constant):
                ended = ended or item.value in ("--end-of-options", "--")
            else:
                assert ended, f"line {call.lineno}: {ast.unparse(item)} before --end-of-options"


@pytest.mark.parametrize("name", ["new config.json", "a b c/config.json", "new\tconfig.json"])
def test_a_new_file_with_a_space_under_diff_base(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    monkeypatch.chdir(repo)
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    write(repo / name, LLAMA)
    code, out, err = run(
        capsys, "lint", "--no-config", "--format", "json", "--diff-base", "HEAD", name, "config.json"
    )
    assert code == 0, err
    assert json.loads(out)["files"] == 2


# ----------------------------------------------------------------------------- control characters

HOSTILE_PATHS = [
    "a\n::error file=x::pwned/config.json",
    "b\r\x1b[2J\x07config.json",
    "c\u202eRTL\x85config.json",
]


@pytest.mark.parametrize("fmt", ["text", "github", "json", "sarif"])
def test_a_hostile_path_never_splits_a_lint_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    monkeypatch.chdir(tmp_path)
    names = []
    for i, name in enumerate(HOSTILE_PATHS):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, {**LLAMA, "num_key_value_heads": 3, f"bad\nkey{i}\x1b[31m": 1})  # one error each
        names.append(name)
    code, out, err = run(capsys, "lint", "--no-config", "--format", fmt, *names)
    assert code == 1, err
    assert not RAW_CONTROL.search(out.replace("\n", "").replace("\r", "")), out
    assert "\r" not in out
    if fmt in ("json", "sarif"):
        text = json.dumps(json.loads(out))
        for name in names:  # the real path survives, escaped by JSON
            assert json.dumps(name)[1:-1] in text
    else:
        lines = out.splitlines()
        assert lines and all(line.startswith("::" if fmt == "github" else ("a", "b", "c")) for line in lines)
        assert not any(line.startswith("::error file=x") for line in lines)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


# The second key forges the mark slotdiff puts on its own colour codes (core.printable).
SGR_CONFIG = {**LLAMA, "model_type": "llama", "evil\x1b[31mkey": 1, "forged\ue000\x1b[31mmark": 1}


@pytest.mark.parametrize(
    "argv",
    [["{F}"], ["{F}", "--markdown"], ["diff", "{F}", "{G}"], ["lint", "--no-config", "{F}"], ["fit", "{F}"]],
)
def test_config_sgr_never_reaches_a_colour_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    f = write(tmp_path / "config.json", SGR_CONFIG)
    g = write(tmp_path / "other.json", {**LLAMA, "model_type": "llama\x1b[42m\x1b]0;t\x07"})
    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    main([a.replace("{F}", str(f)).replace("{G}", str(g)) for a in argv])
    out = tty.getvalue()
    assert "\x1b[31m" not in out and "\x1b[42m" not in out and "\x1b]" not in out and "\x07" not in out
    assert "\ue001" not in out  # the style mark never leaks


def test_slotdiffs_own_colours_still_reach_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = write(tmp_path / "config.json", SGR_CONFIG)
    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    assert main([str(f)]) == 0
    assert "\x1b[" in tty.getvalue() and "\\x1b[31m" in tty.getvalue()


# ----------------------------------------------------------------------------- anchors


def _patterns() -> list[tuple[str, int, str]]:
    """Every string literal passed to re.compile / re.match / re.fullmatch / re.search in src."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and getattr(node.func.value, "id", "") == "re"
                and node.func.attr in ("compile", "match", "fullmatch", "search")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.append((path.relative_to(SRC).as_posix(), node.lineno, node.args[0].value))
    return found


def test_no_input_check_anchors_with_dollar() -> None:
    """``$`` also matches before a trailing newline ("org/model\\n"): input checks end with \\Z
    or use fullmatch."""
    patterns = _patterns()
    assert len(patterns) >= 10
    bad = [f"{f}:{n}: {p!r}" for f, n, p in patterns if re.search(r"(?<!\\)\$", p)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("tail", ["\n", "\r\n", "\x00", " ", "\u2028"])
def test_a_repo_id_with_a_trailing_character_is_not_a_repo_id(tail: str) -> None:
    assert looks_like_repo_id("org/model")
    assert not looks_like_repo_id("org/model" + tail)


@pytest.mark.parametrize("argv", [["scan", "--since", "7d\n"], ["image", "x.json", "--image", "1x1\n\n2"]])
def test_cli_values_with_trailing_newlines_are_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1


# ----------------------------------------------------------------------------- surrogates, DEL, C1

HOSTILE_STRINGS = ["\ud800", "x\udfffy", "llama\x7f", "a\x85b\x9b", "\u202eevil", "a\u2028b"]
EVERY_FORMAT = [
    ["{F}"],
    ["{F}", "--json"],
    ["{F}", "--markdown"],
    ["diff", "{F}", "{G}"],
    ["diff", "{F}", "{G}", "--json"],
    ["diff", "{F}", "{G}", "--markdown"],
    ["fingerprint", "{F}", "--stdout"],
    ["lint", "--no-config", "--format", "text", "{F}"],
    ["lint", "--no-config", "--format", "json", "{F}"],
    ["lint", "--no-config", "--format", "sarif", "{F}"],
    ["lint", "--no-config", "--format", "github", "{F}"],
    ["fit", "{F}", "--json"],
    ["train", "{F}", "--json"],
    ["formats", "{F}", "--json"],
]


def _hostile_config(s: str) -> dict[str, Any]:
    return {**LLAMA, "model_type": "llama" + s, "architectures": [s], f"k{s}": s, "nested": {s: [s]}}


@pytest.mark.parametrize("s", HOSTILE_STRINGS, ids=ascii)
def test_every_format_writes_and_json_is_strict(tmp_path: Path, s: str) -> None:
    """Through the installed CLI (real UTF-8 streams): no crash, no raw control character,
    JSON that parses with a strict parser and gives back the config's own strings."""
    f = tmp_path / "c.json"
    f.write_text(json.dumps(_hostile_config(s)), encoding="ascii")  # "\\ud800" escapes in the file
    g = write(tmp_path / "g.json", LLAMA)
    env = {"PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    for argv in EVERY_FORMAT:
        cmd = [a.replace("{F}", str(f)).replace("{G}", str(g)) for a in argv]
        res = subprocess.run(
            [sys.executable, "-m", "slotdiff", *cmd], capture_output=True, env=env, timeout=120
        )
        out = res.stdout.decode("utf-8")  # strict: undecodable bytes fail here
        err = res.stderr.decode("utf-8")
        assert res.returncode in (0, 1, 2) and "internal error" not in err and "Traceback" not in err, (
            cmd,
            err,
        )
        assert not RAW_CONTROL.search(out.replace("\n", "")), (cmd, out[:300])
        if any(a in argv for a in ("--json", "json", "sarif", "--stdout")) and res.returncode in (0, 1):
            data = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
            if argv[0] == "{F}":
                assert data["model_type"].endswith(s) or s in json.dumps(data)


def test_the_json_writer_escapes_what_json_leaves_raw() -> None:
    from slotdiff.core.jsonout import dumps

    for s in [*HOSTILE_STRINGS, "\x00\x1f", "plain é 漢字"]:
        text = dumps({"k": s, s: [s]})
        assert not RAW_CONTROL.search(text)
        assert json.loads(text) == {"k": s, s: [s]}
    assert "é" in dumps("é") and "漢" in dumps("漢")  # readable where it is safe
    with pytest.raises(ValueError):
        dumps(float("nan"))


def test_every_json_output_goes_through_the_one_writer() -> None:
    """json.dumps for output lives only in core/jsonout.py; the few other calls are
    internal (ids, round trips, the state file with ensure_ascii) and listed here."""
    internal = {
        "slots/classify.py",
        "lint/diffmode.py",
        "render/diff.py",
        "scan/state.py",
        "scan/records.py",  # the journal lines, read back by the scan itself
        "scan/verdict.py",
        "scan/examine.py",  # design_key: a hash of the config, never written
        "scan/sizes.py",  # a round trip to JSON-able values, not output
        "analysis/analyze.py",
        "core/jsonout.py",
        "read/jsonpos.py",  # named in a docstring
        "read/hub_weights.py",  # its own cache of a repo's tensor index, read back by itself
    }
    users = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if "json.dumps(" in p.read_text()}
    assert users <= internal, sorted(users - internal)


# ----------------------------------------------------------------------------- policy


POLICIES = {
    "budget-nan": ("[tool.slotdiff.budgets]\nmax-decode-ms = nan\n", "budgets.max-decode-ms"),
    "budget-inf": ("[tool.slotdiff.budgets]\nmax-total-params = inf\n", "budgets.max-total-params"),
    "budget-neg-inf": ("[tool.slotdiff.budgets]\nmax-active-params = -inf\n", "budgets.max-active-params"),
    "kv-nan-nested": ("[tool.slotdiff.workload]\nbatch = nan\n", "workload.batch"),
    "array-of-tables": ('[[tool.slotdiff]]\nselect = ["SD"]\n', "array of tables"),
    "tool-not-a-table": ("tool = 3  # slotdiff\n", "tool is an integer"),
    "slotdiff-not-a-table": ("[tool]\nslotdiff = 5\n", "tool.slotdiff is an integer"),
    "inline-wrong-type": ('tool = { slotdiff = { select = "SD1" } }\n', "select"),
    "broken-toml": ("[tool.slotdiff\nselect = 1\n", "not valid TOML"),
    "empty-select": ("[tool.slotdiff]\nselect = []\n", "select"),
    "wrong-type": ('[tool.slotdiff]\nselect = "SD1"\n', "select"),
    "baseline-truncated": ('[tool.slotdiff]\nbaseline = "trunc.json"\n', "baseline"),
    "baseline-invalid": ('[tool.slotdiff]\nbaseline = "invalid.json"\n', "baseline"),
    "baseline-array": ('[tool.slotdiff]\nbaseline = "array.json"\n', "baseline"),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_broken_policy_is_exit_2_naming_file_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    body, needle = POLICIES[name]
    (tmp_path / "pyproject.toml").write_text(body)
    (tmp_path / "trunc.json").write_text('{"model_type": "llama", "hidden_size": ')
    write(tmp_path / "invalid.json", {**LLAMA, "hidden_size": -5})
    write(tmp_path / "array.json", [1, 2])
    write(tmp_path / "config.json", LLAMA)
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "lint", "config.json")
    assert code == 2, err
    assert "pyproject.toml" in err and needle in err and err.count("\n") == 1, err


@pytest.mark.parametrize("select", ["", ",", " , "])
def test_an_empty_select_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], select: str) -> None:
    f = write(tmp_path / "config.json", {**LLAMA, "num_key_value_heads": 3})
    code, _, err = run(capsys, "lint", "--no-config", "--select", select, str(f))
    assert code == 2 and "--select" in err


def test_a_pyproject_that_only_depends_on_slotdiff_is_not_a_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["slotdiff"]\n')
    write(tmp_path / "config.json", LLAMA)
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "lint", "config.json")[0] == 0


# ----------------------------------------------------------------------------- impossible sizes


def _with(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(base))
    node = data
    *parents, last = path.split(".")
    for p in parents:
        node = node[p]
    node[last] = value
    return data


IMPOSSIBLE = [
    ("top-0-mixtral", MIXTRAL, "num_experts_per_tok", 0),
    ("top-0-deepseek", DEEPSEEK, "num_experts_per_tok", 0),
    ("zero-routed-experts", DEEPSEEK, "n_routed_experts", 0),
    ("zero-local-experts", MIXTRAL, "num_local_experts", 0),
    ("vision-width-negative", QWEN_VL, "vision_config.hidden_size", -1),
    ("vision-width-zero", QWEN_VL, "vision_config.hidden_size", 0),
    ("vision-depth-zero", QWEN_VL, "vision_config.depth", 0),
    ("vision-heads-negative", QWEN_VL, "vision_config.num_heads", -16),
    ("patch-zero", QWEN_VL, "vision_config.patch_size", 0),
    ("merge-zero", QWEN_VL, "vision_config.spatial_merge_size", 0),
    ("merge-kernel-one-item", KIMI_VL, "vision_config.merge_kernel_size", [2]),
    ("merge-kernel-zero", KIMI_VL, "vision_config.merge_kernel_size", [0, 0]),
    ("vision-width-huge", QWEN_VL, "vision_config.hidden_size", 2**41),
    # issue 30.7: 32 query heads over 7 KV heads (transformers builds it, its first forward fails)
    ("kv-heads-7-of-32", LLAMA, "num_key_value_heads", 7),
    ("kv-heads-3-of-32-mixtral", MIXTRAL, "num_key_value_heads", 3),
    # float sizes: transformers' config classes refuse them (StrictDataclassFieldValidationError)
    ("hidden-float", LLAMA, "hidden_size", 2048.0),
    ("heads-float", LLAMA, "num_attention_heads", 32.0),
    ("layers-float", MIXTRAL, "num_hidden_layers", 32.0),
    ("experts-float", MIXTRAL, "num_local_experts", 8.0),
]


@pytest.mark.parametrize(("name", "base", "key", "value"), IMPOSSIBLE, ids=[c[0] for c in IMPOSSIBLE])
def test_impossible_sizes_are_refused_in_analysis_and_lint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, base: dict[str, Any], key: str, value: Any
) -> None:
    f = write(tmp_path / "config.json", _with(base, key, value))
    every = ([str(f)], [str(f), "--json"], ["image", str(f), "--image", "1024x1024"], ["moe", str(f)])
    for argv in (*every, ["fit", str(f)], ["fit", str(f), "--json"], ["sweep", str(f), "--over", "batch"]):
        code, out, err = run(capsys, *argv)
        assert "FITS" not in out
        if argv[0] == "image" and "vision" not in key:
            continue
        if argv[0] == "moe" and "expert" not in key:
            continue
        assert code == 2, (argv, err)
        assert key in err and err.count("\n") == 1, err
    code, out, _ = run(capsys, "lint", "--no-config", "--format", "json", str(f))
    assert code == 1
    errors = [d for d in json.loads(out)["diagnostics"] if d["severity"] == "error"]
    assert any(d["key"] == key for d in errors), errors


def test_the_python_api_refuses_a_one_item_merge_kernel() -> None:
    from slotdiff.analysis.analyze import analyze
    from slotdiff.core.errors import SlotdiffError

    with pytest.raises(SlotdiffError) as info:
        analyze(_with(KIMI_VL, "vision_config.merge_kernel_size", [2]))
    assert info.value.key == "vision_config.merge_kernel_size"


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--min-pixels", "-1"], "--min-pixels"),
        (["--min-pixels", "nan"], "--min-pixels"),
        (["--max-pixels", "0"], "--max-pixels"),
        (["--min-pixels", "9000000", "--max-pixels", "1000"], "min_pixels"),
        (["--min-pixels", "99999999999999999999"], "min_pixels"),
    ],
)
def test_image_pixel_settings_that_cannot_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], needle: str
) -> None:
    f = write(tmp_path / "config.json", QWEN_VL)
    code, _, err = run(capsys, "image", str(f), "--image", "1024x1024", *flags)
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_a_pixel_setting_the_processor_lacks_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    llava = json.loads(raw("llava-hf/llava-1.5-7b-hf").read_text())
    f = write(tmp_path / "config.json", llava)
    code, _, err = run(capsys, "image", str(f), "--image", "336x336", "--max-pixels", "1000000")
    assert code == 2 and "max_pixels" in err and "internal error" not in err


# ----------------------------------------------------------------------------- numbers in files


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("field", ["memory_bytes", "hbm_bandwidth_bytes_per_s", "interconnect_bytes_per_s"])
def test_a_gpu_file_with_a_non_finite_number_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str
) -> None:
    presets = json.loads((ROOT / "schemas" / "gpus.json").read_text())
    gpu = {**presets["gpus"][0], "id": "mine", field: "@@"}
    doc = {**{k: v for k, v in presets.items() if k != "gpus"}, "gpus": [gpu]}
    gpus = tmp_path / "gpus.json"
    gpus.write_text(json.dumps(doc).replace('"@@"', value))
    f = write(tmp_path / "config.json", LLAMA)
    code, _, err = run(capsys, str(f), "--gpu", "mine", "--gpu-file", str(gpus), "--json")
    assert code == 2 and "--gpu-file" in err and "finite" in err, err
