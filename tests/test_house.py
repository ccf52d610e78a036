"""The package reads as the pipeline: stages import only the stages below them, no module
imports another in a circle, our imports sit at module tops, and no module grows past ~400
lines. docs/ARCHITECTURE.md draws the same order; this test is what keeps it true.

Read from the source with ``ast`` (nothing is imported), so it holds on any machine.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "slotdiff"

# The stages from the bottom up; a package may import its own modules and any package on
# a lower rank, never one on its own rank or above.
RANKS: dict[str, int] = {
    "core": 0,
    "read": 1,
    "schema": 2,
    "constructs": 3,  # one module per mechanism (MLA, ...): what cost/, train/, slots/ ask of it
    "slots": 4,
    "render": 4,  # renderers take the Report duck-typed: they need only schema's types
    "cost": 5,
    "deploy": 6,
    "analysis": 6,
    "train": 6,  # training memory: prices parameters with cost/, beside deploy/
    "lint": 7,
    "scan": 7,
    "commands": 8,
    "cli": 9,
    "__main__": 10,
    "": 10,  # slotdiff/__init__.py: the public API, on top of the stages it names
}

# Third-party libraries heavy enough to load on first use only (a local `slotdiff CONFIG
# --json` must not pay for them: tests/test_imports.py checks which ones a run loads).
LAZY_THIRD_PARTY = {"huggingface_hub", "httpx", "rich", "jsonschema", "deepdiff", "matplotlib"}

MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def top_level_imports(path: Path) -> set[str]:
    """slotdiff modules ``path`` imports at its top level (a package counts as its __init__)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                out.add(full if full in MODULES else target)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in MODULES and m != here}


GRAPH = {m: top_level_imports(p) for m, p in MODULES.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Edges that run up or across the pipeline's ranks."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if stage(a) != stage(b) and RANKS[stage(a)] <= RANKS[stage(b)]
    )


def find_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                circles.append(sorted(part))

    for v in graph:
        if v not in index:
            visit(v)
    return circles


def test_stages_import_only_downwards() -> None:
    wrong = upward_imports(GRAPH)
    assert not wrong, "imports that run up or across the pipeline:\n" + "\n".join(wrong)


def test_every_stage_package_has_a_rank() -> None:
    assert {stage(m) for m in MODULES} <= set(RANKS)


def test_no_import_circles() -> None:
    assert not find_circles(GRAPH)


def test_the_checks_can_fail() -> None:
    loop = {"slotdiff.schema.a": {"slotdiff.schema.b"}, "slotdiff.schema.b": {"slotdiff.schema.a"}}
    assert find_circles(loop) == [["slotdiff.schema.a", "slotdiff.schema.b"]]
    up = {"slotdiff.schema.build": {"slotdiff.cost.params"}, "slotdiff.cost.params": set()}
    assert upward_imports(up) == ["slotdiff.schema.build -> slotdiff.cost.params"]
    # and the real graph is read: the pipeline's top imports the schema layer's build()
    assert "slotdiff.schema.build" in GRAPH["slotdiff.analysis.analyze"]


def _nested_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    guarded = {
        id(n)
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in top or id(node) in guarded or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            found.append((node.lineno, ast.unparse(node)))
            continue
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        for name in names:
            root = name.split(".")[0]
            if root == "slotdiff" or root in sys.stdlib_module_names or root not in LAZY_THIRD_PARTY:
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_imports_sit_at_module_tops() -> None:
    """Only the heavy optional libraries load inside a function; ours and the stdlib never do."""
    found = [
        f"{p.relative_to(SRC)}:{line}: {text}" for p in MODULES.values() for line, text in _nested_imports(p)
    ]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", list(MODULES.values()), ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_is_over_400_lines(path: Path) -> None:
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{n} lines: split it by responsibility"
