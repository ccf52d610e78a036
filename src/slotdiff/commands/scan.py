"""List new and updated models on the Hub, classify their configs, and report what is new.

Run it weekly (cron or CI) with a state file: a repeated scan reports only what changed,
and a scan that was killed resumes where it stopped. Verdicts, most new first:
new_model_type, new_fingerprint, new_keys, new_sizes, known, skipped (with a reason).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..core.errors import SlotdiffError, UsageError
from ..core.files import atomic_write
from ..core.printable import one_line, printable
from ..read.retry import RetryPolicy
from ..scan.engine import ScanOptions, run_scan
from ..scan.pipelines import expand_pipeline_tags
from ..scan.propose import write_proposals
from ..scan.report import PIECES, RENDERERS, new_fingerprints, render_terminal, spool, to_dict
from ..scan.verdict import NEW
from ..slots.classify import families
from .argtypes import COUNT, NONNEGATIVE, SECONDS, WHOLE, add_width_argument

EPILOG = """\
examples:
  slotdiff scan --since 7d --state scan-state.json --markdown > report.md
  slotdiff scan --since 2025-06-01 --pipeline-tag lm --limit 500 --json
  slotdiff scan --state s.json --pipeline-tag lm --write-html report.html
  slotdiff scan --state s.json --write-markdown report.md --write-json report.json --fail-on-new
  slotdiff scan --state s.json --update-fingerprints proposed/   # family files for new designs

environment: HF_TOKEN (gated repos), HF_ENDPOINT (another Hub), HF_HUB_CACHE (config cache)
"""
EXIT_1 = "--fail-on-new and something new was found"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_argument_group("what to list")
    what.add_argument(
        "--since",
        default="7d",
        help="window: 7d, 12h, 2w, an ISO date, or 'last' (since the last finished scan); default 7d",
    )
    what.add_argument(
        "--by",
        choices=["modified", "created"],
        default="modified",
        help="modified: created or updated in the window (default); created: new repos only",
    )
    what.add_argument(
        "--pipeline-tag",
        help="only these pipeline tags: a preset (lm: every tag a language model carries, "
        "text-generation, image-text-to-text, any-to-any, audio-text-to-text, ...; text; multimodal; "
        "schemas/scan.json) or a comma-separated list",
    )
    what.add_argument("--library", help="only this library (e.g. transformers)")
    what.add_argument("--author", help="only this user or organization")
    what.add_argument("--search", help="only repo ids containing this text")
    what.add_argument("--limit", type=COUNT, default=1000, help="at most this many models (default 1000)")

    how = parser.add_argument_group("fetching")
    how.add_argument("--workers", type=WHOLE, default=8, help="concurrent config fetches (default 8)")
    how.add_argument("--timeout", type=SECONDS, default=10.0, help="seconds per request (default 10)")
    how.add_argument(
        "--deadline",
        type=SECONDS,
        default=60.0,
        help="seconds per model, retries included; past it the model is skipped (default 60)",
    )
    how.add_argument(
        "--max-wait",
        type=NONNEGATIVE,
        default=300.0,
        help="seconds the whole scan may spend waiting on retries (default 300)",
    )
    how.add_argument(
        "--retry-after-cap",
        type=NONNEGATIVE,
        default=30.0,
        help="a 429's Retry-After above this is not waited for (default 30)",
    )
    how.add_argument(
        "--list-timeout",
        type=SECONDS,
        default=120.0,
        help="give up on a listing that sends no model for this long (default 120)",
    )
    how.add_argument(
        "--no-cards",
        dest="cards",
        action="store_false",
        help="do not read model cards (no lineage: derivatives are not grouped under their base)",
    )
    how.add_argument("--endpoint", help="Hub URL (default: HF_ENDPOINT, else https://huggingface.co)")
    how.add_argument("--cache-dir", help="HF cache folder (default: HF_HUB_CACHE)")
    how.add_argument(
        "--hf-cache",
        action="store_true",
        help="download through hf_hub_download and keep the configs in the HF cache "
        "(slower: two HEADs and a GET per model instead of one GET, plus cache bookkeeping)",
    )

    known = parser.add_argument_group("what is known")
    known.add_argument(
        "--state", type=Path, help="scan state file (JSON); without it every scan starts blank"
    )
    known.add_argument("--fingerprints", type=Path, help="folder of family files (default: the bundled ones)")
    known.add_argument(
        "--update-fingerprints",
        type=Path,
        metavar="DIR",
        help="write a proposed family file for each new design into DIR",
    )

    out = parser.add_argument_group("output")
    fmt = out.add_mutually_exclusive_group()
    fmt.add_argument("--format", choices=sorted(RENDERERS), default=None, help="stdout format")
    fmt.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        help="JSON (schemas/scan-report.schema.json)",
    )
    fmt.add_argument(
        "--markdown",
        dest="format",
        action="store_const",
        const="markdown",
        help="Markdown, for an issue or a chat post (the default when stdout is not a terminal)",
    )
    add_width_argument(out)
    out.add_argument(
        "--write-markdown", type=Path, metavar="PATH", help="also write the Markdown report here"
    )
    out.add_argument("--write-json", type=Path, metavar="PATH", help="also write the JSON report here")
    out.add_argument(
        "--write-html",
        type=Path,
        metavar="PATH",
        help="also write a self-contained HTML report here (no network: inline CSS and JS)",
    )
    out.add_argument(
        "--fail-on-new", action="store_true", help="exit 1 when something new was found (for CI)"
    )
    talk = out.add_mutually_exclusive_group()
    talk.add_argument("--quiet", action="store_true", help="no progress output")
    talk.add_argument(
        "--progress-log",
        action="store_true",
        help="one line per model on stderr even when it is not a terminal (a CI log); by default "
        "progress shows only on a terminal",
    )


class _PlainProgress:
    """One line per finished model on stderr (CI logs)."""

    def __init__(self) -> None:
        self.listed = 0

    def __call__(self, event: str, *args: Any) -> None:
        if event == "listed":
            self.listed = args[0]
            return
        rec, done, total = args
        what = rec.reason if rec.verdict == "skipped" else (rec.family or rec.fingerprint or "")
        sys.stderr.write(one_line(f"[{done}/{total}] {rec.repo_id}: {rec.verdict} {what}") + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        pass


class _RichProgress:
    """A rich progress bar on a terminal (stderr)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("scan"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[last]}", style="dim", markup=False),
            console=Console(stderr=True),
            transient=True,
        )
        self.task = self.progress.add_task("scan", total=None, last="listing...")
        self.new = 0
        self.progress.start()

    def __call__(self, event: str, *args: Any) -> None:
        if event == "listed":
            self.progress.update(self.task, total=args[0])
            return
        rec, done, total = args

        self.new += rec.verdict in NEW
        self.progress.update(
            self.task, completed=done, total=total, last=one_line(f"{self.new} new · {rec.repo_id}")
        )

    def close(self) -> None:
        self.progress.stop()


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # CI cancelling a job: save the state, exit 130


def run(args: argparse.Namespace) -> int:
    for name in ("workers", "limit"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    for name in ("timeout", "deadline", "max_wait", "retry_after_cap", "list_timeout"):
        if getattr(args, name) <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive")
    expand_pipeline_tags(args.pipeline_tag)  # a bad name is a usage error before any request
    if args.fingerprints is not None and not args.fingerprints.is_dir():
        raise UsageError(f"--fingerprints {args.fingerprints}: not a folder")
    if args.fingerprints is not None:
        families(args.fingerprints)  # every family file read and checked before any request
    _distinct_outputs(args)
    opts = ScanOptions(
        since=args.since,
        by=args.by,
        pipeline_tag=args.pipeline_tag,
        library=args.library,
        author=args.author,
        search=args.search,
        limit=args.limit,
        workers=args.workers,
        timeout=args.timeout,
        deadline=args.deadline,
        list_timeout=args.list_timeout,
        retry=RetryPolicy(
            retry_after_cap=args.retry_after_cap,
            model_budget=max(0.0, args.deadline - args.timeout),
            total_budget=args.max_wait,
        ),
        state=args.state,
        fingerprints=args.fingerprints,
        endpoint=args.endpoint,
        cache_dir=args.cache_dir,
        via_hf_cache=args.hf_cache,
        cards=args.cards,
    )
    from huggingface_hub.utils import disable_progress_bars
    from huggingface_hub.utils import logging as hf_logging

    progress: Any = None
    if not args.quiet:
        # a bar on a terminal; piped or redirected, nothing unless asked for a log
        progress = _RichProgress() if sys.stderr.isatty() else _PlainProgress() if args.progress_log else None
    previous = signal.signal(signal.SIGTERM, _sigterm)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # failures are in the report, one line each
    try:
        with disable_progress_bars():  # the scan has its own; per-file bars would drown it
            result = run_scan(opts, progress, commit=False)
    finally:
        hf_logging.set_verbosity(verbosity)
        signal.signal(signal.SIGTERM, previous)
        if progress is not None:
            progress.close()
    try:
        new = _report(args, result)["new"]  # the report itself is dropped before the merge
    except BaseException:
        result.release()  # not reported: the findings stay pending, the next run reports them
        raise
    result.commit()
    return 1 if args.fail_on_new and new else 0


def _report(args: argparse.Namespace, result: Any) -> dict[str, Any]:
    """Write every report the flags ask for; any that cannot be written is exit 2."""
    proposed: list[str] = []
    if args.update_fingerprints is not None:
        try:
            proposed = write_proposals(args.update_fingerprints, new_fingerprints(result.raw()))
        except OSError as err:
            raise _unwritten(args.update_fingerprints, err) from err
    data = to_dict(result, proposed, stream=True)  # models read back from the journal as written
    fmt = args.format or ("table" if sys.stdout.isatty() else "markdown")
    files = _files(args)
    # Everything is rendered before anything is written: all or nothing. Each format once
    # (a file and stdout share it); the JSON, Markdown and HTML reports, which hold a row per
    # model, into temporary files (streamed, never whole in memory) that the files and stdout
    # are then copied from.
    with contextlib.ExitStack() as stack:
        texts: dict[str, str] = {}
        spools: dict[str, IO[str]] = {}
        for name in {name for _, name in files} | {fmt}:
            if name == "table":
                texts[name] = render_terminal(data, args.width)
                continue
            try:
                spools[name] = stack.enter_context(spool(PIECES[name](data)))
            except OSError as err:
                reason = err.strerror or err
                raise SlotdiffError("scan", f"cannot spool the {name} report ({reason})") from err
        for path, name in files:
            try:
                atomic_write(path, lambda fh, n=name: _copy(spools[n], lambda p: fh.write(p.encode("utf-8"))))
            except OSError as err:
                raise _unwritten(path, err) from err
        if fmt in spools:
            _copy(spools[fmt], sys.stdout.write)
        else:
            sys.stdout.write(texts[fmt])
        sys.stdout.flush()
    return data


def _copy(spooled: IO[str], write: Callable[[str], Any]) -> None:
    """A spooled report, from its start, to ``write`` in pieces (made printable)."""
    spooled.seek(0)
    while piece := spooled.read(1 << 20):
        write(printable(piece))


def _unwritten(path: Path, err: OSError) -> SlotdiffError:
    return SlotdiffError(
        str(path),
        f"cannot write the report ({err.strerror or err}); nothing was marked as seen, "
        "the next scan reports these models again",
    )


def _distinct_outputs(args: argparse.Namespace) -> None:
    """Refuse a report path that is the state file (or its journal or lock) or another report's
    path, through any symlink: the report would replace the state, or one report the other."""
    taken: dict[str, str] = {}
    if args.state is not None:
        state = os.path.realpath(args.state)  # where ScanState keeps it, its journal and lock
        for suffix, what in (("", "--state"), (".journal", "--state's journal"), (".lock", "--state's lock")):
            taken[os.path.realpath(state + suffix)] = what
    for path, name in _files(args):
        real = os.path.realpath(path)
        if real in taken:
            raise UsageError(
                f"--write-{name} {path} is the file {taken[real]} names; give it a path of its own"
            )
        taken[real] = f"--write-{name}"


def _files(args: argparse.Namespace) -> list[tuple[Path, str]]:
    named = ((args.write_markdown, "markdown"), (args.write_json, "json"), (args.write_html, "html"))
    return [(p, name) for p, name in named if p]
