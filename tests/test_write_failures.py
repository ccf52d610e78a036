"""Issue 30.6: an output that cannot be written is the disk's failure, said in one line, exit 2.

A full disk, a read-only file system, a quota, a file-size limit or ``/dev/full`` as stdout:
whatever slotdiff was writing (stdout, a report, a family file, the scan's journal or state),
the run ends with ``slotdiff: error: PATH: cannot write (REASON)`` and exit 2, never an
internal error (exit 3) or the interpreter's "Exception ignored" at exit, and whatever was
there before is kept: the old file byte for byte, the scan's journal for the next run.

The failures are real where the OS can make them without privileges (``/dev/full``;
``RLIMIT_FSIZE``, which fails a write past the limit with EFBIG), and injected by errno for
the ones it cannot (ENOSPC, EROFS, EDQUOT, EIO on the file a writer syncs).
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from slotdiff.cli import main
from test_scan import LLAMA3, _env, _scan_cmd, config, make_families, repo

from conftest import raw
from hubserver import HubServer

ROOT = Path(__file__).resolve().parent.parent
CFG = str(raw("meta-llama/Llama-3.2-1B"))
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}

STDOUT_COMMANDS = [
    [CFG],
    [CFG, "--json"],
    [CFG, "--markdown"],
    ["diff", CFG, CFG, "--json"],
    ["lint", "--no-config", "--format", "sarif", CFG],
    ["fit", CFG, "--gpu", "h100"],
    ["train", CFG, "--gpu", "h100"],
    ["sweep", CFG, "--over", "batch"],
    ["moe", str(raw("mistralai/Mixtral-8x7B-v0.1"))],
    ["formats", CFG],
    ["fingerprint", CFG, "--name", "x", "--stdout"],
    ["gpus", "--json"],
    ["catalog"],
    ["lint", "--list-rules"],
]


def _limit_file_size(limit: int) -> None:
    """In the child: writes past ``limit`` bytes fail with EFBIG (SIGXFSZ ignored, so the
    write returns the error instead of killing the process)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _assert_one_line(res: subprocess.CompletedProcess[str], where: str, reason: str) -> None:
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"slotdiff: error: {where}: cannot write ({reason})"), res.stderr


@pytest.mark.parametrize(
    "argv", STDOUT_COMMANDS, ids=lambda a: " ".join(x for x in a if x != CFG)[:40] or "analyze"
)
def test_stdout_on_dev_full_is_one_line_and_exit_2(argv: list[str]) -> None:
    with open("/dev/full", "w") as full:
        res = subprocess.run(
            [sys.executable, "-m", "slotdiff", *argv], stdout=full, stderr=subprocess.PIPE, text=True, env=ENV
        )
    _assert_one_line(res, "stdout", "No space left on device")


def test_fingerprint_out_past_the_file_size_limit_keeps_the_old_file(tmp_path: Path) -> None:
    """A real write failure (EFBIG) on ``fingerprint --out``: exit 2 naming the file, and the
    file that was there is unchanged, with no temporary file left beside it."""
    target = tmp_path / "x.json"
    target.write_text("old\n")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "slotdiff",
            "fingerprint",
            CFG,
            "--name",
            "x",
            "--out",
            str(tmp_path),
            "--force",
        ],
        capture_output=True,
        text=True,
        # no bytecode written under a 64-byte file limit: a cut .pyc in the suite's shared
        # pycache folder would break every later subprocess ("marshal data too short")
        env={**ENV, "PYTHONDONTWRITEBYTECODE": "1"},
        preexec_fn=lambda: _limit_file_size(64),
    )
    _assert_one_line(res, str(target), "File too large")
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO])
def test_every_write_errno_on_a_file_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """The errnos a full or read-only disk gives, at the sync every atomic write makes."""
    target = tmp_path / "x.json"
    target.write_text("old\n")

    def fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fsync)
    assert main(["fingerprint", CFG, "--name", "x", "--out", str(tmp_path), "--force"]) == 2
    err = capsys.readouterr().err
    assert err == f"slotdiff: error: {target}: cannot write ({os.strerror(code)})\n"
    assert target.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


def test_scan_journal_on_a_full_disk_is_exit_2_and_the_next_scan_loses_nothing(tmp_path: Path) -> None:
    """The scan's journal grows past the file-size limit mid-scan (a real EFBIG on its flush):
    exit 2 naming the journal, and the next scan, with room, ends with every model known."""
    make_families(tmp_path / "families")
    repos = [repo(f"org/m{i:02d}", config(LLAMA3, hidden_size=2048 + 64 * i), hours=1 + i) for i in range(24)]
    with HubServer(repos) as hub:
        res = subprocess.run(
            _scan_cmd(tmp_path, "--json", "--quiet", "--workers", "2"),
            env={**_env(hub, tmp_path), "PYTHONDONTWRITEBYTECODE": "1"},  # no .pyc cut at the limit
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=lambda: _limit_file_size(16 * 1024),
        )
        journal = tmp_path / "state.json.journal"
        _assert_one_line(res, str(journal), "File too large")
        assert 0 < journal.stat().st_size <= 16 * 1024
        again = subprocess.run(
            _scan_cmd(tmp_path, "--json", "--quiet", "--workers", "2"),
            env=_env(hub, tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["scan"]["resumed"] is True
    state = json.loads((tmp_path / "state.json").read_text())
    assert sorted(state["models"]) == sorted(r.id for r in repos)
