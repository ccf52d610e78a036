"""Rules on a config's keys: it parses, matches the schema, has no duplicate, misspelled,
unknown or deprecated keys. Each rule reads one file and yields Hits.

A rule's code, severity and documentation are in schemas/rules.json; here a rule only says
where and what. ``cx`` is the file's :class:`~slotdiff.lint.engine.FileContext`; its
``doc`` is the lazily-built :class:`~slotdiff.lint.document.Document`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from ...core.resources import load_schema_file
from ...read.jsonpos import dotted
from ...schema.keymap import keymap, known_keys, transformers_defaults
from ..configschema import validator
from ..document import KeyPath, key_path
from ..registry import Hit, Pos, params, rule
from ..schemacheck import accepts

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

    if accepts(cx.doc.data):  # valid, as nearly every config is: jsonschema need not load
        return
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
    if err is not None and not getattr(err, "code", None):  # a relation's own rule reports it
        side = cx.doc.sidecar
        if side is not None and err.source and err.source.startswith(side[0]):  # hf_quant_config.json's
            yield Hit(
                (), f"{err.source}: {err.key}: {err.reason}" if err.key else f"{err.source}: {err.reason}"
            )
            return
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

    return frozenset(load_schema_file("config_keys.json")["keys"]) | known_keys(family_ignored=False)


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


def _class_keys(scope: Mapping[str, Any]) -> frozenset[str] | None:
    """Keys slotdiff reads that the scope's transformers config class accepts (its fields in
    defaults.json, its attribute_map aliases in config_keys.json): empty for a model_type
    transformers does not have (its loader is not known), None for a scope without one."""
    model_type = scope.get("model_type")
    if not isinstance(model_type, str):
        return None
    fields = transformers_defaults().get(model_type)
    if not isinstance(fields, Mapping):
        return frozenset()
    aliases = load_schema_file("config_keys.json").get("attribute_aliases", {}).get(model_type, [])
    return frozenset(fields) | frozenset(aliases)


def _unknown(cx: Any) -> list[tuple[KeyPath, str | None]]:
    """(key path, suggested spelling or None) for each key nobody knows; cached per file.

    A spelling is suggested only where the loader is known and would read it: never for custom
    code (``auto_map``) or a model_type transformers does not have, and for a transformers
    model_type only among its class's keys (MiMo's ``layernorm_epsilon`` is no typo of GPT-2's
    ``layer_norm_epsilon``: MiMo's class reads neither)."""
    if "unknown" in cx.cache:
        return cx.cache["unknown"]
    known = _known_keys()
    custom = "auto_map" in cx.doc.data or "auto_map" in cx.doc.text_config
    out: list[tuple[KeyPath, str | None]] = []
    cap, more = params("SD201")["max_listed"], 0
    for prefix, scope in _scopes(cx):
        accepted = _class_keys(scope)
        for key in scope:
            if key in known or key.startswith("_"):
                continue
            if len(out) >= cap:  # 99,000 near misses: counted, not spelled (linear, bounded output)
                more += 1
                continue
            # A near miss counts only when the key it resembles is absent: otherwise it is a stray.
            best = next(
                (
                    target
                    for _, target in _near(key)
                    if target not in scope and not custom and (accepted is None or target in accepted)
                ),
                None,
            )
            out.append(((*prefix, key), best))
    cx.cache["unknown"] = out
    cx.cache["unknown_more"] = more
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
    more = cx.cache["unknown_more"]
    if more and "auto_map" not in cx.doc.data:  # a typo must not hide behind 1,000 strays
        yield Hit(
            (),
            f"{more:,} more unknown keys past the first {params('SD201')['max_listed']:,} were not "
            "checked for misspellings; no config has that many: remove them",
        )


# ---------------------------------------------------------------------- SD110-SD116


# ---------------------------------------------------------------------- SD201-SD204


@rule("SD201")
def unknown_key(cx: Any) -> Iterator[Hit]:
    """A key no config class knows (not checked for custom-code configs)."""
    if "auto_map" in cx.doc.data:
        return
    for path, suggestion in _unknown(cx):
        if not suggestion:
            yield Hit(path, f"unknown key {dotted(path)!r}: no transformers config class reads it")
    more = cx.cache["unknown_more"]
    if more:
        cap = params("SD201")["max_listed"]
        yield Hit((), f"and {more:,} more unknown keys, not listed (at most {cap:,})")


def _has_path(data: Any, path: KeyPath) -> bool:
    for key in path:
        if not isinstance(data, Mapping) or key not in data:
            return False
        data = data[key]
    return True


def _earlier_version(cx: Any) -> Mapping[str, Any] | None:
    """The file as it was at ``--diff-base`` (not the policy's baseline, another model)."""
    if cx.base is None or cx.base_label.startswith("baseline "):
        return None
    data = cx.base.data
    return data if isinstance(data, Mapping) else None


@rule("SD202")
def deprecated_key(cx: Any) -> Iterator[Hit]:
    """Spellings transformers has deprecated: always where it no longer reads them; where it
    still does (torch_dtype, rope_scaling: nearly every published config), only when a change
    adds one, so a lint of published configs is not a page of the same warning."""
    table: Mapping[str, Mapping[str, Any]] = params("SD202")["keys"]
    before = _earlier_version(cx)
    for prefix, scope in _scopes(cx):
        for name, info in table.items():
            parent, _, leaf = name.rpartition(".")
            node = scope.get(parent) if parent else scope
            if not isinstance(node, Mapping) or leaf not in node:
                continue
            path = (*prefix, *key_path(name))
            if info.get("still_read") and (before is None or _has_path(before, path)):
                continue
            since = f" ({info['since']})" if info.get("since") else ""
            added = f"; added since {cx.base_label}" if info.get("still_read") else ""
            yield Hit(path, f"{dotted(path)} is deprecated: write {info['use']}{since}{added}")
