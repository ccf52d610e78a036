"""The key diff (slots/keydiff.py) and the commands on it: right, and linear in the input.

Issue 30.4: deepdiff aligned arrays with difflib, quadratic in their length: a 16,384-entry
``layer_types`` (inside the documented cap) took 13.8 s in ``diff`` and ``lint --diff-base``,
and ``"x": [0] * 64000`` ran past a minute. The expected differences below are written by
hand; the timing tests run the console script on inputs at the caps with a bound far above
the linear time (under 1 s of CPU, measured in process) and far below the quadratic one.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cli import main
from slotdiff.slots.differ import key_changes
from slotdiff.slots.keydiff import Difference, differences, dotted

from conftest import raw

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
LLAMA = json.loads(raw("meta-llama/Meta-Llama-3-8B").read_text())


def diffs(a: Any, b: Any) -> list[tuple[str, str, Any, Any]]:
    return sorted((dotted(d.path), d.change, d.old, d.new) for d in differences(a, b))


def test_objects_key_by_key() -> None:
    a = {"h": 1, "gone": 2, "rope": {"factor": 8.0, "type": "llama3"}}
    b = {"h": 2, "rope": {"factor": 16.0, "type": "llama3"}, "new": [1]}
    assert diffs(a, b) == [
        ("gone", "removed", 2, None),
        ("h", "changed", 1, 2),
        ("new", "added", None, [1]),
        ("rope.factor", "changed", 8.0, 16.0),
    ]


def test_json_types_differ_even_when_python_calls_them_equal() -> None:
    """1, 1.0 and true are three JSON values; NaN written on both sides is no change."""
    assert diffs({"x": 1}, {"x": 1.0}) == [("x", "changed", 1, 1.0)]
    assert diffs({"x": 1}, {"x": True}) == [("x", "changed", 1, True)]
    assert diffs({"x": math.nan}, {"x": math.nan}) == []
    assert diffs({"x": {"a": 1}}, {"x": [1]}) == [("x", "changed", {"a": 1}, [1])]


def test_arrays_position_by_position_with_runs() -> None:
    a = ["full"] * 8
    b = ["full", "sliding", "sliding", "sliding", "full", "full", "sliding", "full", "extra", "more"]
    assert diffs({"t": a}, {"t": b}) == [
        ("t[1:4]", "changed", ["full"] * 3, ["sliding"] * 3),
        ("t[6]", "changed", "full", "sliding"),
        ("t[8:10]", "added", None, ["extra", "more"]),
    ]
    assert diffs({"t": [1, 2, 3]}, {"t": [1]}) == [("t[1:3]", "removed", [2, 3], None)]
    assert diffs({"t": [1, 2]}, {"t": [1]}) == [("t[1]", "removed", 2, None)]


def test_nested_containers_in_arrays_are_compared_inside() -> None:
    a = {"experts": [{"d": 1, "k": 2}, {"d": 1}]}
    b = {"experts": [{"d": 1, "k": 3}, {"d": 1}]}
    assert diffs(a, b) == [("experts[0].k", "changed", 2, 3)]


def test_key_changes_attribute_array_items_to_their_key() -> None:
    """Through differ.key_changes: an array's changes are ``changed`` at their positions and
    belong to the array's key (layer_types feeds the layer pattern)."""
    a = {**LLAMA, "layer_types": ["full_attention"] * 32}
    b = {**LLAMA, "layer_types": ["full_attention"] * 30 + ["sliding_attention"] * 2, "extra": [1, 2]}
    got = [(k.path, k.change) for k in key_changes(a, b)]
    assert got == [("extra", "added"), ("layer_types[30:32]", "changed")]


def test_a_hand_built_worst_case_is_visited_once() -> None:
    """Every position changed and a tail: one Difference per run, however long the array."""
    n = 64_000
    out = list(differences({"x": [0] * n}, {"x": [1] * n + [2]}))
    assert out == [
        Difference(("x", slice(0, n)), "changed", [0] * n, [1] * n),
        Difference(("x", n), "added", None, 2),
    ]


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The console script's module in a fresh interpreter."""
    cmd = [sys.executable, "-m", "slotdiff", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300)


def _cpu(argv: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> float:
    """CPU seconds of the same run in process (``cli.main``, output captured): the process's
    own CPU, which a machine loaded by other work does not inflate as it does wall time."""
    monkeypatch.chdir(cwd)
    started = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(argv)
    return time.process_time() - started


def _repo(tmp: Path, base: dict[str, Any], new: dict[str, Any]) -> None:
    for args in (
        ["init", "-q"],
        ["config", "user.name", "t"],
        ["config", "user.email", "t@slotdiff.invalid"],
    ):
        subprocess.run(["git", *args], cwd=tmp, check=True)
    (tmp / "config.json").write_text(json.dumps(base))
    subprocess.run(["git", "add", "-A"], cwd=tmp, check=True)
    subprocess.run(["git", "-c", "commit.gpgsign=false", "commit", "-qm", "base"], cwd=tmp, check=True)
    (tmp / "config.json").write_text(json.dumps(new))


HALF = 16_384 // 2
CASES = {
    # the two inputs: a layer list at the 16,384-layer cap, alternating against its
    # shifted copy (every position changed, the alignment's worst case), and 64,000 zeros
    "layer-types-16384": (
        {
            **LLAMA,
            "num_hidden_layers": 16_384,
            "sliding_window": 4096,
            "layer_types": ["full_attention", "sliding_attention"] * HALF,
        },
        {
            **LLAMA,
            "num_hidden_layers": 16_384,
            "sliding_window": 4096,
            "layer_types": ["sliding_attention", "full_attention"] * HALF,
        },
    ),
    "zeros-64000": ({**LLAMA, "x": [0] * 64_000}, {**LLAMA, "x": [0] * 63_999 + [1]}),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("command", ["diff", "diff-json", "lint-diff-base"])
def test_diff_and_lint_diff_base_stay_linear_at_the_caps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str, command: str
) -> None:
    base, new = CASES[case]
    if command == "lint-diff-base":
        _repo(tmp_path, base, new)
        argv = ["lint", "--no-config", "--diff-base", "HEAD", "config.json"]
    else:
        (tmp_path / "a.json").write_text(json.dumps(base))
        (tmp_path / "config.json").write_text(json.dumps(new))
        argv = ["diff", "a.json", "config.json", *(["--json"] if command == "diff-json" else [])]
    res = _run(argv, tmp_path)
    assert res.returncode in (0, 1), res.stderr
    assert "internal error" not in res.stderr
    # Linear: under 1 s of CPU (benchmarks/caps.py); the aligning diff took 13.8 s and over 60 s.
    took = _cpu(argv, tmp_path, monkeypatch)
    assert took < 6.0, f"{command} on {case} took {took:.1f} s of CPU"
    if command == "diff-json":
        keys = json.loads(res.stdout)["keys"]
        assert len(keys) <= 2, keys[:3]


def test_lint_at_99000_near_miss_keys_is_bounded_and_a_typo_cannot_hide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30.4: 99,000 top-level keys one edit from keys slotdiff reads took 9.4 s (SARIF:
    13.4 s, 57 MB written). SD201 lists at most 1,000 per file and counts the rest; a real
    typo placed after them still fails the hook, as SD105's error over the unchecked keys."""
    data = dict(LLAMA)
    data.pop("num_key_value_heads")
    i = 0
    while len(data) < 99_000:
        data[f"rope_thetas{i}"] = i
        i += 1
    data["num_key_value_head"] = 8  # the typo, after every stray
    f = tmp_path / "config.json"
    f.write_text(json.dumps(data))
    for fmt in ("text", "sarif"):
        argv = ["lint", "--no-config", "--format", fmt, str(f)]
        res = _run(argv, tmp_path)
        assert res.returncode == 1 and len(res.stdout) < 2_000_000, (res.stderr, len(res.stdout))
        took = _cpu(argv, tmp_path, monkeypatch)
        assert took < 6.0, f"lint --format {fmt} took {took:.1f} s of CPU (about 1 s: caps.py)"
    text = _run(["lint", "--no-config", str(f)], tmp_path).stdout
    assert text.count(" SD201 ") == 1001 and "and 97,979 more unknown keys" in text  # 1,000 listed, one count
    assert " SD105 " in text and "were not checked for misspellings" in text
