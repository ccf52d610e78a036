"""lint/spread.py: a lint run's files over several processes, the same answer as one.

The forking runs happen in a fresh interpreter (a subprocess), where no thread of the test
runner can make ``jobs_for`` fall back to one process and the test pass without forking.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from slotdiff.lint.spread import MIN_FILES_PER_JOB, jobs_for, shares

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "corpus"
PUBLISHED = ROOT / "tests" / "fixtures" / "conformance" / "published"


def _python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _files(tmp_path: Path, n: int) -> list[str]:
    out = []
    for i in range(n):
        p = tmp_path / f"{i:03d}.json"
        p.write_text("x" * (i % 7), encoding="utf-8")  # seven sizes
        out.append(str(p))
    return out


def test_shares_keep_files_of_one_size_together_and_are_balanced(tmp_path: Path) -> None:
    paths = _files(tmp_path, 70)
    parts = shares(paths, 2)
    assert sorted(i for part in parts for i in part) == list(range(70))
    for part in parts:
        sizes = {os.stat(paths[i]).st_size for i in part}
        for other in parts:
            if other is not part:
                assert not sizes & {os.stat(paths[i]).st_size for i in other}
    assert abs(len(parts[0]) - len(parts[1])) <= 10  # groups of 10: at most one apart


def test_few_files_stay_in_one_process() -> None:
    assert jobs_for(MIN_FILES_PER_JOB * 2 - 1, None) == 1
    assert jobs_for(1, 4) == 1  # never more processes than files
    assert jobs_for(500, 1) == 1


def test_results_come_back_in_order_from_several_processes(tmp_path: Path) -> None:
    paths = _files(tmp_path, 64)
    out = _python(
        f"""
        import json, os
        from slotdiff.lint.spread import spread
        paths = {paths!r}
        got = spread(paths, lambda names: [(n, os.getpid()) for n in names], jobs=3)
        print(json.dumps({{"names": [n for n, _ in got], "pids": sorted({{p for _, p in got}}),
                          "me": os.getpid()}}))
        """
    )
    got = json.loads(out)
    assert got["names"] == paths
    assert len(got["pids"]) == 3 and got["me"] in got["pids"]


@pytest.mark.parametrize(
    "failure",
    [
        "raise RuntimeError('child only')",  # an exception in a child
        "os._exit(3)",  # a child that dies without a word
        "os.kill(os.getpid(), 9)",  # killed
    ],
)
def test_a_failed_share_is_checked_again_here(tmp_path: Path, failure: str) -> None:
    paths = _files(tmp_path, 48)
    out = _python(
        f"""
        import json, os
        from slotdiff.lint.spread import spread
        parent = os.getpid()
        def check(names):
            if os.getpid() != parent:
                {failure}
            return [n.upper() for n in names]
        print(json.dumps(spread({paths!r}, check, jobs=2)))
        """
    )
    assert json.loads(out) == [p.upper() for p in paths]


def test_a_failure_here_leaves_no_child_behind(tmp_path: Path) -> None:
    paths = _files(tmp_path, 48)
    out = _python(
        f"""
        import os, time
        from slotdiff.lint.spread import spread
        parent = os.getpid()
        def check(names):
            if os.getpid() == parent:
                raise KeyboardInterrupt
            time.sleep(30)  # a child still at work when the run stops
            return names
        try:
            spread({paths!r}, check, jobs=3)
        except KeyboardInterrupt:
            pass
        try:
            os.waitpid(-1, os.WNOHANG)
            print("a child is left")
        except ChildProcessError:
            print("none left")
        """
    )
    assert out.strip() == "none left"


def test_lint_answers_the_same_over_several_processes(tmp_path: Path) -> None:
    """Every corpus and published config, some twice (copies stay together): -j 3 prints
    byte for byte what -j 1 does, in every format."""
    files = sorted(CORPUS.rglob("*.json"))
    for p in sorted(PUBLISHED.glob("*.json")):
        copy = tmp_path / p.name
        copy.write_text(json.dumps(json.loads(p.read_text(encoding="utf-8"))["config"]), encoding="utf-8")
        files.append(copy)
    files += files[:40]
    args = [str(p) for p in files]
    lint = [sys.executable, "-m", "slotdiff", "lint", "--no-config", "-q"]
    outs = {}
    for jobs in ("1", "3"):
        for fmt in ("text", "json"):
            done = subprocess.run(
                [*lint, "-j", jobs, "--format", fmt, *args],
                capture_output=True,
                env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONDONTWRITEBYTECODE": "1"},
                check=False,
            )
            outs[(jobs, fmt)] = (done.returncode, done.stdout, done.stderr)
    for fmt in ("text", "json"):
        assert outs[("3", fmt)] == outs[("1", fmt)]
    assert outs[("1", "text")][0] == 1  # the published set holds true errors: something was checked
    assert len(outs[("1", "text")][1].splitlines()) > 300
