"""The attention slot's facets: KV sharing (MHA, GQA, MQA, MLA), range (full, sliding, chunked,
sparse, sinks), mixer (softmax or recurrent, hybrid ratio), q/k norms and biases."""

from __future__ import annotations

from typing import Any

from ..constructs import PLAIN, construct, is_cross, softmax
from ..schema.arch import Architecture
from .fill import Collector, Fill, attention_layers


def attention_kv(arch: Architecture) -> Fill:
    ev = Collector(arch)
    attn = attention_layers(arch)
    if not attn:
        return ev.fill("attention.kv", "none", "no attention layers: no KV cache")
    mech = construct(attn[0].mixer)
    if mech is None or not mech.softmax:  # a weight-shared block's attention (Zamba2): plain
        mech = PLAIN
    return mech.kv_fill(ev, attn)


def attention_range(arch: Architecture) -> Fill:
    ev = Collector(arch)
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
        indexed = sum(1 for s in attn if s.sparse)
        where = "" if indexed == len(attn) else f" on {indexed} of {len(attn)} attention layers"
        if windows and indexed < len(attn):  # Dots3 Note: indexed layers between sliding ones
            where += f", sliding {max(windows):,} on {len(windows)}"
        return ev.fill(
            "attention.range",
            "sparse",
            f"sparse: indexer selects top-{topk} tokens{where}{suffix}",
            attrs,
            {"index_topk": topk, "indexed_layers": indexed},
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


def _ssm(mixer: str | None) -> bool:
    """A state-space mixer (Mamba), not a linear-attention or convolution one."""
    mech = construct(mixer)
    return bool(mech and mech.ssm)


def attention_mixer(arch: Architecture) -> Fill:
    ev = Collector(arch)
    runs = arch.layer_runs  # each layer design once, with its count: only counts and sets are read
    n_cross = sum(n for s, n in runs if is_cross(s.mixer))
    recurrent = [
        (s, n) for s, n in runs if s.mixer is not None and not (softmax(s.mixer) or is_cross(s.mixer))
    ]
    variants = sorted(
        {s.variant or s.mixer for s, _ in recurrent} | {s.parallel for s, _ in runs if s.parallel}
    )
    n_attn = len(attention_layers(arch))
    other = sum(n for _, n in recurrent)
    parallel = [s for s, _ in runs if s.parallel]
    n_parallel = sum(n for s, n in runs if s.parallel)
    shared = [s for s, _ in runs if s.shared_block is not None]
    n_shared = sum(n for s, n in runs if s.shared_block is not None)
    if n_cross:
        ev.use("cross_attention_layers")
    if not variants:
        extra = f", {n_cross} cross-attention layers" if n_cross else ""
        return ev.fill("attention.mixer", "softmax", f"softmax attention in every layer{extra}")
    ev.use("layer_types")
    names = ", ".join(v.replace("_", " ") for v in variants)
    linear = any(not _ssm(s.mixer) for s, _ in recurrent) or any(not _ssm(s.parallel) for s in parallel)
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
        detail = f"hybrid: attention and {names} side by side in {n_parallel} layers"
        if n_parallel < n_attn:
            detail += f", attention alone in {n_attn - n_parallel}"
        other = n_parallel
    elif shared:
        blocks = len({s.shared_block for s in shared})
        detail = (
            f"hybrid: {other} {names} layers, {n_shared} of them after a weight-shared "
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


def attention_qk_norm(arch: Architecture) -> Fill:
    ev = Collector(arch)
    if not attention_layers(arch):
        return ev.fill("attention.qk_norm", "none", "no attention layers")
    if ev.use("qk_norm"):
        kind = ev.use("qk_norm_kind")
        detail = QK_NORM_KINDS.get(kind, f"QK-norm ({kind})")
        if kind != "l2" and ev.use("qk_norm_bias"):
            detail += ", with bias"
        attn = attention_layers(arch)
        roped = [s for s in attn if s.rope]
        rope_only = bool(ev.use("qk_norm_rope_only")) and len(roped) < len(attn)
        if rope_only:
            detail += f", on the {len(roped)} RoPE layers only (not the {len(attn) - len(roped)} NoPE layers)"
        return ev.fill("attention.qk_norm", "qk-norm", detail, {"scope": kind, "rope_only": rope_only})
    return ev.fill("attention.qk_norm", "none", "none")


def attention_bias(arch: Architecture) -> Fill:
    ev = Collector(arch)
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
