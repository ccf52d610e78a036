"""Parallel layouts an engine accepts, and what each GPU of one holds.

A layout is tensor parallelism (TP) × pipeline parallelism (PP) × data parallelism (DP),
with the routed experts either sharded by TP inside each expert or spread whole over the
TP × DP GPUs (expert parallelism, EP; vLLM's ``--enable-expert-parallel``). DP with EP is
"data-parallel attention": attention and dense layers replicated per DP rank, each rank
holding only its own sequences' KV (what DeepSeek-style MLA models use to avoid
replicating the latent cache); DP without EP is independent replicas.

Validity, as vLLM and SGLang check it:

* TP divides the query heads, the linear-attention / SSM heads, the dense FFN width and,
  without EP, the expert width; KV heads either divide over TP or are replicated onto it
  (TP a multiple of them: each rank holds one head);
* block-quantized weights need each rank's share of an output dimension to be a whole
  number of blocks (FP8 128×128: 1,536 / TP=8 = 192 is refused);
* EP divides the routed experts;
* PP ≤ layers; a split that does not divide the layers is accepted (vLLM gives the
  remainder to the stages before the last) but never recommended.

What a GPU holds: a tensor sharded by TP holds 1/TP (embedding and head split by vocabulary;
q, o, FFN, shared experts; K/V projections ceil(g/TP)/g of the heads; linear-attention and
SSM projections), replicated tensors in full (norms, routers, MLA's q_a / kv_a down
projections, learned position tables), routed experts 1/EP under EP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..constructs import construct, latent, softmax
from ..schema.arch import Architecture
from ..schema.precision import WeightFormat
from .inventory.tensor import Tensor

KV_PARTS = frozenset({"attention/k", "attention/v", "attention/cross.k", "attention/cross.v"})
REPLICATED_PARTS = (
    "attention/q_a",
    "attention/kv_a",
    "attention/q_a_norm",
    "attention/kv_a_norm",
    "attention/indexer",
)


@dataclass(frozen=True)
class Layout:
    """TP × PP × DP GPUs; ``ep``: routed experts spread whole over the TP × DP GPUs."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: bool = False

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def ep_size(self) -> int:
        return self.tp * self.dp if self.ep else 1

    def label(self) -> str:
        parts = [f"TP={self.tp}"] if self.tp > 1 or (self.pp == 1 and self.dp == 1) else []
        if self.pp > 1:
            parts.append(f"PP={self.pp}")
        if self.dp > 1:
            parts.append(f"DP={self.dp}" + (" attention" if self.ep else ""))
        if self.ep and self.ep_size > 1:
            parts.append(f"EP={self.ep_size}")
        return " × ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "tensor_parallel_size": self.tp,
            "pipeline_parallel_size": self.pp,
            "data_parallel_size": self.dp,
            "expert_parallel": self.ep,
            "expert_parallel_size": self.ep_size,
            "gpus": self.gpus,
            "label": self.label(),
        }


def kv_heads_of(arch: Architecture) -> set[int]:
    """Distinct KV-head counts of the softmax layers (MLA has none to split)."""
    out = set()
    for s, _ in arch.layer_runs:
        if (softmax(s.mixer) and not latent(s.mixer)) or s.shared_block is not None:
            g = s.n_kv_heads or arch.get("n_kv_heads") or arch.get("n_heads") or 0
            if g:
                out.add(g)
    return out


def kv_share(g: int, tp: int) -> float:
    """Share of a layer's g KV heads one TP rank holds: ceil(g/TP)/g (1/g once TP ≥ g)."""
    return math.ceil(g / tp) / g if g else 1.0


def _widths(arch: Architecture) -> list[tuple[str, int]]:
    """(what, size) that TP must divide."""
    out = []
    h = arch.get("n_heads") or 0
    if h and any(softmax(s.mixer) for s, _ in arch.layer_runs):
        out.append(("attention heads", h))
    for key, what in (
        ("linear_n_v_heads", "linear-attention value heads"),
        ("linear_n_k_heads", "linear-attention key heads"),
        ("ssm_n_heads", "SSM heads"),
    ):
        if arch.get(key) and any((m := construct(s.mixer)) and m.recurrent_heads for s, _ in arch.layer_runs):
            out.append((what, arch.get(key)))
    widths = {s.d_ff or arch.get("d_ff") for s, _ in arch.layer_runs if s.ffn == "dense"}
    for f in sorted(w for w in widths if w):
        out.append(("FFN width", f))
    return out


def _block_rows(fmt: WeightFormat) -> int | None:
    """Output-dimension block a rank's shard must be a multiple of (block-scaled fp8)."""
    return fmt.block[0] if fmt.quantized and fmt.block else None


def problems(arch: Architecture, layout: Layout, fmt: WeightFormat | None = None) -> tuple[str, ...]:
    """Why an engine would refuse ``layout`` for ``arch`` (empty: it is valid)."""
    out: list[str] = []
    tp, pp = layout.tp, layout.pp
    for n, name in ((tp, "TP"), (pp, "PP"), (layout.dp, "DP")):
        if n < 1:
            out.append(f"{name}={n}: must be at least 1")
    if out:
        return tuple(out)
    for what, size in _widths(arch):
        if size % tp:
            out.append(f"TP={tp} does not divide the {size:,} {what}")
    for g in sorted(kv_heads_of(arch)):
        if g % tp and tp % g:
            out.append(f"TP={tp} neither divides the {g} KV heads nor is a multiple of them (to replicate)")
    e = arch.get("n_experts") or 0
    moe = e and any(s.ffn == "moe" or s.ffn2 == "moe" for s, _ in arch.layer_runs)
    fe = arch.get("d_ff_expert") or 0
    if moe and layout.ep and e % layout.ep_size:
        out.append(f"EP={layout.ep_size} does not divide the {e} routed experts")
    if moe and not layout.ep and fe and fe % tp:
        out.append(f"TP={tp} does not divide the expert width {fe:,} (expert parallelism would)")
    if layout.ep and not moe:
        out.append("expert parallelism needs routed experts; this model has none")
    block = _block_rows(fmt) if fmt else None
    if block and tp > 1:
        shards = [("expert width", fe)] if moe and not layout.ep and fe else []
        shards += [(w, s) for w, s in _widths(arch) if w == "FFN width"]
        for what, size in shards:
            if size % tp == 0 and (size // tp) % block:
                out.append(
                    f"TP={tp} leaves {size // tp:,} of the {what} {size:,} per rank, not a multiple of "
                    f"the {block}-row weight block"
                )
    if pp > arch.n_layers:
        out.append(f"PP={pp} exceeds the {arch.n_layers} layers")
    return tuple(out)


def uneven_pp(arch: Architecture, layout: Layout) -> bool:
    return arch.n_layers % layout.pp != 0


def stage_sizes(n_layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage as vLLM splits them (get_pp_indices): the remainder goes
    to the stages just before the last, one each."""
    sizes = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        sizes[-i] += 1
    return sizes


def share_class(t: Tensor) -> str:
    """How tensor ``t`` splits over a layout: ``tp`` (1/TP), ``rep`` (whole on every GPU),
    ``kv`` (the K/V heads' share), ``exp`` (a routed expert: 1/EP, or 1/TP without EP)."""
    part = t.part.removeprefix("mtp/")
    if t.routed:
        return "exp"
    if t.slot in ("norms", "router", "position") or part.startswith(REPLICATED_PARTS):
        return "rep"
    if t.kind == "vector" and not part.startswith(("attention/linear", "attention/ssm", "attention/sinks")):
        return "rep"  # biases and norms
    if part.removesuffix(".bias") in KV_PARTS:
        return "kv"
    return "tp"


def class_share(cls: str, layout: Layout, g: int = 1) -> float:
    """Share of a tensor of class ``cls`` (layer with ``g`` KV heads) one GPU holds."""
    if cls == "rep":
        return 1.0
    if cls == "kv":
        return kv_share(g, layout.tp)
    if cls == "exp" and layout.ep:
        return 1 / layout.ep_size
    return 1 / layout.tp
