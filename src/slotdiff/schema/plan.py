"""A canonical field's resolution plan under one model_type: what the resolver reads from the
data files and transformers' defaults, looked up once per model_type and shared by its configs."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any

from .arch import UNKNOWN, Value
from .keymap import MISSING, field_spec, keymap

DONOR_NOTE = "assumed: as in"  # + the known model_type an unknown one is read as
_NONE: Mapping[str, Any] = {}


class Plan:
    """How one canonical field resolves under one model_type: everything ``_resolve`` reads
    from the data files and transformers' defaults, looked up once and shared by every config
    of that model_type (with the Values that do not depend on the config, which are immutable)."""

    __slots__ = ("absent", "aliases", "assumed", "const", "derive", "fixed", "plain", "scope", "spec")

    def __init__(
        self,
        spec: Mapping[str, Any],
        name: str,
        model_type: str,
        donor: str | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        field = field_spec(name)
        own = spec.get("aliases", {}).get(name)
        self.spec = field
        self.aliases: tuple[str, ...] = tuple(own if own is not None else field.get("aliases", []))
        self.plain = not any("." in a for a in self.aliases)  # top-level keys only: dict.get
        self.derive: str | None = spec.get("derive", {}).get(name) or field.get("derive")
        self.scope = field.get("scope")
        # an unknown model_type read with a known one's facts: each fact is an assumption
        how = "assumed" if donor else "model_type"
        fixed = f"{DONOR_NOTE} {donor}" if donor else f"fixed by the {model_type} implementation"
        self.const = spec.get("const", {}).get(name, MISSING)
        self.fixed: Value | None = None  # a const (not a $reference) or a structure fact
        if self.const is not MISSING:
            if not (isinstance(self.const, str) and self.const.startswith("$")):
                self.fixed = Value(self.const, how, (), fixed)
        elif name in spec.get("structure", {}):
            self.fixed = Value(spec["structure"][name], how, (), fixed)
        self.assumed = (
            Value(field["default"], "assumed", (), "absent; slotdiff's default")
            if "default" in field
            else None
        )
        # What ``_resolve`` gives when the text config holds none of the aliases and it is the
        # only place looked (no scope, or a flat config): no default, no derivation, so slotdiff's
        # assumption or unknown. None: the full resolution decides.
        self.absent: Value | None = None
        if (
            self.plain
            and self.const is MISSING
            and self.derive is None
            and defaults is not None
            and not _any_in(self.aliases, defaults)
        ):
            self.absent = self.assumed or UNKNOWN


@lru_cache(maxsize=512)  # keyed by what the defaults come from too: a scan meets many model_types
def plans(key: str, model_type: str, defaults_from: str | None) -> dict[str, Plan]:
    """Plans per field for a model_type ("" for one the key map does not know, "~donor" for one
    read with a donor's facts) and the class whose defaults it reads (None: none), filled lazily."""
    return {}


def _any_in(keys: tuple[str, ...], mapping: Mapping[str, Any]) -> bool:
    """Whether ``mapping`` holds one of ``keys`` (a loop: no generator per plan)."""
    for key in keys:  # noqa: SIM110
        if key in mapping:
            return True
    return False


@cache
def _common(name: str) -> Plan:
    """Field ``name``'s plan where the model_type's file says nothing of it and transformers'
    defaults hold none of its aliases: the same for every model_type (its Values immutable)."""
    return Plan(_NONE, name, "", None, _NONE)


def plan_for(
    spec: Mapping[str, Any], name: str, model_type: str, donor: str | None, defaults: Mapping[str, Any]
) -> Plan:
    """Field ``name``'s plan under ``spec`` (a model_type's file), ``donor`` and ``defaults``:
    the shared common one where none of them bears on it, else its own."""
    if (
        name not in spec.get("aliases", _NONE)
        and name not in spec.get("derive", _NONE)
        and name not in spec.get("const", _NONE)
        and name not in spec.get("structure", _NONE)
    ):
        common = _common(name)
        if not _any_in(common.aliases, defaults):
            return common
    return Plan(spec, name, model_type, donor, defaults)


@cache
def _commons() -> tuple[dict[str, Plan], dict[str, tuple[str, ...]]]:
    """Every key-map field's common plan, and each of their aliases → the fields it names."""
    km = keymap()
    names = [*km["fields"], *km["structure"]]
    common = {name: _common(name) for name in names}
    fields_of: dict[str, list[str]] = {}
    for name, plan in common.items():
        for alias in plan.aliases:
            fields_of.setdefault(alias, []).append(name)
    return common, {alias: tuple(names) for alias, names in fields_of.items()}


def common_plans(spec: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Plan]:
    """The key-map fields whose plan under ``spec`` and ``defaults`` is the common one, with
    it (what :func:`plan_for` gives each of them), to start a model_type's plans at once."""
    common, fields_of = _commons()
    own = {*spec.get("aliases", _NONE), *spec.get("derive", _NONE)}
    own.update(spec.get("const", _NONE), spec.get("structure", _NONE))
    for key in defaults:
        own.update(fields_of.get(key, ()))
    return {name: plan for name, plan in common.items() if name not in own}
