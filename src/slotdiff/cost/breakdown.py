"""A model's weight bytes by how they split over a layout (``layout.share_class``) and the KV
heads of the layer that holds them: whole (one pipeline stage), or broken down per layer
design (or per layer, where layers of one design differ by their index) with what sits on the
first stage (embedding, vision tower) and the last (head, final norm, MTP modules), for plans of
several stages.

The whole model's sums read only its tensor list (the one the parameter count built): a
one-stage layout, as every counterfactual of a cost pass prices, never builds the one-layer
and zero-layer copies the per-stage breakdown needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from ..schema.arch import Architecture, LayerSpec, evolve, with_layers
from ..schema.precision import WeightFormat, dtype_bits
from .inventory.decoder import tensors
from .inventory.mtp import mtp_tensors
from .inventory.tensor import Tensor, Unsupported
from .inventory.towers import vision_tensors
from .layout import share_class
from .weights import tensor_bytes

TOWERS = frozenset({"vision", "connector", "audio"})  # run at prefill, once per input
FLOPS_FORMAT = WeightFormat("bfloat16", "bfloat16", "bfloat16")
# Which tensors a plan counts: what a GPU holds; what one decode step reads (no gathered
# tables, no encoder towers); what it multiplies by (matmul weights, as FLOPs per token).
SELECT = {
    "held": lambda t: True,
    "read": lambda t: t.kind != "embedding" and t.slot not in TOWERS,
    "flops": lambda t: t.matmul and t.slot not in TOWERS,
}
_DESIGN = tuple(f.name for f in fields(LayerSpec) if f.name != "index")
_FIRST = ("embedding", "position", "vision", "connector", "audio")

Bytes = dict[tuple[str, int], float]  # (share class, KV heads) → bytes


def design_key(spec: LayerSpec) -> tuple[object, ...]:
    """What makes two layers cost the same: every field but the index."""
    return tuple(getattr(spec, name) for name in _DESIGN)


def kv_heads(arch: Architecture, spec: LayerSpec | None) -> int:
    """The KV heads of layer ``spec`` (the model's, for tensors outside the layers)."""
    g = (spec.n_kv_heads if spec else None) or arch.get("n_kv_heads") or arch.get("n_heads") or 1
    return int(g)


_CLASSES: dict[tuple[str, str, str, bool], str] = {}


def _class(t: Tensor) -> str:
    """``share_class(t)``, remembered by the four fields it reads (a plan asks for every
    tensor of a model and of each counterfactual, mostly the same few dozen kinds)."""
    key = (t.part, t.slot, t.kind, t.routed)
    cls = _CLASSES.get(key)
    if cls is None:
        if len(_CLASSES) >= 4096:
            _CLASSES.clear()
        cls = _CLASSES[key] = share_class(t)
    return cls


def _sizer(fmt: WeightFormat) -> Callable[[Tensor], int]:
    """``tensor_bytes(·, fmt)``: unquantized, the dtype's bits looked up once (same integer)."""
    if fmt.quantized:
        return lambda t: tensor_bytes(t, fmt)
    bits = dtype_bits(fmt.base_dtype or "bfloat16")
    return lambda t: t.rows * t.cols * t.count * bits // 8


def classed(
    ts: tuple[Tensor, ...],
    fmt: WeightFormat,
    g: int,
    out: Bytes | None = None,
    keep: Callable[[Tensor], bool] | None = None,
) -> Bytes:
    """Bytes of ``ts`` (those ``keep`` selects) in ``fmt`` by (share class, ``g``), added to ``out``."""
    out = {} if out is None else out
    size = _sizer(fmt)
    classes, get = _CLASSES, out.get
    for t in ts:
        if keep is not None and not keep(t):
            continue
        cls = classes.get((t.part, t.slot, t.kind, t.routed)) or _class(t)
        key = (cls, g)
        out[key] = get(key, 0.0) + size(t)
    return out


def _minus(a: Bytes, b: Bytes) -> Bytes:
    return {k: a.get(k, 0.0) - b.get(k, 0.0) for k in set(a) | set(b) if a.get(k, 0.0) != b.get(k, 0.0)}


Inventory = tuple[tuple[Tensor, ...], tuple[tuple[Tensor, ...], ...], tuple[Tensor, ...]]
# The last few architectures' tensor inventories, by identity (each entry holds its
# Architecture, so an id is never reused while cached): a model's held, read and FLOPs plans,
# its feasibility and its at-peak bound all break down the same tensors.
_INVENTORIES: dict[int, tuple[Architecture, Inventory]] = {}
_KEEP = 16


def _inventory(arch: Architecture) -> Inventory:
    """(tensors outside the layers, one layer's tensors per run of ``arch.layer_runs``, all
    tensors) of ``arch``, computed once per Architecture object."""
    hit = _INVENTORIES.get(id(arch))
    if hit is not None and hit[0] is arch:
        return hit[1]
    zero_arch = with_layers(arch, ())
    per_run = tuple(
        tensors(with_layers(arch, (evolve(spec, index=0),)), keep=False) for spec, _ in arch.layer_runs
    )
    out = (tensors(zero_arch, keep=False), per_run, tensors(arch))
    if len(_INVENTORIES) >= _KEEP:
        _INVENTORIES.clear()  # (a whole-cache drop: safe while another thread reads or adds)
    _INVENTORIES[id(arch)] = (arch, out)
    return out


@dataclass(frozen=True)
class Breakdown:
    """Weight bytes per stage part: the first stage's, the last's, the tied table held again
    as the head when PP > 1, and one layer of each design (in ``arch.layer_runs`` order)."""

    first: Bytes
    last: Bytes
    tied_head: Bytes
    layers: tuple[Bytes, ...]
    even: bool  # the layers' bytes spread evenly (they do not add up to the model)
    # Where one layer of a design is not every layer of it (an exclusion list that names some
    # layers, layer 0's own tensors): each layer's bytes at its own index, in layer order
    # (empty: ``layers`` holds).
    per_layer: tuple[Bytes, ...] = ()


def _extras(arch: Architecture, fmt: WeightFormat, select: str, mtp: bool, g0: int) -> tuple[Bytes, Bytes]:
    """(bytes the first stage adds, bytes the last adds) beyond the decoder's own tensors:
    the vision tower held; the tied table read (and multiplied by) as the head; MTP modules."""
    first: Bytes = {}
    last: Bytes = {}
    if select == "held":
        try:
            tower = vision_tensors(arch)
        except Unsupported:  # a tower slotdiff has no data for: left out, as the parameter count does
            tower = ()
        classed(tower, fmt, g0, first)
    elif arch.get("tie_embeddings"):  # decode reads (and multiplies by) the table as the head
        table = tuple(
            replace(t, kind="linear", slot="head") for t in tensors(arch) if t.part == "embedding/tokens"
        )
        classed(table, fmt, g0, last)
    if mtp:
        classed(mtp_tensors(arch), fmt, g0, last)
    return first, last


def whole_model(arch: Architecture, fmt: WeightFormat, select: str, mtp: bool) -> Bytes | None:
    """The model on one stage: its tensors' bytes by (class, KV heads), read off its tensor
    list; None when its layers differ in KV heads (the per-design breakdown keys them)."""
    g0 = kv_heads(arch, None)
    if any(kv_heads(arch, spec) != g0 for spec, _ in arch.layer_runs):
        return None
    keep = SELECT[select]
    first, last = _extras(arch, fmt, select, mtp, g0)
    out = classed(tensors(arch), fmt, g0, keep=keep)
    for extra in (first, last):
        for key, v in extra.items():
            out[key] = out.get(key, 0.0) + v
    return out


def breakdown(arch: Architecture, fmt: WeightFormat, select: str, mtp: bool) -> Breakdown:
    """The bytes of each stage part: one layer of each design where those add up to the model;
    else each layer at its own index where those do (an exclusion list that names some layers,
    layer 0's own tensors: a stage then holds exactly its layers); else (shared blocks and the
    like) the layers' bytes spread evenly over the layers."""
    keep = SELECT[select]
    g0 = kv_heads(arch, None)
    every, per_run, full_tensors = _inventory(arch)
    # One pass over the tensors outside the layers: the first stage's, the last's, all.
    first: Bytes = {}
    last: Bytes = {}
    zero_bytes: Bytes = {}
    sizer = _sizer(fmt)
    for t in every:
        if not keep(t):
            continue
        key, size = (_class(t), g0), sizer(t)
        side = first if t.slot in _FIRST else last
        side[key] = side.get(key, 0.0) + size
        zero_bytes[key] = zero_bytes.get(key, 0.0) + size
    more_first, more_last = _extras(arch, fmt, select, mtp, g0)
    for side, extra in ((first, more_first), (last, more_last)):
        for key, v in extra.items():
            side[key] = side.get(key, 0.0) + v
    # PP > 1 holds the tied table on the first stage and again as the head on the last: the
    # table alone (the first stage's other split tensors, a vision tower's, stay there).
    tied = arch.get("tie_embeddings") and select == "held"
    table = tuple(t for t in every if t.part == "embedding/tokens")
    tied_head = classed(table, fmt, g0) if tied else {}
    layers = [
        _minus(classed(tuple(t for t in one if keep(t)), fmt, kv_heads(arch, spec)), zero_bytes)
        for (spec, _), one in zip(arch.layer_runs, per_run, strict=True)
    ]
    full = sum(sizer(t) for t in full_tensors if keep(t))
    split = sum(zero_bytes.values()) + sum(
        n * sum(b.values()) for (_, n), b in zip(arch.layer_runs, layers, strict=True)
    )
    if abs(split - full) <= 1e-6 * max(1.0, full):
        return Breakdown(first, last, tied_head, tuple(layers), False)
    # One layer of a design built at index 0 is not each of its layers: each layer at its
    # own index, where those add up to the model (a stage then holds exactly its layers).
    own = [
        _minus(
            classed(tuple(t for t in tensors(with_layers(arch, (spec,)), keep=False) if keep(t)), fmt, g),
            zero_bytes,
        )
        for spec in arch.layers
        for g in (kv_heads(arch, spec),)
    ]
    if abs(sum(zero_bytes.values()) + sum(sum(b.values()) for b in own) - full) <= 1e-6 * max(1.0, full):
        return Breakdown(first, last, tied_head, tuple(layers), False, tuple(own))
    # Shared blocks and the like: the layers' bytes spread evenly.
    per = _minus(classed(tuple(t for t in full_tensors if keep(t)), fmt, g0), zero_bytes)
    n = max(1, arch.n_layers)
    layers = [{k: v / n for k, v in per.items()} for _ in layers]
    return Breakdown(first, last, tied_head, tuple(layers), True)
