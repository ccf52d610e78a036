"""A yes-or-maybe check of a config against schemas/config.schema.json, without jsonschema.

SD102 reports jsonschema's own messages, but nearly every config it sees is valid, and
importing jsonschema and walking its validator costs more than the rest of a lint. The
schema is compiled once into plain predicates for the keywords it uses (type, bounds, enum,
properties, $ref, ...) with jsonschema's Draft 2020-12 semantics (bool is no number, 2.0 is
an integer, an enum matches strings by equality). ``accepts`` is True only where jsonschema
finds no error; anything else (an error, or a schema keyword this module does not know,
which makes ``compiled`` None) goes to jsonschema, so the diagnostics are jsonschema's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from ..core.resources import load_schema_file

Check = Callable[[Any], bool]

# Keywords that assert nothing about an instance (annotations, the $defs holder).
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "$defs", "title", "description", "examples", "default", "deprecated"}
)
# Draft 2020-12's assertions and applicators this module implements.
_IMPLEMENTED = frozenset(
    {
        "type",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "required",
        "properties",
        "patternProperties",
        "additionalProperties",
        "items",
        "minItems",
        "allOf",
        "$ref",
    }
)


class Unsupported(Exception):
    """The schema uses something this module does not implement: jsonschema decides alone."""


def _is_integer(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


_TYPES: dict[str, Check] = {
    "array": lambda x: isinstance(x, list),
    "boolean": lambda x: isinstance(x, bool),
    "integer": _is_integer,
    "null": lambda x: x is None,
    "number": _is_number,
    "object": lambda x: isinstance(x, dict),
    "string": lambda x: isinstance(x, str),
}


def _type(types: Any) -> Check:
    names = [types] if isinstance(types, str) else types
    if not isinstance(names, list) or not all(isinstance(t, str) and t in _TYPES for t in names):
        raise Unsupported(f"type {types!r}")
    fns = tuple(_TYPES[t] for t in names)
    if len(fns) == 1:
        return fns[0]
    if len(fns) == 2:
        first, second = fns
        return lambda x: bool(first(x) or second(x))
    return lambda x: any(fn(x) for fn in fns)


def _enum(values: Any) -> Check:
    """jsonschema's ``equal`` for enums of strings and null: a string matches an equal string,
    null matches null, nothing else matches either (other members: jsonschema decides)."""
    if not isinstance(values, list) or not all(v is None or isinstance(v, str) for v in values):
        raise Unsupported("enum of other than strings and null")
    strings = frozenset(v for v in values if isinstance(v, str))
    null = None in values
    return lambda x: (x is None and null) or (isinstance(x, str) and x in strings)


def _bound(keyword: str, limit: Any) -> Check:
    if not _is_number(limit):
        raise Unsupported(f"{keyword} {limit!r}")
    if keyword == "minimum":
        return lambda x: not _is_number(x) or not x < limit
    if keyword == "maximum":
        return lambda x: not _is_number(x) or not x > limit
    if keyword == "exclusiveMinimum":
        return lambda x: not _is_number(x) or not x <= limit
    return lambda x: not _is_number(x) or not x >= limit  # exclusiveMaximum


def _length(keyword: str, limit: Any) -> Check:
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise Unsupported(f"{keyword} {limit!r}")
    if keyword == "minLength":
        return lambda x: not isinstance(x, str) or len(x) >= limit
    return lambda x: not isinstance(x, str) or len(x) <= limit


def _min_items(limit: Any) -> Check:
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise Unsupported(f"minItems {limit!r}")
    return lambda x: not isinstance(x, list) or len(x) >= limit


def _required(names: Any) -> Check:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise Unsupported("required")
    return lambda x: not isinstance(x, dict) or all(n in x for n in names)


def _all(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]
    fns = tuple(checks)

    def every(x: Any) -> bool:
        for fn in fns:  # noqa: SIM110 (a loop, not all(): no generator per value checked)
            if not fn(x):
                return False
        return True

    return every


class _Compiler:
    """Schema dicts to predicates; local ``#/$defs/NAME`` references compiled once each
    (a reference to a definition being compiled, as RoPE's per-layer-type block is, goes
    through a cell filled when that definition is done)."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.defs = root.get("$defs", {})
        self.done: dict[str, list[Check]] = {}

    def ref(self, ref: Any) -> Check:
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            raise Unsupported(f"$ref {ref!r}")
        name = ref.removeprefix("#/$defs/")
        if name not in self.done:
            if name not in self.defs:
                raise Unsupported(f"$ref {ref!r}")
            cell: list[Check] = []
            self.done[name] = cell
            cell.append(self.node(self.defs[name]))
        cell = self.done[name]
        return lambda x: cell[0](x)

    def node(self, schema: Any) -> Check:
        if schema is True:
            return lambda x: True
        if not isinstance(schema, Mapping):
            raise Unsupported("a schema that is not an object or true")
        unknown = set(schema) - _IMPLEMENTED - _ANNOTATIONS
        if unknown:
            raise Unsupported(", ".join(sorted(unknown)))
        checks: list[Check] = []
        for key, value in schema.items():
            if key == "type":
                checks.append(_type(value))
            elif key == "enum":
                checks.append(_enum(value))
            elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                checks.append(_bound(key, value))
            elif key in ("minLength", "maxLength"):
                checks.append(_length(key, value))
            elif key == "required":
                checks.append(_required(value))
            elif key == "items":
                checks.append(self.items(value))
            elif key == "minItems":
                checks.append(_min_items(value))
            elif key == "allOf":
                if not isinstance(value, list) or not value:
                    raise Unsupported("allOf")
                checks.extend(self.node(sub) for sub in value)
            elif key == "$ref":
                checks.append(self.ref(value))
        if {"properties", "patternProperties", "additionalProperties"} & set(schema):
            checks.append(self.members(schema))
        return _all(checks) if checks else (lambda x: True)

    def items(self, sub: Any) -> Check:
        each = self.node(sub)
        return lambda x: not isinstance(x, list) or all(each(v) for v in x)

    def members(self, schema: Mapping[str, Any]) -> Check:
        """properties, patternProperties and additionalProperties of one schema object."""
        props = {k: self.node(v) for k, v in schema.get("properties", {}).items()}
        patterns = [(re.compile(p), self.node(v)) for p, v in schema.get("patternProperties", {}).items()]
        extra = schema.get("additionalProperties")
        rest = None if extra is None else self.node(extra)
        if extra is False:
            raise Unsupported("additionalProperties: false")

        def check(x: Any) -> bool:
            if not isinstance(x, dict):
                return True
            for key, value in x.items():
                fn = props.get(key)
                if fn is not None and not fn(value):
                    return False
                matched = False
                for pattern, sub in patterns:
                    if pattern.search(key):
                        matched = True
                        if not sub(value):
                            return False
                if rest is not None and fn is None and not matched and not rest(value):
                    return False
            return True

        return check


def compile_schema(schema: Mapping[str, Any]) -> Check | None:
    """A predicate true exactly where jsonschema finds no error; None when the schema uses a
    keyword this module does not implement."""
    try:
        return _Compiler(schema).node(schema)
    except Unsupported:
        return None


@cache
def compiled() -> Check | None:
    """schemas/config.schema.json compiled (None: jsonschema checks every file)."""
    return compile_schema(load_schema_file("config.schema.json"))


def accepts(instance: Any) -> bool:
    """True when the config schema certainly accepts ``instance``; False: ask jsonschema."""
    check = compiled()
    return check is not None and check(instance)
