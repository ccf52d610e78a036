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
    """The bundle as read: its header (folders, indexes, digest), its bytes, and where each
    file's JSON text lies in them, decoded only when a stage asks for that file."""

    head: dict[str, Any]
    data: bytes
    spans: dict[str, tuple[int, int]]  # file name → (start, end) of its JSON text in ``data``

    def file(self, name: str) -> Any:
        """The parsed file ``name`` (KeyError when the bundle lacks it); callers cache it."""
        start, end = self.spans[name]
        return json.loads(self.data[start:end])


@cache
def bundle() -> Bundle | None:
    """The bundle, or None when it is absent, of another format, or switched off
    (SLOTDIFF_NO_BUNDLE): one read, and no JSON decoded but the header. Each line is only
    located, not copied out (a run uses a fraction of the files)."""
    if os.environ.get("SLOTDIFF_NO_BUNDLE", "") not in ("", "0"):
        return None
    try:
        with open(BUNDLE, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    find, size = data.find, len(data)
    pos = find(b"\n") % (size + 1)  # the header's end (the whole file when it has one line)
    try:
        head = json.loads(data[:pos])
    except ValueError:
        return None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        return None
    spans = {}
    while pos + 1 < size:  # each line: name, a tab, the file's JSON text (a CR before LF is whitespace)
        end = find(b"\n", pos + 1) % (size + 1)
        tab = find(b"\t", pos + 1, end)
        if tab < 0:
            tab = end
        spans[data[pos + 1 : tab].decode()] = (tab + 1, end)
        pos = end
    return Bundle(head, data, spans)


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
