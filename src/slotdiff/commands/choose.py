"""Choose a model for a deployment target: every bundled catalog config (and any config or
repo id named with --candidates) judged on the target's GPUs, context, batch and latency
budget — fits or not and why, the widest precision that fits (bf16 → fp8 → int4), its
layout, its decode bound and tokens/s, ranked by --optimise, with the slot facets that
bought it. Ranked only by what a config determines: capability on a task is not in a config.
docs/CHOOSE.md has the rules. Exit status 1 when no candidate fits.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

from ..analysis.analyze import Model, baseline_fills, load
from ..analysis.coverage import coverage
from ..core.errors import SlotdiffError, UsageError
from ..cost.feasibility import RESERVE_FRACTION
from ..cost.params import count
from ..deploy.choose import Candidate, choose
from ..deploy.target import LADDER, OPTIMISE, Target, short_label
from ..read.source import catalog, catalog_entries, from_catalog
from ..render.choose import render_choose, render_choose_markdown
from ..render.json_report import render as render_json
from ..schema.precision import canonical_dtype
from .argtypes import COUNT, POSITIVE, RESERVE, WHOLE, add_width_argument
from .options import add_workload_arguments, workload_from

EPILOG = """\
examples:
  slotdiff choose --gpu h100 --gpus 1 --context 32K --batch 8
  slotdiff choose --gpu h200 --gpus 8 --context 128K --concurrency 64 --max-decode-ms 50
  slotdiff choose --gpu rtx-4090 --modality image --optimise params
  slotdiff choose --candidates ./my-model/config.json,Qwen/Qwen3-8B --no-catalog --json
optimise: tokens-per-s (default) and decode-ms order alike at one batch; gpus = fewest GPUs that
hold it; params = most parameters first (size is not capability); kv = least KV + state per
sequence at the context; max-batch = most sequences that fit
"""
EXIT_1 = "no candidate fits"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    c = parser.add_argument_group("candidates")
    c.add_argument(
        "--candidates",
        action="append",
        default=[],
        metavar="A,B,...",
        help="configs, folders or Hub repo ids to judge beside the catalog (repeatable)",
    )
    c.add_argument("--no-catalog", action="store_true", help="judge only the --candidates")
    c.add_argument(
        "--modality", choices=("image",), help="image: only models whose config has a vision tower"
    )
    t = parser.add_argument_group("target")
    t.add_argument("--gpus", type=WHOLE, default=1, help="GPUs of the --gpu kind (default 1)")
    t.add_argument(
        "--concurrency", dest="batch", type=COUNT, default=argparse.SUPPRESS, help="the same as --batch"
    )
    t.add_argument("--max-decode-ms", type=POSITIVE, metavar="MS", help="latency budget of one decode step")
    t.add_argument(
        "--min-tokens-per-s",
        type=POSITIVE,
        metavar="N",
        help="throughput asked of the whole group at the batch (decode tokens/s)",
    )
    t.add_argument(
        "--precisions",
        metavar="LIST",
        help="weight formats to try, widest first (default " + ",".join(short_label(d) for d in LADDER) + ")",
    )
    t.add_argument(
        "--optimise", "--optimize", choices=OPTIMISE, default="tokens-per-s", help="what to rank by"
    )
    t.add_argument(
        "--reserve",
        type=RESERVE,
        default=RESERVE_FRACTION,
        help=f"share of each GPU kept for the runtime (default {RESERVE_FRACTION:g})",
    )
    add_workload_arguments(parser)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="JSON validated by schemas/choose.schema.json")
    out.add_argument("--markdown", action="store_true", help="Markdown for a pull request or wiki")
    add_width_argument(parser)


def precisions_from(args: argparse.Namespace) -> tuple[str, ...]:
    if args.dtype and args.precisions:
        raise UsageError("--dtype and --precisions both name the formats to try: give one")
    text = args.dtype or args.precisions
    if not text:
        return LADDER
    out = []
    for part in (p.strip() for p in text.split(",")):
        d = canonical_dtype(part)
        if d is None:
            raise UsageError(f"--precisions: unknown format {part!r} (bf16, fp8, int8, int4, mxfp4, ...)")
        if d not in out:
            out.append(d)
    return tuple(out)


def _names(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for item in args.candidates:
        for name in (n.strip() for n in item.split(",")):
            if name and name not in out:
                out.append(name)
    return out


def _candidate(name: str, read: Model | None, error: str | None, named: bool) -> Candidate:
    if read is None:
        return Candidate(
            name,
            "unread",
            error=error,
            named=named,
            trust={"status": "unverified", "reasons": ["the config was not read"]},
        )
    try:
        params, refused = count(read.arch), None
    except SlotdiffError as err:
        params, refused = None, err.reason
    trust = coverage(read.arch, params, refused)
    entry = read.raw.catalog
    return Candidate(
        name,
        read.raw.origin,
        read.arch,
        read.fills,
        trust.to_dict(),
        named=named,
        trimmed=bool(entry and not entry.complete),
    )


def candidates(args: argparse.Namespace) -> Iterator[Candidate]:
    """The named candidates (read through the Hub when not local), then the catalog's
    entries the user did not name; one that cannot be read is kept with the reason."""
    named = _names(args)
    taken = set()
    for name in named:
        entry = catalog().get(name.lower())
        if entry is not None:
            taken.add(entry.repo_id)
        try:
            yield _candidate(name, load(name), None, True)
        except SlotdiffError as err:
            yield _candidate(name, None, err.reason, True)
    if args.no_catalog:
        return
    for entry in catalog_entries():
        if entry.repo_id in taken:
            continue
        try:
            yield _candidate(entry.repo_id, load(from_catalog(entry.repo_id)), None, False)
        except SlotdiffError as err:
            yield _candidate(entry.repo_id, None, err.reason, False)


def run(args: argparse.Namespace) -> int:
    if args.no_catalog and not args.candidates:
        raise UsageError("--no-catalog leaves nothing to choose from: name --candidates")
    target = Target(
        workload=workload_from(args, args.gpus),
        precisions=precisions_from(args),
        max_decode_ms=args.max_decode_ms,
        min_tokens_per_s=args.min_tokens_per_s,
        modality=args.modality,
        optimise=args.optimise,
        reserve=args.reserve,
    )
    report = choose(list(candidates(args)), target, baseline_fills("gpt2"))
    if args.json:
        sys.stdout.write(render_json(report))
    elif args.markdown:
        sys.stdout.write(render_choose_markdown(report.to_dict()))
    else:
        sys.stdout.write(render_choose(report.to_dict(), args.width))
    return 0 if report.any_fits else 1
