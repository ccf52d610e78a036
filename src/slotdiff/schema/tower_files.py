"""The tower data files as a run reads them: vision and audio tower files and composite-model
files (``schemas/vision_types``, ``audio_types``, ``multimodal``; their grammar is
``tower_spec``'s), each ``extends`` chain merged and each tensor item's keys checked.

A composite file is read when a model_type it describes is first asked for: a text model
reads none of them (the bundle's ``multimodal_model_types`` index says which file covers
which model_type without decoding them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from ..core.bundle import index
from ..core.resources import load_schema_file, schema_folder

_ITEM_KEYS = {
    "linear": {"in", "out", "bias", "when", "per", "count", "slot"},
    "conv": {"in", "out", "bias", "when", "per", "count"},
    "norm": {"kind", "width", "when", "count", "slot"},
    "param": {"rows", "cols", "kind", "when", "per", "count", "slot", "routed"},
    "group": {"count", "tensors", "attention", "when", "each", "over"},
}
MULTIMODAL = "multimodal"
COMPOSITE_OWN = ("model_types",)  # what a composite file never inherits through ``extends``


def _check_items(items: list[dict[str, Any]], where: str) -> None:
    for item in items:
        kinds = [k for k in _ITEM_KEYS if k in item]
        if len(kinds) != 1:
            raise ValueError(f"{where}: item {item} must name exactly one of {sorted(_ITEM_KEYS)}")
        extra = set(item) - {kinds[0]} - _ITEM_KEYS[kinds[0]] - {"doc"}
        if extra:
            raise ValueError(f"{where}: item {item[kinds[0]]!r} has unknown keys {sorted(extra)}")
        if kinds[0] == "group":
            _check_items(item["tensors"], where)


def _merged(
    folder_name: str,
    name: str,
    get: Callable[[str], dict[str, Any]],
    known: Mapping[str, Any] | frozenset[str],
    own: tuple[str, ...],
    seen: tuple[str, ...] = (),
) -> dict[str, Any]:
    """File ``name`` of ``schemas/<folder_name>`` with its ``extends`` chain merged: the
    child's keys win, its ``fields`` merged key by key; keys in ``own`` are never inherited."""
    spec = get(name)
    parent = spec.get("extends")
    if not parent:
        return spec
    if parent in seen or parent not in known:
        raise ValueError(f"{folder_name}/{name}.json extends unknown or cyclic {parent!r}")
    inherited = _merged(folder_name, parent, get, known, own, (*seen, name))
    base = {k: v for k, v in inherited.items() if k not in own}
    out = {**base, **spec}
    out["fields"] = {**base.get("fields", {}), **spec.get("fields", {})}
    return out


def _with_extends(folder_name: str, own: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Every file of ``schemas/<folder_name>`` by file stem, each ``extends`` chain merged."""
    raw = {
        name.removesuffix(".json"): load_schema_file(f"{folder_name}/{name}")
        for name in schema_folder(folder_name)
    }
    return {name: _merged(folder_name, name, raw.__getitem__, raw, own) for name in raw}


def _load_towers(folder_name: str) -> dict[str, dict[str, Any]]:
    """Every tower file of ``schemas/<folder_name>``, by file stem, its items checked."""
    out = _with_extends(folder_name)
    for name, spec in out.items():
        _check_items(spec.get("tensors", []), f"{folder_name}/{name}.json")
    return out


@cache
def vision_types() -> dict[str, dict[str, Any]]:
    """Every vision tower file, by its name (the file stem); ``extends`` chains merged (child wins)."""
    return _load_towers("vision_types")


@cache
def audio_types() -> dict[str, dict[str, Any]]:
    """Every audio encoder file (``schemas/audio_types``), in the tower files' grammar.

    A composite model's file names one under ``audio`` (``tower``, ``config_key``,
    ``tower_module``); its fields are read from that config key and kept in the vision
    mapping under :data:`AUDIO_PREFIX` so the rest of the model's figures need no new stage.
    """
    return _load_towers("audio_types")


# Audio encoder fields sit in the vision mapping under this prefix (``audio.hidden``).
AUDIO_PREFIX = "audio."


def _composite(stem: str) -> dict[str, Any]:
    return load_schema_file(f"{MULTIMODAL}/{stem}.json")


def multimodal_index() -> list[list[str]]:
    """[model_type, file stem] of every composite file, in the order ``multimodal_types``
    lists them (a later file naming the same model_type wins): read from every file (what
    tools/bundle.py stores as the bundle's ``multimodal_model_types`` index)."""
    stems: dict[str, str] = {}
    for name in schema_folder(MULTIMODAL):
        stem = name.removesuffix(".json")
        for model_type in _composite(stem).get("model_types", [stem]):
            stems[model_type] = stem
    return [[model_type, stem] for model_type, stem in stems.items()]


class Composites(Mapping[str, dict[str, Any]]):
    """Composite-model files by the top-level model_type each describes (``extends``: a
    sibling file's connector, fields and images, never its model_types); a file is read, its
    chain merged and its connector's items checked, when first asked for."""

    def __init__(self, pairs: list[list[str]]) -> None:
        self._stems = {model_type: stem for model_type, stem in pairs}
        self._known = frozenset(name.removesuffix(".json") for name in schema_folder(MULTIMODAL))
        self._specs: dict[str, dict[str, Any]] = {}

    def __getitem__(self, model_type: str) -> dict[str, Any]:
        stem = self._stems[model_type]
        spec = self._specs.get(stem)
        if spec is None:
            spec = _merged(MULTIMODAL, stem, _composite, self._known, COMPOSITE_OWN)
            _check_items(spec.get("connector", []), f"{stem}.json")
            self._specs[stem] = spec
        return spec

    def __iter__(self) -> Iterator[str]:
        return iter(self._stems)

    def __len__(self) -> int:
        return len(self._stems)


@cache
def multimodal_types() -> Composites:
    """Every composite-model file, by the top-level model_type it describes."""
    pairs = index("multimodal_model_types")
    return Composites(multimodal_index() if pairs is None else pairs)
