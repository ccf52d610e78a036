"""The scale plan of a hierarchical patch MLP (HMLP) encoder: a stack of linear layers, each
folding a (t, h, w) block of the previous layer's grid into its channels, from single pixels
to one whole temporal × spatial patch (Inkling's vision encoder, ``plan_out_scales`` in
transformers/models/inkling/modeling_inkling.py). A tower file reads the plan through the
``hmlp_scales`` expression function; the widths come from it and nothing else."""

from __future__ import annotations

import math
from functools import cache

# Two layers' log-size distances closer than this make the nearest scale a coin toss between
# float32 (transformers) and float64 (here): refuse rather than guess.
_TIE = 1e-4


def _prime_factors(number: int) -> list[int]:
    """Prime factors in ascending order, with repeats (transformers' ``prime_factors``)."""
    out: list[int] = []
    while number % 2 == 0:
        out.append(2)
        number //= 2
    p = 3
    while p * p <= number:
        while number % p == 0:
            out.append(p)
            number //= p
        p += 2
    if number > 1:
        out.append(number)
    return out


def _cumprod(values: list[int]) -> list[int]:
    out, acc = [], 1
    for v in values:
        acc *= v
        out.append(acc)
    return out


@cache
def _plan(temporal_patch: int, patch: int, layers: int, channels: int) -> tuple[tuple[int, ...], ...]:
    h = _cumprod(_prime_factors(patch)[::-1])
    t = _cumprod(_prime_factors(temporal_patch)[::-1])
    if not h or not t:
        # transformers' cumprod of an empty factor list is a float tensor: the scales turn
        # float and no layer can be built (temporal_patch_size 1 fails in InklingVisionModel).
        raise ValueError(f"hmlp_scales needs patch sizes above 1, got {temporal_patch} × {patch}")
    side = h[-1]
    scales = [(1, 1, 1, channels)]
    scales += [(1, x, x, -(-x * x * channels // 64) * 64) for x in h]
    # The temporal scales' width, as transformers writes it: ceil(side² · channels · t) · 64.
    scales += [(x, side, side, side * side * channels * x * 64) for x in t]
    if layers < len(scales):
        raise ValueError(
            f"{layers} layers for {len(scales)} scales: transformers assigns them with scipy's "
            "linear_sum_assignment, which slotdiff does not reproduce"
        )
    logs = [math.log(a * b * c) for a, b, c, _ in scales]
    top = math.log(patch * patch * temporal_patch * channels)
    plan = []
    for k in range(layers + 1):
        ideal = top * k / layers
        costs = sorted((abs(ideal - v), j) for j, v in enumerate(logs))
        if len(costs) > 1 and 0 < k < layers and costs[1][0] - costs[0][0] < _TIE:
            why = "lies midway between two scales: transformers' float32 choice is ambiguous"
            raise ValueError(f"layer {k} {why}")
        plan.append(scales[costs[0][1]])
    plan[0], plan[-1] = scales[0], scales[-1]
    return tuple(plan)


def hmlp_scales(temporal_patch: int, patch: int, layers: int, channels: int) -> list[list[int]]:
    """The ``layers + 1`` (t, h, w, channels) grid scales the encoder steps through: layer ``l``
    folds scale ``l`` into scale ``l + 1``. Each layer's scale is the candidate (pixels, then
    each prime factor of the patch side, then of the temporal patch) whose log block size is
    nearest a log-even spacing; the first and last are fixed. Raises ValueError where
    transformers' choice cannot be reproduced exactly (fewer layers than scales; a near tie)."""
    args = {"temporal_patch": temporal_patch, "patch": patch, "layers": layers, "channels": channels}
    for name, v in args.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 2**20:
            raise ValueError(f"hmlp_scales: {name} must be a positive whole number, got {v!r}")
    return [list(s) for s in _plan(temporal_patch, patch, layers, channels)]
