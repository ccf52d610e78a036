"""Locate the data folders (schemas/, fingerprints/, catalog/) shipped with the package.

In a wheel they live in ``slotdiff/_data``; in a source checkout (editable install or
tests run from the repository) they are the top-level folders of the repository.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from .bundle import bundled, listing

_PKG = Path(__file__).resolve().parent.parent  # the slotdiff package (this file is in core/)


@cache
def data_dir(name: str) -> Path:
    """Return the folder holding the ``name`` data set (``schemas`` or ``fingerprints``)."""
    packaged = _PKG / "_data" / name
    if packaged.is_dir():
        return packaged
    checkout = _PKG.parent.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"slotdiff data folder {name!r} is missing from this installation")


def catalog_dir() -> Path:
    """The bundled catalog of published configs, inside the package itself."""
    return _PKG / "catalog"


@cache
def load_schema_file(filename: str) -> Any:
    """One JSON file of ``schemas/``, parsed: from the knowledge bundle, else the file itself
    (cached: these files never change at run time)."""
    try:
        return bundled(f"schemas/{filename}")
    except KeyError:
        with open(data_dir("schemas") / filename, encoding="utf-8") as fh:
            return json.load(fh)


def schema_folder(folder: str) -> list[str]:
    """The JSON file names of ``schemas/<folder>``, sorted (the bundle's listing when it is on)."""
    names = listing(f"schemas/{folder}")
    if names is None:
        names = sorted(p.name for p in (data_dir("schemas") / folder).glob("*.json"))
    return names
