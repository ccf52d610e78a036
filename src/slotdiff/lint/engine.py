"""Run the rules over files: read → rules in table order → diagnostics sorted by position.

The engine owns the order of stages and what each rule may assume (``needs`` in the
registry); rules own what they check. One frozen Diagnostic per problem comes out, and the
run's exit status follows from their severities alone.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..core.errors import SlotdiffError
from ..core.printable import one_line
from ..read.jsonpos import dotted
from . import budgets, diffmode, rules  # noqa: F401  (importing registers the rules)
from .document import Builds, Document, KeyPath, read
from .policy import Policy
from .registry import RULES, Hit, Pos, by_code, table
from .spread import spread


@dataclass(frozen=True)
class Diagnostic:
    """One problem (or, in diff mode, one slot change) at one place in one file."""

    path: str
    line: int
    col: int
    code: str
    severity: str
    message: str
    key: str | None = None  # the config key it points at, dotted
    extra: Mapping[str, Any] | None = None  # facet, deltas ... (diff and policy rules)

    def sort_key(self) -> tuple[int, int, str]:
        return (self.line, self.col, self.code)


@dataclass(frozen=True)
class FileResult:
    path: str
    diagnostics: tuple[Diagnostic, ...]


@dataclass(frozen=True)
class Run:
    """Everything one ``slotdiff lint`` invocation found."""

    files: tuple[FileResult, ...]

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return tuple(d for f in self.files for d in f.diagnostics)

    def count(self, severity: str) -> int:
        return sum(1 for d in self.diagnostics if d.severity == severity)

    @property
    def exit_code(self) -> int:
        return 1 if self.count("error") else 0


@dataclass
class FileContext:
    """What a rule sees: the file, its base, the policy and the workload costs use."""

    doc: Document
    policy: Policy
    base: Document | None = None
    base_label: str = ""
    workload_factory: Any = None
    cache: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def workload(self) -> Any:
        return self.workload_factory()


def _stage_ok(needs: str, cx: FileContext) -> bool:
    doc = cx.doc
    if needs == "text":
        return True
    if doc.data is None:
        return False
    if needs in ("data", "values"):  # values fall back to field-by-field resolution
        return True
    if needs == "arch":
        return doc.arch is not None
    if needs == "base":
        return cx.base is not None and doc.arch is not None
    raise AssertionError(needs)


def _dotted(where: KeyPath) -> str | None:
    return dotted(where) if where else None


def lint_document(cx: FileContext) -> tuple[Diagnostic, ...]:
    """Every selected rule over one file, sorted by (line, col, code)."""
    doc = cx.doc
    out: list[Diagnostic] = []
    enabled = cx.policy.enabled_codes(doc.name)
    for info in table():
        reg = RULES.get(info.code)
        if reg is None or info.code not in enabled or not _stage_ok(reg.needs, cx):
            continue
        try:
            hits = list(reg.fn(cx))
        except Exception as err:  # absurd input (a 1e308-wide model) must not crash the hook
            hits = [Hit((), f"could not be checked: {type(err).__name__}: {err}")]
        for hit in hits:
            if isinstance(hit.where, Pos):
                (line, col), key = hit.where, None
            else:
                (line, col), key = doc.where(hit.where), _dotted(hit.where)
            # A message quotes config keys and values: a newline in one must not start a
            # line that reads like another diagnostic.
            message = one_line(hit.message)
            out.append(Diagnostic(doc.name, line, col, info.code, info.severity, message, key, hit.extra))
    return tuple(sorted(_drop_superseded(out), key=Diagnostic.sort_key))


def _drop_superseded(diags: list[Diagnostic]) -> list[Diagnostic]:
    """SD103 (the schema layer's refusal) only where no more specific error speaks for that key."""
    specific = [d for d in diags if d.severity == "error" and d.code != "SD103"]

    def covered(d: Diagnostic) -> bool:
        if d.key is None:
            return False
        for o in specific:
            if o.key is None:
                continue
            if o.key == d.key or o.key.startswith(d.key + ".") or o.key.startswith(d.key + "["):
                return True
            if d.key.startswith(o.key + ".") or d.key.startswith(o.key + "["):
                return True
        return False

    return [d for d in diags if d.code != "SD103" or not covered(d)]


def _unreadable(name: str, err: SlotdiffError) -> FileResult:
    info = by_code()["SD101"]
    return FileResult(name, (Diagnostic(name, 1, 1, "SD101", info.severity, f"cannot read: {err.reason}"),))


def lint(
    paths: Sequence[str],
    policy: Policy,
    diff_base: str | None = None,
    texts: Mapping[str, bytes] | None = None,
    bases: Mapping[str, bytes | None] | None = None,
    jobs: int | None = 1,
) -> Run:
    """Lint ``paths`` under ``policy``; ``diff_base`` compares each with its version there.

    ``texts`` and ``bases`` supply file contents and base versions directly (tests, editors);
    otherwise files are read from disk and bases from git. ``jobs`` processes share the
    files (None: every usable CPU, when there are enough files; lint/spread.py).
    """
    workload_cache: list[Any] = []

    def workload() -> Any:
        if not workload_cache:
            workload_cache.append(policy.make_workload())
        return workload_cache[0]

    label = diff_base or "base"
    if bases is None:
        bases = diffmode.git_versions(diff_base, list(paths)) if diff_base is not None else {}
    baseline: Document | None = None
    if policy.baseline:
        baseline = diffmode.baseline_document(policy.baseline, policy.root, policy.source or "policy")
        # A baseline that cannot be read would turn every comparison off: refuse it instead.
        broken = baseline.error.message if baseline.error else None
        if broken is None and baseline.build_error is not None:
            broken = baseline.build_error.line()
        if broken is not None:
            where = policy.source or "policy"
            raise SlotdiffError(where, f"baseline {policy.baseline!r} cannot be read: {broken}", "baseline")

    builds = Builds()

    def one(name: str) -> FileResult:
        try:
            doc = (
                Document(name, texts[name], builds=builds)
                if texts and name in texts
                else read(Path(name), name, builds)
            )
        except SlotdiffError as err:
            return _unreadable(name, err)
        base_text = bases.get(name)
        if base_text is not None:
            base, against = Document(f"{label}:{name}", base_text), label
        elif baseline is not None:
            base, against = baseline, f"baseline {policy.baseline}"
        else:
            base, against = None, ""
        return FileResult(name, lint_document(FileContext(doc, policy, base, against, workload)))

    return Run(tuple(spread(paths, lambda names: [one(name) for name in names], jobs)))


# The files the pre-commit hooks run on (.pre-commit-hooks.yaml states the same two patterns;
# a test keeps them equal): config.json and *config*.json, but not the companion files of a
# Hugging Face checkpoint that match the glob without being model configs.
CONFIG_FILES = r"(^|/)[^/]*config[^/]*\.json$"
NOT_MODEL_CONFIGS = (
    r"(^|/)((generation|tokenizer|preprocessor|processor|video_preprocessor|feature_extractor|adapter"
    r"|quantize|sentence_bert)_config|config_sentence_transformers|[tj]sconfig)\.json$"
)


def iter_config_files(paths: Iterable[str]) -> list[str]:
    """Files as given; folders expand to the model configs beneath them (hidden folders skipped)."""

    wanted, unwanted = re.compile(CONFIG_FILES), re.compile(NOT_MODEL_CONFIGS)
    out: list[str] = []
    for p in paths:
        if not os.path.isdir(p):
            out.append(p)
            continue
        for folder, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for f in sorted(files):
                rel = os.path.join(folder, f).replace(os.sep, "/")
                if wanted.search(rel) and not unwanted.search(rel):
                    out.append(os.path.join(folder, f))
    return out
