"""Every lint rule against its examples: a config that fires it and a near-identical one that does not.

``tests/example-files/negative/<CODE>/NAME.json`` fires the rule; ``positive/<CODE>/NAME.json``
is the same config with the problem fixed. ``NAME.expected`` lists every diagnostic the file
gets, as ``line:col CODE`` (no messages: those may be reworded). ``NAME.base.json`` is the base
for diff-mode rules and ``policy.toml`` (a .slotdiff.toml) the policy for the folder.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from slotdiff.lint import engine
from slotdiff.lint.policy import Policy, load
from slotdiff.lint.registry import RULES, table

from conftest import EXAMPLES

CODES = [r.code for r in table()]


def examples(kind: str) -> list[Path]:
    return sorted(p for p in (EXAMPLES / kind).glob("*/*.json") if not p.name.endswith(".base.json"))


def expected(path: Path) -> list[tuple[int, int, str]]:
    exp = path.with_suffix(".expected")
    if not exp.is_file():
        return []
    out = []
    for line in exp.read_text().splitlines():
        pos, code = line.split()
        ln, col = pos.split(":")
        out.append((int(ln), int(col), code))
    return out


def lint_example(path: Path) -> list[tuple[int, int, str]]:
    policy_file = path.parent / "policy.toml"
    policy = load(policy_file) if policy_file.is_file() else Policy(root=path.parent)
    base = path.with_name(path.stem + ".base.json")
    bases = {str(path): base.read_bytes()} if base.is_file() else None
    run = engine.lint([str(path)], policy, bases=bases)
    return [(d.line, d.col, d.code) for d in run.diagnostics]


def test_every_rule_has_examples_and_an_implementation() -> None:
    assert set(RULES) == set(CODES), "rules.json and the registered rule functions disagree"
    for kind in ("negative", "positive"):
        have = {p.parent.name for p in examples(kind)}
        assert have == set(CODES), f"{kind} examples missing for {sorted(set(CODES) - have)}"


@pytest.mark.parametrize("path", examples("negative"), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_negative_example_fires_its_rule(path: Path) -> None:
    got = lint_example(path)
    assert got == expected(path)
    assert path.parent.name in {code for _, _, code in got}


@pytest.mark.parametrize("path", examples("positive"), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_positive_twin_does_not(path: Path) -> None:
    got = lint_example(path)
    assert got == expected(path)
    assert path.parent.name not in {code for _, _, code in got}


@pytest.mark.parametrize("path", examples("negative"), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_twins_are_near_identical(path: Path) -> None:
    twin = EXAMPLES / "positive" / path.parent.name / path.name
    assert twin.is_file(), f"no positive twin for {path}"
    a, b = twin.read_text().splitlines(), path.read_text().splitlines()
    changed = sum(1 for line in difflib.unified_diff(a, b, lineterm="", n=0) if line[:1] in "+-")
    assert 0 < changed - 2 <= 4, f"{path.name}: {changed - 2} changed lines"
