"""Rules on the model family: a model_type slotdiff or transformers does not know, fields that
contradict the family's implementation, and custom code the config would make transformers
import."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from ...analysis.coverage import UNREAD_REASON, coverage
from ...core.errors import SlotdiffError
from ...core.resources import load_schema_file
from ...cost.inventory.tensor import Unsupported
from ...cost.params import count
from ...read.jsonpos import dotted
from ...read.source import custom_code as refs_of
from ...read.source import custom_code_text
from ...schema.fill import fill, ignored_flat_keys
from ...schema.keymap import known_model_types, transformers_defaults
from ...schema.resolver import Resolver
from ..document import KeyPath, key_path
from ..registry import Hit, params, rule
from .keys import _edits, _known_keys, _scopes


@cache
def _model_types() -> frozenset[str]:
    """Model types transformers has (config_keys.json) or slotdiff has a key-map file for."""

    return frozenset(load_schema_file("config_keys.json")["model_types"]) | known_model_types()


def _unknown_model_types(cx: Any) -> list[tuple[KeyPath, str, str | None]]:
    """(key path, model_type, closest known model_type or None) for each unknown model_type."""
    if "auto_map" in cx.doc.data:
        return []  # custom code names its own config class
    out = []
    for prefix, scope in _scopes(cx):
        mt = scope.get("model_type")
        if not isinstance(mt, str) or not mt or mt in _model_types():
            continue
        limit = 2 if len(mt) >= 6 else 1
        near = sorted((_edits(mt, known, limit), known) for known in _model_types())
        best = near[0][1] if near and near[0][0] <= limit else None
        out.append(((*prefix, "model_type"), mt, best))
    return out


def _present(doc: Any, field: str) -> bool:
    val = doc.fields.get(field)
    return bool(val is not None and val.how in ("explicit", "alias") and val.value)


@rule("SD116", needs="values")
def model_type_mismatch(cx: Any) -> Iterator[Hit]:
    """A misspelled model_type, or fields for a feature its class does not have."""

    doc = cx.doc
    for path, mt, best in _unknown_model_types(cx):
        if best:
            yield Hit(path, f"model_type {mt!r} is not a transformers model type: did you mean {best!r}?")
    if "auto_map" in doc.data or "auto_map" in doc.text_config:
        return
    yield from _ignored_flat_keys(doc)
    res = Resolver(doc.raw)
    defaults = transformers_defaults().get(res.spec.get("defaults_from", res.model_type))
    if not isinstance(defaults, Mapping):
        return  # not a transformers model_type: nothing to compare with
    for feature, fields in params("SD116")["features"].items():
        present = [f for f in fields if _present(doc, f)]
        if not present or _supports(defaults, res, fields):
            continue
        keys = [doc.key_of(f) for f in present]
        shown = ", ".join(dotted(k) for k in keys)
        hint = _suggest(doc, fields)
        yield Hit(
            keys[0],
            f"model_type {res.model_type!r} has no {feature} ({shown} is ignored by its class)"
            + (f"; did you mean model_type {hint}?" if hint else ""),
        )


def _ignored_flat_keys(doc: Any) -> Iterator[Hit]:
    """Flat text keys of a composite without text_config, which its class ignores (it builds
    the text model from the sub-config class's defaults)."""
    filled = fill(doc.raw)
    read_top = {k for k, _ in doc.arch.read_keys} if doc.arch is not None else set()
    ignored = ignored_flat_keys(doc.raw, filled, read_top)
    if ignored:
        shown = ", ".join(ignored[:6]) + (f" and {len(ignored) - 6} more" if len(ignored) > 6 else "")
        yield Hit(
            (ignored[0],),
            f"model_type {doc.data.get('model_type')!r} reads its text model from text_config only: "
            f"without one it builds {filled.data['text_config']['model_type']}'s defaults and "
            f"ignores {shown} (move them under text_config)",
        )


def _supports(defaults: Mapping[str, Any], res: Any, fields: list[str]) -> bool:
    return any(alias.split(".")[0] in defaults for f in fields for alias in res.aliases(f))


def _suggest(doc: Any, fields: list[str]) -> str:
    """Up to three transformers model_types that have the feature and fit this file best.

    Best: a name sharing a stem with the current model_type (qwen3 → qwen3_moe), then one
    slotdiff has a key-map file for, then the largest overlap of keys with the file.
    """

    res = Resolver(doc.raw)
    mine = set(doc.text_config)
    stem = res.model_type.split("_")[0]
    ranked = []
    for mt, keys in transformers_defaults().items():
        if not isinstance(keys, Mapping) or mt.startswith("_") or not _supports(keys, res, fields):
            continue
        overlap = len(mine & set(keys)) / len(mine | set(keys))
        ranked.append((not mt.startswith(stem), mt not in known_model_types(), -overlap, mt))
    return " or ".join(repr(r[-1]) for r in sorted(ranked)[:3])


@rule("SD118", needs="arch")
def derived_key_disagrees(cx: Any) -> Iterator[Hit]:
    """A key the class derives instead of reading, written with another value than it builds."""
    model_type = cx.doc.arch.model_type
    for key, given, built, how in cx.doc.arch.disagreements:
        yield Hit(
            key_path(key),
            f"{key} is {given!r} but {model_type}'s class builds {built!r} ({how}) whatever the key says: "
            "an engine that reads the key builds another model",
        )


@rule("SD205")
def unknown_model_type(cx: Any) -> Iterator[Hit]:
    """A model_type transformers does not know, not close to one it does (SD116 takes typos)."""
    for path, mt, best in _unknown_model_types(cx):
        if not best:
            yield Hit(
                path,
                f"model_type {mt!r} is unknown to transformers {_transformers_version()} and the config "
                "has no auto_map: AutoConfig cannot load it",
            )


@rule("SD206")
def custom_code(cx: Any) -> Iterator[Hit]:
    """auto_map names code transformers would import; report it, never follow it."""

    for prefix, scope in _scopes(cx):
        refs = refs_of(scope)
        if refs:
            yield Hit(
                (*prefix, "auto_map"),
                f"auto_map names custom code that loading imports (trust_remote_code=True): "
                f"{custom_code_text(refs)}",
            )


def _transformers_version() -> str:
    return str(load_schema_file("config_keys.json").get("transformers_version", ""))


@rule("SD207", needs="arch")
def unverified(cx: Any) -> Iterator[Hit]:
    """Figures transformers' classes do not back: each unread key where it stands, and the
    coverage check's other reasons at model_type."""
    doc = cx.doc
    try:
        params = count(doc.arch)
    except Unsupported as err:  # a structure slotdiff cannot count: a coverage reason
        params, refused = None, err.reason
    except SlotdiffError:  # a config no model can have: the SD1xx errors say why
        return
    else:
        refused = None
    trust = coverage(doc.arch, params, refused)
    known = _known_keys()  # a key nothing knows is SD201's (or SD105's, when misspelled)
    disagree = {d[0].partition("[")[0] for d in doc.arch.disagreements}  # SD118's
    for key in doc.arch.unread_keys:
        if key.rpartition(".")[2] in known and key not in disagree:
            yield Hit(key_path(key), f"{key} is read by nothing slotdiff knows and may change the structure")
    # an unknown model_type is SD205's (or SD116's): here only what transformers does know
    others = [r for r in trust.reasons if not r.startswith(UNREAD_REASON) and "(remote code)" not in r]
    if others:
        yield Hit(("model_type",), "figures unverified: " + "; ".join(others))
