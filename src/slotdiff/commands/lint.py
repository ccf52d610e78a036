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
from ..lint import engine, policy, registry
from ..lint.diffmode import changed_files
from ..lint.discover import discover, summary
from ..lint.reporters import REPORTER_BY_NAME, counts_line
from ..render import page
from ..render.json_report import dumps
from .argtypes import WHOLE, add_width_argument

EPILOG = """\
examples:
  slotdiff lint configs/                       every model config (*.json) below configs/
  slotdiff lint config.json --format sarif > lint.sarif
  slotdiff lint configs/ --markdown > lint.md   a pull request comment (--json: schemas/lint.schema.json)
  slotdiff lint --diff-base HEAD configs/a/config.json   slot changes since the last commit
  slotdiff lint --diff-base origin/main        every config changed since origin/main
  slotdiff lint --list-rules | --explain SD105
"""
EXIT_1 = (
    "at least one error-level diagnostic (2 also for a bad policy, a missing file, an unknown "
    "revision, or no model config to check)"
)

FORMATS = ("text", "json", "sarif", "github", "markdown")  # lint/reporters.py REPORTER_BY_NAME

# cli.py: every argument after the first ``--`` is one of ``paths``, never an option.
FILES_AFTER_SEPARATOR = "paths"


def _codes(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        help="config files, or folders searched recursively for *.json files that are model configs "
        "(a JSON object with model_type, architectures or a core size key such as hidden_size)",
    )
    out = parser.add_argument_group("output")
    style = out.add_mutually_exclusive_group()
    style.add_argument("--format", choices=FORMATS, default="text", help="output format (default text)")
    style.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="--format json (validated by schemas/lint.schema.json)",
    )
    style.add_argument(
        "--markdown",
        dest="format",
        action="store_const",
        const="markdown",
        help="--format markdown: a table for a pull request or wiki",
    )
    # a diagnostic and a --list-rules row are one line whatever the width (editors and scripts
    # read them as records); --width lays out --explain
    add_width_argument(out)
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
    parser.add_argument(
        "-j",
        "--jobs",
        type=WHOLE,
        metavar="N",
        help="processes that share the files (default: one per usable CPU when there are many files)",
    )
    parser.add_argument("--list-rules", action="store_true", help="print the rule table and exit")
    parser.add_argument("--explain", metavar="CODE", help="print what a rule checks, why, and how to fix it")
    parser.add_argument(
        "--pre-commit",
        action="store_true",
        help="run as the pre-commit hook: the file names come after '--' (the hook's args end "
        "with it) and without one the run is refused, so that no file name is read as an option",
    )
    talk = parser.add_mutually_exclusive_group()
    talk.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    talk.add_argument(
        "-v", "--verbose", action="store_true", help="say on stderr why each JSON file is checked or skipped"
    )


def run(args: argparse.Namespace) -> int:

    if args.pre_commit and not getattr(args, "separated", False):
        raise UsageError(
            "--pre-commit: the file names must follow '--' (end the hook's args with it, e.g. "
            "args: [--ignore, SD202, --]), so that a file name can never be read as an option"
        )
    if args.list_rules:
        if args.format == "json":
            rows = [vars(r) | {"params": dict(r.params)} for r in registry.table()]
            sys.stdout.write(dumps(rows))
        elif args.format == "markdown":
            sys.stdout.write("### slotdiff lint rules\n\n" + registry.rules_markdown())
        else:
            sys.stdout.write(registry.rules_text())
        return 0
    if args.explain:
        code = args.explain.upper()
        if code not in registry.by_code():
            raise UsageError(f"--explain: no rule {args.explain!r} (slotdiff lint --list-rules)")
        if args.format == "json":
            r = registry.by_code()[code]
            sys.stdout.write(dumps(vars(r) | {"params": dict(r.params)}))
        elif args.format == "markdown":
            sys.stdout.write(registry.explain_markdown(code))
        else:
            sys.stdout.write(registry.explain_text(code, page.output_width(args.width)))
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
    found = discover(paths)
    if args.verbose:
        for path, why in found.reasons:
            sys.stderr.write(f"slotdiff lint: checking {path} ({why})\n")
        for path, why in found.skipped:
            sys.stderr.write(f"slotdiff lint: skipping {path} ({why})\n")
    if not found.checked:
        if args.diff_base is not None and not args.paths:
            since = args.diff_base
            sys.stderr.write(f"slotdiff lint: no config file changed since {since}; nothing to check\n")
            return 0
        what = summary(found).removeprefix("checked 0 configs, ") if found.skipped else "no *.json file in it"
        raise SlotdiffError(
            ", ".join(args.paths),
            f"no model config to check: {what} (a model config has model_type, architectures or a "
            "core size key; name a file to check it anyway)",
        )
    result = engine.lint(list(found.checked), pol, diff_base=args.diff_base, jobs=args.jobs)
    sys.stdout.write(REPORTER_BY_NAME[args.format](result))
    if not args.quiet and args.format == "text":
        sys.stderr.write(f"slotdiff lint: {counts_line(result)}; {summary(found)}\n")
    return result.exit_code
