"""Resolve MODEL to a raw config: local file or folder → Hub → bundled catalog.

The result keeps the parsed JSON, key positions (for ``file:line:col`` diagnostics) and an
honest account of where the bytes came from. Multimodal configs nest the text model; the
nested part is located here so later stages read one text config.
"""

from __future__ import annotations

import csv
import difflib
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from ..core.errors import SlotdiffError
from ..core.files import read_capped
from ..core.printable import json_kind, one_line
from ..core.resources import catalog_dir
from .hf_quant import FILENAME as QUANT_FILE
from .hf_quant import read_sidecar
from .hub import download_config, hub_deadline
from .hub_errors import HubFailure, looks_like_repo_id
from .hub_sidecar import fetch_sidecar
from .jsonpos import MAX_BYTES, JSONInputError, Parsed, parse

# Keys under which multimodal / composite configs keep their language model, in the order
# they are tried; a value is a path of keys (thinker_config nests once more).
TEXT_CONFIG_PATHS: tuple[tuple[str, ...], ...] = (
    ("text_config",),
    ("llm_config",),
    ("language_config",),
    ("text_model_config",),
    ("thinker_config", "text_config"),
    ("decoder",),
)
VISION_CONFIG_KEYS = ("vision_config", "vision_tower_config", "visual", "vision_encoder")
AUDIO_CONFIG_KEYS = ("audio_config", "audio_encoder_config", "whisper_config")


@dataclass(frozen=True)
class CatalogEntry:
    """One bundled published config and where it was taken from."""

    repo_id: str
    aliases: tuple[str, ...]
    file: str
    complete: bool
    source: str
    notes: str


@dataclass(frozen=True)
class RawConfig:
    """A config as read, before any interpretation."""

    name: str  # what the user asked for (path or repo id)
    data: Mapping[str, Any]
    parsed: Parsed
    origin: str  # file | hub | hf-cache | catalog
    location: str  # path on disk
    repo_id: str | None = None
    revision: str | None = None
    note: str | None = None  # provenance or fallback explanation, shown to the user
    catalog: CatalogEntry | None = None
    # hf_quant_config.json's (quant_algo, kv_cache_quant_algo) where ModelOpt's file was read
    # (read.hf_quant.SidecarQuant.section), its algorithm null included.
    quant_file: tuple[str | None, str | None] | None = None

    # Cached: the schema layer reads both for every field it resolves (``data`` is never
    # modified once read).
    @cached_property
    def text_path(self) -> tuple[str, ...]:
        """Where the language model's config sits inside ``data`` (empty at top level)."""
        return text_config_path(self.data)

    @cached_property
    def text(self) -> Mapping[str, Any]:
        """The language model's config mapping (the top level for plain LMs)."""
        node: Any = self.data
        for key in self.text_path:
            node = node[key]
        return node


def custom_code(node: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(auto class, code reference) for each entry of ``node``'s ``auto_map``.

    ``auto_map`` tells transformers which Python module of the repo to import (with
    ``trust_remote_code=True``) for each Auto class: ``"AutoModelForCausalLM":
    "modeling_deepseek.DeepseekV3ForCausalLM"``, or ``"other/repo--module.Class"`` for code
    in another repo. slotdiff only reads these strings, to say what loading would run; it
    never resolves, downloads or imports any of them. A value that is not an object or a
    string (AutoTokenizer's [slow, fast] pair aside) is listed as what it is.
    """
    amap = node.get("auto_map")
    if amap is None:
        return ()
    if not isinstance(amap, Mapping):
        return (("auto_map", f"<{type(amap).__name__}, not an object>"),)
    out: list[tuple[str, str]] = []
    for cls, ref in amap.items():
        refs = ref if isinstance(ref, list) else [ref]
        for r in refs:
            if r is None:
                continue
            text = one_line(r) if isinstance(r, str) else f"<{type(r).__name__}>"
            out.append((one_line(str(cls))[:80], text if len(text) <= 120 else text[:117] + "..."))
    return tuple(out)


def custom_code_text(refs: tuple[tuple[str, str], ...], limit: int = 4) -> str:
    """``AutoConfig → configuration_x.XConfig, ...`` (the first ``limit``, then a count)."""
    shown = ", ".join(f"{cls} → {ref}" for cls, ref in refs[:limit])
    return shown + (f", +{len(refs) - limit} more" if len(refs) > limit else "")


def text_config_path(data: Mapping[str, Any]) -> tuple[str, ...]:
    """Path to the nested text config, or ``()`` when the config is a plain LM."""
    for path in TEXT_CONFIG_PATHS:
        node: Any = data
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and node:
            return path
    return ()


@cache
def catalog() -> dict[str, CatalogEntry]:
    """Bundled catalog keyed by repo id and by each alias (case-insensitive)."""
    index = catalog_dir() / "index.tsv"
    out: dict[str, CatalogEntry] = {}
    with open(index, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            entry = CatalogEntry(
                repo_id=row["repo_id"],
                aliases=tuple(a for a in row["aliases"].split(",") if a),
                file=row["file"],
                complete=row["complete"] == "yes",
                source=row["source"],
                notes=row["notes"],
            )
            for key in (entry.repo_id, *entry.aliases):
                out[key.lower()] = entry
    return out


def catalog_entries() -> list[CatalogEntry]:
    """Each catalog entry once, in index order."""
    seen: dict[str, CatalogEntry] = {}
    for entry in catalog().values():
        seen.setdefault(entry.repo_id, entry)
    return list(seen.values())


def closest_entries(spec: str, n: int = 3) -> list[str]:
    """Catalog repo ids closest to ``spec`` (difflib), for a "did you mean" after a miss; an
    id without its org is matched against the names after the slash."""
    entries = {e.repo_id.lower(): e.repo_id for e in catalog_entries()}
    names = {e.repo_id.split("/")[-1].lower(): e.repo_id for e in catalog_entries()}
    want = spec.lower().strip()
    hits = difflib.get_close_matches(want, list(entries), n=n, cutoff=0.6)
    out = [entries[h] for h in hits]
    for h in difflib.get_close_matches(want.split("/")[-1], list(names), n=n, cutoff=0.75):
        if names[h] not in out:
            out.append(names[h])
    return [r for r in out if r.lower() != want][:n]


def _did_you_mean(spec: str) -> str:
    near = closest_entries(spec)
    if not near:
        return ""
    also = f" (also close: {', '.join(near[1:])})" if len(near) > 1 else ""
    return f"; did you mean {near[0]}?{also}"


def read_bytes(path: Path, name: str) -> bytes:
    """Read a config file with the size cap applied before reading it whole (through
    ``core.files.read_capped``: regular files only, never blocking, never past the cap)."""

    if path.is_dir():
        raise SlotdiffError(name, "is a directory without config.json")
    return read_capped(path, name, MAX_BYTES)


def parse_config(raw: bytes | str, name: str) -> tuple[Mapping[str, Any], Parsed]:
    """Parse config text; the top level must be a JSON object."""
    try:
        parsed = parse(raw)
    except JSONInputError as err:
        raise SlotdiffError(f"{name}:{err.line}:{err.col}", err.message) from err
    if not isinstance(parsed.value, dict):
        raise SlotdiffError(name, f"top level is {json_kind(parsed.value)}, not a JSON object")
    return parsed.value, parsed


def states_quantization(data: Mapping[str, Any]) -> bool:
    """True when config.json's top level holds a non-null ``quantization_config``: vLLM then
    never reads hf_quant_config.json, and neither does slotdiff. Only the top level counts
    (vLLM 0.34.0 transformers_utils/config.py get_config: ``config_dict.get(
    "quantization_config")``); a text config's copy does not stop the file being read, and the
    file, merged at the top, is the one vLLM then uses (model_arch_config_convertor
    get_quantization_config: the top level's, else the text config's)."""
    return data.get("quantization_config") is not None


def with_sidecar(raw: RawConfig, body: bytes | None, name: str, failed: str | None = None) -> RawConfig:
    """``raw`` with the ``quantization_config`` that ModelOpt's hf_quant_config.json (``body``,
    read from ``name``; None: there is none) stands for, and a note saying where it came from;
    ``failed`` says why the file could not be read (the weights are then the config's)."""
    note = failed
    if body is not None:
        doc, _ = parse_config(body, name)
        side = read_sidecar(doc, name)
        note = side.note
        raw = replace(raw, quant_file=side.section)
        if side.config is not None:
            data = {**raw.data, "quantization_config": side.config}
            raw = replace(raw, data=data)
    if note is None:
        return raw
    return replace(raw, note="; ".join(n for n in (raw.note, note) if n))


def from_file(path: Path, name: str | None = None) -> RawConfig:
    """Load a local config.json (or a folder holding one), with ModelOpt's hf_quant_config.json
    beside it when config.json states no quantization (as vLLM reads a local model)."""
    name = name or str(path)
    if path.is_dir():
        path = path / "config.json"
        if not path.is_file():
            raise SlotdiffError(name, "folder has no config.json")
    data, parsed = parse_config(read_bytes(path, name), name)
    raw = RawConfig(name=name, data=data, parsed=parsed, origin="file", location=str(path))
    side = path.parent / QUANT_FILE
    if path.name != "config.json" or states_quantization(data) or not (side.exists() or side.is_symlink()):
        return raw
    return with_sidecar(raw, read_capped(side, str(side), MAX_BYTES), str(side))


def from_catalog(repo_id: str, why: str | None = None) -> RawConfig:
    """Load a bundled published config; ``why`` says why the Hub was not used."""
    entry = catalog().get(repo_id.lower())
    if entry is None:
        raise SlotdiffError(repo_id, "not in the bundled catalog")
    path = catalog_dir() / entry.file
    data, parsed = parse_config(read_bytes(path, repo_id), repo_id)
    note = f"bundled catalog copy of {entry.repo_id}'s published config.json, taken from {entry.source}"
    if not entry.complete:
        note += " (that copy is trimmed: some keys are missing)"
    if why:
        note = f"{why}; served the {note}"
    return RawConfig(
        name=repo_id,
        data=data,
        parsed=parsed,
        origin="catalog",
        location=str(path),
        repo_id=entry.repo_id,
        note=note,
        catalog=entry,
    )


# Hub failures after which a catalog copy is served (the Hub answered nothing useful,
# but the published file is bundled); a missing repo or revision is an error instead.
_FALLBACK_KINDS = frozenset({"offline", "network", "http", "gated"})


# Misses after which the closest catalog entries are suggested: the id may be misspelt.
_SUGGEST_KINDS = frozenset({"offline", "not_found", "network", "http"})


def resolve(spec: str, revision: str | None = None) -> RawConfig:
    """Resolve ``spec``: existing local path → Hub (huggingface_hub) → bundled catalog."""
    path = Path(spec).expanduser()
    if path.exists():
        return from_file(path, spec)

    if not looks_like_repo_id(spec):
        raise SlotdiffError(spec, "no such file, and not a Hub repo id (org/name)" + _did_you_mean(spec))
    started = time.monotonic()
    try:
        local, origin, note = download_config(spec, revision)
    except HubFailure as fail:
        in_catalog = spec.lower() in catalog()
        if in_catalog and fail.kind in _FALLBACK_KINDS and revision in (None, "main"):
            return from_catalog(spec, why=str(fail))
        hint = _did_you_mean(spec) if fail.kind in _SUGGEST_KINDS and not in_catalog else ""
        raise SlotdiffError(spec, str(fail) + hint) from fail
    data, parsed = parse_config(read_bytes(Path(local), spec), spec)
    raw = RawConfig(
        name=spec,
        data=data,
        parsed=parsed,
        origin=origin,
        location=local,
        repo_id=spec,
        revision=revision,
        note=note,
    )
    if states_quantization(data):
        return raw
    # One deadline for both files (a config read from the HF cache reads the other there too).
    left = hub_deadline() - (time.monotonic() - started) if origin == "hub" else None
    body, failed = fetch_sidecar(spec, revision, local, origin, left)
    return with_sidecar(raw, body, f"{spec}/{QUANT_FILE}", failed)
