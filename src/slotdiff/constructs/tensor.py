"""The tensor inventory's unit: a Tensor row (a shape times a count, in a slot part), the
builder that collects them, and the refusal raised when a structure cannot be counted."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..core.errors import SlotdiffError
from ..schema.arch import Architecture, LayerSpec

# Slots a tensor can belong to, in breakdown order.
PARTS = (
    "embedding",
    "position",
    "attention",
    "ffn",
    "experts",
    "shared_experts",
    "router",
    "norms",
    "head",
    "vision",
    "connector",
    "audio",
)


@dataclass(frozen=True)
class Tensor:
    """``count`` tensors of shape ``rows × cols`` (``cols == 1`` for vectors)."""

    part: str  # slash name, e.g. "attention/q"
    slot: str  # one of PARTS, or "mtp"
    rows: int
    cols: int
    count: int
    kind: str  # linear | embedding | vector | conv
    module: str  # HF-style name of one instance, for quantization exclusion patterns
    routed: bool = False  # a routed expert: active for top_k of n_experts per token
    # Weights a weight-tied layer runs again (HRM's recurrent stacks): per-token compute
    # and no parameters of their own; the parameter count leaves them out, FLOPs keep them.
    reused: bool = False
    # The decoder layers a per-layer row stands for (``module`` names the first as layer 0),
    # each holding count / len(layers) of it: a quantizer's exclusion list can name layers.
    layers: tuple[int, ...] = ()

    @property
    def params(self) -> int:
        return self.rows * self.cols * self.count

    @property
    def matmul(self) -> bool:
        """Counts toward per-token matmul FLOPs (linear layers, the head, convolutions)."""
        return self.kind in ("linear", "conv")


def fast_tensor(
    part: str,
    slot: str,
    rows: int,
    cols: int,
    count: int,
    kind: str,
    module: str,
    routed: bool,
    layers: tuple[int, ...] = (),
) -> Tensor:
    """``Tensor(...)`` without the frozen dataclass's ``__init__`` (one ``object.__setattr__``
    per field): every pricing builds dozens, and a model is priced ~8 times (counterfactuals)."""
    t = object.__new__(Tensor)
    t.__dict__.update(
        part=part,
        slot=slot,
        rows=rows,
        cols=cols,
        count=count,
        kind=kind,
        module=module,
        routed=routed,
    )
    if layers:  # else the class default, ()
        t.__dict__["layers"] = layers
    return t


class Unsupported(SlotdiffError):
    """The config names a structure the cost model does not cover: say so, give no number."""


def need_int(arch: Architecture, name: str) -> int:
    value = arch.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise Unsupported(arch.name, f"cannot count parameters: {name} is unknown", key=arch.key(name))
    return value


class Builder:
    """Collects an architecture's tensor rows; ``layers`` is set while a group of decoder
    layers is being built, and each row added then records them."""

    def __init__(self, arch: Architecture) -> None:
        self.arch = arch
        self.out: list[Tensor] = []
        self.layers: tuple[int, ...] = ()
        self.where: dict[int, tuple[int, ...]] | None = None  # layer positions by run (decoder._grouped)

    def add(
        self,
        part: str,
        rows: int,
        cols: int,
        count: int,
        kind: str,
        module: str,
        slot: str | None = None,
        routed: bool = False,
    ) -> None:
        if count <= 0 or rows <= 0 or cols <= 0:
            return
        slot = slot or part.split("/")[0]
        self.out.append(fast_tensor(part, slot, rows, cols, count, kind, module, routed, self.layers))

    def norm(
        self, part: str, width: int, count: int, module: str, slot: str = "norms", bias: bool | None = None
    ) -> None:
        """``count`` norms of ``width``; ``bias`` None: as ``norm_bias`` says."""
        if self.arch.get("norm_affine") is False:
            return  # LayerNorm without elementwise affine: no parameters
        self.add(part, width, 1, count, "vector", module, slot)
        if self.arch.get("norm_bias") if bias is None else bias:
            self.add(part + ".bias", width, 1, count, "vector", module, slot)


def group_runs(
    runs: Iterable[tuple[LayerSpec, int]], key: Callable[[LayerSpec], Any]
) -> Iterator[tuple[Any, int, LayerSpec]]:
    """Group layers by ``key(layer)``: (key, how many layers, the first such layer), in the
    order first seen. ``runs`` are ``Architecture.layer_runs`` (identical layers counted)."""
    counts: dict[Any, int] = defaultdict(int)
    first: dict[Any, LayerSpec] = {}
    for spec, n in runs:
        k = key(spec)
        counts[k] += n
        first.setdefault(k, spec)
    for k, n in counts.items():
        yield k, n, first[k]
