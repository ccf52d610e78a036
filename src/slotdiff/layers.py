"""Lay out one LayerSpec per decoder layer from the rules a model_type's key-map file names.

Hybrids, sliding patterns, NoPE interleaves and dense-first MoE all differ by layer, so the
per-layer view is what the cost pass sums over. Each rule is a small named function; the
data file picks rules and their parameters, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .arch import LayerSpec
from .errors import SlotdiffError

if TYPE_CHECKING:
    from .schema import Resolver

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
    from .schema import _MISSING, lookup

    value = lookup(res.text, key)
    if value is _MISSING:
        value = lookup(res.defaults, key)
    return None if value is _MISSING else value


def _window(res: Resolver) -> int | None:
    window = _get(res, "sliding_window")
    if window is not None and _get(res, "use_sliding_window") is False:
        return None
    return window


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


@rule("layer_types")
def _layer_types(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer kinds from ``layer_types`` (transformers' own per-layer list)."""
    types = _get(res, "layer_types")
    if not types:
        return layers
    key = res.resolve("layer_types").keys[0] if res.resolve("layer_types").keys else "layer_types"
    if len(types) != len(layers):
        raise SlotdiffError(
            res.raw.name, f"has {len(types)} entries for {len(layers)} layers", key=key
        )
    window = _window(res) if args.get("window_needs_switch", True) else _get(res, "sliding_window")
    attention = args.get("attention", res.spec.get("attention", "attention"))
    out = []
    for spec, kind in zip(layers, types, strict=True):
        what = LAYER_TYPE_KINDS.get(kind) if isinstance(kind, str) else None
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
        out.append(replace(spec, **changes))
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
    return [replace(s, window=window) if s.mixer == "attention" else s for s in layers]


@rule("sliding_from")
def _sliding_from(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Sliding from layer ``max_window_layers`` on, when switched on (Qwen2 family)."""
    if getattr(res, "layer_types_applied", False):
        return layers
    window = _window(res)
    start = _get(res, "max_window_layers") or 0
    if window is None:
        return layers
    return [
        replace(s, window=window) if s.index >= start and s.mixer == "attention" else s
        for s in layers
    ]


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
        out.append(s if full else replace(s, window=window))
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
        s
        if (s.index + 1) % n == 0
        else replace(s, mixer=other, variant=res.spec.get("linear_variant"))
        for s in layers
    ]


@rule("index_list")
def _index_list(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Layers listed under a key get ``set`` (``base`` = 0 or 1 for the list's numbering)."""
    listed = _raw(res, args["key"])
    if listed is None:
        return layers
    if not isinstance(listed, list) or not all(isinstance(i, int) for i in listed):
        raise SlotdiffError(
            res.raw.name, "expected a list of layer indices", key=res.cite(args["key"])
        )
    base = args.get("base", 0)
    chosen = {i - base for i in listed}
    bad = [i for i in chosen if not 0 <= i < len(layers)]
    if bad:
        raise SlotdiffError(
            res.raw.name, f"layer index {bad[0] + base} out of range", key=res.cite(args["key"])
        )
    on, off = args.get("set", {}), args.get("else")
    out = []
    for s in layers:
        if s.index in chosen:
            out.append(replace(s, **on))
        elif off is not None:
            out.append(replace(s, **off))
        else:
            out.append(s)
    return out


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
            raise SlotdiffError(
                res.raw.name, f"unknown layer code {ch!r}", key=res.cite(args["key"])
            )
        out.append(replace(s, **table[ch]))
    return out


@rule("period")
def _period(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """``set`` on layers where ``i % period == offset`` (Jamba attention and expert layers)."""
    period = _raw(res, args["period"])
    offset = _raw(res, args["offset"]) or 0
    if not period:
        return layers
    on, off = args.get("set", {}), args.get("else", {})
    return [replace(s, **(on if s.index % period == offset else off)) for s in layers]


@rule("moe")
def _moe(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Which layers hold MoE. ``style``: every | deepseek | qwen (see the docstring table).

    - every:    all layers (Mixtral, gpt-oss, OLMoE)
    - deepseek: i >= first_dense_layers and i % moe_layer_freq == 0
    - qwen:     i not in mlp_only_layers and (i + 1) % moe_layer_freq == 0

    A ``when`` expression over fields, the layer index ``i`` and the layer count ``n``
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
    when = args.get("when")
    out = []
    for s in layers:
        if s.ffn is None:
            out.append(s)
            continue
        i = s.index
        if when:
            moe = bool(res.expression(when, {"i": i, "n": len(layers)}))
        elif style == "every":
            moe = True
        elif style == "deepseek":
            moe = i >= first and i % freq == 0
        elif style == "qwen":
            moe = i not in dense_only and (i + 1) % freq == 0
        else:
            raise ValueError(f"unknown moe style {style!r}")
        out.append(replace(s, ffn="moe" if moe else "dense"))
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
        return [replace(s, rope=bool(f)) for s, f in zip(layers, flags, strict=True)]
    if interval:
        return [replace(s, rope=(s.index + 1) % interval != 0) for s in layers]
    return layers


@rule("chunked")
def _chunked(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Chunked attention on RoPE layers; NoPE layers stay global (Llama 4)."""
    chunk = _get(res, "attention_chunk_size")
    if not chunk:
        return layers
    return [replace(s, chunk=chunk) if s.rope and s.mixer == "attention" else s for s in layers]


@rule("all")
def _all(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Set the same attributes on every layer (e.g. DSA indexer on all layers)."""
    when = args.get("when")
    if when and not _get(res, when):
        return layers
    return [replace(s, **args["set"]) for s in layers]


@rule("dense_width")
def _dense_width(res: Resolver, layers: list[LayerSpec], args: dict[str, Any]) -> list[LayerSpec]:
    """Per-layer dense FFN width from a list key (e.g. OpenELM-style lists)."""
    widths = _raw(res, args["key"])
    if not isinstance(widths, Sequence) or len(widths) != len(layers):
        return layers
    return [replace(s, d_ff=w) for s, w in zip(layers, widths, strict=True)]


def layout(res: Resolver) -> tuple[LayerSpec, ...]:
    """Build the per-layer specs for a resolved config."""
    n = res.resolve("n_layers").value
    if not isinstance(n, int) or n <= 0:
        raise SlotdiffError(
            res.raw.name, "missing or invalid layer count", key=res.cite("num_hidden_layers")
        )
    if n > 100_000:
        raise SlotdiffError(
            res.raw.name, f"{n} layers is beyond any real model", key=res.key_of("n_layers")
        )
    mixer = res.spec.get("mixer")
    if mixer is None:
        mixer = "mla" if res.resolve("kv_lora_rank").value else "attention"
    ffn = res.spec.get("ffn", "dense")
    layers = [LayerSpec(index=i, mixer=mixer, ffn=ffn) for i in range(n)]
    res.layer_types_applied = False
    for step in res.spec.get(
        "layers",
        [{"rule": "layer_types"}, {"rule": "sliding_all"}, {"rule": "moe", "style": "every"}],
    ):
        name = step["rule"]
        if name not in RULES:
            raise ValueError(f"key map names unknown layer rule {name!r}")
        layers = RULES[name](res, layers, step)
    return tuple(layers)
