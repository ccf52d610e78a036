"""What each GPU of a parallel layout holds, and the fewest GPUs of a valid layout.

A :class:`MemoryPlan` holds one model's weights (``cost.breakdown``: whole for one stage,
per layer design with the first and last stages' parts for more) and its cache per layer
design, so the bytes on a GPU of any layout at any context cost O(stages), not O(layers):
the fewest-GPU search stays well under a second at the 16,384-layer cap.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property

from ..constructs import latent
from ..schema.arch import Architecture, LayerSpec
from ..schema.precision import WeightFormat, storage_bits
from .breakdown import FLOPS_FORMAT, Breakdown, Bytes, breakdown, design_key, kv_heads, whole_model
from .kv import layer_kv_elements, layer_state_elements, state_dtype
from .layout import Layout, class_share, problems, stage_sizes

MAX_GPUS = 1 << 16  # the fewest-GPU search stops here


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


class MemoryPlan:
    """One model's weights and cache by share class and layer design, for any layout."""

    def __init__(
        self, arch: Architecture, fmt: WeightFormat, kv_dtype: str, mtp: bool = False, select: str = "held"
    ) -> None:
        if select == "flops":  # 2 bytes a parameter: a tensor's "bytes" are its FLOPs per token
            fmt = FLOPS_FORMAT
        self.arch, self.fmt, self.kv_dtype, self.select, self.mtp = arch, fmt, kv_dtype, select, mtp
        self.designs: list[LayerSpec] = [spec for spec, _ in arch.layer_runs]
        self.counts: list[int] = [n for _, n in arch.layer_runs]
        self._sums: dict[int, list[tuple[Bytes, dict[tuple[bool, int, int | None], float], float]]] = {}

    @cached_property
    def _cache(self) -> tuple[list[list[tuple[bool, int, int | None, float]]], list[float]]:
        """(KV groups, recurrent state bytes) per layer design: made on first use, as a
        FLOPs plan (every counterfactual's) never reads them."""
        arch = self.arch
        b = storage_bits(self.kv_dtype) / 8
        b_state = storage_bits(state_dtype(arch)) / 8
        kv_groups: list[list[tuple[bool, int, int | None, float]]] = []
        state: list[float] = []
        for spec in self.designs:
            elems = layer_kv_elements(arch, spec)
            cap = min((x for x in (spec.window, spec.chunk) if x), default=None)
            kv_groups.append([(latent(spec.mixer), kv_heads(arch, spec), cap, elems * b)] if elems else [])
            rec, conv = layer_state_elements(arch, spec)
            state.append(rec * b_state + conv * b)
        return kv_groups, state

    @property
    def kv_groups(self) -> list[list[tuple[bool, int, int | None, float]]]:
        return self._cache[0]

    @property
    def state(self) -> list[float]:
        return self._cache[1]

    @cached_property
    def _index(self) -> dict[tuple[object, ...], int]:
        return {design_key(spec): i for i, spec in enumerate(self.designs)}

    # ------------------------------------------------------------------ per stage, per layout

    @cached_property
    def _parts(self) -> Breakdown:
        """The weights per stage part (built only for plans of more than one stage)."""
        return breakdown(self.arch, self.fmt, self.select, self.mtp)

    @property
    def even(self) -> bool:
        """Whether the layers' weights are spread evenly (weight-shared blocks and the like)."""
        return self._parts.even

    @cached_property
    def _layer_designs(self) -> list[int]:
        return [self._index[design_key(s)] for s in self.arch.layers]

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
        one = whole_model(self.arch, self.fmt, self.select, self.mtp) if pp == 1 else None
        for s, c in enumerate(self._stage_counts(pp)):
            w: Bytes = {} if one is None else one
            parts: list[tuple[Bytes, int]] = []
            if one is None:
                bd = self._parts
                if bd.per_layer:  # this stage's own layers, each at its index
                    start = sum(stage_sizes(len(bd.per_layer), pp)[:s])
                    parts = [(b, 1) for b in bd.per_layer[start : start + sum(c)]]
                else:
                    parts = [(b, n) for b, n in zip(bd.layers, c, strict=True) if n]
                if s == 0:
                    parts.append((bd.first, 1))
                if s == pp - 1:
                    parts.append((bd.last, 1))
                    if pp > 1:
                        parts.append((bd.tied_head, 1))
            for b, n in parts:
                for key, v in b.items():
                    w[key] = w.get(key, 0.0) + n * v
            kv: dict[tuple[bool, int, int | None], float] = {}
            st = 0.0
            for d, n in enumerate(c if self.select != "flops" else ()):  # FLOPs: no cache
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
        one_rank = layout if layout.dp == 1 else replace(layout, dp=1)
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
        held, experts = self._weight_totals()
        for base in bases:
            if found is not None and base.tp * base.pp > found[0][0]:
                break  # no layout from here on uses fewer GPUs
            # Every share is at least 1/TP of a tensor, so the fullest stage's GPU holds at
            # least the weights / (TP × PP) (routed experts aside under EP, which DP spreads):
            # past the usable memory, no DP makes this base fit, and its stages go unbuilt.
            if (held - (experts if base.ep else 0.0)) / (base.tp * base.pp) > usable * (1 + 1e-9):
                continue
            got = self._smallest_dp(base, batch, context, usable, found[0][0] if found else limit)
            if got is None:
                continue
            rank = (got.layout.gpus, base.pp, got.layout.dp, base.tp)
            if found is None or rank < found[0]:
                found = (rank, got)
        return (found[1].layout.gpus, found[1]) if found else None

    def _weight_totals(self) -> tuple[float, float]:
        """(every weight byte, the routed experts' bytes) of the model, one copy."""
        w = self._stage_sums(1)[0][0]
        return sum(w.values()), sum(v for (cls, _), v in w.items() if cls == "exp")

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
