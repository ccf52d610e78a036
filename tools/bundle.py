"""Build src/slotdiff/knowledge.bundle: schemas/ and fingerprints/ validated once, in one file.

Every JSON file of the two data sets, parsed, by path; the folder listings; the indexes a
run would otherwise rebuild (the known keys, with and without the families' ignored keys;
which composite file describes each multimodal model_type);
the SHA-256 of the sources; and what every analysis would otherwise compute from them,
GPT-2's and Llama-3-8B's fills (``derived/baseline_fills.json``, slots/stored.py). Data
files with a JSON Schema are validated against it here, so a run reads them without
jsonschema. Run it after any change to schemas/ or fingerprints/ (it is the last of the
generators), and after a change to the code that reads a config into fills (schema/,
slots/) that changes GPT-2's or Llama-3-8B's; ``--check`` only says whether the bundle is
up to date (exit 1 when stale). tests/test_bundle.py fails on a stale bundle.

    PYTHONPATH=src python tools/bundle.py [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

# The indexes and the baselines are computed from the sources themselves: switched off before
# any slotdiff import, because an import may already read the bundle (a module-level table),
# and an index computed through the old bundle would copy itself forever.
os.environ["SLOTDIFF_NO_BUNDLE"] = "1"

import jsonschema

from slotdiff.analysis.analyze import BASELINE_FILLS, BASELINES, baseline
from slotdiff.core.bundle import BUNDLE, FORMAT, SOURCES, source_files, sources_digest
from slotdiff.core.files import atomic_write_text
from slotdiff.core.resources import data_dir
from slotdiff.schema.keymap import known_keys
from slotdiff.schema.tower_files import multimodal_index
from slotdiff.slots.stored import fills_to_data

# Data files validated against a JSON Schema of schemas/ before they are bundled.
SCHEMA_OF = {
    "schemas/keymap.json": "keymap.schema.json",
    "schemas/slots.json": "slots.schema.json",
    "schemas/gpus.json": "gpus.schema.json",
    "schemas/rules.json": "rules.schema.json",
    "schemas/efficiency.json": "efficiency.schema.json",
    "schemas/train_numerics.json": "train_numerics.schema.json",
}


def roots() -> dict[str, Path]:
    return {name: data_dir(name) for name in SOURCES}


def validate(files: dict[str, Any]) -> None:
    """Every data file with a schema, every model_type file and every fingerprint, or exit 1."""

    def check(instance: Any, schema: dict[str, Any], where: str) -> None:
        errors = sorted(
            jsonschema.Draft202012Validator(schema).iter_errors(instance), key=lambda e: list(e.path)
        )
        if errors:
            path = "/".join(str(p) for p in errors[0].path) or "top level"
            sys.exit(f"{where}: {path}: {errors[0].message[:300]}")

    for name, schema_name in SCHEMA_OF.items():
        check(files[name], files[f"schemas/{schema_name}"], name)
    km = files["schemas/keymap.schema.json"]
    model_type = {**km["$defs"]["model_type"], "$defs": km["$defs"]}
    fingerprint = files["schemas/fingerprint.schema.json"]
    for name, data in files.items():
        if name.startswith("schemas/model_types/"):
            check(data, model_type, name)
            if data.get("model_type") != Path(name).stem:
                sys.exit(f"{name}: model_type {data.get('model_type')!r} is not the file's name")
        elif name.startswith("fingerprints/"):
            check(data, fingerprint, name)


def build() -> str:
    """The bundle's text: a header line, then one line per file (a change to one source is a
    one-line diff)."""
    files = {name: json.loads(path.read_text(encoding="utf-8")) for name, path in source_files(roots())}
    validate(files)
    folders: dict[str, list[str]] = {}
    for name in files:
        folder, _, leaf = name.rpartition("/")
        folders.setdefault(folder, []).append(leaf)
    head = {
        "format": FORMAT,
        "sources_sha256": sources_digest(roots()),
        "folders": {k: sorted(v) for k, v in sorted(folders.items())},
        "index": {
            "known_keys": sorted(known_keys(True)),
            "known_keys_without_family_ignored": sorted(known_keys(False)),
            "multimodal_model_types": multimodal_index(),
        },
    }
    derived = {BASELINE_FILLS: {which: fills_to_data(baseline(which).fills) for which in BASELINES}}
    compact = {"separators": (",", ":"), "ensure_ascii": False, "sort_keys": True}
    lines = [json.dumps(head, **compact)]
    lines += [f"{name}\t{json.dumps(data, **compact)}" for name, data in sorted({**files, **derived}.items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the bundle is stale; write nothing")
    args = ap.parse_args(argv)
    text = build()
    old = BUNDLE.read_text(encoding="utf-8") if BUNDLE.is_file() else None
    if old == text:
        print(f"{BUNDLE.name} is up to date")
        return 0
    if args.check:
        print(f"{BUNDLE.name} is stale: run tools/bundle.py", file=sys.stderr)
        return 1
    atomic_write_text(BUNDLE, text)
    print(f"wrote {BUNDLE} ({len(text.encode()):,} bytes, {text.count(chr(10)) - 1} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
