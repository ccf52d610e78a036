"""Config rules (SD1xx errors, SD2xx warnings): each reads one file and yields Hits.

A rule's code, severity and documentation are in schemas/rules.json; here a rule only says
where and what. ``cx`` is the file's :class:`~slotdiff.lint.engine.FileContext`; its
``doc`` is the lazily-built :class:`~slotdiff.lint.document.Document`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from ..core.resources import load_schema_file
from ..read.jsonpos import dotted
from ..read.source import custom_code as refs_of
from ..read.source import custom_code_text
from ..schema.keymap import keymap, known_keys, known_model_types, transformers_defaults
from ..schema.resolver import Resolver
from .configschema import validator
from .document import KeyPath, key_path
from .registry import Hit, Pos, params, rule

# ---------------------------------------------------------------------- SD101-SD105


@rule("SD101", needs="text")
def invalid_json(cx: Any) -> Iterator[Hit]:
    """The bytes must be UTF-8 JSON with an object at the top."""
    err = cx.doc.error
    if err is not None:
        yield Hit(Pos(err.line, err.col), err.message)


_SCHEMA_MESSAGE_CAP = 160


@rule("SD102")
def schema(cx: Any) -> Iterator[Hit]:
    """Types, ranges and enumerations from schemas/config.schema.json."""

    errors = list(validator().iter_errors(cx.doc.data))
    if not errors:
        return
    # One diagnostic per problem: a list whose items fail the same way is one problem.
    seen: dict[tuple[Any, ...], int] = {}
    firsts: list[Any] = []
    for err in sorted(errors, key=lambda e: [(isinstance(p, int), p) for p in e.absolute_path]):
        path = tuple(err.absolute_path)
        group = (path[:-1], err.validator) if path and isinstance(path[-1], int) else (path, id(err))
        if group in seen:
            seen[group] += 1
            continue
        seen[group] = 0
        firsts.append((group, path, err))
    for group, path, err in firsts:
        message = err.message
        if len(message) > _SCHEMA_MESSAGE_CAP:
            message = message[: _SCHEMA_MESSAGE_CAP - 3] + "..."
        more = seen[group]
        if more:
            message += f" (and {more} more in this list)"
        yield Hit(path, f"{dotted(path)}: {message}" if path else message)


@rule("SD103")
def unreadable(cx: Any) -> Iterator[Hit]:
    """What the schema layer (Resolver, layer layout) refuses, where SD102 has not said it."""
    err = cx.doc.build_error
    if err is not None:
        where = key_path(err.key) if err.key else ()
        yield Hit(where, f"{err.key}: {err.reason}" if err.key else err.reason)


@rule("SD104")
def duplicate_key(cx: Any) -> Iterator[Hit]:
    """A key twice in one object: loaders keep the last value silently."""
    if not cx.doc.has_duplicates:
        return
    parsed = cx.doc.parsed
    for path, pos in parsed.duplicates:
        first = parsed.positions.get(path)
        at = f" (first at line {first[0]})" if first else ""
        yield Hit(Pos(*pos), f"duplicate key {dotted(path)!r}{at}; loaders keep this later value")


@cache
def _known_keys() -> frozenset[str]:
    """Keys some transformers config class or slotdiff's key map knows."""

    return frozenset(load_schema_file("config_keys.json")["keys"]) | known_keys()


@cache
def _read_keys() -> Mapping[int, tuple[str, ...]]:
    """Keys slotdiff reads (the key map's aliases) by length: what a misspelling is matched to."""

    by_length: dict[int, list[str]] = {}
    for key in sorted(known_keys() - set(keymap()["ignored"])):
        by_length.setdefault(len(key), []).append(key)
    return {n: tuple(keys) for n, keys in by_length.items()}


def _edits(a: str, b: str, limit: int) -> int:
    """Optimal-string-alignment distance, stopping early past ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return limit + 1
        prev2, prev = prev, cur
    return prev[-1]


def _scopes(cx: Any) -> Iterator[tuple[KeyPath, Mapping[str, Any]]]:
    """The objects whose keys are config keys: the top level and the nested text config."""
    yield (), cx.doc.data
    if cx.doc.text_path:
        yield cx.doc.text_path, cx.doc.text_config


@cache
def _near(key: str) -> tuple[tuple[int, str], ...]:
    """(edits, key slotdiff reads) within the edit limit of ``key``, closest first."""
    p = params("SD105")
    if len(key) < p["min_length"]:
        return ()
    limit = p["max_edits_long"] if len(key) >= p["long_from"] else p["max_edits_short"]
    targets, letters = _read_keys(), set(key)
    found = []
    for n in range(len(key) - limit, len(key) + limit + 1):
        for target in targets.get(n, ()):
            # An edit changes at most two letters of the letter set: a cheap lower bound.
            if len(letters ^ set(target)) > 2 * limit:
                continue
            d = _edits(key, target, limit)
            if d <= limit:
                found.append((d, target))
    return tuple(sorted(found))


def _unknown(cx: Any) -> list[tuple[KeyPath, str | None]]:
    """(key path, suggested spelling or None) for each key nobody knows; cached per file."""
    if "unknown" in cx.cache:
        return cx.cache["unknown"]
    known = _known_keys()
    out: list[tuple[KeyPath, str | None]] = []
    for prefix, scope in _scopes(cx):
        for key in scope:
            if key in known or key.startswith("_"):
                continue
            # A near miss counts only when the key it resembles is absent: otherwise it is a stray.
            best = next((target for _, target in _near(key) if target not in scope), None)
            out.append(((*prefix, key), best))
    cx.cache["unknown"] = out
    return out


@rule("SD105")
def misspelled_key(cx: Any) -> Iterator[Hit]:
    """An unknown key a typo away from a key slotdiff reads, which the file lacks."""
    for path, suggestion in _unknown(cx):
        if suggestion:
            yield Hit(
                path,
                f"unknown key {path[-1]!r}: did you mean {suggestion!r}? "
                f"(loaders ignore {path[-1]!r} and use the default for {suggestion!r})",
            )


# ---------------------------------------------------------------------- SD110-SD116


def _positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def _mla(cx: Any) -> bool:
    return bool(cx.doc.value("kv_lora_rank"))


@rule("SD110", needs="values")
def kv_heads_divisor(cx: Any) -> Iterator[Hit]:
    """Query heads must split evenly over KV heads (GQA)."""
    doc = cx.doc
    h, g = doc.value("n_heads"), doc.value("n_kv_heads")
    if _mla(cx) or not (_positive_int(h) and _positive_int(g)) or h % g == 0:
        return
    where = doc.key_of("n_kv_heads") or doc.key_of("n_heads")
    hk, gk = _name(doc, "n_heads"), _name(doc, "n_kv_heads")
    yield Hit(
        where, f"{hk} {h} is not a multiple of {gk} {g}: {h} query heads cannot share {g} KV heads evenly"
    )


def _name(doc: Any, field: str) -> str:
    """The key a field was written as (its last part), or the field's first alias."""
    path = doc.key_of(field)
    if path:
        return str(path[-1])

    return keymap()["fields"][field]["aliases"][0]


@rule("SD111", needs="values")
def head_dim_mismatch(cx: Any) -> Iterator[Hit]:
    """Without head_dim, heads × head width must come out at hidden_size."""
    doc = cx.doc
    d, h = doc.value("d_model"), doc.value("n_heads")
    hd_val = doc.fields.get("head_dim")
    if _mla(cx) or not (_positive_int(d) and _positive_int(h)) or hd_val is None:
        return
    where = doc.key_of("d_model") or doc.key_of("n_heads")
    dk, hk = _name(doc, "d_model"), _name(doc, "n_heads")
    if hd_val.how == "derived" and d % h:
        hd = d // h
        yield Hit(
            where,
            f"{dk} {d} is not divisible by {hk} {h} and no head_dim is given: loaders use head_dim "
            f"{hd} ({h} × {hd} = {h * hd}, not {d})",
        )
    elif hd_val.how == "default" and _positive_int(hd_val.value) and h * hd_val.value != d:
        hd = hd_val.value
        mt = doc.text_config.get("model_type") or doc.data.get("model_type")
        yield Hit(
            where,
            f"no head_dim is given, so the {mt} class's default head_dim {hd} applies: "
            f"{h} × {hd} = {h * hd}, not {dk} {d}",
        )


@rule("SD112", needs="values")
def top_k_exceeds_experts(cx: Any) -> Iterator[Hit]:
    """A token cannot be routed to more experts than exist."""
    doc = cx.doc
    e, k = doc.value("n_experts"), doc.value("top_k")
    if _positive_int(e) and _positive_int(k) and k > e:
        yield Hit(
            doc.key_of("top_k") or doc.key_of("n_experts"),
            f"{_name(doc, 'top_k')} {k} is larger than {_name(doc, 'n_experts')} {e}",
        )


@rule("SD113", needs="values")
def layer_types_length(cx: Any) -> Iterator[Hit]:
    """layer_types needs one entry per layer."""
    doc = cx.doc
    types, n = doc.value("layer_types"), doc.value("n_layers")
    if isinstance(types, list) and _positive_int(n) and len(types) != n and doc.given("layer_types"):
        yield Hit(
            doc.key_of("layer_types"),
            f"layer_types has {len(types)} entries for {_name(doc, 'n_layers')} {n}",
        )


def _rope_blocks(cx: Any) -> Iterator[tuple[KeyPath, Mapping[str, Any]]]:
    """Every RoPE parameter block: rope_scaling / rope_parameters and per-layer-type blocks."""
    for prefix, scope in _scopes(cx):
        for key in ("rope_scaling", "rope_parameters"):
            block = scope.get(key)
            if not isinstance(block, Mapping):
                continue
            yield (*prefix, key), block
            for sub, inner in block.items():
                if isinstance(inner, Mapping):
                    yield (*prefix, key, sub), inner


@rule("SD114")
def rope_scaling_fields(cx: Any) -> Iterator[Hit]:
    """A RoPE scaling type needs its own fields."""
    required: Mapping[str, list[str]] = params("SD114")["required"]
    for path, block in _rope_blocks(cx):
        kind = block.get("rope_type", block.get("type"))
        if not isinstance(kind, str) or kind not in required:
            continue
        missing = [f for f in required[kind] if block.get(f) is None]
        if missing:
            yield Hit(path, f"{dotted(path)}: {kind} scaling needs {', '.join(missing)}")


@rule("SD115", needs="values")
def mla_partial(cx: Any) -> Iterator[Hit]:
    """MLA fields come as a set."""
    doc = cx.doc
    fields = params("SD115")["fields"]
    given = [f for f in fields if doc.given(f)]
    if given and len(given) < len(fields):
        missing = [f for f in fields if f not in given]
        yield Hit(
            doc.key_of(given[0]),
            f"MLA fields partly given: {', '.join(given)} set, {', '.join(missing)} missing",
        )


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


# ---------------------------------------------------------------------- SD201-SD204


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


@rule("SD201")
def unknown_key(cx: Any) -> Iterator[Hit]:
    """A key no config class knows (not checked for custom-code configs)."""
    if "auto_map" in cx.doc.data:
        return
    for path, suggestion in _unknown(cx):
        if not suggestion:
            yield Hit(path, f"unknown key {dotted(path)!r}: no transformers config class reads it")


@rule("SD202")
def deprecated_key(cx: Any) -> Iterator[Hit]:
    """Spellings transformers has deprecated."""
    table: Mapping[str, Mapping[str, str]] = params("SD202")["keys"]
    for prefix, scope in _scopes(cx):
        for name, info in table.items():
            parent, _, leaf = name.rpartition(".")
            node = scope.get(parent) if parent else scope
            if not isinstance(node, Mapping) or leaf not in node:
                continue
            path = (*prefix, *key_path(name))
            since = f" ({info['since']})" if info.get("since") else ""
            yield Hit(path, f"{dotted(path)} is deprecated: write {info['use']}{since}")


@rule("SD203", needs="values")
def tensor_core_size(cx: Any) -> Iterator[Hit]:
    """Widths that tile badly on tensor cores."""
    doc = cx.doc
    for field, multiple in params("SD203")["multiples"].items():
        value = doc.value(field)
        if not doc.given(field) or not _positive_int(value) or value % multiple == 0:
            continue
        if field == "head_dim" and _mla(cx):
            continue
        padded = -(-value // multiple) * multiple
        yield Hit(
            doc.key_of(field),
            f"{_name(doc, field)} {value} is not a multiple of {multiple} (tensor cores tile "
            f"{multiple}); {padded} would be",
        )


@rule("SD204", needs="arch")
def window_exceeds_context(cx: Any) -> Iterator[Hit]:
    """A sliding window as long as the context never slides."""
    doc = cx.doc
    context = doc.value("max_positions")
    windows = sorted({s.window for s in doc.arch.layers if s.window})
    if not _positive_int(context) or not windows or windows[-1] < context:
        return
    w = windows[-1]
    yield Hit(
        doc.key_of("sliding_window") or doc.key_of("max_positions"),
        f"sliding window {w:,} ≥ {_name(doc, 'max_positions')} {context:,}: the window never "
        "closes, so these layers attend to the whole context",
    )
