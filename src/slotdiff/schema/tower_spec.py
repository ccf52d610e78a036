"""Data-driven description of vision towers and multimodal connectors.

Two kinds of data files describe a multimodal model, so that no family needs its own
Python branch:

``schemas/vision_types/<name>.json``
    one vision encoder (the tower): which ``vision_config.model_type`` values it covers,
    the config keys it reads (``fields``: aliases, transformers' default when absent), and
    the tensors transformers instantiates for it (``tensors``: linear / conv / norm / param
    items, ``group`` items repeated per layer, ``when`` conditions).
``schemas/multimodal/<model_type>.json``
    the composite model named by the top-level ``model_type`` (``llava``, ``qwen2_vl``...):
    which tower it builds (fixed, or chosen by ``vision_config.model_type``), where the
    tower sits in the module tree, the connector's tensors, the top-level keys they read,
    and the processor rule that turns a W×H image into tokens (see ``images.py``). It may
    ``extends`` a sibling file (fields merged, the child's keys winning), build several
    copies of its tower (``tower_modules``: Video-LLaVA's image and video towers) or a
    second tower read from its own config node (``extra_towers``: a tower file, the node's
    key, the module path and a prefix for that tower's field names, ``hr_hidden``).

Sizes are small arithmetic expressions over the fields (``(image_size // patch_size) ** 2
+ 1``) in the strict dialect of ``expr.py``'s language: names, numbers, + - * / // % **,
comparisons, ``and``/``or``/``not``, ``a if c else b``, lists, subscripts and the functions
in ``FUNCTIONS``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .arch import Value
from .expr import Dialect, compiler
from .hmlp import hmlp_scales
from .keymap import transformers_defaults
from .layer_tables import layer_override, overrides_only
from .tower_files import AUDIO_PREFIX, audio_types, multimodal_types, vision_types

# ------------------------------------------------------------------------- expressions


def _count(value: Any) -> int:
    """Entries of a list (1 for a scalar, 0 for null): ``vision_feature_layer`` may be either."""
    if value is None:
        return 0
    return len(value) if isinstance(value, (list, tuple)) else 1


def _round(value: Any) -> int:
    """Nearest integer, as Python's ``round(x)``; no digits argument (``round(x, -2**40)`` would
    build a number of 2^40 digits)."""
    return round(value)


def _count_of(values: Any, value: Any, limit: Any = None) -> int:
    """How many of the first ``limit`` entries of a list equal ``value`` (a per-layer type list
    such as ``layer_types`` counted for one kind: ``count_of(layer_types, 'conv', layers)``)."""
    if not isinstance(values, (list, tuple)):
        raise ExprError(f"count_of needs a list, got {values!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ExprError(f"count_of limit must be a whole number, got {limit!r}")
    return sum(1 for v in (values if limit is None else values[:limit]) if v == value)


def _ilog2(value: Any) -> int:
    """``int(math.log2(x))`` as transformers writes it (NeMo subsampling stages); x must be > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"ilog2 needs a positive number, got {value!r}")
    return int(math.log2(value))


FUNCTIONS: dict[str, Any] = {
    "hmlp_scales": hmlp_scales,
    "layer_override": layer_override,
    "overrides_only": overrides_only,
    "count_of": _count_of,
    "ilog2": _ilog2,
    "len": len,
    "count": _count,
    "min": min,
    "max": max,
    "int": int,
    "round": _round,
    "abs": abs,
    "isqrt": math.isqrt,
}


# Largest size any tower or connector dimension may take (as the key map's 2^40 bound).
MAX_SIZE = 2**40


class ExprError(ValueError):
    """An expression in a data file names something unknown or uses an unsupported form."""


# The vision files' dialect of expr.py's language: strict (every name a tower needs must be
# known: a size cannot be half-computed), ``**`` capped at 64, lists, subscripts and ``in``,
# calls with any number of arguments, eager ``and``/``or`` giving a bool.
VISION_DIALECT = Dialect(
    functions=FUNCTIONS,
    error=ExprError,
    strict=True,
    constants={"true": True, "True": True, "false": False, "False": False},
    max_exponent=64,
    containers=True,
    eager_bool=True,
    call_args=None,
)

# Each data-file expression compiled once (the cost pass evaluates them per tensor).
_compiled = compiler(VISION_DIALECT)


def evaluate(expr: Any, env: Mapping[str, Any]) -> Any:
    """Evaluate a data-file expression; non-strings (numbers, booleans) are returned as is."""
    if not isinstance(expr, str):
        return expr
    return _compiled(expr)(env)


def as_int(value: Any, expr: Any) -> int:
    """An evaluated size as an int (4096.0 is fine, 10.5 is a data error)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExprError(f"{expr!r} gave {value!r}, not a number")
    if isinstance(value, float):
        if not value.is_integer():
            raise ExprError(f"{expr!r} gave {value}, not a whole number")
        value = int(value)
    if abs(value) > MAX_SIZE:
        raise ExprError(f"{expr!r} gave {value:.3g}, beyond any real model (cap 2^40)")
    return value


# --------------------------------------------------------------------------- data files
# (read by tower_files: vision_types, audio_types, multimodal_types)


def tower_for(parent: Mapping[str, Any], vision_model_type: str | None) -> str | None:
    """The tower file a composite model builds: fixed by the parent, else by vision model_type."""
    fixed = parent.get("tower")
    if fixed:
        return str(fixed)
    if vision_model_type is None:
        return None
    for name, spec in vision_types().items():
        if vision_model_type in spec.get("model_types", [name]):
            return name
    return None


# ------------------------------------------------------------------------ field values


def _lookup(node: Mapping[str, Any], dotted: str) -> Any:
    """A dotted key path's value (``image_processor_config.max_patches``), None when absent."""
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


class FieldError(ValueError):
    """A tower field whose value cannot be read as the data file says (``key``: the cited key)."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(reason)
        self.key = key
        self.reason = reason


def _pick(value: Any, spec: Mapping[str, Any], cited: str = "") -> Any:
    """Apply a field's ``index`` (a [h, w] pair read as one side)."""
    index = spec.get("index")
    if index is not None and isinstance(value, (list, tuple)):
        if not -len(value) <= index < len(value):
            raise FieldError(cited, f"{value!r} has no item {index} (expected a list like [h, w])")
        return value[index]
    return value


def resolve_fields(
    fields: Mapping[str, Mapping[str, Any]],
    node: Mapping[str, Any],
    node_key: str,
    defaults: Mapping[str, Any],
    defaults_name: str,
) -> dict[str, Value]:
    """Read ``fields`` from a config node: alias in order → transformers' default → file default.

    ``node_key`` prefixes the cited keys (``vision_config.depth``); ``defaults`` is the
    defaults.json entry of the config class that fills absent keys (``defaults_name``).
    """
    out: dict[str, Value] = {}
    for name, spec in fields.items():
        aliases = spec.get("aliases", [name])
        found: Value | None = None
        for i, alias in enumerate(aliases):
            value = _lookup(node, alias)
            if value is not None:
                cited = f"{node_key}.{alias}" if node_key else alias
                found = Value(_pick(value, spec, cited), "explicit" if i == 0 else "alias", (cited,))
                break
        if found is None:
            for alias in aliases:
                if alias in defaults and (defaults[alias] is not None or "default" not in spec):
                    cited = f"{node_key}.{alias}" if node_key else alias
                    found = Value(
                        _pick(defaults[alias], spec, cited),
                        "default",
                        (cited,),
                        f"absent; transformers' default for {defaults_name}",
                    )
                    break
        if found is None and "default" in spec:
            found = Value(
                _pick(spec["default"], spec),
                "default",
                (),
                spec.get("default_source", "absent; the config class's default"),
            )
        out[name] = found if found is not None else Value(None, "unknown")
    for name, spec in fields.items():
        other = spec.get("fallback")
        if out[name].value is None and other and out.get(other, Value(None, "unknown")).value:
            src = out[other]
            out[name] = Value(src.value, "derived", src.keys, f"absent; {name} falls back to {other}")
    return out


def spec_fields(data: Mapping[str, Any], key: str | None) -> dict[str, Value]:
    """Fields the tower, connector and image rule of ``data`` need, with provenance.

    Empty when the top-level model_type has no multimodal data file. ``key`` is where the
    vision config sits (None when absent: transformers then builds its default vision config,
    so every tower field takes the config class's default; unless the parent's file says
    ``"tower_optional": true``, a sub-config transformers leaves out when it is absent or null,
    building no tower: Gemma 4's ``vision_config``).
    """

    parent_type = data.get("model_type")
    parent = multimodal_types().get(str(parent_type)) if parent_type else None
    if parent is None or (key is None and parent.get("tower_optional")):
        return {}
    node_key = key or parent.get("config_key", "vision_config")
    node = data.get(key) if key else {}
    node = node if isinstance(node, Mapping) else {}
    out: dict[str, Value] = {
        "multimodal": Value(parent_type, "explicit", ("model_type",)),
    }
    if key is None:
        out["config_key"] = Value(
            node_key, "default", (), f"absent; transformers builds its default {node_key}"
        )
        out["model_type"] = Value(None, "unknown")
    tower_name = tower_for(parent, node.get("model_type"))
    defaults = transformers_defaults()
    if tower_name is not None and tower_name in vision_types():
        tower = vision_types()[tower_name]
        how = "fixed by the parent" if parent.get("tower") else f"{node_key}.model_type"
        out["tower"] = Value(tower_name, "model_type", (), how)
        source = tower.get("defaults_from", tower_name)
        out.update(resolve_fields(tower.get("fields", {}), node, node_key, defaults.get(source, {}), source))
    for extra in parent.get("extra_towers", []):
        # A second encoder with its own config node (DeepSeek-VL-Hybrid's SAM tower under
        # high_res_vision_config): its fields carry the entry's prefix (``hr_hidden``).
        spec = vision_types()[extra["tower"]]
        sub = data.get(extra["config_key"])
        source = spec.get("defaults_from", extra["tower"])
        got = resolve_fields(
            spec.get("fields", {}),
            sub if isinstance(sub, Mapping) else {},
            extra["config_key"],
            defaults.get(source, {}),
            source,
        )
        out.update({extra["prefix"] + name: value for name, value in got.items()})
    out.update(
        resolve_fields(
            parent.get("fields", {}), data, "", defaults.get(str(parent_type), {}), str(parent_type)
        )
    )
    out.update(_audio_fields(parent, data, defaults))
    return out


def _audio_fields(
    parent: Mapping[str, Any], data: Mapping[str, Any], defaults: Mapping[str, Any]
) -> dict[str, Value]:
    """The audio encoder's fields (prefixed) when the composite model's file names one."""
    audio = parent.get("audio")
    if not audio or audio.get("tower") not in audio_types():
        return {}
    key = str(audio.get("config_key", "audio_config"))
    node = data.get(key)
    node = node if isinstance(node, Mapping) else {}
    tower = audio_types()[audio["tower"]]
    source = tower.get("defaults_from", audio["tower"])
    fields = resolve_fields(tower.get("fields", {}), node, key, defaults.get(source, {}), source)
    out = {AUDIO_PREFIX + name: val for name, val in fields.items()}
    out["audio_tower"] = Value(audio["tower"], "model_type", (), "fixed by the parent")
    return out
