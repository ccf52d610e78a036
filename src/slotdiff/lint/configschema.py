"""schemas/config.schema.json: generated from the key map, applied with jsonschema.

The key map already states every field's type and range under each alias; the generator
turns that into JSON Schema properties (dotted aliases become nested objects) and merges
the hand-kept shapes of ``schemas/config.constraints.json`` on top. The result is a plain
Draft 2020-12 schema that other tools (check-jsonschema) can use on their own.

    python tools/gen_config_schema.py        # rewrite schemas/config.schema.json
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from ..core.jsonout import dumps_line
from ..core.resources import data_dir, load_schema_file
from ..read.source import TEXT_CONFIG_PATHS
from ..schema import layers  # noqa: F401  (importing it registers every layer rule)
from ..schema.keymap import LIST_FUNCTIONS
from ..schema.layer_rules import LAYER_TYPE_KINDS, STEP_KEY_TYPES

SCHEMA_FILE = "config.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: ``uniform(name)`` and the like in a model_type file's ``derive``: ``name`` is read as a list.
_LIST_READ = re.compile(rf"\b(?:{'|'.join(LIST_FUNCTIONS)})\(\s*([A-Za-z_]\w*)\s*\)")


def _field_schema(spec: Mapping[str, Any]) -> dict[str, Any]:
    """One key's schema from a key-map field spec; null always allowed (it means "default")."""
    types = spec.get("type")
    out: dict[str, Any] = {}
    if types is not None:
        types = [types] if isinstance(types, str) else list(types)
        out["type"] = sorted(set(types) | {"null"})
    low = spec.get("minimum")
    if low is not None:
        out["exclusiveMinimum" if spec.get("exclusiveMinimum") else "minimum"] = low
    if spec.get("maximum") is not None:
        out["maximum"] = spec["maximum"]
    if "enum" in spec:
        out["enum"] = [*spec["enum"], None]
    if "items" in spec:  # a type name, or a whole item schema (a per-layer list's entries)
        items = spec["items"]
        out["items"] = dict(items) if isinstance(items, Mapping) else {"type": items}
    if "minItems" in spec:
        out["minItems"] = spec["minItems"]
    return out


def _numeric(spec: Mapping[str, Any]) -> bool:
    """Whether a key schema accepts numbers (untyped accepts anything)."""
    return "type" not in spec or bool({"integer", "number"} & set(spec["type"]))


def _merge_key(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two fields read through the same key: accept what either accepts."""
    out = dict(a)
    if "type" in a or "type" in b:
        if "type" in a and "type" in b:
            out["type"] = sorted(set(a["type"]) | set(b["type"]))
        else:
            out.pop("type", None)  # one side is untyped: anything goes
    for bound, looser in (("minimum", min), ("exclusiveMinimum", min), ("maximum", max)):
        if bound in a and bound in b:
            out[bound] = looser(a[bound], b[bound])
        elif bound in a and not _numeric(b):
            out[bound] = a[bound]  # the other side takes no numbers: a bound binds numbers only
        elif bound in b and not _numeric(a):
            out[bound] = b[bound]
        else:
            out.pop(bound, None)
    if "enum" in a and "enum" in b:
        out["enum"] = [*a["enum"], *(v for v in b["enum"] if v not in a["enum"])]
    else:
        out.pop("enum", None)
    for key in ("items", "minItems"):  # a per-layer list's entries: the side that takes lists
        if key in b and key not in a:
            out[key] = b[key]
    if "properties" in a or "properties" in b:
        props = dict(a.get("properties", {}))
        for key, sub in b.get("properties", {}).items():
            props[key] = _merge_key(props[key], sub) if key in props else sub
        out["properties"] = props
    return out


def _insert(props: dict[str, Any], parts: list[str], leaf: dict[str, Any]) -> None:
    """Put ``leaf`` at the dotted path ``parts`` (a.b.c nests as properties of a and b)."""
    key = parts[0]
    if len(parts) > 1:
        holder = props.setdefault(key, {})
        _insert(holder.setdefault("properties", {}), parts[1:], leaf)
        return
    existing = props.get(key)
    if existing is None:
        props[key] = leaf
    elif set(existing) <= {"properties"}:  # only a holder for nested aliases so far
        props[key] = {**leaf, **existing}
    else:
        props[key] = _merge_key(existing, leaf)


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Overlay wins on scalars; objects merge key by key."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _aliases(keymap: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(config key, field spec) for every alias in the key map and the model_type files, and
    for every key a model_type file's layout step reads (typed by its rule: MiniMax-M3's
    ``layer_map`` reads ``moe_layer_freq`` as a per-layer list, where DeepSeek's class takes an
    interval; the schema accepts what any class accepts)."""
    fields = keymap["fields"]
    for spec in fields.values():
        for alias in spec["aliases"]:
            yield alias, spec
    for path in sorted((data_dir("schemas") / "model_types").glob("*.json")):
        mt = json.loads(path.read_text(encoding="utf-8"))
        for name, aliases in mt.get("aliases", {}).items():
            spec = fields.get(name) or keymap["structure"].get(name)
            if spec is None:
                continue
            for alias in aliases:
                yield alias, spec
        yield from _list_inputs(mt, keymap)
        for step in mt.get("layers", []):
            key_type = STEP_KEY_TYPES.get(step.get("rule", ""))
            if key_type and isinstance(step.get("key"), str):
                yield step["key"], {"type": key_type}


def _list_inputs(mt: Mapping[str, Any], keymap: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(config key, spec) for a family-local name its ``derive`` reads through a list function
    (Hunyuan's ``uniform(moe_topk)``, ERNIE-4.5-VL's ``first(moe_widths)``): the derived field's
    type, or a list (HunYuanMoEV1Config takes ``moe_topk: int | list[int]``)."""
    known = {**keymap["structure"], **keymap["fields"]}
    for target, expr in mt.get("derive", {}).items():
        base = known.get(target)
        if base is None or not isinstance(expr, str):
            continue
        types = base.get("type") or []
        item = {k: v for k, v in base.items() if k in ("type", "maximum")}
        if base.get("minimum") is not None:
            item["exclusiveMinimum" if base.get("exclusiveMinimum") else "minimum"] = base["minimum"]
        listed = {
            **base,
            "type": sorted({*([types] if isinstance(types, str) else types), "array"}),
            "items": item,
            "minItems": 1,
        }
        for name in _LIST_READ.findall(expr):
            if name not in known:
                for alias in mt.get("aliases", {}).get(name, ()):
                    yield alias, listed


def generate() -> dict[str, Any]:
    """The config schema, from the key map, the layer kinds and the hand-kept constraints."""

    keymap = json.loads((data_dir("schemas") / "keymap.json").read_text(encoding="utf-8"))
    constraints = json.loads((data_dir("schemas") / "config.constraints.json").read_text(encoding="utf-8"))
    props: dict[str, Any] = {}
    for alias, spec in _aliases(keymap):
        leaf = _field_schema(spec)
        if spec.get("doc") and "." not in alias:
            leaf["description"] = spec["doc"]
        _insert(props, alias.split("."), leaf)
    model = {"type": "object", "properties": dict(sorted(props.items()))}
    model = _deep_merge(model, {"properties": constraints.get("properties", {})})
    defs = dict(constraints.get("$defs", {}))
    if "layer_type" in defs:  # transformers' kinds plus the ones slotdiff's layer rules read
        known = defs["layer_type"]["enum"]
        extra = sorted(k for k in LAYER_TYPE_KINDS if k not in known)
        defs["layer_type"] = {**defs["layer_type"], "enum": [*known, *extra]}
    containers: dict[str, Any] = {}
    for path in TEXT_CONFIG_PATHS:
        node: dict[str, Any] = {"$ref": "#/$defs/model"}
        for part in reversed(path[1:]):
            node = {"properties": {part: node}}
        containers = _deep_merge(containers, {path[0]: node})
    return {
        "$schema": DIALECT,
        "$id": "https://slotdiff.dev/schemas/config.schema.json",
        "title": "Language-model config.json (the fields slotdiff reads)",
        "description": "Types, ranges and allowed values of the config.json fields slotdiff knows, "
        "under every alias. Generated by tools/gen_config_schema.py from schemas/keymap.json and "
        "schemas/config.constraints.json; null is accepted wherever transformers reads it as "
        "'use the default'. Unknown keys are allowed (slotdiff lint reports them as SD201/SD105).",
        "type": "object",
        "required": constraints.get("required", []),
        "allOf": [{"$ref": "#/$defs/model"}],
        "properties": containers,
        "$defs": {"model": model, **defs},
    }


def render() -> str:
    """The schema file's text (what tools/gen_config_schema.py writes)."""
    return dumps_line(generate())


def _inline(node: Any, defs: Mapping[str, Any], depth: int = 0) -> Any:
    """Replace local ``$ref``s by their targets (a few levels deep; recursion stays a $ref).

    Same meaning (a $ref beside other keywords is their allOf), and twice as fast to
    validate: jsonschema resolves every $ref on every instance through its registry.
    """
    if isinstance(node, list):
        return [_inline(x, defs, depth) for x in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 3:
        target = _inline(defs[ref.removeprefix("#/$defs/")], defs, depth + 1)
        rest = {k: _inline(v, defs, depth) for k, v in node.items() if k != "$ref"}
        return {"allOf": [rest, target]} if rest else target
    return {k: (v if k == "$defs" else _inline(v, defs, depth)) for k, v in node.items()}


@cache
def validator() -> Any:
    """A validator for schemas/config.schema.json (jsonschema is imported here only)."""
    from jsonschema import Draft202012Validator

    schema = load_schema_file(SCHEMA_FILE)
    return Draft202012Validator(_inline(schema, schema.get("$defs", {})))
