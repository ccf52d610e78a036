"""Check model config files: JSON Schema, consistency rules, the team's budgets, slot changes.

Every problem prints as ``path:line:col: CODE message`` (positions from the raw JSON).
Rules and their codes: ``slotdiff lint --list-rules``; policy: ``[tool.slotdiff]`` in
pyproject.toml or ``.slotdiff.toml`` (docs/LINT.md). With ``--diff-base REV`` each file is
also compared with its version at REV and every slot change is reported with its cost.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import SlotdiffError, UsageError
from ..core.jsonout import dumps_line
from ..lint import engine, policy, registry
from ..lint.diffmode import changed_files
from ..lint.reporters import REPORTER_BY_NAME

EPILOG = """\
examples:
  slotdiff lint configs/                       every *config*.json below configs/
  slotdiff lint config.json --format sarif > lint.sarif
  slotdiff lint --diff-base HEAD configs/a/config.json   slot changes since the last commit
  slotdiff lint --diff-base origin/main        every config changed since origin/main
  slotdiff lint --list-rules | --explain SD105

exit codes: 0 no error-level diagnostic, 1 at least one, 2 usage error (bad flag, bad policy,
missing file, unknown revision)
"""

FORMATS = ("text", "json", "sarif", "github")  # lint/reporters.py REPORTER_BY_NAME


def _codes(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", help="config files, or folders to search for *config*.json")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    parser.add_argument(
        "--select", type=_codes, metavar="CODES", help="comma-separated codes or prefixes to run"
    )
    parser.add_argument(
        "--ignore", type=_codes, metavar="CODES", help="comma-separated codes or prefixes to skip"
    )
    parser.add_argument(
        "--diff-base",
        metavar="REV",
        help="compare each file with its version at this git revision and report slot changes",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--config", metavar="FILE", help="policy file (pyproject.toml or .slotdiff.toml)")
    where.add_argument("--no-config", action="store_true", help="ignore any policy file; defaults only")
    parser.add_argument("--list-rules", action="store_true", help="print the rule table and exit")
    parser.add_argument("--explain", metavar="CODE", help="print what a rule checks, why, and how to fix it")
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")


def run(args: argparse.Namespace) -> int:

    if args.list_rules:
        if args.format == "json":
            rows = [vars(r) | {"params": dict(r.params)} for r in registry.table()]
            sys.stdout.write(dumps_line(rows))
        else:
            sys.stdout.write(registry.rules_text())
        return 0
    if args.explain:
        code = args.explain.upper()
        if code not in registry.by_code():
            raise UsageError(f"--explain: no rule {args.explain!r} (slotdiff lint --list-rules)")
        sys.stdout.write(registry.explain_text(code))
        return 0

    pol = policy.load(Path(args.config)) if args.config else policy.load(search=not args.no_config)
    pol = policy.with_overrides(pol, args.select, args.ignore)
    paths = args.paths
    if not paths:
        if args.diff_base is None:
            raise UsageError("name config files or folders to lint (or use --diff-base REV)")

        paths = [p for p in changed_files(args.diff_base) if "config" in Path(p).name and p.endswith(".json")]
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise SlotdiffError(missing[0], "no such file or folder")
    files = engine.iter_config_files(paths)
    result = engine.lint(files, pol, diff_base=args.diff_base)
    sys.stdout.write(REPORTER_BY_NAME[args.format](result))
    if not args.quiet and args.format == "text":
        counts = [(result.count(s), s) for s in ("error", "warning", "info")]
        shown = ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for n, s in counts if n) or "no problems"
        sys.stderr.write(f"slotdiff lint: {shown} in {len(files)} file{'s' if len(files) != 1 else ''}\n")
    return result.exit_code
