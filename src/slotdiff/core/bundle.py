"""The knowledge bundle: every data file of schemas/ and fingerprints/ in one file, read once.

A run needs hundreds of small JSON files (every model_type file for the known keys, every
fingerprint for the nearest family, every composite file for its ``extends`` chains); opening
and decoding them one by one cost more than the analysis. ``tools/bundle.py`` validates them
once, against their JSON Schemas, and writes ``slotdiff/knowledge.bundle``: a first line of
JSON (the folder listings, the indexes a stage would otherwise rebuild, such as the known
keys, and the SHA-256 of the sources it was made from), then one line per file, its path, a
tab and its compact JSON. A run reads it in one read and decodes only the files it uses.
``tests/test_bundle.py`` fails when the bundle is stale against its sources.

``SLOTDIFF_NO_BUNDLE=1`` (or a missing bundle) reads the sources themselves: the test suite
does so when it finds the bundle stale, so edits to schemas/ are tested before regenerating.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

BUNDLE = Path(__file__).resolve().parent.parent / "knowledge.bundle"
SOURCES = ("schemas", "fingerprints")  # data sets bundled, each a folder of JSON files
FORMAT = 1


def source_files(roots: Mapping[str, Path]) -> list[tuple[str, Path]]:
    """Every source under ``roots`` (data set name → folder) as (``set/relative/path.json``,
    path), in a stable order."""
    out = []
    for name, root in sorted(roots.items()):
        for path in sorted(root.rglob("*.json")):
            out.append((f"{name}/{path.relative_to(root).as_posix()}", path))
    return out


def sources_digest(roots: Mapping[str, Path]) -> str:
    """SHA-256 over every source's name and bytes: what the bundle must have been made from."""
    h = hashlib.sha256()
    for name, path in source_files(roots):
        data = path.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@dataclass(frozen=True, eq=False)
class Bundle:
    """The bundle as read: its header (folders, indexes, digest) and each file's JSON text,
    decoded only when a stage asks for that file."""

    head: dict[str, Any]
    texts: dict[str, bytes]

    def file(self, name: str) -> Any:
        """The parsed file ``name`` (KeyError when the bundle lacks it); callers cache it."""
        return json.loads(self.texts[name])


@cache
def bundle() -> Bundle | None:
    """The bundle, or None when it is absent, of another format, or switched off
    (SLOTDIFF_NO_BUNDLE): one read, and no JSON decoded but the header."""
    if os.environ.get("SLOTDIFF_NO_BUNDLE", "") not in ("", "0"):
        return None
    try:
        with open(BUNDLE, "rb") as fh:
            first, *rest = fh.read().splitlines()
    except (FileNotFoundError, ValueError):
        return None
    head = json.loads(first)
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        return None
    texts = {}
    for line in rest:
        name, _, text = line.partition(b"\t")
        texts[name.decode()] = text
    return Bundle(head, texts)


def bundled(name: str) -> Any:
    """The parsed file ``name`` (``schemas/keymap.json``) from the bundle; KeyError when the
    bundle is off or lacks it (the caller then reads the source)."""
    b = bundle()
    if b is None:
        raise KeyError(name)
    return b.file(name)


def listing(folder: str) -> list[str] | None:
    """File names (sorted) of a bundled folder (``schemas/model_types``), None when the bundle is off."""
    b = bundle()
    return None if b is None else b.head["folders"].get(folder, [])


def index(name: str) -> Any:
    """A precomputed index (``known_keys``), None when the bundle is off."""
    b = bundle()
    return None if b is None else b.head["index"].get(name)
