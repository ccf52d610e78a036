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


def _tensor(
    part: str, slot: str, rows: int, cols: int, count: int, kind: str, module: str, routed: bool
) -> Tensor:
    """``Tensor(...)`` without the frozen dataclass's ``__init__`` (one ``object.__setattr__``
    per field): every pricing builds dozens, and a model is priced ~8 times (counterfactuals)."""
    t = object.__new__(Tensor)
    t.__dict__.update(
        part=part, slot=slot, rows=rows, cols=cols, count=count, kind=kind, module=module, routed=routed
    )
    return t


class Unsupported(SlotdiffError):
    """The config names a structure the cost model does not cover: say so, give no number."""


def _int(arch: Architecture, name: str) -> int:
    value = arch.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise Unsupported(arch.name, f"cannot count parameters: {name} is unknown", key=arch.key(name))
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
        self.out.append(_tensor(part, slot or part.split("/")[0], rows, cols, count, kind, module, routed))

    def norm(self, part: str, width: int, count: int, module: str, slot: str = "norms") -> None:
        if self.arch.get("norm_affine") is False:
            return  # LayerNorm without elementwise affine: no parameters
        self.add(part, width, 1, count, "vector", module, slot)
        if self.arch.get("norm_bias"):
            self.add(part + ".bias", width, 1, count, "vector", module, slot)


def _runs(
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
    elif layer.kv_shared:
        # K/V come from an earlier layer: only the query side has weights here.
        b.add("attention/q", q_out, d, n, "linear", f"{mod}.q_proj", slot)
    else:
        b.add("attention/q", q_out, d, n, "linear", f"{mod}.q_proj", slot)
        b.add("attention/k", g * hd, d, n, "linear", f"{mod}.k_proj", slot)
        if not a.get("k_eq_v") or layer.window is not None:
            b.add("attention/v", g * hv, d, n, "linear", f"{mod}.v_proj", slot)
    b.add("attention/o", d, h * hv, n, "linear", f"{mod}.o_proj", slot)
    if a.get("qkv_bias"):
        has_v = not a.get("k_eq_v") or layer.window is not None
        kv_bias = 0 if layer.kv_shared else g * hd + (g * hv if has_v else 0)
        b.add(
            "attention/qkv.bias",
            q_out + kv_bias,
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
            if not layer.kv_shared:  # a layer reusing another's K/V has no k norm
                b.add(f"attention/k_norm{suffix}", k_w, 1, n, "vector", f"{mod}.k_norm", slot)
    if a.get("sinks"):
        b.add("attention/sinks", h, 1, n, "vector", f"{mod}.sinks", slot)


def _cross_attention(b: _Builder, n: int, layer: LayerSpec) -> None:
    """Decoder cross-attention to image states already projected to the text width (Mllama).

    q reads text tokens; k and v read the image states, so they run per image state, not per
    text token, and the layer caches no text-token KV.
    """
    a = b.arch
    d, h = _int(a, "d_model"), _int(a, "n_heads")
    g = layer.n_kv_heads or _int(a, "n_kv_heads")
    hd = layer.head_dim or _int(a, "head_dim")
    mod = "model.layers.0.cross_attn"
    b.add("attention/cross.q", h * hd, d, n, "linear", f"{mod}.q_proj")
    b.add("attention/cross.k", g * hd, d, n, "linear", f"{mod}.k_proj")
    b.add("attention/cross.v", g * hd, d, n, "linear", f"{mod}.v_proj")
    b.add("attention/cross.o", d, h * hd, n, "linear", f"{mod}.o_proj")
    if a.get("cross_attn_qk_norm"):
        b.add("attention/cross.q_norm", hd, 1, n, "vector", f"{mod}.q_norm")
        b.add("attention/cross.k_norm", hd, 1, n, "vector", f"{mod}.k_norm")
    gates = a.get("cross_attn_gates") or 0
    b.add("attention/cross.gates", 1, 1, gates * n, "vector", "model.layers.0.cross_attn_attn_gate")


def _mla(b: _Builder, n: int, layer: LayerSpec) -> None:
    a = b.arch
    d, h = _int(a, "d_model"), _int(a, "n_heads")
    kv_rank, rope, nope = (
        _int(a, "kv_lora_rank"),
        _int(a, "qk_rope_head_dim"),
        _int(a, "qk_nope_head_dim"),
    )
    hv = _int(a, "v_head_dim")
    qk = a.get("qk_head_dim") or nope + rope
    q_rank = a.get("q_lora_rank")
    mod = "model.layers.0.self_attn"
    slot = "attention"
    bias = bool(a.get("qkv_bias"))
    if q_rank:
        b.add("attention/q_a", q_rank, d, n, "linear", f"{mod}.q_a_proj", slot)
        b.add("attention/q_a_norm", q_rank, 1, n, "vector", f"{mod}.q_a_layernorm", slot)
        b.add(
            "attention/q_b",
            h * qk,
            q_rank,
            n,
            "linear",
            f"{mod}.q_b_proj",
            slot,
        )
        if bias:
            b.add("attention/q_a.bias", q_rank, 1, n, "vector", f"{mod}.q_a_proj", slot)
    else:
        b.add("attention/q", h * qk, d, n, "linear", f"{mod}.q_proj", slot)
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
    """Linear-attention layers; ``layer.variant`` picks the tensor set."""
    a = b.arch
    variant = layer.variant or "gated_deltanet"
    d = _int(a, "d_model")
    mod = "model.layers.0.linear_attn"
    if variant == "gated_deltanet":
        # Gated DeltaNet (Qwen3-Next, Qwen3.5): q/k/v/z projections (fused or split), a
        # depthwise conv over q/k/v, per-v-head decay (A_log, dt_bias), a gated RMSNorm.
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
    if variant == "lightning":
        # Lightning attention (MiniMax-01): fused qkv over the softmax layers' heads, a
        # sigmoid output gate, an RMSNorm over all heads; decay rates are buffers.
        h, hd = _int(a, "n_heads"), _int(a, "head_dim")
        mod = "model.layers.0.self_attn"
        b.add("attention/linear.qkv", 3 * h * hd, d, n, "linear", f"{mod}.qkv_proj")
        b.add("attention/linear.gate", h * hd, d, n, "linear", f"{mod}.output_gate")
        b.add("attention/linear.norm", h * hd, 1, n, "vector", f"{mod}.norm")
        b.add("attention/linear.out", d, h * hd, n, "linear", f"{mod}.out_proj")
        return
    if variant == "kda":
        # Kimi Delta Attention (Kimi Linear): q/k/v, a depthwise conv over them, a low-rank
        # per-channel forget gate (f_a, f_b, dt_bias, per-head A_log), a beta projection, a
        # low-rank output gate (g_a, g_b) into a gated RMSNorm.
        nh, hd = _int(a, "linear_n_v_heads"), _int(a, "linear_v_head_dim")
        kernel = _int(a, "linear_conv_kernel")
        proj = nh * hd
        mod = "model.layers.0.self_attn"
        for name in ("q", "k", "v"):
            b.add(f"attention/linear.{name}", proj, d, n, "linear", f"{mod}.{name}_proj")
        b.add("attention/linear.conv", 3 * proj, kernel, n, "conv", f"{mod}.conv1d")
        b.add("attention/linear.f_a", hd, d, n, "linear", f"{mod}.forget_gate.f_a_proj")
        b.add("attention/linear.f_b", proj, hd, n, "linear", f"{mod}.forget_gate.f_b_proj")
        b.add("attention/linear.dt_bias", proj, 1, n, "vector", f"{mod}.forget_gate.dt_bias")
        b.add("attention/linear.A_log", nh, 1, n, "vector", f"{mod}.forget_gate.A_log")
        b.add("attention/linear.beta", nh, d, n, "linear", f"{mod}.b_proj")
        b.add("attention/linear.g_a", hd, d, n, "linear", f"{mod}.g_a_proj")
        b.add("attention/linear.g_b", proj, hd, n, "linear", f"{mod}.g_b_proj")
        b.add("attention/linear.norm", hd, 1, n, "vector", f"{mod}.o_norm")
        b.add("attention/linear.out", d, proj, n, "linear", f"{mod}.o_proj")
        return
    raise Unsupported(
        a.name,
        f"cannot count parameters of {variant.replace('_', ' ')} layers yet",
        key=a.key("layer_types"),
    )


def _mamba(b: _Builder, n: int, version: int) -> None:
    """Mamba-1 (selective scan, per-channel state) or Mamba-2 (per-head scalar decay)."""
    a = b.arch
    d = _int(a, "d_model")
    mod = "model.layers.0.mixer"
    kernel = _int(a, "ssm_conv_kernel")
    state = _int(a, "ssm_state")
    inner = _int(a, "ssm_inner")
    conv_bias = bool(a.get("ssm_conv_bias"))
    proj_bias = bool(a.get("ssm_proj_bias"))
    out_bias = bool(a.get("ssm_out_bias"))
    if version == 2:
        heads, groups = _int(a, "ssm_n_heads"), _int(a, "ssm_n_groups")
        conv_dim = inner + 2 * groups * state
        width = inner + conv_dim + heads  # z, x/B/C, dt
        b.add("attention/ssm.in_proj", width, d, n, "linear", f"{mod}.in_proj")
        if proj_bias:
            b.add("attention/ssm.in_proj.bias", width, 1, n, "vector", f"{mod}.in_proj")
        b.add("attention/ssm.conv", conv_dim, kernel, n, "conv", f"{mod}.conv1d")
        if conv_bias:
            b.add("attention/ssm.conv.bias", conv_dim, 1, n, "vector", f"{mod}.conv1d")
        for name in ("dt_bias", "A_log", "D"):
            b.add(f"attention/ssm.{name}", heads, 1, n, "vector", f"{mod}.{name}")
        if a.get("ssm_norm", True):
            b.add("attention/ssm.norm", inner, 1, n, "vector", f"{mod}.norm")
        b.add("attention/ssm.out_proj", d, inner, n, "linear", f"{mod}.out_proj")
        if out_bias:
            b.add("attention/ssm.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
        return
    dt_rank = a.get("ssm_dt_rank")
    if dt_rank in (None, "auto"):
        dt_rank = -(-d // 16)
    if not isinstance(dt_rank, int):
        raise Unsupported(a.name, f"cannot read Δ rank {dt_rank!r}", key=a.key("ssm_dt_rank"))
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
    if out_bias:
        b.add("attention/ssm.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
    if a.get("ssm_inner_norms"):
        b.add("attention/ssm.dt_norm", dt_rank, 1, n, "vector", f"{mod}.dt_layernorm")
        b.add("attention/ssm.bc_norm", state, 1, 2 * n, "vector", f"{mod}.b_layernorm")


def _short_conv(b: _Builder, n: int) -> None:
    """Gated short convolution (LFM2): in_proj to B, C, x; depthwise conv; out_proj."""
    a = b.arch
    d = _int(a, "d_model")
    kernel = _int(a, "short_conv_kernel")
    bias = bool(a.get("short_conv_bias"))
    mod = "model.layers.0.conv"
    b.add("attention/conv.in_proj", 3 * d, d, n, "linear", f"{mod}.in_proj")
    b.add("attention/conv.conv", d, kernel, n, "conv", f"{mod}.conv")
    b.add("attention/conv.out_proj", d, d, n, "linear", f"{mod}.out_proj")
    if bias:
        b.add("attention/conv.in_proj.bias", 3 * d, 1, n, "vector", f"{mod}.in_proj")
        b.add("attention/conv.conv.bias", d, 1, n, "vector", f"{mod}.conv")
        b.add("attention/conv.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")


def _mixer(b: _Builder, n: int, kind: str | None, layer: LayerSpec) -> None:
    """The tensors of ``n`` sequence mixers of ``kind`` shaped like ``layer``."""
    if kind == "attention":
        _attention(b, n, layer)
    elif kind == "mla":
        _mla(b, n, layer)
    elif kind == "linear_attention":
        _linear_attention(b, n, layer)
    elif kind in ("mamba", "mamba2"):
        _mamba(b, n, 2 if kind == "mamba2" else 1)
    elif kind == "conv":
        _short_conv(b, n)
    elif kind == "cross_attention":
        _cross_attention(b, n, layer)
    elif kind is not None:
        raise Unsupported(
            b.arch.name,
            f"cannot count parameters of {kind} layers yet",
            key=b.arch.key("layer_types"),
        )


def _shared_blocks(b: _Builder, layers: tuple[LayerSpec, ...]) -> None:
    """Weight-shared attention+MLP blocks (Zamba2), counted once per distinct block.

    Each block: softmax attention whose input is ``attn_in_width`` wide (Zamba2 feeds the
    hidden state concatenated with the original embeddings), a gated MLP, an input norm of
    that width and a pre-FFN norm. Every use of a block adds its own LoRA-style adapters of
    rank ``shared_adapter_rank`` (on the MLP's gate/up projection, and on q/k/v when
    ``shared_attn_adapters``) and a d×d linear mapping the block's output into the layer.
    The adapters are sized by ``shared_block_users`` when the config lists it (transformers
    keeps a config's hybrid_layer_ids over the computed one).
    """
    users = [s for s in layers if s.shared_block is not None]
    if not users:
        return
    a = b.arch
    d = _int(a, "d_model")
    din = a.get("attn_in_width") or d
    h, g = _int(a, "n_heads"), _int(a, "n_kv_heads")
    hd = users[0].head_dim or _int(a, "head_dim")
    ff = _int(a, "d_ff")
    blocks = len({s.shared_block for s in users})
    mod = "model.layers.0.shared_transformer"
    slot = "attention"
    b.add("attention/shared.q", h * hd, din, blocks, "linear", f"{mod}.self_attn.q_proj", slot)
    b.add("attention/shared.k", g * hd, din, blocks, "linear", f"{mod}.self_attn.k_proj", slot)
    b.add("attention/shared.v", g * hd, din, blocks, "linear", f"{mod}.self_attn.v_proj", slot)
    b.add("attention/shared.o", d, h * hd, blocks, "linear", f"{mod}.self_attn.o_proj", slot)
    _dense_ffn(b, blocks, ff, "ffn", "shared_transformer.feed_forward")
    b.norm("norms/shared.input", din, blocks, f"{mod}.input_layernorm")
    b.norm("norms/shared.pre_ff", d, blocks, f"{mod}.pre_ff_layernorm")
    rank = a.get("shared_adapter_rank") or 0
    if rank:
        # Block k keeps adapters for the slots i of the users list with i % M == k.
        period = a.get("n_shared_blocks") or 1
        listed = a.get("shared_block_users")
        slots = len(listed) if isinstance(listed, list) else len(users)
        adapters = sum(1 for i in range(slots) if i % period < blocks)
        up = ff * (2 if a.get("ffn_gated") else 1)
        amod = f"{mod}.feed_forward.gate_up_proj_adapter_list.0"
        b.add("ffn/shared.adapter_a", rank, d, adapters, "linear", f"{amod}.0", "ffn")
        b.add("ffn/shared.adapter_b", up, rank, adapters, "linear", f"{amod}.1", "ffn")
        if a.get("shared_attn_adapters"):
            for x in ("q", "k", "v"):
                amod = f"{mod}.self_attn.linear_{x}_adapter_list.0"
                b.add(f"attention/shared.{x}_adapter_a", rank, din, adapters, "linear", f"{amod}.0")
                b.add(f"attention/shared.{x}_adapter_b", din, rank, adapters, "linear", f"{amod}.1")
    b.add("attention/shared.linear", d, d, len(users), "linear", "model.layers.0.linear", slot)


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
    zero = a.get("n_zero_experts") or 0
    mod = "model.layers.0.mlp"
    b.add("router/weight", e + zero, d, n, "linear", f"{mod}.gate")
    if a.get("router_bias"):
        b.add("router/bias", e + zero, 1, n, "vector", f"{mod}.gate")
    if a.get("router_score_bias"):
        b.add("router/score_bias", e, 1, n, "vector", f"{mod}.gate")
    if a.get("router_scales"):
        # A learned input scale before the router projection and a scale per expert.
        b.add("router/scale", d, 1, n, "vector", f"{mod}.router.scale")
        b.add("router/expert_scale", e, 1, n, "vector", f"{mod}.router.per_expert_scale")
    latent = a.get("moe_latent") or 0
    if latent:
        # Experts run in a narrower latent space: one down/up projection around them.
        bias = bool(a.get("ffn_bias"))
        b.add("experts/latent_in", latent, d, n, "linear", f"{mod}.fc1_latent_proj")
        b.add("experts/latent_out", d, latent, n, "linear", f"{mod}.fc2_latent_proj")
        if bias:
            b.add("experts/latent_in.bias", latent, 1, n, "vector", f"{mod}.fc1_latent_proj")
            b.add("experts/latent_out.bias", d, 1, n, "vector", f"{mod}.fc2_latent_proj")
    # transformers' LongCat-Flash allocates gate/up rows for the zero (identity) experts too.
    allocated = zero if a.get("zero_experts_allocated") else 0
    _expert_bank(b, n, width, e, latent or d, extra_in=allocated)
    shared = a.get("n_shared_experts") or 0
    shared_width = a.get("d_ff_shared")
    if shared_width:
        _dense_ffn(b, n, shared_width, "shared_experts", "mlp.shared_experts")
    elif shared:
        _dense_ffn(b, n, shared * width, "shared_experts", "mlp.shared_experts")
    if a.get("shared_expert_gate") and (shared or shared_width):
        b.add("shared_experts/gate", 1, d, n, "linear", "model.layers.0.mlp.shared_expert_gate")


def _expert_bank(b: _Builder, n: int, width: int, e: int, d_in: int, extra_in: int = 0) -> None:
    """``e`` routed experts of hidden ``width`` reading and writing ``d_in``-wide vectors;
    ``extra_in`` more experts' worth of gate/up rows (allocated, never computed)."""
    a = b.arch
    gated = bool(a.get("ffn_gated"))
    mod = "model.layers.0.mlp.experts.0"
    up_count = n * (e + extra_in)
    if gated:
        b.add("experts/gate", width, d_in, up_count, "linear", f"{mod}.gate_proj", None, True)
    b.add("experts/up", width, d_in, up_count, "linear", f"{mod}.up_proj", None, True)
    b.add("experts/down", d_in, width, n * e, "linear", f"{mod}.down_proj", None, True)
    if a.get("expert_bias"):
        rows = width * (2 if gated else 1)
        b.add("experts/up.bias", rows, 1, up_count, "vector", f"{mod}.up_proj", None, True)
        b.add("experts/down.bias", d_in, 1, n * e, "vector", f"{mod}.down_proj", None, True)


def _per_layer_inputs(b: _Builder, n_layers: int) -> None:
    """Per-layer input embeddings (Gemma 3n/4): a packed table of ``per_layer_input`` dims
    per layer, a projection of the hidden state into it, and per layer a gate, a projection
    back to d and a norm."""
    a = b.arch
    p = a.get("per_layer_input") or 0
    if not p:
        return
    d = _int(a, "d_model")
    rows = a.get("per_layer_vocab") or _int(a, "vocab")
    total = n_layers * p
    b.add("embedding/per_layer", rows, total, 1, "embedding", "model.embed_tokens_per_layer")
    b.add(
        "embedding/per_layer_proj",
        total,
        d,
        1,
        "linear",
        "model.per_layer_model_projection",
    )
    b.norm("norms/per_layer_proj", p, 1, "model.per_layer_projection_norm")
    mod = "model.layers.0"
    b.add("ffn/per_layer.gate", p, d, n_layers, "linear", f"{mod}.per_layer_input_gate")
    b.add("ffn/per_layer.proj", d, p, n_layers, "linear", f"{mod}.per_layer_projection")
    b.norm("norms/per_layer_input", d, n_layers, f"{mod}.post_per_layer_input_norm")


def _norms(b: _Builder, runs: tuple[tuple[LayerSpec, int], ...]) -> None:
    a = b.arch
    d = _int(a, "d_model")
    placement = a.get("norm_placement") or "pre"
    per_sublayer = {"pre": 1, "post": 1, "sandwich": 2, "parallel": 0, "parallel2": 1}[placement]
    count = 0
    for spec, n in runs:
        sub = (spec.mixer is not None) + (spec.ffn is not None)
        if placement == "parallel":
            count += n
        else:
            count += per_sublayer * sub * n
        if spec.ffn2 is not None:
            count += (a.get("ffn2_norms") or 0) * n
    b.norm("norms/layers", d, count, "model.layers.0.input_layernorm")


def tensors(arch: Architecture) -> tuple[Tensor, ...]:
    """Every parameter tensor of the model transformers would build from this config."""
    b = _Builder(arch)
    d, vocab = _int(arch, "d_model"), _int(arch, "vocab")
    rows = vocab + (arch.get("embed_extra_rows") or 0)  # Mllama: vocab_size + 8
    d_embed = arch.get("d_embed") or d
    b.add("embedding/tokens", rows, d_embed, 1, "embedding", "model.embed_tokens")
    if d_embed != d:
        b.add("embedding/project_in", d, d_embed, 1, "linear", "model.project_in")
    if arch.get("embed_norm"):
        b.norm("norms/embedding", d, 1, "model.embed_layernorm")
    if arch.get("position") == "learned":
        rows = _int(arch, "max_positions") + (arch.get("position_offset") or 0)
        b.add("position/table", rows, d, 1, "embedding", "model.embed_positions")
    layers, runs = arch.layers, arch.layer_runs

    def shape(s: LayerSpec) -> tuple[Any, ...]:
        return (s.mixer, s.variant, s.window, s.sparse, s.n_kv_heads, s.head_dim, s.kv_shared)

    for key, n, first in _runs(runs, shape):
        _mixer(b, n, key[0], first)
    for kind, n, first in _runs(runs, lambda s: s.parallel):
        _mixer(b, n, kind, first)
    _shared_blocks(b, layers)
    for (ffn, width), n, _ in _runs(runs, lambda s: (s.ffn, s.d_ff)):
        if ffn == "dense":
            _dense_ffn(b, n, width or _int(arch, "d_ff"))
        elif ffn == "moe":
            _moe(b, n)
    for ffn2, n, _ in _runs(runs, lambda s: s.ffn2):
        if ffn2 == "dense":
            _dense_ffn(b, n, _int(arch, "d_ff"), module="mlps.1")
        elif ffn2 == "moe":
            _moe(b, n)
    _per_layer_inputs(b, len(layers))
    _norms(b, runs)
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
    if not n or arch.get("mtp_style") != "deepseek":
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
    mtp: int | None  # MTP modules, counted separately; None when their structure is not known

    tensors: tuple[Tensor, ...]
    embedding_lookup: int = 0  # embedding-table params a token only gathers (0 when tied to the head)

    @property
    def active_without_embedding(self) -> int:
        """Active parameters less the gathered embedding table: what most model cards quote
        as "activated" (gpt-oss, DeepSeek, Llama 4, Kimi); Qwen's cards count the table."""
        return self.active - self.embedding_lookup

    def part(self, name: str) -> int:
        return dict(self.by_part).get(name, 0)


def active_fraction(arch: Architecture) -> float:
    """Share of routed-expert weights one token uses: top_k / n_experts."""
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    return k / e if e else 1.0


def count(arch: Architecture, mtp_of: tuple[Tensor, ...] | None = None) -> ParamCount:
    """Count parameters exactly (total, active, by part) from the config alone.

    ``mtp_of``: ``mtp_tensors(arch)`` when the caller already has them (the cost pass).
    """
    refused = arch.v("unsupported")
    if refused.value:
        raise Unsupported(arch.name, f"cannot count parameters: {refused.value}", key=arch.key("unsupported"))
    from .vision_params import vision_tensors

    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    if e and k > e and any(s.ffn == "moe" or s.ffn2 == "moe" for s in arch.layers):
        # No router picks more experts than exist; pricing it would report active > total.
        raise SlotdiffError(
            arch.name, f"routes each token to {k} experts but there are only {e}", key=arch.key("top_k")
        )
    ts = tensors(arch) + vision_tensors(arch)
    by: dict[str, int] = {p: 0 for p in PARTS}
    for t in ts:
        by[t.slot] = by.get(t.slot, 0) + t.params
    total = sum(by.values())
    routed = sum(t.params for t in ts if t.routed)
    active = total - routed + (routed * k // e if e else 0)
    mtp: int | None = sum(t.params for t in (mtp_tensors(arch) if mtp_of is None else mtp_of))
    if (arch.get("mtp_layers") or 0) and arch.get("mtp_style") != "deepseek":
        mtp = None  # the config names MTP modules but not their tensors
    lookup = 0 if arch.get("tie_embeddings") else sum(t.params for t in ts if t.part == "embedding/tokens")
    return ParamCount(total, active, tuple((p, v) for p, v in by.items() if v), mtp, ts, lookup)
