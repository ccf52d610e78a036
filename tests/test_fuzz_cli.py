"""A fixed, seeded slice of tools/fuzz_cli.py: hostile configs and flags through every
subcommand and output format, in process and through ``python -m slotdiff``.

The long run (``python tools/fuzz_cli.py --cases 50000``) is for a person before a release;
this slice runs the same cases every time (seeds 0..) in a few seconds, and fails on any
exit 3, traceback, invalid JSON, raw control character or hang that they reach.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "fuzz_cli.py"


def _fuzz_cli():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("fuzz_cli", TOOL)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_cli"] = module  # the worker processes find it by name
    spec.loader.exec_module(module)
    return module


def test_a_seeded_slice_of_the_cli_fuzzer_finds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    fuzz_cli = _fuzz_cli()
    failures = fuzz_cli.fuzz(cases=300, workers=2, subprocess_cases=6, seed=0, timeout=20.0)
    out = capsys.readouterr().out
    assert "306 cases" in out, out
    assert failures == 0, out


def test_every_subcommand_and_format_is_in_the_fuzzer() -> None:
    """A subcommand added to the CLI without a fuzzer entry fails here."""
    from slotdiff.cli import COMMANDS

    fuzz_cli = _fuzz_cli()
    covered = set(fuzz_cli.COMMANDS) | set(fuzz_cli.NOT_FUZZED)
    assert set(COMMANDS) | {"analyze"} <= covered, sorted(set(COMMANDS) - covered)
    lint_formats = {argv[-2] for argv in fuzz_cli.COMMANDS["lint"]} | {
        argv[4] for argv in fuzz_cli.COMMANDS["lint"]
    }
    assert {"text", "json", "sarif", "github"} <= lint_formats


def test_the_same_seed_builds_the_same_case(tmp_path: Path) -> None:
    fuzz_cli = _fuzz_cli()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    argv_a = [x.replace(str(a), "@") for x in fuzz_cli.build_case(1234, a)]
    argv_b = [x.replace(str(b), "@") for x in fuzz_cli.build_case(1234, b)]
    assert argv_a == argv_b
    assert _contents(a) == _contents(b)


def _contents(folder: Path) -> list[tuple[str, bytes]]:
    """Each file's name and bytes; a FIFO, a link or a folder by its kind (a FIFO would block)."""
    out = []
    for p in folder.iterdir():
        if p.is_symlink():
            out.append((p.name, b"-> " + os.fsencode(os.readlink(p))))
        elif stat.S_ISREG(p.lstat().st_mode):
            out.append((p.name, p.read_bytes()))
        else:
            out.append((p.name, stat.filemode(p.lstat().st_mode).encode()))
    return sorted(out)


def test_the_slice_holds_every_hostile_class_of_issue_30(tmp_path: Path) -> None:
    """The seeds the slice runs build each class at least once: a config that is a FIFO, a
    device or a folder; a file named like an option after ``--``; a value too small or too
    large to price; and subprocess cases on a full stdout."""
    fuzz_cli = _fuzz_cli()
    seen: set[str] = set()
    for seed in range(300):
        folder = tmp_path / str(seed)
        folder.mkdir()
        argv = fuzz_cli.build_case(seed, folder)
        for p in folder.iterdir():
            mode = p.lstat().st_mode
            if stat.S_ISFIFO(mode):
                seen.add("fifo")
            elif p.is_symlink():
                seen.add(os.readlink(p))
            elif stat.S_ISDIR(mode):
                seen.add("folder")
        if "--" in argv and argv[argv.index("--") + 1] in fuzz_cli.OPTION_NAMES:
            seen.add("option-named")
        if any(v in argv for v in ("1e-300", "2e-308", "5e-324", "1e300")):
            seen.add("unpriceable")
    assert {"fifo", "/dev/zero", "/dev/null", "folder", "option-named", "unpriceable"} <= seen, seen
    assert any(fuzz_cli.full_stdout(s) for s in range(300, 306))
