"""Write a family fingerprint file for a model: how a maintainer adds a known family.

The file (fingerprints/<slug>.json) holds the family's name, model_types, categorical
fills, exemplar repo ids and the articles of its fills; it is validated by
schemas/fingerprint.schema.json. Run it on the exemplar checkpoint of the new family.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..analysis.analyze import load
from ..core.errors import SlotdiffError
from ..core.files import atomic_write_text, safe_child
from ..core.jsonout import dumps_line
from ..core.resources import data_dir
from ..slots.classify import family_record, fingerprint, slugify

EPILOG = """\
examples:
  slotdiff fingerprint Qwen/Qwen3-30B-A3B --name "Qwen3-MoE"
  slotdiff fingerprint ./config.json --name "In-house 7B" --out fingerprints/
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json or repo id of the family's exemplar")
    parser.add_argument("--name", required=True, help="family name, e.g. 'Qwen3-MoE'")
    parser.add_argument(
        "--out",
        default=None,
        help="folder to write into (default: the fingerprints/ folder in use)",
    )
    parser.add_argument("--exemplar", action="append", default=[], help="more exemplar repo ids (repeatable)")
    parser.add_argument(
        "--exemplar-id", default=None, help="repo id to record for MODEL when it is a local file"
    )
    parser.add_argument("--note", default=None, help="where the fills come from, if not a published config")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    parser.add_argument("--stdout", action="store_true", help="print instead of writing")


def run(args: argparse.Namespace) -> int:
    model = load(args.model)
    exemplars = [args.exemplar_id or model.raw.repo_id or model.raw.name]
    model_types = [model.arch.model_type]
    fp = fingerprint(model.fills)
    for extra in args.exemplar:
        other = load(extra)
        if fingerprint(other.fills) != fp:
            raise SlotdiffError(extra, f"has another fingerprint than {args.model}: not the same family")
        exemplars.append(other.raw.repo_id or other.raw.name)
        if other.arch.model_type not in model_types:
            model_types.append(other.arch.model_type)
    record = family_record(args.name, model_types, model.fills, exemplars)
    if args.note:
        record["notes"] = args.note
    text = dumps_line(record)
    if args.stdout:
        sys.stdout.write(text)
        return 0
    folder = Path(args.out) if args.out else data_dir("fingerprints")
    target = safe_child(folder, slugify(args.name) + ".json")
    if target.exists() and not args.force:
        raise SlotdiffError(str(target), "exists; pass --force to overwrite")
    atomic_write_text(target, text)
    sys.stdout.write(f"wrote {target} ({record['id']})\n")
    return 0
