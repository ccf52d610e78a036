"""The layout rules' registry and what they share: a rule maps the layer list to a new one
under a step's arguments from a model_type file; the generic steps (set on listed, periodic,
matching or last layers; cycles) live here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from .arch import LayerSpec, evolve
from .keymap import MISSING, lookup
from .resolver import Resolver

Rule = Callable[["Resolver", list[LayerSpec], dict[str, Any]], list[LayerSpec]]


RULES: dict[str, Rule] = {}
#: The JSON type of the config value a rule reads under its step's ``key`` (``layer_map``: a
#: per-layer list): what the lint schema accepts for that key besides the key map's type.
STEP_KEY_TYPES: dict[str, str] = {}


def rule(name: str, key_type: str | None = None) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        RULES[name] = fn
        if key_type:
            STEP_KEY_TYPES[name] = key_type
        return fn

    return register


def field_value(res: Resolver, name: str) -> Any:
    return res.resolve(name).value


def is_explicit(res: Resolver, name: str) -> bool:
    return res.resolve(name).how in ("explicit", "alias", "default")


def raw_value(res: Resolver, key: str) -> Any:
    res.note_read(key)
    value = lookup(res.text, key)
    if value is MISSING:
        value = lookup(res.defaults, key)
    return None if value is MISSING else value


def sliding_window(res: Resolver) -> int | None:
    window = field_value(res, "sliding_window")
    if window is not None and field_value(res, "use_sliding_window") is False:
        return None
    return window


def resolve_set(res: Resolver, spec: LayerSpec, changes: dict[str, Any]) -> dict[str, Any]:
    """Resolve a rule's ``set`` dict for one layer.

    A string value starting with ``=`` is an expression over canonical fields and ``i``
    (the layer index), e.g. ``"=global_head_dim"`` or ``"=2 * d_ff"``; when it evaluates to
    None (a field is unknown or null) that attribute is left as it is.
    """
    out: dict[str, Any] = {}
    for attr, value in changes.items():
        if isinstance(value, str) and value.startswith("="):
            value = res.evaluate(value[1:], {"i": spec.index})
            if value is None:
                continue
            if attr in _SIZE_ATTRS:
                value = _size(res, changes[attr][1:], value, attr)
        out[attr] = value
    return out


# Layer attributes that are sizes: a value an expression computed from config keys (which
# may be anything) is held to a non-negative integer within the key map's bounds.
_SIZE_ATTRS = frozenset({"window", "chunk", "d_ff", "n_kv_heads", "head_dim", "n_heads", "compress"})
_SIZE_CAP = 1099511627776


def _size(res: Resolver, expr: str, value: Any, attr: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    low = 0 if attr == "d_ff" else 1
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= _SIZE_CAP:
        raise SlotdiffError(
            res.raw.name,
            f"{attr} must be an integer {low}..{_SIZE_CAP:,}, got {value!r}",
            key=res._expr_key(expr),
        )
    return value


def set_attrs(res: Resolver, spec: LayerSpec, changes: dict[str, Any] | None) -> LayerSpec:
    if not changes:
        return spec
    return evolve(spec, **resolve_set(res, spec, changes))


def holds(res: Resolver, cond: str | None) -> bool:
    """A step's ``when``: an expression over canonical fields (a bare name = truthy)."""
    return True if not cond else bool(res.evaluate(cond))


# Strings seen in layer_types across families, and what each layer then holds.
LAYER_TYPE_KINDS: dict[str, dict[str, Any]] = {
    "full_attention": {"mixer": "attention"},
    "attention": {"mixer": "attention"},
    "global_attention": {"mixer": "attention"},
    "sliding_attention": {"mixer": "attention", "window": True},
    "local_attention": {"mixer": "attention", "window": True},
    "chunked_attention": {"mixer": "attention", "chunk": True},
    # DSA: softmax (or MLA) attention with a lightning indexer that picks index_topk keys.
    "indexed_attention": {"mixer": "attention", "sparse": True},
    "linear_attention": {"mixer": "linear_attention"},
    "conv": {"mixer": "conv"},
    "mamba": {"mixer": "mamba"},
    "mamba2": {"mixer": "mamba2"},
}


def legacy_layer_type(kind: str) -> str | None:
    """The name transformers gives a legacy ``layer_types`` entry (``deepseek_sparse_attention``
    is ``indexed_attention``), or None: every config class renames these in ``__post_init__``
    (``config_keys.json``'s ``legacy_layer_types``, generated from transformers)."""
    table = load_schema_file("config_keys.json").get("legacy_layer_types", {})
    return table.get(kind)


def layer_type_list(res: Resolver, args: dict[str, Any]) -> tuple[list[Any] | None, str]:
    """The per-layer type list a ``layer_types`` step reads, and the key to cite.

    ``layer_types`` (through the family's aliases) when the config gives it; else, when the
    step names ``runs`` (``{"key": ..., "default": ...}``), that key's run-length groups
    expanded (see _expand_runs); else, when the step names a ``pattern`` (``{"key": ...,
    "map": {char: type}}``, Nemotron-H's ``hybrid_override_pattern``) and the config has that
    string, one type per character; else, when it names ``tile`` (see _tile), that key's
    block of types repeated over the layers;
    else the layer_types default (transformers' or the model_type file's).
    """
    val = res.resolve("layer_types")
    key = val.keys[0] if val.keys else res.cite("layer_types")
    pattern = args.get("pattern")
    if pattern and val.how not in ("explicit", "alias"):
        res.note_read(pattern["key"])
        raw = lookup(res.text, pattern["key"])
        if raw is not MISSING and raw is not None:
            key = res.cite(pattern["key"])
            if not isinstance(raw, str):
                raise SlotdiffError(res.raw.name, "expected a string of layer codes", key=key)
            bad = [ch for ch in raw if ch not in pattern["map"]]
            if bad:
                raise SlotdiffError(res.raw.name, f"unknown layer code {bad[0]!r}", key=key)
            return [pattern["map"][ch] for ch in raw], key
    runs = args.get("runs")
    if runs and val.how not in ("explicit", "alias"):
        return _expand_runs(res, runs)
    tile = args.get("tile")
    if tile and val.how not in ("explicit", "alias"):
        return _tile(res, tile)
    types = val.value
    if types is not None and not isinstance(types, list):
        raise SlotdiffError(res.raw.name, "expected a list of layer types", key=key)
    return types, key


def _expand_runs(res: Resolver, runs: dict[str, Any]) -> tuple[list[Any], str]:
    """A run-length list of layer-type groups, ``[[[type, ...], repeat], ...]``, expanded as
    the config class does (GPT-Neo ``attention_types``: ``[[["global", "local"], 12]]`` is 24
    layers alternating global and local); ``runs["default"]`` when the key is absent or null."""
    key = res.cite(runs["key"])
    raw = raw_value(res, runs["key"])
    if raw is None:
        raw = runs.get("default")
    bad = SlotdiffError(res.raw.name, "expected [[layer types], repeat] groups", key=key)
    if not isinstance(raw, list):
        raise bad
    total, cap = 0, res.field_spec("n_layers")["maximum"]
    for group in raw:
        if not (isinstance(group, list) and len(group) == 2 and isinstance(group[0], list)):
            raise bad
        repeat = group[1]
        if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 0:
            raise bad
        total += len(group[0]) * repeat
        if total > cap:  # checked before expanding: a hostile repeat must not allocate
            raise SlotdiffError(res.raw.name, f"expands to more than {cap:,} layers", key=key)
    return [kind for kinds, repeat in raw for _ in range(repeat) for kind in kinds], key


def _tile(res: Resolver, tile: dict[str, Any]) -> tuple[list[Any], str]:
    """A block of layer types under ``tile["key"]`` repeated over the layers and cut to the
    layer count, as the config class does (RecurrentGemma ``block_types``: ``[recurrent,
    recurrent, attention]`` repeated); ``tile["default"]`` when the key is absent or null."""
    key = res.cite(tile["key"])
    raw = raw_value(res, tile["key"])
    if raw is None:
        raw = tile.get("default")
    if not isinstance(raw, list) or not raw:
        raise SlotdiffError(res.raw.name, "expected a non-empty list of layer types", key=key)
    n = field_value(res, "n_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return [], key  # the layout refuses the layer count itself
    n = min(n, res.field_spec("n_layers")["maximum"])
    return [raw[i % len(raw)] for i in range(n)], key


@rule("index_list", key_type="array")
def _index_list(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Layers listed under a key get ``set`` (``base`` = 0 or 1 for the list's numbering).

    ``default`` is the list the config class fills in when the key is absent or null.
    """
    listed = raw_value(res, args["key"])
    if listed is None:
        listed = args.get("default")
    if listed is None:
        return layers
    if not isinstance(listed, list) or not all(isinstance(i, int) for i in listed):
        raise SlotdiffError(res.raw.name, "expected a list of layer indices", key=res.cite(args["key"]))
    base = args.get("base", 0)
    chosen = {i - base for i in listed}
    bad = [i for i in chosen if not 0 <= i < len(layers)]
    if bad:
        raise SlotdiffError(
            res.raw.name, f"layer index {bad[0] + base} out of range", key=res.cite(args["key"])
        )
    on, off = args.get("set", {}), args.get("else")
    return [set_attrs(res, s, on if s.index in chosen else off) for s in layers]


@rule("period")
def _period(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """``set`` on layers where ``i % period == offset`` (Jamba attention and expert layers).

    ``period`` and ``offset`` are config keys (read with transformers' defaults) or ints.
    """

    def read(arg: Any) -> Any:
        if isinstance(arg, int):
            return arg
        value = raw_value(res, arg)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise SlotdiffError(
                res.raw.name, f"expected a non-negative layer count, got {value!r}", key=res.cite(arg)
            )
        return value

    period = read(args["period"])
    offset = read(args.get("offset", 0)) or 0
    if not period:
        return layers
    on, off = args.get("set", {}), args.get("else", {})
    return [set_attrs(res, s, on if s.index % period == offset else off) for s in layers]


@rule("all")
def _all(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Set the same attributes on every layer (e.g. DSA indexer on all layers)."""
    return [set_attrs(res, s, args["set"]) for s in layers]


@rule("where")
def _where(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """``set`` on layers where ``expr`` (over ``i`` and canonical fields) holds, else ``else``.

    Restates a config class's computed default layout, e.g. MiniMax's
    ``"full_attention" if (i + 1) % 2 else "linear_attention"``.
    """
    on, off = args.get("set", {}), args.get("else")
    out = []
    for s in layers:
        hit = bool(res.evaluate(args["expr"], {"i": s.index}))
        out.append(set_attrs(res, s, on if hit else off))
    return out


@rule("set_where")
def _set_where(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """``set`` on layers whose attributes equal ``match`` (e.g. Gemma 4's global layers:
    ``{"mixer": "attention", "window": null}`` get the global head_dim)."""
    match: dict[str, Any] = args.get("match", {})
    return [
        set_attrs(res, s, args["set"]) if all(getattr(s, k) == v for k, v in match.items()) else s
        for s in layers
    ]


@rule("last_n", key_type="integer")
def _last_n(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """``set`` on the last N layers, N read from config key ``key`` (Gemma 4 KV-shared layers)."""
    n = raw_value(res, args["key"]) or 0
    if not isinstance(n, int) or n < 0 or n > len(layers):
        raise SlotdiffError(
            res.raw.name, f"expected 0..{len(layers)} layers, got {n!r}", key=res.cite(args["key"])
        )
    first = len(layers) - n
    return [set_attrs(res, s, args["set"]) if s.index >= first else s for s in layers]


@rule("cycle")
def _cycle(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Number the layers where ``attr`` is set 0, 1, ... modulo the config key ``period``.

    Zamba2 ties its shared transformer blocks in a cycle of ``num_mem_blocks``: the k-th
    hybrid layer uses block ``k % num_mem_blocks``. Without ``period`` every such layer gets
    its own number: blocks built per layer and left untied (transformers ties Zamba2's blocks
    only with the head, under tie_word_embeddings).
    """
    attr = args["attr"]
    # Without a period the numbering never wraps: one number per layer.
    period = raw_value(res, args["period"]) or 1 if "period" in args else len(layers) + 1
    if not isinstance(period, int) or period < 1:
        raise SlotdiffError(
            res.raw.name,
            f"must be a positive integer, got {period!r}",
            key=res.cite(args["period"]),
        )
    out, k = [], 0
    for s in layers:
        if getattr(s, attr) is None:
            out.append(s)
            continue
        out.append(evolve(s, **{attr: k % period}))
        k += 1
    return out
