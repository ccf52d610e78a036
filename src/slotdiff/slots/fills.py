"""Fill the ten GPT-2 slots from an Architecture: one Fill per facet, with its evidence.

A fill has a categorical ``kind`` and ``attrs`` (the design: what fingerprints and diffs
compare) and ``sizes`` (numbers that differ between checkpoints of one design). The slot
table itself (facets, GPT-2's fill, article pointers) is data in ``schemas/slots.json``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from ..core.resources import load_schema_file
from ..schema.arch import Architecture
from ..schema.precision import weight_format


@dataclass(frozen=True)
class Fill:
    """What one model puts in one slot facet."""

    slot: str
    facet: str
    kind: str
    attrs: tuple[tuple[str, Any], ...] = ()
    sizes: tuple[tuple[str, Any], ...] = ()
    detail: str = ""
    evidence: tuple[tuple[str, Any], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.slot}.{self.facet}"

    @property
    def design(self) -> tuple[str, tuple[tuple[str, Any], ...]]:
        """The categorical part that fingerprints and diffs compare."""
        return (self.kind, self.attrs)

    def attr(self, name: str, default: Any = None) -> Any:
        return dict(self.attrs).get(name, default)

    def size(self, name: str, default: Any = None) -> Any:
        return dict(self.sizes).get(name, default)


@dataclass(frozen=True)
class FacetInfo:
    slot: str
    facet: str
    gpt2: str
    today: str
    article: str
    fingerprint: str = "kind+attrs"  # what enters the fingerprint: kind+attrs | attrs | none

    @property
    def id(self) -> str:
        return f"{self.slot}.{self.facet}"


@cache
def slot_table() -> tuple[FacetInfo, ...]:
    """Every facet in report order, from schemas/slots.json."""
    data = load_schema_file("slots.json")
    return tuple(
        FacetInfo(
            s["slot"], f["facet"], f["gpt2"], f["today"], f["article"], f.get("fingerprint", "kind+attrs")
        )
        for s in data["slots"]
        for f in s["facets"]
    )


@cache
def articles() -> Mapping[str, Mapping[str, str]]:
    return load_schema_file("slots.json")["articles"]


# ------------------------------------------------------------------------------ helpers


class _Ev:
    """Collects evidence (config key → value) for one fill."""

    def __init__(self, arch: Architecture) -> None:
        self.arch = arch
        self.items: dict[str, Any] = {}
        self.notes: list[str] = []

    def use(self, name: str) -> Any:
        val = self.arch.v(name)
        if val.keys and val.how in ("explicit", "alias"):
            for key in val.keys:
                self.items[key] = val.value
        elif val.how == "default":
            self.items[val.keys[0] if val.keys else name] = val.value
            self.notes.append(f"{name}: {val.note}")
        elif val.how == "model_type":
            self.notes.append(f"{name}={val.value!r}: {val.note}")
        elif val.how == "derived":
            self.notes.append(f"{name}={val.value!r}: derived as {val.note}")
        return val.value

    def fill(
        self,
        facet: str,
        kind: str,
        detail: str,
        attrs: dict[str, Any] | None = None,
        sizes: dict[str, Any] | None = None,
    ) -> Fill:
        slot, _, name = facet.partition(".")
        return Fill(
            slot=slot,
            facet=name,
            kind=kind,
            attrs=tuple(sorted((attrs or {}).items())),
            sizes=tuple(sorted((sizes or {}).items())),
            detail=detail,
            evidence=tuple(self.items.items()),
            notes=tuple(dict.fromkeys(self.notes)),
        )


def _num(x: float | int | None) -> str:
    """Compact numbers for labels: 500000 → 5e5, 150000 → 1.5e5, 4096 → 4096."""
    if x is None:
        return "?"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:g}"
    n = int(x)
    mantissa, exp = f"{n:e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    if n >= 10_000 and len(mantissa.replace(".", "")) <= 3:
        return f"{mantissa}e{int(exp)}"
    return str(n)


def attention_layers(arch: Architecture) -> list[Any]:
    """Layers that run softmax attention (their own, or a weight-shared block's)."""
    return [s for s in arch.layers if s.mixer in ("attention", "mla") or s.shared_block is not None]


# ------------------------------------------------------------------------ facet rules


def _embedding(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    vocab, d = ev.use("vocab"), ev.use("d_model")
    scaled = bool(ev.use("embed_scale"))
    detail = f"vocab {vocab:,} × {d:,}" + (", scaled by √d" if scaled else "")
    per_layer = arch.get("per_layer_input", 0)
    if per_layer:
        detail += f", per-layer inputs {per_layer}"
    return ev.fill(
        "embedding.table",
        "table",
        detail,
        {"scaled": scaled, "per_layer_inputs": bool(per_layer)},
        {"vocab": vocab, "d_model": d},
    )


ROPE_TYPE_KEYS = ("rope_type", "type")


def rope_scaling_type(arch: Architecture) -> str | None:
    """The RoPE scaling kind (linear, dynamic, yarn, llama3, longrope, ...) or None."""
    scaling = arch.get("rope_scaling")
    if not isinstance(scaling, Mapping):
        return None
    if "full_attention" in scaling and isinstance(scaling["full_attention"], Mapping):
        scaling = scaling["full_attention"]
    for key in ROPE_TYPE_KEYS:
        kind = scaling.get(key)
        if isinstance(kind, str) and kind not in ("default", "none"):
            return kind
    return None


def _position(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    pos = ev.use("position")
    if pos == "learned":
        rows = ev.use("max_positions")
        shown = f"{rows:,} rows" if isinstance(rows, int) else "rows not stated"
        return ev.fill("position.encoding", "learned", f"learned table, {shown}", {}, {"rows": rows})
    if pos == "alibi":
        return ev.fill("position.encoding", "alibi", "ALiBi: linear distance bias, no table")
    if pos == "none" or not attention_layers(arch):
        detail = "none: recurrent layers carry order" if not attention_layers(arch) else "none (NoPE)"
        return ev.fill("position.encoding", "none", detail)
    theta = ev.use("rope_theta")
    rotary = ev.use("rotary_dim")
    frac = ev.use("partial_rotary_factor") or 1.0
    scaling = rope_scaling_type(arch)
    if scaling:
        ev.use("rope_scaling")
    mrope = pos == "mrope" or (
        isinstance(arch.get("rope_scaling"), Mapping) and "mrope_section" in arch.get("rope_scaling")
    )
    partial = frac < 1.0 or bool(rotary and rotary < (arch.get("head_dim") or rotary + 1))
    nope = [s.index for s in arch.layers if s.mixer in ("attention", "mla") and not s.rope]
    detail = ("M-RoPE" if mrope else "RoPE") + f" θ={_num(theta)}"
    if partial:
        detail += f", rotary {rotary} dims" if rotary else f", partial {frac:g}"
    if scaling:
        factor = (arch.get("rope_scaling") or {}).get("factor")
        detail += f", {scaling} scaling" + (f" ×{factor:g}" if isinstance(factor, (int, float)) else "")
    if nope:
        detail += f", NoPE on {len(nope)} of {len(attention_layers(arch))} attention layers"
    return ev.fill(
        "position.encoding",
        "mrope" if mrope else "rope",
        detail,
        {"partial": partial, "scaling": scaling, "nope_layers": bool(nope)},
        {"theta": theta, "rotary_fraction": frac, "rotary_dim": rotary},
    )


def _kv(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    attn = attention_layers(arch)
    if not attn:
        return ev.fill("attention.kv", "none", "no attention layers: no KV cache")
    if attn[0].mixer == "mla":
        kv_rank, rope = ev.use("kv_lora_rank"), ev.use("qk_rope_head_dim")
        q_rank, h = ev.use("q_lora_rank"), ev.use("n_heads")
        detail = f"MLA: latent {kv_rank} + RoPE key {rope} per token, {h} heads"
        detail += f", q rank {q_rank}" if q_rank else ", full q projection"
        return ev.fill(
            "attention.kv",
            "mla",
            detail,
            {},
            {
                "kv_lora_rank": kv_rank,
                "qk_rope_head_dim": rope,
                "q_lora_rank": q_rank,
                "n_heads": h,
            },
        )
    h, g, hd = ev.use("n_heads"), ev.use("n_kv_heads"), ev.use("head_dim")
    kind = "mha" if g == h else ("mqa" if g == 1 else "gqa")
    detail = f"{kind.upper()} {h}/{g}, head_dim {hd}"
    layer_g = {s.n_kv_heads for s in attn if s.n_kv_heads}
    if layer_g:
        detail += f" (some layers {'/'.join(str(x) for x in sorted(layer_g))} KV heads)"
    return ev.fill("attention.kv", kind, detail, {}, {"n_heads": h, "n_kv_heads": g, "head_dim": hd})


def _range(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    attn = attention_layers(arch)
    sinks = bool(ev.use("sinks"))
    attrs: dict[str, Any] = {"sinks": sinks}
    if not attn:
        return ev.fill("attention.range", "none", "no attention layers", attrs)
    windows = [s.window for s in attn if s.window]
    chunks = [s.chunk for s in attn if s.chunk]
    sparse = any(s.sparse for s in attn)
    if windows:
        ev.use("sliding_window")
        ev.use("layer_types")
    suffix = ", attention sinks" if sinks else ""
    if sparse:
        topk = ev.use("index_topk")
        return ev.fill(
            "attention.range",
            "sparse",
            f"sparse: indexer selects top-{topk} tokens{suffix}",
            attrs,
            {"index_topk": topk},
        )
    if chunks:
        ev.use("attention_chunk_size")
        n = len(chunks)
        return ev.fill(
            "attention.range",
            "chunked",
            f"chunked {chunks[0]:,} on {n} of {len(attn)} attention layers, rest global{suffix}",
            attrs,
            {"chunk": chunks[0], "chunked_layers": n},
        )
    if windows:
        n = len(windows)
        w = max(windows)
        if n == len(attn):
            return ev.fill(
                "attention.range",
                "sliding",
                f"sliding window {w:,} on every layer{suffix}",
                attrs,
                {"window": w},
            )
        ratio = f"{n}:{len(attn) - n}"
        return ev.fill(
            "attention.range",
            "interleave",
            f"local {w:,} / global interleave, {ratio} local:global{suffix}",
            attrs,
            {"window": w, "local_layers": n, "global_layers": len(attn) - n},
        )
    return ev.fill("attention.range", "full", f"full causal{suffix}", attrs)


def _mixer(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    counts = Counter(s.mixer for s in arch.layers if s.mixer)
    recurrent = [s for s in arch.layers if s.mixer not in ("attention", "mla", "cross_attention", None)]
    variants = sorted(
        {s.variant or s.mixer for s in recurrent} | {s.parallel for s in arch.layers if s.parallel}
    )
    n_attn = len(attention_layers(arch))
    other = len(recurrent)
    parallel = [s for s in arch.layers if s.parallel]
    shared = [s for s in arch.layers if s.shared_block is not None]
    if counts.get("cross_attention"):
        ev.use("cross_attention_layers")
    if not variants:
        extra = (
            f", {counts['cross_attention']} cross-attention layers" if counts.get("cross_attention") else ""
        )
        return ev.fill("attention.mixer", "softmax", f"softmax attention in every layer{extra}")
    ev.use("layer_types")
    names = ", ".join(v.replace("_", " ") for v in variants)
    linear = any(v not in ("mamba", "mamba2") for v in variants)
    if n_attn == 0:
        kind = "ssm" if not linear else "recurrent"
        return ev.fill(
            "attention.mixer",
            kind,
            f"{names} in every layer, no attention",
            {"mixers": tuple(variants)},
            {"recurrent_layers": other},
        )
    kind = "linear-hybrid" if linear else "ssm-hybrid"
    if parallel:
        detail = f"hybrid: attention and {names} side by side in {len(parallel)} layers"
        if len(parallel) < n_attn:
            detail += f", attention alone in {n_attn - len(parallel)}"
        other = len(parallel)
    elif shared:
        blocks = len({s.shared_block for s in shared})
        detail = (
            f"hybrid: {other} {names} layers, {len(shared)} of them after a weight-shared "
            f"attention block ({blocks} distinct)"
        )
    else:
        detail = f"hybrid: {other} {names} + {n_attn} attention layers ({other}:{n_attn})"
    return ev.fill(
        "attention.mixer",
        kind,
        detail,
        {"mixers": tuple(variants), "parallel": bool(parallel), "shared_blocks": bool(shared)},
        {"recurrent_layers": other, "attention_layers": n_attn},
    )


QK_NORM_KINDS = {
    "head": "QK-norm per head",
    "head_separate": "QK-norm per head, each head its own weight",
    "full": "QK-norm over all heads",
    "l2": "QK L2-norm, no weights",
}


def _qk_norm(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    if not attention_layers(arch):
        return ev.fill("attention.qk_norm", "none", "no attention layers")
    if ev.use("qk_norm"):
        kind = ev.use("qk_norm_kind")
        detail = QK_NORM_KINDS.get(kind, f"QK-norm ({kind})")
        if kind != "l2" and ev.use("qk_norm_bias"):
            detail += ", with bias"
        return ev.fill("attention.qk_norm", "qk-norm", detail, {"scope": kind})
    return ev.fill("attention.qk_norm", "none", "none")


def _attn_bias(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    if not attention_layers(arch):
        return ev.fill("attention.bias", "none", "no attention layers")
    qkv, out = bool(ev.use("qkv_bias")), bool(ev.use("o_bias"))
    kind = {
        (True, True): "qkv+out",
        (True, False): "qkv",
        (False, True): "out",
        (False, False): "none",
    }
    text = {
        "qkv+out": "bias on q/k/v and output",
        "qkv": "bias on q/k/v only",
        "out": "bias on the output projection only",
        "none": "no bias",
    }
    k = kind[(qkv, out)]
    return ev.fill("attention.bias", k, text[k])


def activation_name(act: str, gated: bool) -> str:
    """Display name of an FFN activation (schemas/slots.json ``activations``)."""
    names = load_schema_file("slots.json").get("activations", {}).get(act)
    if names:
        return names["gated" if gated else "plain"]
    return f"{act}-GLU" if gated else act


def _activation(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    if not any(s.ffn or s.ffn2 or s.shared_block is not None for s in arch.layers):
        return ev.fill("ffn.activation", "none", "no FFN sublayers (mixer-only blocks)")
    act = ev.use("activation") or "unknown"
    gated = bool(ev.use("ffn_gated"))
    d = arch.get("d_model")
    widths = [s.d_ff or arch.get("d_ff") for s in arch.layers if s.ffn == "dense"]
    f = widths[0] if widths else arch.get("d_ff_expert")
    if widths:
        ev.use("d_ff")
    name = activation_name(act, gated)
    kind = name.lower() if gated else ("gelu" if act.startswith("gelu") else act)
    ratio = f / d if f and d else None
    mats = 3 if gated else 2
    detail = f"{name}, {mats} matrices" + (f", {ratio:.2f}×d" if ratio else "")
    return ev.fill(
        "ffn.activation",
        kind,
        detail,
        {"gated": gated},
        {"d_ff": f, "ratio": round(ratio, 3) if ratio else None},
    )


def _experts(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    moe = [s for s in arch.layers if s.ffn == "moe" or s.ffn2 == "moe"]
    if not moe:
        ffn_layers = [s for s in arch.layers if s.ffn]
        if not ffn_layers and any(s.shared_block is not None for s in arch.layers):
            return ev.fill("ffn.experts", "dense", "one dense FFN, inside the weight-shared block")
        if not ffn_layers:
            return ev.fill("ffn.experts", "none", "no FFN sublayers (mixer-only blocks)")
        return ev.fill("ffn.experts", "dense", "one dense FFN per layer")
    e, k = ev.use("n_experts"), ev.use("top_k")
    shared = ev.use("n_shared_experts") or 0
    shared_width = arch.get("d_ff_shared")
    has_shared = bool(shared or shared_width)
    width = ev.use("d_ff_expert")
    dense_layers = [s for s in arch.layers if s.ffn == "dense"]
    first = ev.use("first_dense_layers") or 0
    dense_first = bool(first) and all(s.index < first for s in dense_layers) and bool(dense_layers)
    interleave = bool(dense_layers) and not dense_first
    detail = f"MoE {e}×top-{k}"
    if shared:
        detail += f" + {shared} shared"
    elif shared_width:
        ev.use("d_ff_shared")
        detail += " + shared expert"
    zero = arch.get("n_zero_experts") or 0
    if zero:
        ev.use("n_zero_experts")
        detail += f" + {zero} zero-compute experts"
    detail += f", expert width {width}"
    beside = any(s.ffn2 == "moe" and s.ffn == "dense" for s in moe)
    if beside:
        detail += ", beside the dense FFN"
        dense_layers = [s for s in arch.layers if s.ffn == "dense" and s.ffn2 != "moe"]
        interleave = bool(dense_layers)
        dense_first = False
    if dense_first:
        detail += f", first {first} layers dense"
    elif interleave:
        detail += f", MoE on {len(moe)} of {len(arch.layers)} layers"
    return ev.fill(
        "ffn.experts",
        "moe",
        detail,
        {
            "shared": has_shared,
            "dense_first": dense_first,
            "interleave": interleave,
            "beside_dense": beside,
        },
        {
            "experts": e,
            "top_k": k,
            "shared_experts": shared,
            "expert_width": width,
            "moe_layers": len(moe),
        },
    )


def _ffn_bias(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    if not any(s.ffn or s.shared_block is not None for s in arch.layers):
        return ev.fill("ffn.bias", "none", "no FFN sublayers")
    dense = any(s.ffn == "dense" for s in arch.layers)
    moe = any(s.ffn == "moe" for s in arch.layers)
    shared = moe and bool(arch.get("n_shared_experts") or arch.get("d_ff_shared"))
    # ffn_bias covers dense FFNs and shared experts; expert_bias the routed experts.
    plain = (dense or shared) and bool(ev.use("ffn_bias"))
    routed = moe and bool(ev.use("expert_bias"))
    if plain and (routed or not moe):
        return ev.fill("ffn.bias", "bias", "bias on the FFN matrices")
    if routed:
        only = " only" if dense or shared else ""
        return ev.fill("ffn.bias", "bias", f"bias on the routed expert matrices{only}")
    if plain:
        return ev.fill(
            "ffn.bias", "bias", "bias on the dense and shared FFN matrices, not the routed experts"
        )
    return ev.fill("ffn.bias", "none", "no bias")


PLACEMENT = {
    "pre": "pre-norm",
    "sandwich": "pre and post (sandwich)",
    "post": "post-norm after each sublayer",
    "parallel": "one norm feeding parallel attention and FFN",
    "parallel2": "two norms feeding parallel attention and FFN",
}


def _norm(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    kind, placement, bias = ev.use("norm"), ev.use("norm_placement"), bool(ev.use("norm_bias"))
    eps = ev.use("norm_eps")
    name = "RMSNorm" if kind == "rmsnorm" else "LayerNorm"
    detail = f"{name}{' with bias' if bias else ''}, {PLACEMENT[placement]}"
    if eps is not None:
        detail += f", eps {eps:g}"
    return ev.fill("norm.kind", kind, detail, {"placement": placement, "bias": bias}, {"eps": eps})


def _head(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    tied = bool(ev.use("tie_embeddings"))
    cap = ev.use("final_softcap")
    detail = "tied to the embedding" if tied else "untied"
    if ev.use("head_bias"):
        detail += ", with a bias"
    if cap:
        detail += f", logits soft-capped at {cap:g}"
    return ev.fill(
        "head.tying", "tied" if tied else "untied", detail, {"softcap": bool(cap)}, {"softcap": cap}
    )


def _objective(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    n = ev.use("mtp_layers") or 0
    if n:
        return ev.fill(
            "objective.target",
            "mtp",
            f"next token + {n} MTP module{'s' if n > 1 else ''}",
            {},
            {"mtp_modules": n},
        )
    return ev.fill("objective.target", "next-token", "next token")


def _decoding(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    n = ev.use("mtp_layers") or 0
    if n:
        return ev.fill(
            "decoding.steps",
            "mtp-draft",
            f"one token per forward; the {n} MTP module{'s' if n > 1 else ''} can draft for "
            "speculative decoding",
            {},
            {"mtp_modules": n},
        )
    return ev.fill(
        "decoding.steps",
        "one-token",
        "one token per forward (speculative decoding is an engine setting, not in the config)",
    )


def _precision(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    ev.use("dtype")
    q = arch.get("quantization_config")
    if q:
        ev.use("quantization_config")
    fmt = weight_format(arch)
    return ev.fill("precision.weights", fmt.kind, fmt.detail, {}, {})


def _modality(arch: Architecture) -> Fill:
    ev = _Ev(arch)
    vis = arch.vision
    cross = [s for s in arch.layers if s.mixer == "cross_attention"]
    audio = arch.get("audio", None)
    if not vis:
        return ev.fill("modality.input", "text", "text tokens")
    key = vis["config_key"].value
    ev.items[f"{key}.model_type"] = vis["model_type"].value
    enc = vis["model_type"].value or "vision encoder"
    layers, hidden = vis.get("layers"), vis.get("hidden")
    dims = f" ({layers.value} layers × {hidden.value})" if layers and hidden else ""
    if cross:
        ev.use("cross_attention_layers")
        return ev.fill(
            "modality.input",
            "vision-cross-attention",
            f"{enc}{dims}, read through {len(cross)} cross-attention layers",
            {"audio": bool(audio)},
        )
    return ev.fill(
        "modality.input",
        "vision-tokens",
        f"{enc}{dims} + connector, image features injected as tokens",
        {"audio": bool(audio)},
    )


FACET_RULES: dict[str, Callable[[Architecture], Fill]] = {
    "embedding.table": _embedding,
    "position.encoding": _position,
    "attention.kv": _kv,
    "attention.range": _range,
    "attention.mixer": _mixer,
    "attention.qk_norm": _qk_norm,
    "attention.bias": _attn_bias,
    "ffn.activation": _activation,
    "ffn.experts": _experts,
    "ffn.bias": _ffn_bias,
    "norm.kind": _norm,
    "head.tying": _head,
    "objective.target": _objective,
    "decoding.steps": _decoding,
    "precision.weights": _precision,
    "modality.input": _modality,
}


@dataclass(frozen=True)
class Fills:
    """All fills of one architecture, in slot-table order."""

    items: tuple[Fill, ...] = field(default_factory=tuple)

    @cached_property
    def _by_id(self) -> dict[str, Fill]:
        return {f.id: f for f in self.items}

    def __getitem__(self, facet_id: str) -> Fill:
        return self._by_id[facet_id]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.items)


def fill_slots(arch: Architecture) -> Fills:
    """Compute every facet's fill for ``arch``."""
    return Fills(tuple(FACET_RULES[info.id](arch) for info in slot_table()))
