"""Every file slotdiff writes is replaced atomically and lands in the folder the user named.

Untrusted strings (repo ids, model names, model_types from the Hub) become file names only
through ``files.safe_name`` / ``classify.slugify`` and ``files.safe_child``; a writer
killed midway leaves the previous file byte for byte, and its temp file trips nothing up.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.core.errors import SlotdiffError
from slotdiff.core.files import atomic_write, atomic_write_text, safe_child, safe_name
from slotdiff.scan.propose import write_proposals
from slotdiff.scan.state import ScanState
from slotdiff.slots.classify import fingerprint, slugify

from conftest import budget, raw

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "slotdiff"
LLAMA = raw("meta-llama/Meta-Llama-3-8B")

hostile_names = st.one_of(
    st.text(max_size=300),
    st.sampled_from(
        [
            "../../etc/passwd",
            "/etc/passwd",
            "..",
            ".",
            "",
            "a\x00b",
            "org/../../x",
            "x" * 5000,
            "\u202e.json",
            "C:\\Windows\\system32",
            "~/.ssh/id_rsa",
            "..\\..\\x",
        ]
    ),
)

SAFE = re.compile(r"^[A-Za-z0-9._-]{1,120}$")


@budget(300)
@given(hostile_names)
def test_safe_name_and_slugify_give_plain_names_inside_the_folder(name: str) -> None:
    folder = Path("/tmp/slotdiff-never-written")
    for made in (safe_name(name), slugify(name), slugify(name) + ".json"):
        assert SAFE.match(made) and made not in (".", ".."), made
        assert safe_child(folder, made).parent == folder.resolve()


@pytest.mark.parametrize("name", ["../x.json", "/etc/passwd", "a/b.json", "x\x00.json", ".", "..", ""])
def test_safe_child_refuses_escapes(tmp_path: Path, name: str) -> None:
    with pytest.raises(SlotdiffError):
        safe_child(tmp_path, name)


def test_safe_child_refuses_a_symlink_out_of_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "family.json").symlink_to(outside / "family.json")
    with pytest.raises(SlotdiffError):
        safe_child(folder, "family.json")


@pytest.mark.parametrize("name", ["../../escape", "/etc/passwd", "a\x00b", "x" * 1000, "..", "名前"])
def test_fingerprint_writes_inside_out_whatever_the_name(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    code = main(["fingerprint", str(LLAMA), "--name", name, "--out", str(out)])
    assert code == 0
    written = list(out.iterdir())
    assert len(written) == 1 and SAFE.match(written[0].name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_scan_proposals_name_files_by_slug_never_by_repo_id(tmp_path: Path) -> None:
    fills = fingerprint(load(LLAMA).fills).as_dict()
    hostile = "../../" + "x" * 300
    entry = {
        "fills": fills,
        "label": "x",
        "model_types": [hostile],
        "models": ["../../etc/passwd"],
        "model_type_of": {"../../etc/passwd": hostile},
        "sizes": [],
    }
    out = tmp_path / "proposals"
    written = write_proposals(out, [entry])
    assert len(written) == 1 and Path(written[0]).parent == out.resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proposals"]


def test_atomic_write_keeps_the_old_file_when_the_writer_fails(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old\n")

    def half_then_fail(fh: object) -> None:
        fh.write(b"new, but cut")  # type: ignore[attr-defined]
        raise OSError("disk full")

    with pytest.raises(OSError):
        atomic_write(target, half_then_fail)
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # temp file removed


def test_every_writer_goes_through_files_py() -> None:
    """No module writes a file except through files.atomic_write (the scan journal, an
    append-only log replayed line by line, the scan's empty lock file and the pipe a lint
    worker sends its results through are the exceptions)."""
    writes = re.compile(
        r"""open\([^)]*["'][wax+]|\.write_text\(|\.write_bytes\(|savefig\(|os\.open\(|shutil\.copy"""
    )
    allowed = {
        ("scan/records.py", 'open(path, "a+b"'),  # the journal: lines, flushed; a cut line is skipped
        ("render/plot.py", "fig.savefig(fh"),  # inside atomic_write's callback
        ("scan/statefile.py", "fd = os.open(lock_path, os.O_RDWR"),  # flock target, never written
        ("lint/spread.py", 'os.fdopen(write_end, "wb")'),  # a pipe to the parent, not a file
    }
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "core/files.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if writes.search(line) and not any(rel == f and snippet in line for f, snippet in allowed):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


# ----------------------------------------------------------------- killed writers

# The child slows the writer down: the first write() puts half its bytes into the temp file,
# syncs them, tells the parent (the marker file) and sleeps until it is killed.
CHILD = r"""
import os, sys, time
from pathlib import Path

import slotdiff.core.files as files

mode, target, marker = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
if marker.name != "-":
    real = os.fdopen

    class Slow:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            os.fsync(self.fh.fileno())
            marker.write_text("midway")
            time.sleep(600)

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)

    files.os.fdopen = lambda *a, **k: Slow(real(*a, **k))

if mode == "state":
    from slotdiff.scan.state import ScanState

    state = ScanState.load(target)
    state.data["models"] = {f"org/model-{i}": {"commit": "c" * 40, "verdict": "known"} for i in range(50_000)}
    state.checkpoint(force=True)
elif mode == "fingerprint":
    from slotdiff.cli import main

    sys.exit(main(["fingerprint", sys.argv[4], "--name", "Family", "--out", str(target.parent), "--force"]))
elif mode == "report":
    files.atomic_write_text(target, "x" * 5_000_000)
"""


def _child(mode: str, target: Path, marker: str, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-c", CHILD, mode, str(target), marker, *extra], env=env)


def _old_file(mode: str, folder: Path) -> Path:
    if mode == "state":
        target = folder / "scan-state.json"
        state = ScanState.load(target)
        state.data["models"] = {"org/old": {"commit": "a" * 40, "verdict": "new"}}
        state.checkpoint(force=True, pretty=True)
    elif mode == "fingerprint":
        target = folder / "family.json"
        atomic_write_text(target, '{"old": true}\n')
    else:
        target = folder / "report.md"
        atomic_write_text(target, "# the previous report\n")
    return target


@pytest.mark.parametrize("mode", ["state", "fingerprint", "report"])
def test_a_writer_killed_midway_leaves_the_old_file(tmp_path: Path, mode: str) -> None:
    target = _old_file(mode, tmp_path)
    before = target.read_bytes()
    marker = tmp_path / "marker"
    proc = _child(mode, target, str(marker), str(LLAMA))
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, f"the writer exited ({proc.returncode}) before writing"
            assert time.monotonic() < deadline, "the writer never started writing"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert target.read_bytes() == before, "the killed writer changed the file"
    leftovers = [
        p for p in tmp_path.iterdir() if p.name.startswith(f".{target.name}.") and p.suffix == ".tmp"
    ]
    assert leftovers, "the child should have died holding a half-written temp file"
    # The next run reads past the leftover temp file and replaces the file completely.
    again = _child(mode, target, "-", str(LLAMA))
    assert again.wait(timeout=120) == 0
    after = target.read_bytes()
    assert after != before
    if mode == "state":
        assert len(ScanState.load(target).models) == 50_000
    elif mode == "fingerprint":
        assert json.loads(after)["name"] == "Family"
    else:
        assert after == b"x" * 5_000_000
    # Nothing that reads these folders picks a temp file up as a config or a family file.
    from slotdiff.lint.engine import iter_config_files

    assert [Path(p).name for p in iter_config_files([str(tmp_path)])] == [
        p.name for p in sorted(tmp_path.glob("*config*.json"))
    ]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == sorted(
        [target.name, "marker"]
    )
