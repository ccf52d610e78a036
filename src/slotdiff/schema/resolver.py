"""The resolver: one config's canonical fields, each from a const, a config key,
transformers' default, a derivation or slotdiff's assumption, with its provenance, and held
to the field's type and bounds from the key map."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from ..core.errors import SlotdiffError
from ..read.source import RawConfig
from .arch import UNKNOWN, Value
from .expr import expression_names
from .fieldtypes import plain_int_ok, type_error
from .fill import class_defaults, flat_text_type
from .keymap import (
    MISSING,
    UnsupportedExpression,
    evaluate,
    field_spec,
    keymap,
    known_keys,
    lookup,
    model_type_spec,
    structure_free_keys,
    transformers_defaults,
)
from .plan import Plan, common_plans, plan_for, plans
from .tower_spec import multimodal_types


@lru_cache(maxsize=512)  # model_types come from the configs read (a scan meets many)
def _defaults(model_type: str, defaults_from: str) -> dict[str, Any]:
    """transformers' defaults for a config of ``model_type`` (see ``fill.class_defaults``)."""
    return class_defaults(model_type, defaults_from)


# The fuzz tests' name for it.
_type_error = type_error


class Resolver:
    """Resolve canonical fields for one config; remembers provenance and errors."""

    def __init__(self, raw: RawConfig, donor: str | None = None) -> None:
        self.raw = raw
        self.text = raw.text
        self.prefix = ".".join(raw.text_path)
        self.model_type = str(self.text.get("model_type") or raw.data.get("model_type") or "")
        self.spec = model_type_spec(self.model_type) or {}
        # a model_type slotdiff does not know, read with a known one's facts (analysis.donor)
        self.donor = donor if not self.spec and model_type_spec(donor or "") else None
        if self.donor:
            self.spec = model_type_spec(self.donor) or {}
        if not self.spec and not raw.text_path and not self.donor:
            # Qwen2-VL without text_config: its flat keys are read with the text type's facts
            self.spec = model_type_spec(flat_text_type(self.model_type) or "") or {}
        if not self.spec and raw.text_path and not self.donor:
            # A nested text config without its own model_type: the parent's default text type.
            parent = transformers_defaults().get(str(raw.data.get("model_type")), {})
            sub = parent.get("_text_model_type")
            if sub and not self.text.get("model_type"):
                self.model_type = sub
                self.spec = model_type_spec(sub) or {}
        # transformers' defaults (fill.class_defaults), shared by every config of this type; a donor
        # lends its facts, never its class's defaults (Mistral's default window on a renamed Llama)
        defaults_from = None if self.donor else self.spec.get("defaults_from", self.model_type)
        self.defaults = {} if defaults_from is None else _defaults(self.model_type, defaults_from)
        self.values: dict[str, Value] = {}
        # Top-level keys of the text config (and of the file, for a nested text config) that
        # some resolution found: what the coverage check holds every key against.
        self.read: set[str] = set()
        self.read_top: set[str] = set()
        self.notes: list[str] = []
        self.layer_types_applied = False
        key = f"~{self.donor}" if self.donor else self.model_type if self.spec else ""
        self._plans = plans(key, self.model_type, defaults_from)
        if not self._plans:  # new: the fields nothing model_type-specific bears on, at once
            self._plans.update(common_plans(self.spec, self.defaults))
        # The fast path of ``resolve`` (a plan's ``absent``): one scope, a plain dict
        self._flat = not raw.text_path and type(self.text) is dict

    def cite(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def key_of(self, name: str) -> str:
        """The config key to cite for canonical field ``name``."""
        val = self.resolve(name)
        return val.keys[0] if val.keys else self.cite(self.aliases(name)[0] if self.aliases(name) else name)

    def field_spec(self, name: str) -> dict[str, Any]:
        return field_spec(name)

    def _check(self, name: str, key: str, value: Any) -> Any:
        """``value`` held to field ``name``'s JSON type, bounds and enum (SlotdiffError citing ``key``)."""
        spec = self.field_spec(name)
        types = spec.get("type")
        if types is None or value is None:
            return value
        if type(value) is int and plain_int_ok(name, value):
            return value  # the common case, decided without building the messages
        types = [types] if isinstance(types, str) else list(types)
        why = type_error(value, types)
        if why:
            raise SlotdiffError(self.raw.name, why, key=key)
        if isinstance(value, float) and not math.isfinite(value):
            raise SlotdiffError(self.raw.name, f"must be finite, got {value}", key=key)
        if "integer" in types and isinstance(value, float):
            value = int(value)
        if isinstance(value, list) and "items" in spec:
            for i, item in enumerate(value):
                why = type_error(item, [spec["items"]])
                if why:
                    raise SlotdiffError(self.raw.name, why, key=f"{key}[{i}]")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            low = spec.get("minimum")
            if low is not None and (value < low or (spec.get("exclusiveMinimum") and value == low)):
                raise SlotdiffError(
                    self.raw.name,
                    f"must be > {low}, got {value}"
                    if spec.get("exclusiveMinimum")
                    else f"must be >= {low}, got {value}",
                    key=key,
                )
            high = spec.get("maximum")
            if high is not None and value > high:
                raise SlotdiffError(self.raw.name, f"must be <= {high}, got {value}", key=key)
        if "enum" in spec and value not in spec["enum"]:
            raise SlotdiffError(self.raw.name, f"must be one of {spec['enum']}", key=key)
        return value

    def plan(self, name: str) -> Plan:
        plan = self._plans.get(name)
        if plan is None:
            plan = self._plans[name] = plan_for(self.spec, name, self.model_type, self.donor, self.defaults)
        return plan

    def aliases(self, name: str) -> list[str]:
        return list(self.plan(name).aliases)

    def resolve(self, name: str) -> Value:
        """Resolve one field: const → config key → transformers default → derive → assumed."""
        values = self.values
        known = values.get(name)
        if known is not None:
            return known
        plan = self._plans.get(name) or self.plan(name)
        val = plan.fixed
        if val is None:
            val = plan.absent
            if val is None or not (self._flat or (plan.scope is None and type(self.text) is dict)):
                val = self._derived(name, plan)
            else:
                text = self.text
                for alias in plan.aliases:
                    if alias in text:
                        val = self._derived(name, plan)
                        break
        values[name] = val
        return val

    def resolve_each(self, names: Iterable[str]) -> None:
        """``resolve`` each of ``names`` in turn (its fast paths inline: a config resolves
        some two hundred fields, most of them fixed facts or absent keys)."""
        values, plans, text = self.values, self._plans, self.text
        one_scope = type(text) is dict
        for name in names:
            if name in values:
                continue
            plan = plans.get(name) or self.plan(name)
            val = plan.fixed
            if val is None:
                val = plan.absent
                if val is None or not (self._flat or (plan.scope is None and one_scope)):
                    val = self._derived(name, plan)
                else:
                    for alias in plan.aliases:  # a loop, not any(): no generator per field
                        if alias in text:
                            val = self._derived(name, plan)
                            break
            values[name] = val

    def _derived(self, name: str, plan: Plan) -> Value:
        """``_resolve``, guarded against derivation cycles."""
        self.values[name] = UNKNOWN
        return self._resolve(name, plan)

    def _resolve(self, name: str, plan: Plan) -> Value:
        derive, aliases = plan.derive, plan.aliases
        if plan.const is not MISSING:  # "$other": the value of another field
            return self.resolve(plan.const[1:])
        scopes = [self.text]
        nested = plan.scope is not None and self.raw.text_path
        if nested and plan.scope == "text_then_top":
            scopes.append(self.raw.data)
        # "stated_top_then_text": the top level's value unless it is absent or null, then the
        # text config's (vLLM's get_quantization_config: the top's, else the text config's).
        stated = nested and plan.scope == "stated_top_then_text"
        if stated:
            scopes.insert(0, self.raw.data)
        held: Value | None = None  # with ``stated``: the top level's null, kept as a last answer
        if nested and plan.scope == "top_then_text":
            # A composite model's own config decides (transformers ties the head of
            # ...ForConditionalGeneration by the top-level tie_word_embeddings).
            scopes.insert(0, self.raw.data)
            # The text config's own copy is consulted too (and so counts as read).
            self.read.update(a.partition(".")[0] for a in aliases if lookup(self.text, a) is not MISSING)
            top_type = str(self.raw.data.get("model_type"))
            parent = transformers_defaults().get(top_type, {})
            # The multimodal file's top_only: transformers reads getattr(composite, key,
            # False), so the text config's copy has no effect.
            top_only = bool(aliases) and name in multimodal_types().get(top_type, {}).get("top_only", ())
            if top_only:
                scopes, parent = [self.raw.data], {aliases[0]: False, **parent}
            # LLaVA: the text config's own value, its class default when the file leaves it out
            from_text = parent.get("_tie_from_text") and not top_only
            for alias in aliases:
                if (
                    (not from_text or lookup(self.text, alias) is lookup(self.defaults, alias) is MISSING)
                    and lookup(parent, alias) is not MISSING
                    and lookup(self.raw.data, alias) is MISSING
                ):
                    value = self._check(name, alias, lookup(parent, alias))
                    return Value(
                        value,
                        "default",
                        (alias,),
                        f"absent; transformers' default for {self.raw.data.get('model_type')}",
                    )
        for scope in scopes:
            plain = plan.plain and type(scope) is dict
            for i, alias in enumerate(aliases):
                found = scope.get(alias, MISSING) if plain else lookup(scope, alias)
                if found is MISSING:
                    continue
                if scope is self.text:
                    cited = self.cite(alias)
                    self.read.add(alias.partition(".")[0])
                else:
                    cited = alias
                    self.read_top.add(alias.partition(".")[0])
                value = self._check(name, cited, found)
                how = "explicit" if i == 0 else "alias"
                if value is None and stated and scope is not self.text:
                    held = Value(None, how, (cited,))
                    break  # a null at the top states nothing: the text config's is read
                if value is None and derive:
                    derived = self._derive(name, derive)
                    if derived is not None:
                        return Value(derived, "derived", (cited,), f"{alias} is null; {derive}")
                return Value(value, how, (cited,))
        if held is not None:
            return held
        defaults = self.defaults
        for alias in aliases:
            found = defaults.get(alias, MISSING) if plan.plain else lookup(defaults, alias)
            if found is not MISSING:
                value = self._check(name, self.cite(alias), found)
                if value is None and derive:
                    derived = self._derive(name, derive)
                    if derived is not None:
                        return Value(derived, "derived", (), derive)
                return Value(
                    value,
                    "default",
                    (self.cite(alias),),
                    f"absent; transformers' default for {self.model_type}",
                )
        if derive:
            derived = self._derive(name, derive)
            if derived is not None:
                return Value(derived, "derived", (), derive)
        return plan.assumed or UNKNOWN

    def _derive(self, name: str, expr: str) -> Any:
        """``expr`` evaluated, then held to ``name``'s type and bounds like a written value.

        Derivations read fields the key map does not type (a family's local switches), so
        a bad value surfaces here; the error cites the config key the expression read.
        """
        value = self.evaluate(expr)
        if isinstance(value, float) and value.is_integer() and self.field_spec(name).get("type") == "integer":
            value = int(value)
        return self._check(name, self._expr_key(expr), value)

    def _expr_key(self, expr: str) -> str:
        """The config key an expression's value came from (its first name read from a key)."""
        for n in sorted(expression_names(expr)):
            val = self.values.get(n)
            if val is not None and val.keys:
                return val.keys[0]
        return self.cite(sorted(expression_names(expr))[0]) if expression_names(expr) else expr

    def evaluate(self, expr: str, extra: Mapping[str, Any] | None = None) -> Any:
        """Evaluate ``expr`` over resolved canonical fields (and ``extra`` names)."""
        extra = extra or {}
        env = {n: extra[n] if n in extra else self.resolve(n).value for n in expression_names(expr)}
        try:
            return evaluate(expr, env)
        except UnsupportedExpression:
            raise  # the data file's mistake, not the config's
        except (ArithmeticError, TypeError, ValueError) as err:  # values the config wrote
            raise SlotdiffError(
                self.raw.name, f"cannot work out {expr}: {err}", key=self._expr_key(expr)
            ) from err

    def unknown_keys(self) -> tuple[str, ...]:
        known = known_keys()
        return tuple(self.cite(k) for k in self.text if k not in known)

    def note_read(self, key: str) -> None:
        """Record that a layout rule or check read text-config ``key`` (a dotted path)."""
        self.read.add(key.partition(".")[0])

    def unread_keys(self, nested: frozenset[str] = frozenset()) -> tuple[str, ...]:
        """Text-config keys no resolution read and neither the key map nor this family marks
        as structure-free (token ids, dropout, cache flags ...): keys that may change the
        structure without slotdiff knowing. ``nested`` are sub-config keys read elsewhere."""
        free = structure_free_keys(self.donor or (self.model_type if self.spec else ""))
        skip = self.read | free | nested | set(self.spec.get("reads", ()))
        return tuple(self.cite(k) for k in self.text if k not in skip)


def resolve_all(raw: RawConfig, donor: str | None = None) -> Resolver:
    """Resolve every canonical and structure field of ``raw`` (an unknown model_type with the
    facts of ``donor``, when given)."""
    res = Resolver(raw, donor)
    km = keymap()
    for names in (km["fields"], km["structure"], res.spec.get("const", {})):
        res.resolve_each(names)
    res.values["unsupported"] = _unsupported(res)
    return res


def _unsupported(res: Resolver) -> Value:
    """A structure the config names that the model_type's implementation does not build.

    A model_type file's ``unsupported`` items (``key``, ``reason``) refuse parameter counting
    when the key is present and truthy (remote code, a newer variant: no verified tensors), or
    whatever it holds with ``"always": true`` (the class builds that structure by default too).
    Cited: the hits present in the config, else ``model_type`` (the model_type alone decides).
    """
    items = res.spec.get("unsupported", [])
    for item in items:
        res.note_read(item["key"])
    found = [(i["key"], i["reason"], i.get("always"), lookup(res.text, i["key"])) for i in items]
    hits = [(k, r, v) for k, r, always, v in found if always or v not in (MISSING, None, False, 0)]
    if not hits:
        return Value(None, "model_type")
    keys = tuple(res.cite(k) for k, _, v in hits if v is not MISSING) or ("model_type",)
    reasons = "; ".join(dict.fromkeys(r for _, r, _ in hits))
    return Value(reasons, "explicit", keys, reasons)
