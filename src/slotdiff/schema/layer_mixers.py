"""Layout rules for the sequence mixer of each layer: layer_types lists, sliding windows
(everywhere, from a layer on, alternating), full-attention intervals in hybrids, character
patterns, NoPE layers and chunked attention."""

from __future__ import annotations

from typing import Any

from ..core.errors import SlotdiffError
from .arch import LayerSpec, evolve
from .layer_rules import (
    LAYER_TYPE_KINDS,
    field_value,
    layer_type_list,
    legacy_layer_type,
    raw_value,
    resolve_set,
    rule,
    set_attrs,
    sliding_window,
)
from .resolver import Resolver


@rule("layer_types")
def _layer_types(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer kinds from ``layer_types`` (transformers' own per-layer list).

    ``kinds`` (optional) maps a family's type strings to layer attributes, on top of
    LAYER_TYPE_KINDS (Nemotron-H's "linear_attention" is a mamba2 layer, its "moe" an
    FFN-only layer); ``pattern`` reads a character pattern instead (see layer_type_list).
    ``unwindowed_full``: a sliding layer whose window is switched off or absent attends over
    the full context (SmolLM3 windows a layer only when use_sliding_window), instead of
    refusing the config. A name neither knows is read as transformers renames it
    (``legacy_layer_type``: ``deepseek_sparse_attention`` is ``indexed_attention``).
    ``truncate`` cuts a longer list to the layer count, as a config class that keeps the
    first n entries does. ``must_have`` names a kind the list must hold
    (Dory's "mlp" blocks: a list without them is a paired form the data does not read).
    """
    types, key = layer_type_list(res, args)
    if not types:
        return layers
    needed = args.get("must_have")
    if needed and needed not in types:  # a form of the list this family's data does not read
        raise SlotdiffError(res.raw.name, f"expected {needed!r} entries (the released layout)", key=key)
    if args.get("truncate"):
        types = types[: len(layers)]  # the config class keeps the first n entries (DeepSeek-V4)
    if len(types) != len(layers):
        raise SlotdiffError(res.raw.name, f"has {len(types)} entries for {len(layers)} layers", key=key)
    window = (
        sliding_window(res) if args.get("window_needs_switch", True) else field_value(res, "sliding_window")
    )
    attention = args.get("attention", res.spec.get("attention", "attention"))
    kinds = {**LAYER_TYPE_KINDS, **args.get("kinds", {})}
    out = []
    for spec, kind in zip(layers, types, strict=True):
        what = kinds.get(kind) if isinstance(kind, str) else None
        if what is None and isinstance(kind, str):  # a legacy name the config class renames
            what = kinds.get(legacy_layer_type(kind) or "")
        if what is None:
            raise SlotdiffError(res.raw.name, f"unknown layer type {kind!r}", key=key)
        mixer = what["mixer"]
        if mixer == "attention":
            mixer = attention
        changes: dict[str, Any] = {"mixer": mixer, "window": None, "chunk": None}
        if what.get("window"):
            if window is not None:
                changes["window"] = window
            elif not args.get("unwindowed_full"):
                raise SlotdiffError(res.raw.name, "sliding layers but no sliding_window", key=key)
        if what.get("chunk"):
            changes["chunk"] = field_value(res, "attention_chunk_size")
        if mixer == "linear_attention":
            changes["variant"] = res.spec.get("linear_variant")
        rest = {k: v for k, v in what.items() if k not in ("mixer", "window", "chunk")}
        changes.update(resolve_set(res, spec, rest))
        out.append(evolve(spec, **changes))
    res.layer_types_applied = True
    return out


@rule("sliding_all")
def _sliding_all(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Every attention layer uses ``sliding_window`` (Mistral, Mixtral, Phi-3, Starcoder2)."""
    if getattr(res, "layer_types_applied", False):
        return layers
    window = sliding_window(res)
    if window is None:
        return layers
    return [evolve(s, window=window) if s.mixer == "attention" else s for s in layers]


@rule("sliding_from")
def _sliding_from(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Sliding from layer ``max_window_layers`` on, when switched on (Qwen2 family)."""
    if getattr(res, "layer_types_applied", False):
        return layers
    window = sliding_window(res)
    start = field_value(res, "max_window_layers") or 0
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
    window = field_value(res, "sliding_window")
    period: Any = args.get("period", 2)
    if "period_key" in args:
        period = raw_value(res, args["period_key"]) or period
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
    n = field_value(res, "full_attention_interval")
    if not n:
        return layers
    other = args.get("other", "linear_attention")
    return [
        s if (s.index + 1) % n == 0 else evolve(s, mixer=other, variant=res.spec.get("linear_variant"))
        for s in layers
    ]


@rule("char_pattern", key_type="string")
def _char_pattern(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """One character per layer (Nemotron-H ``hybrid_override_pattern``: M * E -)."""
    pattern = raw_value(res, args["key"])
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


@rule("nope")
def _nope(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """NoPE layers: from a per-layer 0/1 list, else every ``no_rope_layer_interval``-th layer."""
    flags = field_value(res, "no_rope_layers")
    interval = field_value(res, "no_rope_layer_interval") or args.get("interval")
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
    chunk = field_value(res, "attention_chunk_size")
    if not chunk:
        return layers
    return [evolve(s, chunk=chunk) if s.rope and s.mixer == "attention" else s for s in layers]


@rule("source_layers", key_type="array")
def _source_layers(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer index of the layer whose cache a layer reads, under config key ``key``: a layer
    whose entry is not its own index gets ``set`` (default ``kv_shared``), as transformers'
    ``kv_source_layers`` (Mistral Large 4) drops that layer's K/V projection and cache. Each
    entry must name this or an earlier layer. Absent or null: unchanged."""
    values = raw_value(res, args["key"])
    if values is None:
        return layers
    key = res.cite(args["key"])
    if not isinstance(values, list) or len(values) != len(layers):
        raise SlotdiffError(res.raw.name, f"expected a list of {len(layers)} layer indices", key=key)
    out = []
    for s, v in zip(layers, values, strict=True):
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= s.index:
            why = f"expected this or an earlier layer's index, got {v!r}"
            raise SlotdiffError(res.raw.name, why, key=key)
        out.append(s if v == s.index else set_attrs(res, s, args.get("set", {"kv_shared": True})))
    return out


@rule("loop")
def _loop(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """A looped span: the ``span`` layers from ``start`` (or those up to ``end``, cut to the
    layers there are, as a slice) run ``times`` times in a row (config keys, or ints), as a
    looped transformer (Dory, Inkling 2 Loop) does. Every run after the first is laid out
    as copies right after the span, ``tied`` (the first run's weights: no parameters, their
    own compute and cache); with ``shared_cache`` (``{"key", "value"}``) and that config key
    at that value, the copies also write no cache of their own (``kv_shared``: earlier runs
    read the last run's). Layers are renumbered in running order. A count ``"=expr"`` is an
    expression over fields (a family's derivation of a key the file may leave out: Dory's
    n_recurrent_layers, what the other layers leave)."""

    def cite(arg: Any) -> str:
        if not isinstance(arg, str):
            return "layers"
        return res._expr_key(arg[1:]) if arg.startswith("=") else res.cite(arg)

    def read(arg: Any) -> int:
        formula = isinstance(arg, str) and arg.startswith("=")
        value = arg if isinstance(arg, int) else res.evaluate(arg[1:]) if formula else raw_value(res, arg)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SlotdiffError(
                res.raw.name, f"expected a non-negative layer count, got {value!r}", key=cite(arg)
            )
        return value

    start, times = read(args["start"]), read(args["times"])
    # An end beyond the layers is cut to them, as transformers slices self.layers[start:end].
    if "span" not in args:
        start = min(start, len(layers))
    span = read(args["span"]) if "span" in args else max(0, min(read(args["end"]), len(layers)) - start)
    if times < 1 or span < 0 or start + span > len(layers):
        key = cite(args["times"] if times < 1 else args.get("span", args.get("end")))
        raise SlotdiffError(res.raw.name, f"a loop of {span} layers from {start} does not fit", key=key)
    cap = res.field_spec("n_layers")["maximum"]
    if len(layers) + span * (times - 1) > cap:
        raise SlotdiffError(res.raw.name, f"runs more than {cap:,} layers", key=cite(args["times"]))
    copy: dict[str, Any] = {"tied": True}
    shared = args.get("shared_cache")
    if shared and raw_value(res, shared["key"]) == shared["value"]:
        copy["kv_shared"] = True
    body = layers[start : start + span]
    runs = [evolve(s, **copy) for _ in range(times - 1) for s in body]
    out = layers[: start + span] + runs + layers[start + span :]
    return [s if s.index == i else evolve(s, index=i) for i, s in enumerate(out)]
