"""Lay out one LayerSpec per decoder layer from the rules a model_type's key-map file names.

Hybrids, sliding patterns, NoPE interleaves and dense-first MoE all differ by layer, so the
per-layer view is what the cost pass sums over. Each rule is a small named function; the
data file picks rules and their parameters, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..core.errors import SlotdiffError
from .arch import LayerSpec, evolve, numbered
from .keymap import MISSING, lookup
from .resolver import Resolver

Rule = Callable[["Resolver", list[LayerSpec], dict[str, Any]], list[LayerSpec]]
RULES: dict[str, Rule] = {}


def rule(name: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        RULES[name] = fn
        return fn

    return register


def _get(res: Resolver, name: str) -> Any:
    return res.resolve(name).value


def _explicit(res: Resolver, name: str) -> bool:
    return res.resolve(name).how in ("explicit", "alias", "default")


def _raw(res: Resolver, key: str) -> Any:
    value = lookup(res.text, key)
    if value is MISSING:
        value = lookup(res.defaults, key)
    return None if value is MISSING else value


def _window(res: Resolver) -> int | None:
    window = _get(res, "sliding_window")
    if window is not None and _get(res, "use_sliding_window") is False:
        return None
    return window


def _values(res: Resolver, spec: LayerSpec, changes: dict[str, Any]) -> dict[str, Any]:
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
        out[attr] = value
    return out


def _set(res: Resolver, spec: LayerSpec, changes: dict[str, Any] | None) -> LayerSpec:
    if not changes:
        return spec
    return evolve(spec, **_values(res, spec, changes))


def _when(res: Resolver, cond: str | None) -> bool:
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
    "linear_attention": {"mixer": "linear_attention"},
    "conv": {"mixer": "conv"},
    "mamba": {"mixer": "mamba"},
    "mamba2": {"mixer": "mamba2"},
}


def layer_type_list(res: Resolver, args: dict[str, Any]) -> tuple[list[Any] | None, str]:
    """The per-layer type list a ``layer_types`` step reads, and the key to cite.

    ``layer_types`` (through the family's aliases) when the config gives it; else, when the
    step names a ``pattern`` (``{"key": ..., "map": {char: type}}``, Nemotron-H's
    ``hybrid_override_pattern``) and the config has that string, one type per character;
    else the layer_types default (transformers' or the model_type file's).
    """
    val = res.resolve("layer_types")
    key = val.keys[0] if val.keys else res.cite("layer_types")
    pattern = args.get("pattern")
    if pattern and val.how not in ("explicit", "alias"):
        raw = lookup(res.text, pattern["key"])
        if raw is not MISSING and raw is not None:
            key = res.cite(pattern["key"])
            if not isinstance(raw, str):
                raise SlotdiffError(res.raw.name, "expected a string of layer codes", key=key)
            bad = [ch for ch in raw if ch not in pattern["map"]]
            if bad:
                raise SlotdiffError(res.raw.name, f"unknown layer code {bad[0]!r}", key=key)
            return [pattern["map"][ch] for ch in raw], key
    types = val.value
    if types is not None and not isinstance(types, list):
        raise SlotdiffError(res.raw.name, "expected a list of layer types", key=key)
    return types, key


@rule("layer_types")
def _layer_types(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer kinds from ``layer_types`` (transformers' own per-layer list).

    ``kinds`` (optional) maps a family's type strings to layer attributes, on top of
    LAYER_TYPE_KINDS (Nemotron-H's "linear_attention" is a mamba2 layer, its "moe" an
    FFN-only layer); ``pattern`` reads a character pattern instead (see layer_type_list).
    """
    types, key = layer_type_list(res, args)
    if not types:
        return layers
    if len(types) != len(layers):
        raise SlotdiffError(res.raw.name, f"has {len(types)} entries for {len(layers)} layers", key=key)
    window = _window(res) if args.get("window_needs_switch", True) else _get(res, "sliding_window")
    attention = args.get("attention", res.spec.get("attention", "attention"))
    kinds = {**LAYER_TYPE_KINDS, **args.get("kinds", {})}
    out = []
    for spec, kind in zip(layers, types, strict=True):
        what = kinds.get(kind) if isinstance(kind, str) else None
        if what is None:
            raise SlotdiffError(res.raw.name, f"unknown layer type {kind!r}", key=key)
        mixer = what["mixer"]
        if mixer == "attention":
            mixer = attention
        changes: dict[str, Any] = {"mixer": mixer, "window": None, "chunk": None}
        if what.get("window"):
            if window is None:
                raise SlotdiffError(res.raw.name, "sliding layers but no sliding_window", key=key)
            changes["window"] = window
        if what.get("chunk"):
            changes["chunk"] = _get(res, "attention_chunk_size")
        if mixer == "linear_attention":
            changes["variant"] = res.spec.get("linear_variant")
        rest = {k: v for k, v in what.items() if k not in ("mixer", "window", "chunk")}
        changes.update(_values(res, spec, rest))
        out.append(evolve(spec, **changes))
    res.layer_types_applied = True
    return out


@rule("sliding_all")
def _sliding_all(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Every attention layer uses ``sliding_window`` (Mistral, Mixtral, Phi-3, Starcoder2)."""
    if getattr(res, "layer_types_applied", False):
        return layers
    window = _window(res)
    if window is None:
        return layers
    return [evolve(s, window=window) if s.mixer == "attention" else s for s in layers]


@rule("sliding_from")
def _sliding_from(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Sliding from layer ``max_window_layers`` on, when switched on (Qwen2 family)."""
    if getattr(res, "layer_types_applied", False):
        return layers
    window = _window(res)
    start = _get(res, "max_window_layers") or 0
    if window is None:
        return layers
    return [evolve(s, window=window) if s.index >= start and s.mixer == "attention" else s for s in layers]


@rule("alternate")
def _alternate(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Sliding on layers where ``(i + 1) % period != 0`` (Gemma 2/3, EXAONE 4 before layer_types).

    ``period`` is fixed, or read from ``period_key`` with ``period`` as its fallback.
    """
    if getattr(res, "layer_types_applied", False):
        return layers
    window = _get(res, "sliding_window")
    period: Any = args.get("period", 2)
    if "period_key" in args:
        period = _raw(res, args["period_key"]) or period
        if not isinstance(period, int) or isinstance(period, bool) or period < 1:
            raise SlotdiffError(
                res.raw.name,
                f"expected a positive layer period, got {period!r}",
                key=res.cite(args["period_key"]),
            )
    if window is None:
        return layers
    out = []
    for s in layers:
        full = (s.index + 1) % period == 0
        out.append(s if full else evolve(s, window=window))
    return out


@rule("interval")
def _interval(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Every n-th layer full attention, the rest linear (Qwen3-Next before layer_types)."""
    if getattr(res, "layer_types_applied", False):
        return layers
    n = _get(res, "full_attention_interval")
    if not n:
        return layers
    other = args.get("other", "linear_attention")
    return [
        s if (s.index + 1) % n == 0 else evolve(s, mixer=other, variant=res.spec.get("linear_variant"))
        for s in layers
    ]


@rule("index_list")
def _index_list(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Layers listed under a key get ``set`` (``base`` = 0 or 1 for the list's numbering).

    ``default`` is the list the config class fills in when the key is absent or null.
    """
    listed = _raw(res, args["key"])
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
    return [_set(res, s, on if s.index in chosen else off) for s in layers]


@rule("char_pattern")
def _char_pattern(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """One character per layer (Nemotron-H ``hybrid_override_pattern``: M * E -)."""
    pattern = _raw(res, args["key"])
    if not isinstance(pattern, str):
        return layers
    if len(pattern) != len(layers):
        raise SlotdiffError(
            res.raw.name,
            f"has {len(pattern)} characters for {len(layers)} layers",
            key=res.cite(args["key"]),
        )
    table: dict[str, dict[str, Any]] = args["map"]
    out = []
    for s, ch in zip(layers, pattern, strict=True):
        if ch not in table:
            raise SlotdiffError(res.raw.name, f"unknown layer code {ch!r}", key=res.cite(args["key"]))
        out.append(evolve(s, **table[ch]))
    return out


@rule("period")
def _period(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """``set`` on layers where ``i % period == offset`` (Jamba attention and expert layers).

    ``period`` and ``offset`` are config keys (read with transformers' defaults) or ints.
    """

    def read(arg: Any) -> Any:
        if isinstance(arg, int):
            return arg
        value = _raw(res, arg)
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
    return [_set(res, s, on if s.index % period == offset else off) for s in layers]


@rule("moe")
def _moe(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Which layers hold MoE. ``style``: every | deepseek | qwen (see the docstring table).

    - every:    all layers (Mixtral, gpt-oss, OLMoE)
    - deepseek: i >= first_dense_layers and i % moe_layer_freq == 0
    - qwen:     i not in mlp_only_layers and (i + 1) % moe_layer_freq == 0

    A ``layer_when`` expression over fields, the layer index ``i`` and the layer count ``n``
    replaces the style for placements none of them covers (a first..last MoE span, or
    Llama 4's every n-th layer without mlp_only_layers).
    """
    experts = _get(res, "n_experts") or 0
    if experts <= 0:
        return layers
    style = args.get("style", "every")
    first = _get(res, "first_dense_layers") or 0
    freq = _get(res, "moe_layer_freq") or 1
    dense_only = set(_get(res, "mlp_only_layers") or [])
    when = args.get("layer_when")
    out = []
    for s in layers:
        if s.ffn is None:
            out.append(s)
            continue
        i = s.index
        if when:
            moe = bool(res.evaluate(when, {"i": i, "n": len(layers)}))
        elif style == "every":
            moe = True
        elif style == "deepseek":
            moe = i >= first and i % freq == 0
        elif style == "qwen":
            moe = i not in dense_only and (i + 1) % freq == 0
        else:
            raise ValueError(f"unknown moe style {style!r}")
        out.append(evolve(s, ffn="moe" if moe else "dense"))
    return out


@rule("nope")
def _nope(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """NoPE layers: from a per-layer 0/1 list, else every ``no_rope_layer_interval``-th layer."""
    flags = _get(res, "no_rope_layers")
    interval = _get(res, "no_rope_layer_interval") or args.get("interval")
    if isinstance(flags, list) and flags:
        if len(flags) != len(layers):
            raise SlotdiffError(
                res.raw.name,
                f"has {len(flags)} entries for {len(layers)} layers",
                key=res.cite("no_rope_layers"),
            )
        return [evolve(s, rope=bool(f)) for s, f in zip(layers, flags, strict=True)]
    if interval:
        return [evolve(s, rope=(s.index + 1) % interval != 0) for s in layers]
    return layers


@rule("chunked")
def _chunked(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Chunked attention on RoPE layers; NoPE layers stay global (Llama 4)."""
    chunk = _get(res, "attention_chunk_size")
    if not chunk:
        return layers
    return [evolve(s, chunk=chunk) if s.rope and s.mixer == "attention" else s for s in layers]


@rule("all")
def _all(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Set the same attributes on every layer (e.g. DSA indexer on all layers)."""
    return [_set(res, s, args["set"]) for s in layers]


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
        out.append(_set(res, s, on if hit else off))
    return out


@rule("set_where")
def _set_where(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """``set`` on layers whose attributes equal ``match`` (e.g. Gemma 4's global layers:
    ``{"mixer": "attention", "window": null}`` get the global head_dim)."""
    match: dict[str, Any] = args.get("match", {})
    return [
        _set(res, s, args["set"]) if all(getattr(s, k) == v for k, v in match.items()) else s for s in layers
    ]


@rule("last_n")
def _last_n(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """``set`` on the last N layers, N read from config key ``key`` (Gemma 4 KV-shared layers)."""
    n = _raw(res, args["key"]) or 0
    if not isinstance(n, int) or n < 0 or n > len(layers):
        raise SlotdiffError(
            res.raw.name, f"expected 0..{len(layers)} layers, got {n!r}", key=res.cite(args["key"])
        )
    first = len(layers) - n
    return [_set(res, s, args["set"]) if s.index >= first else s for s in layers]


@rule("ffn_types")
def _ffn_types(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer FFN kind from a list key, through ``map`` (Kimi Linear ``mlp_layer_types``:
    dense / sparse)."""
    types = _raw(res, args["key"])
    if types is None:
        return layers
    key = res.cite(args["key"])
    if not isinstance(types, list) or len(types) != len(layers):
        raise SlotdiffError(res.raw.name, f"expected a list of {len(layers)} FFN types", key=key)
    out = []
    for s, kind in zip(layers, types, strict=True):
        if kind not in args["map"]:
            raise SlotdiffError(res.raw.name, f"unknown FFN type {kind!r}", key=key)
        out.append(evolve(s, ffn=args["map"][kind]))
    return out


@rule("cycle")
def _cycle(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Number the layers where ``attr`` is set 0, 1, ... modulo the config key ``period``.

    Zamba2 ties its shared transformer blocks in a cycle of ``num_mem_blocks``: the k-th
    hybrid layer uses block ``k % num_mem_blocks``.
    """
    attr = args["attr"]
    period = _raw(res, args["period"]) or 1
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


@rule("dense_width")
def _dense_width(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer dense FFN width from a list key (e.g. OpenELM-style lists)."""
    widths = _raw(res, args["key"])
    if not isinstance(widths, list) or len(widths) != len(layers):
        return layers
    cap = res.field_spec("d_ff")["maximum"]
    for w in widths:
        if not isinstance(w, int) or isinstance(w, bool) or not 0 <= w <= cap:
            raise SlotdiffError(
                res.raw.name, f"expected FFN widths 0..{cap:,}, got {w!r}", key=res.cite(args["key"])
            )
    return [evolve(s, d_ff=w) for s, w in zip(layers, widths, strict=True)]


DEFAULT_STEPS: list[dict[str, Any]] = [
    {"rule": "layer_types"},
    {"rule": "sliding_all"},
    {"rule": "moe", "style": "every"},
]


def counted_layers(res: Resolver) -> int | None:
    """The layer count a ``"count": true`` layer_types step fixes, if any.

    Some families build one layer per entry of their layer list and ignore
    num_hidden_layers (Nemotron-H, Zamba2); that step says so in the model_type file.
    """
    for step in res.spec.get("layers", DEFAULT_STEPS):
        if step.get("count") and step["rule"] == "layer_types":
            types, _ = layer_type_list(res, step)
            if types:
                return len(types)
    return None


def layout(res: Resolver) -> tuple[LayerSpec, ...]:
    """Build the per-layer specs for a resolved config.

    Any step may carry ``when`` (an expression over canonical fields: the step runs only when
    it holds) and ``unless_layer_types`` (skip the step when a layer_types step already laid
    the layers out: a default pattern that an explicit list overrides).
    """
    n = res.resolve("n_layers").value
    counted = counted_layers(res)
    if counted is not None and counted != n:
        if isinstance(n, int):
            res.notes.append(
                f"{res.key_of('n_layers')} says {n} but the layer list has {counted} entries; "
                f"transformers builds {counted} layers"
            )
        n = counted
        res.values["n_layers"] = replace(
            res.values["n_layers"], value=n, how="derived", note="length of the layer list"
        )
    if not isinstance(n, int) or n <= 0:
        raise SlotdiffError(res.raw.name, "missing or invalid layer count", key=res.cite("num_hidden_layers"))
    cap = res.field_spec("n_layers")["maximum"]  # also bounds a layer list's length
    if n > cap:
        raise SlotdiffError(
            res.raw.name, f"{n} layers is beyond any real model (cap {cap:,})", key=res.key_of("n_layers")
        )
    mixer = res.spec.get("mixer")
    if mixer is None:
        mixer = "mla" if res.resolve("kv_lora_rank").value else "attention"
    ffn = res.spec.get("ffn", "dense")
    layers = numbered(LayerSpec(index=0, mixer=mixer, ffn=ffn), n)  # cheaper than n __init__ calls
    res.layer_types_applied = False
    for step in res.spec.get("layers", DEFAULT_STEPS):
        name = step["rule"]
        if name not in RULES:
            raise ValueError(f"key map names unknown layer rule {name!r}")
        if not _when(res, step.get("when")):
            continue
        if step.get("unless_layer_types") and res.layer_types_applied:
            continue
        layers = RULES[name](res, layers, step)
    return tuple(layers)
