"""A fixed, seeded slice of tools/fuzz_cli.py: hostile configs and flags through every
subcommand and output format, in process and through ``python -m slotdiff``.

The long run (``python tools/fuzz_cli.py --cases 50000``) is for a person before a release;
this slice runs the same cases every time (seeds 0..) in a few seconds, and fails on any
exit 3, traceback, invalid JSON, raw control character or hang that they reach.
"""

from __future__ import annotations

import importlib.util
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
    assert sorted(p.read_bytes() for p in a.iterdir()) == sorted(p.read_bytes() for p in b.iterdir())
