"""Parameter tensors of an architecture, one entry per kind of tensor, from the config alone.

The list is an ordered breakdown with slash-named parts (``attention/q``, ``experts/up``)
in the manner of nanoGPT's sizing notebook: totals are sums of named parts, every part is
a whole tensor shape times a count, so weight bytes (with quantization block scales) and
per-token FLOPs can be computed from the same list. Mixer kinds (softmax attention, MLA,
linear attention, Mamba) each have their own tensor set; facts that differ by family
(biases, norms, fused projections, gates) come from the key map's model_type files.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..arch import Architecture, LayerSpec
from ..errors import SlotdiffError

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

    @property
    def params(self) -> int:
        return self.rows * self.cols * self.count

    @property
    def matmul(self) -> bool:
        """Counts toward per-token matmul FLOPs (linear layers, the head, convolutions)."""
        return self.kind in ("linear", "conv")


class Unsupported(SlotdiffError):
    """The config names a structure the cost model does not cover: say so, give no number."""


def _int(arch: Architecture, name: str) -> int:
    value = arch.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise Unsupported(
            arch.name, f"cannot count parameters: {name} is unknown", key=arch.key(name)
        )
    return value


class _Builder:
    def __init__(self, arch: Architecture) -> None:
        self.arch = arch
        self.out: list[Tensor] = []

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
        self.out.append(
            Tensor(part, slot or part.split("/")[0], rows, cols, count, kind, module, routed)
        )

    def norm(self, part: str, width: int, count: int, module: str, slot: str = "norms") -> None:
        if self.arch.get("norm_affine") is False:
            return  # LayerNorm without elementwise affine: no parameters
        self.add(part, width, 1, count, "vector", module, slot)
        if self.arch.get("norm_bias"):
            self.add(part + ".bias", width, 1, count, "vector", module, slot)


def _runs(layers: Iterable[LayerSpec], key: Any) -> Iterator[tuple[Any, int]]:
    """Group layers by ``key(layer)`` and count them (order-independent)."""
    counts: dict[Any, int] = defaultdict(int)
    for spec in layers:
        counts[key(spec)] += 1
    yield from counts.items()


def _attention(b: _Builder, n: int, layer: LayerSpec) -> None:
    a = b.arch
    d, h = _int(a, "d_model"), _int(a, "n_heads")
    g = layer.n_kv_heads or _int(a, "n_kv_heads")
    hd = layer.head_dim or _int(a, "head_dim")
    hv = a.get("v_head_dim") or hd
    mod = "model.layers.0.self_attn"
    q_out = h * hd * (2 if a.get("attn_output_gate") else 1)
    slot = "attention"
    if a.get("fused_qkv"):
        b.add(
            "attention/qkv",
            q_out + g * hd + g * hv,
            d,
            n,
            "linear",
            f"{mod}.qkv_proj",
            slot,
        )
    else:
        b.add("attention/q", q_out, d, n, "linear", f"{mod}.q_proj", slot)
        b.add("attention/k", g * hd, d, n, "linear", f"{mod}.k_proj", slot)
        if not a.get("k_eq_v") or layer.window is not None:
            b.add("attention/v", g * hv, d, n, "linear", f"{mod}.v_proj", slot)
    b.add("attention/o", d, h * hv, n, "linear", f"{mod}.o_proj", slot)
    if a.get("qkv_bias"):
        b.add(
            "attention/qkv.bias",
            q_out + g * hd + g * hv,
            1,
            n,
            "vector",
            f"{mod}.q_proj",
            slot,
        )
    if a.get("o_bias"):
        b.add("attention/o.bias", d, 1, n, "vector", f"{mod}.o_proj", slot)
    kind = a.get("qk_norm_kind")
    if a.get("qk_norm") and kind != "l2":  # an L2 QK-norm has no weights
        # One weight per head (each head its own, or one over all heads) or one shared.
        q_w, k_w = (h * hd, g * hd) if kind in ("full", "head_separate") else (hd, hd)
        for suffix in ("", ".bias") if a.get("qk_norm_bias") else ("",):
            b.add(f"attention/q_norm{suffix}", q_w, 1, n, "vector", f"{mod}.q_norm", slot)
            b.add(f"attention/k_norm{suffix}", k_w, 1, n, "vector", f"{mod}.k_norm", slot)
    if a.get("sinks"):
        b.add("attention/sinks", h, 1, n, "vector", f"{mod}.sinks", slot)


def _mla(b: _Builder, n: int, layer: LayerSpec) -> None:
    a = b.arch
    d, h = _int(a, "d_model"), _int(a, "n_heads")
    kv_rank, rope, nope = (
        _int(a, "kv_lora_rank"),
        _int(a, "qk_rope_head_dim"),
        _int(a, "qk_nope_head_dim"),
    )
    hv = _int(a, "v_head_dim")
    q_rank = a.get("q_lora_rank")
    mod = "model.layers.0.self_attn"
    slot = "attention"
    bias = bool(a.get("qkv_bias"))
    if q_rank:
        b.add("attention/q_a", q_rank, d, n, "linear", f"{mod}.q_a_proj", slot)
        b.add("attention/q_a_norm", q_rank, 1, n, "vector", f"{mod}.q_a_layernorm", slot)
        b.add(
            "attention/q_b",
            h * (nope + rope),
            q_rank,
            n,
            "linear",
            f"{mod}.q_b_proj",
            slot,
        )
        if bias:
            b.add("attention/q_a.bias", q_rank, 1, n, "vector", f"{mod}.q_a_proj", slot)
    else:
        b.add("attention/q", h * (nope + rope), d, n, "linear", f"{mod}.q_proj", slot)
    b.add("attention/kv_a", kv_rank + rope, d, n, "linear", f"{mod}.kv_a_proj_with_mqa", slot)
    b.add("attention/kv_a_norm", kv_rank, 1, n, "vector", f"{mod}.kv_a_layernorm", slot)
    b.add("attention/kv_b", h * (nope + hv), kv_rank, n, "linear", f"{mod}.kv_b_proj", slot)
    b.add("attention/o", d, h * hv, n, "linear", f"{mod}.o_proj", slot)
    if bias:
        b.add(
            "attention/kv_a.bias",
            kv_rank + rope,
            1,
            n,
            "vector",
            f"{mod}.kv_a_proj_with_mqa",
            slot,
        )
        b.add("attention/o.bias", d, 1, n, "vector", f"{mod}.o_proj", slot)
    if layer.sparse:
        ih, idim = _int(a, "index_n_heads"), _int(a, "index_head_dim")
        src = q_rank or d
        b.add(
            "attention/indexer.wq_b",
            ih * idim,
            src,
            n,
            "linear",
            f"{mod}.indexer.wq_b",
            slot,
        )
        b.add("attention/indexer.wk", idim, d, n, "linear", f"{mod}.indexer.wk", slot)
        b.add(
            "attention/indexer.k_norm",
            2 * idim,
            1,
            n,
            "vector",
            f"{mod}.indexer.k_norm",
            slot,
        )
        b.add(
            "attention/indexer.weights",
            ih,
            d,
            n,
            "linear",
            f"{mod}.indexer.weights_proj",
            slot,
        )


def _linear_attention(b: _Builder, n: int, layer: LayerSpec) -> None:
    a = b.arch
    variant = layer.variant or "gated_deltanet"
    d = _int(a, "d_model")
    mod = "model.layers.0.linear_attn"
    if variant == "gated_deltanet":
        nk, nv = _int(a, "linear_n_k_heads"), _int(a, "linear_n_v_heads")
        dk, dv = _int(a, "linear_k_head_dim"), _int(a, "linear_v_head_dim")
        kernel = _int(a, "linear_conv_kernel")
        key, value = nk * dk, nv * dv
        if a.get("linear_split_proj"):
            b.add("attention/linear.in_qkv", 2 * key + value, d, n, "linear", f"{mod}.in_proj_qkv")
            b.add("attention/linear.in_z", value, d, n, "linear", f"{mod}.in_proj_z")
            b.add("attention/linear.in_b", nv, d, n, "linear", f"{mod}.in_proj_b")
            b.add("attention/linear.in_a", nv, d, n, "linear", f"{mod}.in_proj_a")
        else:
            b.add(
                "attention/linear.in_qkvz",
                2 * key + 2 * value,
                d,
                n,
                "linear",
                f"{mod}.in_proj_qkvz",
            )
            b.add("attention/linear.in_ba", 2 * nv, d, n, "linear", f"{mod}.in_proj_ba")
        b.add("attention/linear.conv", 2 * key + value, kernel, n, "conv", f"{mod}.conv1d")
        b.add("attention/linear.dt_bias", nv, 1, n, "vector", f"{mod}.dt_bias")
        b.add("attention/linear.A_log", nv, 1, n, "vector", f"{mod}.A_log")
        b.add("attention/linear.norm", dv, 1, n, "vector", f"{mod}.norm")
        b.add("attention/linear.out", d, value, n, "linear", f"{mod}.out_proj")
        return
    raise Unsupported(
        a.name,
        f"cannot count parameters of {variant.replace('_', ' ')} layers yet",
        key=a.key("layer_types"),
    )


def _mamba(b: _Builder, n: int, version: int) -> None:
    a = b.arch
    d = _int(a, "d_model")
    mod = "model.layers.0.mixer"
    kernel = _int(a, "ssm_conv_kernel")
    state = _int(a, "ssm_state")
    conv_bias = bool(a.get("ssm_conv_bias"))
    proj_bias = bool(a.get("ssm_proj_bias"))
    if version == 2:
        heads, hdim = _int(a, "ssm_n_heads"), _int(a, "ssm_head_dim")
        groups = _int(a, "ssm_n_groups")
        inner = heads * hdim
        conv_dim = inner + 2 * groups * state
        b.add("attention/ssm.in_proj", inner + conv_dim + heads, d, n, "linear", f"{mod}.in_proj")
        if proj_bias:
            b.add(
                "attention/ssm.in_proj.bias",
                inner + conv_dim + heads,
                1,
                n,
                "vector",
                f"{mod}.in_proj",
            )
        b.add("attention/ssm.conv", conv_dim, kernel, n, "conv", f"{mod}.conv1d")
        if conv_bias:
            b.add("attention/ssm.conv.bias", conv_dim, 1, n, "vector", f"{mod}.conv1d")
        for name in ("dt_bias", "A_log", "D"):
            b.add(f"attention/ssm.{name}", heads, 1, n, "vector", f"{mod}.{name}")
        b.add("attention/ssm.norm", inner, 1, n, "vector", f"{mod}.norm")
        b.add("attention/ssm.out_proj", d, inner, n, "linear", f"{mod}.out_proj")
        if proj_bias:
            b.add("attention/ssm.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
        return
    expand = a.get("ssm_expand")
    inner = int(expand * d) if expand else _int(a, "ssm_inner")
    dt_rank = a.get("ssm_dt_rank")
    if dt_rank in (None, "auto"):
        dt_rank = -(-d // 16)
    b.add("attention/ssm.in_proj", 2 * inner, d, n, "linear", f"{mod}.in_proj")
    if proj_bias:
        b.add("attention/ssm.in_proj.bias", 2 * inner, 1, n, "vector", f"{mod}.in_proj")
    b.add("attention/ssm.conv", inner, kernel, n, "conv", f"{mod}.conv1d")
    if conv_bias:
        b.add("attention/ssm.conv.bias", inner, 1, n, "vector", f"{mod}.conv1d")
    b.add("attention/ssm.x_proj", dt_rank + 2 * state, inner, n, "linear", f"{mod}.x_proj")
    b.add("attention/ssm.dt_proj", inner, dt_rank, n, "linear", f"{mod}.dt_proj")
    b.add("attention/ssm.dt_proj.bias", inner, 1, n, "vector", f"{mod}.dt_proj")
    b.add("attention/ssm.A_log", inner, state, n, "vector", f"{mod}.A_log")
    b.add("attention/ssm.D", inner, 1, n, "vector", f"{mod}.D")
    b.add("attention/ssm.out_proj", d, inner, n, "linear", f"{mod}.out_proj")
    if proj_bias:
        b.add("attention/ssm.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
    if a.get("ssm_inner_norms"):
        b.add("attention/ssm.dt_norm", dt_rank, 1, n, "vector", f"{mod}.dt_layernorm")
        b.add("attention/ssm.bc_norm", state, 1, 2 * n, "vector", f"{mod}.b_layernorm")


def _dense_ffn(
    b: _Builder,
    n: int,
    width: int,
    part: str = "ffn",
    module: str = "mlp",
    routed: bool = False,
    experts: int = 1,
    slot: str | None = None,
) -> None:
    a = b.arch
    d = _int(a, "d_model")
    gated = bool(a.get("ffn_gated"))
    mod = f"model.layers.0.{module}"
    count = n * experts
    if gated:
        b.add(f"{part}/gate", width, d, count, "linear", f"{mod}.gate_proj", slot, routed)
    b.add(f"{part}/up", width, d, count, "linear", f"{mod}.up_proj", slot, routed)
    b.add(f"{part}/down", d, width, count, "linear", f"{mod}.down_proj", slot, routed)
    bias = a.get("expert_bias") if part == "experts" else a.get("ffn_bias")
    if bias:
        b.add(
            f"{part}/up.bias",
            width * (2 if gated else 1),
            1,
            count,
            "vector",
            f"{mod}.up_proj",
            slot,
            routed,
        )
        b.add(f"{part}/down.bias", d, 1, count, "vector", f"{mod}.down_proj", slot, routed)


def _moe(b: _Builder, n: int) -> None:
    a = b.arch
    d = _int(a, "d_model")
    e = _int(a, "n_experts")
    width = _int(a, "d_ff_expert")
    b.add("router/weight", e, d, n, "linear", "model.layers.0.mlp.gate")
    if a.get("router_bias"):
        b.add("router/bias", e, 1, n, "vector", "model.layers.0.mlp.gate")
    if a.get("router_score_bias"):
        b.add("router/score_bias", e, 1, n, "vector", "model.layers.0.mlp.gate")
    _dense_ffn(b, n, width, "experts", "mlp.experts.0", routed=True, experts=e)
    shared = a.get("n_shared_experts") or 0
    shared_width = a.get("d_ff_shared")
    if shared_width:
        _dense_ffn(b, n, shared_width, "shared_experts", "mlp.shared_experts")
    elif shared:
        _dense_ffn(b, n, shared * width, "shared_experts", "mlp.shared_experts")
    if a.get("shared_expert_gate") and (shared or shared_width):
        b.add("shared_experts/gate", 1, d, n, "linear", "model.layers.0.mlp.shared_expert_gate")


def _norms(b: _Builder, layers: tuple[LayerSpec, ...]) -> None:
    a = b.arch
    d = _int(a, "d_model")
    placement = a.get("norm_placement") or "pre"
    per_sublayer = {"pre": 1, "post": 1, "sandwich": 2, "parallel": 0, "parallel2": 1}[placement]
    count = 0
    for spec in layers:
        sub = (spec.mixer is not None) + (spec.ffn is not None)
        if placement == "parallel":
            count += 1
        else:
            count += per_sublayer * sub
    b.norm("norms/layers", d, count, "model.layers.0.input_layernorm")


def tensors(arch: Architecture) -> tuple[Tensor, ...]:
    """Every parameter tensor of the model transformers would build from this config."""
    b = _Builder(arch)
    d, vocab = _int(arch, "d_model"), _int(arch, "vocab")
    d_embed = arch.get("d_embed") or d
    b.add("embedding/tokens", vocab, d_embed, 1, "embedding", "model.embed_tokens")
    if d_embed != d:
        b.add("embedding/project_in", d, d_embed, 1, "linear", "model.project_in")
    if arch.get("embed_norm"):
        b.norm("norms/embedding", d, 1, "model.embed_layernorm")
    if arch.get("position") == "learned":
        rows = _int(arch, "max_positions") + (arch.get("position_offset") or 0)
        b.add("position/table", rows, d, 1, "embedding", "model.embed_positions")
    layers = arch.layers
    for (mixer, variant, window, sparse, kv, hd), n in _runs(
        layers, lambda s: (s.mixer, s.variant, s.window, s.sparse, s.n_kv_heads, s.head_dim)
    ):
        rep = next(
            s
            for s in layers
            if (s.mixer, s.variant, s.window, s.sparse, s.n_kv_heads, s.head_dim)
            == (mixer, variant, window, sparse, kv, hd)
        )
        if mixer == "attention":
            _attention(b, n, rep)
        elif mixer == "mla":
            _mla(b, n, rep)
        elif mixer == "linear_attention":
            _linear_attention(b, n, rep)
        elif mixer in ("mamba", "mamba2"):
            _mamba(b, n, 2 if mixer == "mamba2" else 1)
        elif mixer is not None:
            raise Unsupported(
                arch.name,
                f"cannot count parameters of {mixer} layers yet",
                key=arch.key("layer_types"),
            )
    for (ffn, width), n in _runs(layers, lambda s: (s.ffn, s.d_ff)):
        if ffn == "dense":
            _dense_ffn(b, n, width or _int(arch, "d_ff"))
        elif ffn == "moe":
            _moe(b, n)
    _norms(b, layers)
    if arch.get("final_norm", True):
        b.norm("norms/final", d, 1, "model.norm")
    if d_embed != d:
        b.add("head/project_out", d_embed, d, 1, "linear", "model.project_out")
    if not arch.get("tie_embeddings"):
        b.add("head/weight", vocab, d_embed, 1, "linear", "lm_head")
    if arch.get("head_bias"):
        b.add("head/bias", vocab, 1, 1, "vector", "lm_head")
    return tuple(b.out)


def mtp_tensors(arch: Architecture) -> tuple[Tensor, ...]:
    """Tensors of the MTP modules (DeepSeek-V3 style), counted apart from the main model.

    Each module: two RMSNorms on the inputs, a 2d→d projection, one decoder layer shaped like
    the model's last layer, and a final norm; embedding and head are shared with the trunk.
    """
    n = arch.get("mtp_layers") or 0
    if not n:
        return ()
    last = arch.layers[-1]
    sub = _Builder(arch)
    d = _int(arch, "d_model")
    if last.mixer == "mla":
        _mla(sub, n, last)
    elif last.mixer == "attention":
        _attention(sub, n, last)
    if last.ffn == "moe":
        _moe(sub, n)
    elif last.ffn == "dense":
        _dense_ffn(sub, n, last.d_ff or _int(arch, "d_ff"))
    sub.norm("norms/layers", d, 2 * n, "model.layers.61.input_layernorm")
    sub.norm("norms/mtp_inputs", d, 2 * n, "model.layers.61.enorm")
    sub.add("mtp/eh_proj", d, 2 * d, n, "linear", "model.layers.61.eh_proj")
    sub.norm("norms/mtp_head", d, n, "model.layers.61.shared_head.norm")
    return tuple(
        Tensor(
            "mtp/" + t.part,
            "mtp",
            t.rows,
            t.cols,
            t.count,
            t.kind,
            t.module.replace("layers.0.", "layers.61."),
            t.routed,
        )
        for t in sub.out
    )


@dataclass(frozen=True)
class ParamCount:
    """Parameter totals and the breakdown by slot part."""

    total: int  # what transformers instantiates (MTP modules excluded)
    active: int  # per token: routed experts at top_k / n_experts
    by_part: tuple[tuple[str, int], ...]
    mtp: int  # MTP modules, counted separately
    tensors: tuple[Tensor, ...]

    def part(self, name: str) -> int:
        return dict(self.by_part).get(name, 0)


def active_fraction(arch: Architecture) -> float:
    """Share of routed-expert weights one token uses: top_k / n_experts."""
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    return k / e if e else 1.0


def count(arch: Architecture) -> ParamCount:
    """Count parameters exactly (total, active, by part) from the config alone."""
    ts = tensors(arch)
    by: dict[str, int] = {p: 0 for p in PARTS}
    for t in ts:
        by[t.slot] = by.get(t.slot, 0) + t.params
    total = sum(by.values())
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    routed = sum(t.params for t in ts if t.routed)
    active = total - routed + (routed * k // e if e else 0)
    mtp = sum(t.params for t in mtp_tensors(arch))
    return ParamCount(total, active, tuple((p, v) for p, v in by.items() if v), mtp, ts)
