"""``--update-fingerprints DIR``: propose a family file for each new design a scan found.

Each file is what ``slotdiff fingerprint`` would write for the design's first model, plus
every model of the scan that shares it as exemplars and their sizes (so the next scan can
tell a new size from a known one). Names are slugs of the model_type and fingerprint id,
never repo ids; an existing file is left alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.files import atomic_write_text, safe_child
from ..core.jsonout import dumps_line
from ..slots.classify import _article, fingerprint_from_dict, slugify


def family_file(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint-file object for one new design (``report.new_fingerprints`` entry)."""
    fp = fingerprint_from_dict(entry["fills"])
    # The model_type most of its models declare comes first (it names the file).
    counts = Counter(entry.get("model_type_of", {}).values())
    model_types = sorted(entry["model_types"], key=lambda t: -counts[t]) or ["unknown"]
    name = f"{model_types[0]} {fp.id} (proposed by slotdiff scan)"
    return {
        "$schema": "../schemas/fingerprint.schema.json",
        "name": name,
        "id": fp.id,
        "label": entry["label"] or "",
        "model_types": model_types,
        "exemplars": list(entry["models"]),
        "fills": fp.as_dict(),
        "articles": {f: _article(f) for f, _, _ in fp.facets},
        "sizes": list(entry.get("sizes", [])),
        "notes": "Proposed by slotdiff scan: rename it, check the exemplars, and commit it to fingerprints/.",
    }


def write_proposals(folder: Path, entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """Write one file per new design into ``folder``; return the paths written."""
    written = []
    for entry in entries:
        if not entry.get("fills"):
            continue
        record = family_file(entry)
        stem = slugify(f"{record['model_types'][0]}-{record['id']}")
        target = safe_child(folder, stem + ".json")
        if target.exists():
            continue
        atomic_write_text(target, dumps_line(record))
        written.append(str(target))
    return written
