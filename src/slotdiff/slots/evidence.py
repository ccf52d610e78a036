"""Every config key slotdiff read, shown in a slot: the facet each key belongs to, and a pass
that adds a read key to its facet's evidence when the facet's rule did not cite it itself.

A key belongs to the facet of the canonical field it decided (the key map's ``facet``, or
``field_facets`` in schemas/slots.json for structure facts and the model's dimensions); a
family's local field belongs to the facet of the field its derivation feeds; a key a layer
rule reads directly (a layer list, a pattern) is named in slots.json ``key_facets``. A key an
``unsupported`` refusal cites (the model_type file's reason for refusing to count) is recognised
by that refusal: shown in its facet where one claims it, else returned as refused, never as
unplaced. A read key with no facet is returned as unplaced: the coverage line says so, and the
tests fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from ..core.resources import load_schema_file
from ..schema.arch import Architecture
from ..schema.expr import expression_names
from ..schema.keymap import field_spec, keymap, model_type_spec
from .fill import Fill, slot_table, with_evidence


@cache
def _facets() -> frozenset[str]:
    return frozenset(i.id for i in slot_table())


@cache
def _field_facets() -> Mapping[str, str]:
    data = load_schema_file("slots.json").get("field_facets", {})
    return {k: v for k, v in data.items() if not k.startswith("_")}


@cache
def key_facets() -> Mapping[str, str]:
    """Top-level config key → facet for keys layer rules read directly (slots.json)."""
    data = load_schema_file("slots.json").get("key_facets", {})
    return {k: v for k, v in data.items() if not k.startswith("_")}


@cache  # the data files do not change in a run; every config of a family asks the same
def field_facet(name: str, model_type: str = "") -> str | None:
    """The facet whose evidence shows canonical field ``name``'s keys (None: none known)."""
    facet = _common_facet(name)
    if facet:
        return facet
    # a family's local field (a switch its derivations read): the facet of what it feeds
    spec = model_type_spec(model_type) or {}
    for target, expr in spec.get("derive", {}).items():
        if target != name and name in expression_names(expr):
            found = field_facet(target, "")
            if found:
                return found
    return None


@cache
def _common_facet(name: str) -> str | None:
    """Field ``name``'s facet from slots.json's field_facets or the key map (any model_type's)."""
    own = _field_facets().get(name)
    if own:
        return own
    facet = field_spec(name).get("facet")
    return facet if facet in _facets() else None


def top_key(arch: Architecture, cited: str) -> str:
    """``text_config.rope_scaling.factor`` → ``text_config.rope_scaling`` (the text config's key)."""
    path = arch.text_path
    if not path:
        return cited.partition(".")[0]
    parts = cited.split(".")
    depth = len(path) if parts[: len(path)] == list(path) else 0
    return ".".join(parts[: depth + 1])


def _bare(arch: Architecture, cited: str) -> str:
    prefix = ".".join(arch.text_path) + "." if arch.text_path else ""
    return cited[len(prefix) :] if prefix and cited.startswith(prefix) else cited


def _decided_owners(arch: Architecture) -> dict[str, str]:
    """Each top-level config key that decided a field → the facet it is shown in (the first
    field's, in the order the fields were resolved)."""
    family = arch.donor or arch.model_type
    out: dict[str, str] = {}
    for name, val in arch.fields.items():
        if not val.keys or val.how not in ("explicit", "alias", "derived"):
            continue
        facet = field_facet(name, family)
        if facet:
            for key in val.keys:
                out.setdefault(top_key(arch, key), facet)
    return out


@cache
def _first_alias_facets(model_type: str) -> Mapping[str, str]:
    """:func:`_alias_facets` as a mapping, the first facet of each alias kept."""
    out: dict[str, str] = {}
    for alias, facet in _alias_facets(model_type):
        out.setdefault(alias, facet)
    return out


@cache
def _alias_facets(model_type: str) -> tuple[tuple[str, str], ...]:
    """(top-level alias, facet) for every alias of a field some facet shows, in
    :func:`_alias_fields`' order."""
    pairs = (
        (alias, _common_facet(name) or field_facet(name, model_type))  # the first: cached per field
        for alias, name in _alias_fields(model_type).items()
    )
    return tuple((alias, facet) for alias, facet in pairs if facet)


@cache
def _alias_fields(model_type: str) -> Mapping[str, str]:
    """Top-level config key → the canonical field whose alias it is (the family's own first)."""
    out: dict[str, str] = {}
    spec = model_type_spec(model_type) or {}
    for name, aliases in spec.get("aliases", {}).items():
        for alias in aliases:
            out.setdefault(alias.split(".")[0], name)
    for alias, name in _keymap_alias_fields().items():
        out.setdefault(alias, name)
    return out


@cache
def _keymap_alias_fields() -> Mapping[str, str]:
    """Top-level config key → the key map's field whose alias it is (the first such field)."""
    out: dict[str, str] = {}
    for section in ("fields", "structure"):
        for name, field in keymap()[section].items():
            for alias in field.get("aliases", ()):
                out.setdefault(alias.split(".")[0], name)
    return out


def refusal_keys(arch: Architecture) -> frozenset[str]:
    """The top-level keys the ``unsupported`` refusal cites (none when slotdiff counts the model)."""
    refusal = arch.fields.get("unsupported")
    if refusal is None or not refusal.value:
        return frozenset()
    return frozenset(top_key(arch, k) for k in refusal.keys)


def place_keys(
    arch: Architecture, fills: tuple[Fill, ...]
) -> tuple[tuple[Fill, ...], tuple[str, ...], tuple[str, ...]]:
    """``fills`` with every read key in some facet's evidence, the keys no facet claims, and
    the keys no facet claims that the ``unsupported`` refusal cites (recognised, not unplaced)."""
    shown = {top_key(arch, k) for f in fills for k, _ in f.evidence}
    refused = refusal_keys(arch)
    extra: dict[str, dict[str, Any]] = {}
    unplaced: list[str] = []
    by_refusal: list[str] = []
    # key_owners(arch), built only when a read key is not shown already: the keys that decided
    # a field, then the aliases' facets by their bare name (the text config's prefix removed)
    decided: dict[str, str] | None = None
    prefix = ".".join(arch.text_path) + "." if arch.text_path else ""
    aliases = _first_alias_facets(arch.donor or arch.model_type)
    for key, value in arch.read_keys:
        if key in shown:
            continue
        if decided is None:
            decided = _decided_owners(arch)
        facet = decided.get(key)
        if facet is None and key.startswith(prefix):
            facet = aliases.get(key[len(prefix) :])
        facet = facet or key_facets().get(_bare(arch, key))
        if facet is not None:
            extra.setdefault(facet, {})[key] = value
        elif key in refused:
            by_refusal.append(key)
        else:
            unplaced.append(key)
    out = tuple(
        with_evidence(f, f.evidence + tuple(extra[f.id].items())) if f.id in extra else f for f in fills
    )
    return out, tuple(unplaced), tuple(by_refusal)
