"""The rule table and the rule functions registered against it.

``schemas/rules.json`` is the one place a rule's code, name, severity and documentation
live; ``--list-rules``, ``--explain`` and docs/LINT.md are rendered from it. A rule is a
small function that yields ``Hit(where, message)``; the registry adds code and severity.
Codes are selected by prefix (``SD2`` is every warning, ``SD11`` the SD110-SD119 block);
the longest matching prefix wins, so ``select = ["SD"]`` with ``ignore = ["SD2"]`` and
``select = ["SD203"]`` turns every warning off except SD203.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

from ..core.resources import load_schema_file

SEVERITIES = ("error", "warning", "info")

# What a rule needs before it can run, in the order the engine can provide it:
#   text    the file's bytes (runs even when the JSON does not parse)
#   data    the parsed JSON object
#   values  resolved canonical fields (from the schema layer, even when layout failed)
#   arch    the Architecture with its per-layer specs
#   base    a base to diff against (--diff-base or the policy's baseline)
NEEDS = ("text", "data", "values", "arch", "base")


@dataclass(frozen=True)
class RuleInfo:
    """One row of the rule table."""

    code: str
    name: str
    severity: str
    what: str
    why: str
    fix: str
    params: Mapping[str, Any] = field(default_factory=dict)


class Pos(NamedTuple):
    """An explicit 1-based position (when a rule knows it better than a key path does)."""

    line: int
    col: int


class Hit(NamedTuple):
    """What a rule yields: where (a JSON key path or a Pos), a message, optional extras."""

    where: tuple[str | int, ...] | Pos
    message: str
    extra: Mapping[str, Any] | None = None


RuleFn = Callable[[Any], Iterable[Hit]]


@dataclass(frozen=True)
class Registered:
    code: str
    fn: RuleFn
    needs: str


RULES: dict[str, Registered] = {}


def rule(code: str, needs: str = "data") -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as the implementation of ``code`` (one function per code)."""
    if needs not in NEEDS:
        raise ValueError(f"unknown stage {needs!r}")

    def register(fn: RuleFn) -> RuleFn:
        if code in RULES:
            raise ValueError(f"{code} is implemented twice")
        RULES[code] = Registered(code, fn, needs)
        return fn

    return register


@cache
def table() -> tuple[RuleInfo, ...]:
    """Every rule, in table order."""
    data = load_schema_file("rules.json")
    return tuple(
        RuleInfo(
            r["code"],
            r["name"],
            r["severity"],
            r["what"],
            r["why"],
            r["fix"],
            r.get("params", {}),
        )
        for r in data["rules"]
    )


@cache
def by_code() -> Mapping[str, RuleInfo]:
    return {r.code: r for r in table()}


def params(code: str) -> Mapping[str, Any]:
    return by_code()[code].params


def severity_text() -> Mapping[str, str]:
    return load_schema_file("rules.json")["severities"]


# ------------------------------------------------------------------------- selection


def valid_selector(prefix: str) -> bool:
    """A selector must name at least one code (``SD``, ``SD2``, ``SD105``)."""
    return bool(prefix) and any(r.code.startswith(prefix) for r in table())


def is_selected(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    """Longest matching prefix decides; a tie goes to ignore; no match means off."""
    best_select = max((len(p) for p in select if code.startswith(p)), default=-1)
    best_ignore = max((len(p) for p in ignore if code.startswith(p)), default=-1)
    return best_select > best_ignore


# ------------------------------------------------------------------------- rendering


def _fill(text: str, width: int, lead: str = "", indent: str = "") -> list[str]:
    """``text`` wrapped at spaces only (a code, a key or a path is never split)."""
    return textwrap.wrap(
        text,
        max(width, len(indent) + 20),
        initial_indent=lead,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [lead.rstrip()]


def rules_text() -> str:
    """``slotdiff lint --list-rules``: one line per rule (a table row is never wrapped)."""
    lines = [f"{'code':<6} {'severity':<8} {'name':<22} what"]
    for r in table():
        lines.append(f"{r.code:<6} {r.severity:<8} {r.name:<22} {r.what}")
    return "\n".join(lines) + "\n"


def explain_text(code: str, width: int = 10_000) -> str:
    """``slotdiff lint --explain CODE``, its paragraphs wrapped at ``width``."""
    r = by_code()[code]
    parts = [[f"{r.code} {r.name} ({r.severity})"]]
    parts += [
        _fill(text, width, f"{label}: ")
        for label, text in (("What", r.what), ("Why", r.why), ("How to fix", r.fix))
    ]
    return "\n\n".join("\n".join(p) for p in parts) + "\n"


def explain_markdown(code: str) -> str:
    """``slotdiff lint --explain CODE --markdown``."""
    r = by_code()[code]
    return (
        f"### {r.code} {r.name} ({r.severity})\n\n**What:** {r.what}\n\n**Why:** {r.why}\n\n"
        f"**How to fix:** {r.fix}\n"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rules_markdown() -> str:
    """The rule table as Markdown (the generated block of docs/LINT.md)."""
    out = [
        "| code | name | severity | what | why | how to fix |",
        "|---|---|---|---|---|---|",
    ]
    for r in table():
        out.append(
            f"| `{r.code}` | {r.name} | {r.severity} | {_cell(r.what)} | {_cell(r.why)} | {_cell(r.fix)} |"
        )
    return "\n".join(out) + "\n"
