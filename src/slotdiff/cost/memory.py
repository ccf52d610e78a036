"""What each GPU of a parallel layout holds, and the fewest GPUs of a valid layout.

A :class:`MemoryPlan` breaks one model's weights and cache down once — per layer design,
by how each tensor splits (``layout.share_class``), plus what sits on the first stage
(embedding, vision tower) and the last (head, final norm, MTP modules) — so the bytes on a
GPU of any layout at any context cost O(stages), not O(layers): the fewest-GPU search
stays well under a second at the 16,384-layer cap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields, replace
from functools import cached_property

from ..constructs import latent
from ..schema.arch import Architecture, LayerSpec, evolve, with_layers
from ..schema.precision import WeightFormat, dtype_bits, storage_bits
from .inventory.decoder import tensors
from .inventory.mtp import mtp_tensors
from .inventory.tensor import Tensor, Unsupported
from .inventory.towers import vision_tensors
from .kv import layer_kv_elements, layer_state_elements, state_dtype
from .layout import Layout, class_share, problems, share_class, stage_sizes
from .weights import tensor_bytes

MAX_GPUS = 1 << 16  # the fewest-GPU search stops here
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


def _key(spec: LayerSpec) -> tuple[object, ...]:
    return tuple(getattr(spec, name) for name in _DESIGN)


def _g(arch: Architecture, spec: LayerSpec | None) -> int:
    g = (spec.n_kv_heads if spec else None) or arch.get("n_kv_heads") or arch.get("n_heads") or 1
    return int(g)


Bytes = dict[tuple[str, int], float]  # (share class, KV heads) → bytes


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


def _classed(ts: tuple[Tensor, ...], fmt: WeightFormat, g: int, out: Bytes | None = None) -> Bytes:
    out = {} if out is None else out
    size = _sizer(fmt)
    for t in ts:
        key = (_class(t), g)
        out[key] = out.get(key, 0.0) + size(t)
    return out


def _minus(a: Bytes, b: Bytes) -> Bytes:
    return {k: a.get(k, 0.0) - b.get(k, 0.0) for k in set(a) | set(b) if a.get(k, 0.0) != b.get(k, 0.0)}


@dataclass(frozen=True)
class Need:
    """One GPU of ``layout`` (its fullest pipeline stage) serving its share of a batch."""

    layout: Layout
    weights: float
    kv_per_sequence: float  # at the context
    state_per_sequence: float
    sequences: int  # sequences its data-parallel rank serves: ceil(batch / DP)
    usable: float
    max_batch: int | None  # whole group; None: sequences take no memory

    @property
    def per_sequence(self) -> float:
        return self.kv_per_sequence + self.state_per_sequence

    @property
    def needed(self) -> float:
        return self.weights + self.sequences * self.per_sequence

    @property
    def fits(self) -> bool:
        return self.needed <= self.usable

    @property
    def shortfall(self) -> float:
        return max(0.0, self.needed - self.usable)


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


class MemoryPlan:
    """One model's weights and cache by share class and layer design, for any layout."""

    def __init__(
        self, arch: Architecture, fmt: WeightFormat, kv_dtype: str, mtp: bool = False, select: str = "held"
    ) -> None:
        keep = SELECT[select]
        if select == "flops":  # 2 bytes a parameter: a tensor's "bytes" are its FLOPs per token
            fmt = FLOPS_FORMAT
        self.arch, self.fmt, self.kv_dtype, self.select = arch, fmt, kv_dtype, select
        self.b = storage_bits(kv_dtype) / 8
        self.b_state = storage_bits(state_dtype(arch)) / 8
        g0 = _g(arch, None)
        every, per_run, full_tensors = _inventory(arch)
        zero = tuple(t for t in every if keep(t))
        # One pass over the tensors outside the layers: the first stage's, the last's, all.
        self.first: Bytes = {}
        self.last: Bytes = {}
        zero_bytes: Bytes = {}
        sizer = _sizer(fmt)
        for t in zero:
            key, size = (_class(t), g0), sizer(t)
            side = self.first if t.slot in _FIRST else self.last
            side[key] = side.get(key, 0.0) + size
            zero_bytes[key] = zero_bytes.get(key, 0.0) + size
        if select == "held":
            try:
                tower = vision_tensors(arch)
            except Unsupported:  # a tower slotdiff has no data for: left out, as the parameter count does
                tower = ()
            self.first = _classed(tower, fmt, g0, self.first)
        self.tied_head: Bytes = {}
        if arch.get("tie_embeddings") and select == "held":
            # PP > 1 holds the tied table on the first stage and again as the head on the last.
            self.tied_head = {k: v for k, v in self.first.items() if k[0] == "tp"}
        elif arch.get("tie_embeddings"):  # decode reads (and multiplies by) the table as the head
            table = tuple(
                replace(t, kind="linear", slot="head") for t in every if t.part == "embedding/tokens"
            )
            self.last = _classed(table, fmt, g0, dict(self.last))
        if mtp:
            self.last = _classed(mtp_tensors(arch), fmt, g0, dict(self.last))
        self.designs: list[LayerSpec] = []
        self.counts: list[int] = []
        self.layer_bytes: list[Bytes] = []
        index: dict[tuple[object, ...], int] = {}
        for (spec, n), one_layer in zip(arch.layer_runs, per_run, strict=True):
            index[_key(spec)] = len(self.designs)
            self.designs.append(spec)
            self.counts.append(n)
            one = _classed(tuple(t for t in one_layer if keep(t)), fmt, _g(arch, spec))
            self.layer_bytes.append(_minus(one, zero_bytes))
        self._index = index
        self._sums: dict[int, list[tuple[Bytes, dict[tuple[bool, int, int | None], float], float]]] = {}
        full = sum(sizer(t) for t in full_tensors if keep(t))
        split = sum(zero_bytes.values()) + sum(
            n * sum(b.values()) for n, b in zip(self.counts, self.layer_bytes, strict=True)
        )
        self.even = abs(split - full) > 1e-6 * max(1.0, full)
        if self.even:  # shared blocks and the like: spread the layers' bytes evenly instead
            per = _minus(_classed(tuple(t for t in full_tensors if keep(t)), fmt, g0), zero_bytes)
            n = max(1, arch.n_layers)
            self.layer_bytes = [{k: v / n for k, v in per.items()} for _ in self.designs]
        self.kv_groups: list[list[tuple[bool, int, int | None, float]]] = []
        self.state: list[float] = []
        for spec in self.designs:
            elems = layer_kv_elements(arch, spec)
            cap = min((x for x in (spec.window, spec.chunk) if x), default=None)
            groups = [(latent(spec.mixer), _g(arch, spec), cap, elems * self.b)] if elems else []
            self.kv_groups.append(groups)
            rec, conv = layer_state_elements(arch, spec)
            self.state.append(rec * self.b_state + conv * self.b)

    # ------------------------------------------------------------------ per stage, per layout

    @cached_property
    def _layer_designs(self) -> list[int]:
        return [self._index[_key(s)] for s in self.arch.layers]

    def _stage_counts(self, pp: int) -> list[list[int]]:
        """How many layers of each design each of ``pp`` stages holds."""
        if pp == 1:
            return [list(self.counts)]
        out, start = [], 0
        order = self._layer_designs
        for size in stage_sizes(len(order), pp):
            c = [0] * len(self.designs)
            for d in order[start : start + size]:
                c[d] += 1
            out.append(c)
            start += size
        return out

    def _stage_sums(self, pp: int) -> list[tuple[Bytes, dict[tuple[bool, int, int | None], float], float]]:
        """Per stage of ``pp``: weight bytes by (share class, KV heads), KV bytes per token by
        (held whole on every TP rank, as MLA's latent; KV heads; window), recurrent state per
        sequence — independent of the layout's TP / DP / EP, so computed once per PP degree."""
        cached = self._sums.get(pp)
        if cached is not None:
            return cached
        out = []
        for s, c in enumerate(self._stage_counts(pp)):
            w: Bytes = {}
            parts: list[tuple[Bytes, int]] = [(b, n) for b, n in zip(self.layer_bytes, c, strict=True) if n]
            if s == 0:
                parts.append((self.first, 1))
            if s == pp - 1:
                parts.append((self.last, 1))
                if pp > 1:
                    parts.append((self.tied_head, 1))
            for b, n in parts:
                for key, v in b.items():
                    w[key] = w.get(key, 0.0) + n * v
            kv: dict[tuple[bool, int, int | None], float] = {}
            st = 0.0
            for d, n in enumerate(c):
                if n:
                    for whole, g, cap, per_token in self.kv_groups[d]:
                        kv[(whole, g, cap)] = kv.get((whole, g, cap), 0.0) + n * per_token
                    st += n * self.state[d]
            out.append((w, kv, st))
        self._sums[pp] = out
        return out

    def stages(self, layout: Layout, context: int) -> Iterator[tuple[float, float, float, float]]:
        """Per stage: (weights outside routed experts, routed experts, KV of one sequence at
        ``context``, recurrent state of one sequence), per GPU, before the DP split of experts."""
        one_rank = replace(layout, dp=1)
        for w, kvs, st in self._stage_sums(layout.pp):
            weights = experts = kv = 0.0
            for (cls, g), v in w.items():
                share = class_share(cls, one_rank, g)
                if cls == "exp":
                    experts += v * share
                else:
                    weights += v * share
            for (whole, g, cap), per_token in kvs.items():
                span = min(context, cap) if cap else context
                kv += per_token * span * (1.0 if whole else class_share("kv", layout, g))
            yield weights, experts, kv, st / layout.tp

    def need(
        self,
        layout: Layout,
        batch: int,
        context: int,
        usable: float,
        stages: list[tuple[float, float, float, float]] | None = None,
    ) -> Need:
        """What the fullest stage's GPU needs for ``batch`` sequences at ``context``
        (``stages``: this layout's, when the caller already has them)."""
        dp = layout.dp
        seqs = math.ceil(batch / dp)
        best: Need | None = None
        cap: int | None = None
        for w, e, kv, st in stages if stages is not None else self.stages(layout, context):
            weights = w + (e / dp if layout.ep else e)
            per = kv + st
            if weights > usable:
                room: int | None = 0
            elif per <= 0:
                room = None
            else:
                room = int((usable - weights) // per) * dp
            cap = room if cap is None else (cap if room is None else min(cap, room))
            need = Need(layout, weights, kv, st, seqs, usable, None)
            if best is None or need.needed > best.needed:
                best = need
        assert best is not None
        return replace(best, max_batch=cap)

    # ------------------------------------------------------------------ the fewest GPUs

    def _tp_choices(self) -> list[int]:
        h = self.arch.get("n_heads") or self.arch.get("ssm_n_heads") or self.arch.get("linear_n_v_heads") or 1
        return [t for t in _divisors(int(h)) if not problems(self.arch, Layout(tp=t), self.fmt)]

    def fewest(
        self, batch: int, context: int, usable: float, limit: int = MAX_GPUS
    ) -> tuple[int, Need] | None:
        """The fewest GPUs of a valid layout that hold ``batch`` sequences at ``context``,
        and that layout's need; None when no layout of up to ``limit`` GPUs does.

        Candidates: every valid TP, every PP that divides the layers, expert parallelism
        on or off for MoE models, and data parallelism (replicas, or data-parallel
        attention with EP) sized to the batch. Ties go to no PP, then no DP, then lower TP.
        """
        arch = self.arch
        e = arch.get("n_experts") or 0
        moe = bool(e) and any(s.ffn == "moe" or s.ffn2 == "moe" for s, _ in arch.layer_runs)
        pps = [p for p in _divisors(arch.n_layers) if p <= 1024] or [1]
        bases = [
            Layout(tp, pp, 1, ep)
            for tp in self._tp_choices()
            for pp in pps
            for ep in ((False, True) if moe else (False,))
            if tp * pp <= limit and not (ep and e % tp)
        ]
        bases.sort(key=lambda b: (b.tp * b.pp, b.pp, b.tp, b.ep))
        found: tuple[tuple[int, int, int, int], Need] | None = None
        for base in bases:
            if found is not None and base.tp * base.pp > found[0][0]:
                break  # no layout from here on uses fewer GPUs
            got = self._smallest_dp(base, batch, context, usable, found[0][0] if found else limit)
            if got is None:
                continue
            rank = (got.layout.gpus, base.pp, got.layout.dp, base.tp)
            if found is None or rank < found[0]:
                found = (rank, got)
        return (found[1].layout.gpus, found[1]) if found else None

    def _smallest_dp(self, base: Layout, batch: int, context: int, usable: float, limit: int) -> Need | None:
        stages = list(self.stages(base, context))
        per_dp = base.tp * base.pp
        e = self.arch.get("n_experts") or 0
        if base.ep:  # data-parallel attention: experts spread over TP × DP
            choices = [d for d in _divisors(e // base.tp) if d * per_dp <= limit] if e else [1]
        else:  # replicas: the smallest count whose share of the batch fits
            room: int | None = None
            for w, ex, kv, st in stages:
                if w + ex > usable:
                    return None
                if kv + st > 0:
                    r = int((usable - w - ex) // (kv + st))
                    room = r if room is None else min(room, r)
            if room is not None and room < 1:
                return None
            choices = [1 if room is None else max(1, math.ceil(batch / room))]
        for dp in choices:
            if dp * per_dp > limit:
                return None
            need = self.need(replace(base, dp=dp), batch, context, usable, stages)
            if need.fits:
                return need
        return None


def _divisors(n: int) -> list[int]:
    if n < 1:
        return [1]
    small, large = [], []
    i = 1
    while i * i <= n:
        if n % i == 0:
            small.append(i)
            if i * i != n:
                large.append(n // i)
        i += 1
    return small + large[::-1]
