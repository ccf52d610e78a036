"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2, GLM-5, ...): every fact about it in
one place. K and V are cached as one low-rank latent (``kv_lora_rank``) plus a decoupled RoPE
key (``qk_rope_head_dim``) shared by all heads; a query may go through its own low-rank
bottleneck (``q_lora_rank``). Decode runs absorbed in inference engines (W_UK folded into the
query, W_UV into the output: an MQA over the latent, d_qk = r_kv + rope, d_v = r_kv);
transformers re-expands every cached latent through kv_b_proj at each step instead; prefill
runs decompressed (d_qk = nope + rope, d_v = v_head_dim) in both. A DSA indexer (indexer.py)
may sit on it: its keys are cached beside the latent, and a decode step reads the keys over
the whole span but the latents of only ``index_topk`` tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..schema.arch import Architecture, LayerSpec, layer_size
from . import indexer
from .base import Construct, Evidence
from .saved import QKV, Conventions, Saved, fp32, norm, residual_dropout, scores, t
from .tensor import Builder, Unsupported, need_int

# vLLM's fp8_ds_mla cache (DeepSeek-V3.2 with --kv-cache-dtype fp8): 656 bytes per token.
DS_MLA_FP8_BYTES = 656


def _size(a: Architecture, layer: LayerSpec, name: str) -> int:
    """A size field on ``layer`` (its own, else the model's), which must be known."""
    value = layer_size(a, layer, name)
    return value if isinstance(value, int) and not isinstance(value, bool) else need_int(a, name)


class MLA(Construct):
    """Multi-head latent attention."""

    name = "mla"
    label = "MLA"
    latent_kv = True  # one latent per token, no heads: every TP rank holds all of it
    transformers_form = True
    vllm_kind = "mla"
    price_note = (
        "MLA caches the latent and RoPE key; decode attention FLOPs in the absorbed form, prefill "
        "in the decompressed form (transformers' re-expanding decode form is in "
        "flops.attention_per_token_transformers)"
    )

    def kv_kind(self, layer: LayerSpec) -> str:
        return "mla"

    def kv_elements(self, arch: Architecture, layer: LayerSpec) -> int:
        """The latent, the RoPE key (none on a NoPE layer) and the layer's own index key."""
        extra = indexer.own_index_elements(arch, layer)
        rank = layer_size(arch, layer, "kv_lora_rank") or 0
        rope = (layer_size(arch, layer, "qk_rope_head_dim") or 0) if layer.rope else 0  # NoPE: latent only
        return rank + rope + extra

    def shared_kv_elements(self, arch: Architecture, layer: LayerSpec) -> int:
        """The latent comes from an earlier layer; an indexer of its own still caches its keys
        (Mistral Large 4's "reuse_but_indexer" layers)."""
        return indexer.own_index_elements(arch, layer)

    def selected_read(self, arch: Architecture, layer: LayerSpec, elems: int, span: int) -> int | None:
        """DSA: the index keys over the whole span, the latents of only ``index_topk`` tokens."""
        topk = arch.get("index_topk") or 0
        if not (layer.sparse and topk):
            return None
        keys = 0 if layer.index_shared else indexer.index_key_elements(arch)  # a shared layer scores nothing
        latent = elems - keys
        return keys * span + latent * min(span, topk)

    def qk_v_dims(self, arch: Architecture, layer: LayerSpec, absorbed: bool) -> tuple[int, int, int]:
        """Absorbed: an MQA over the latent (r_kv + rope, r_kv); else per head (nope + rope, v)."""
        h = layer.n_heads or arch.get("n_heads") or 0
        rope = layer_size(arch, layer, "qk_rope_head_dim") or 0
        nope = layer_size(arch, layer, "qk_nope_head_dim") or 0
        rank = layer_size(arch, layer, "kv_lora_rank") or 0
        if not layer.rope:  # a NoPE MLA layer: the RoPE width joins the nope part
            nope, rope = nope + rope, 0
        if absorbed:
            return h, rank + rope, rank
        return h, nope + rope, layer_size(arch, layer, "v_head_dim") or 0

    def reexpand_flops(self, arch: Architecture, layer: LayerSpec, keys: int) -> int:
        """transformers re-expands the other ``keys − 1`` cached latents through kv_b_proj."""
        h = layer.n_heads or arch.get("n_heads") or 0
        rank = arch.get("kv_lora_rank") or 0
        nope, hv = arch.get("qk_nope_head_dim") or 0, arch.get("v_head_dim") or 0
        return 2 * rank * h * (nope + hv) * (keys - 1)

    def rope_dim(self, arch: Architecture) -> int | None:
        """Only the decoupled key is rotated."""
        return arch.get("qk_rope_head_dim") or 0

    def tensors(self, b: Builder, n: int, layer: LayerSpec) -> None:
        """q (full, or low-rank q_a → norm → q_b), kv_a to the latent and the RoPE key, its norm, kv_b
        per head, o, the family options, and a DSA indexer of its own."""
        a = b.arch
        d, h = need_int(a, "d_model"), layer.n_heads or need_int(a, "n_heads")
        kv_rank, rope, nope = (
            _size(a, layer, "kv_lora_rank"),
            _size(a, layer, "qk_rope_head_dim"),
            _size(a, layer, "qk_nope_head_dim"),
        )
        hv = _size(a, layer, "v_head_dim")
        qk = (a.get("qk_head_dim") if not layer.sizes else None) or nope + rope
        q_rank = layer_size(a, layer, "q_lora_rank")
        mod = "model.layers.0.self_attn"
        slot = "attention"
        bias = bool(a.get("qkv_bias"))
        if q_rank and a.get("mla_q_gate"):
            # One fused projection from [q_a, its norm] to the queries and a per-channel output
            # gate (A.X-K2's q_gate_proj), in place of q_b.
            b.add("attention/q_a", q_rank, d, n, "linear", f"{mod}.q_a_proj", slot)
            b.add("attention/q_a_norm", q_rank, 1, n, "vector", f"{mod}.q_a_layernorm", slot)
            b.add("attention/q_gate", h * (qk + hv), 2 * q_rank, n, "linear", f"{mod}.q_gate_proj", slot)
            if bias:
                b.add("attention/q_a.bias", q_rank, 1, n, "vector", f"{mod}.q_a_proj", slot)
        elif q_rank:
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
        if not layer.rope:
            nope, rope = nope + rope, 0  # a NoPE layer: no decoupled RoPE key, its width joins nope
        if not layer.kv_shared:  # a layer reading an earlier layer's latent has no kv_a of its own
            b.add("attention/kv_a", kv_rank + rope, d, n, "linear", f"{mod}.kv_a_proj_with_mqa", slot)
            b.add("attention/kv_a_norm", kv_rank, 1, n, "vector", f"{mod}.kv_a_layernorm", slot)
            if bias:
                b.add(
                    "attention/kv_a.bias", kv_rank + rope, 1, n, "vector", f"{mod}.kv_a_proj_with_mqa", slot
                )
        b.add("attention/kv_b", h * (nope + hv), kv_rank, n, "linear", f"{mod}.kv_b_proj", slot)
        b.add("attention/o", d, h * hv, n, "linear", f"{mod}.o_proj", slot)
        if bias:
            b.add("attention/o.bias", d, 1, n, "vector", f"{mod}.o_proj", slot)
        gate = a.get("attn_gate")
        if gate in (
            "channel",
            "head",
        ):  # an output gate from the input: per channel (HY-V4), per head (Dots3)
            b.add(
                "attention/gate", h * hv if gate == "channel" else h, d, n, "linear", f"{mod}.gate_proj", slot
            )
        if a.get("mla_rope_k_norm"):  # an RMSNorm on the decoupled RoPE key (Dots3 k_rope_only_layernorm)
            b.add("attention/k_rope_norm", rope, 1, n, "vector", f"{mod}.k_rope_only_layernorm", slot)
        if a.get("sinks"):
            b.add("attention/sinks", h, 1, n, "vector", f"{mod}.sinks", slot)
        if a.get("softmax_scaling"):  # a learned scale and bias per head on the scores (Mistral Large 4)
            b.add("attention/softmax_scaling", 2 * h, 1, n, "vector", f"{mod}.softmax_scaling", slot)
        if layer.sparse and not layer.index_shared:
            indexer.dsa_indexer(b, n, q_rank or d)

    def saved(self, arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
        """Multi-head latent attention as transformers runs it in training: latents normed and
        expanded per head by kv_b, k built per head as [k_nope, k_rope], then ordinary attention."""
        d = arch.get("d_model")
        h = arch.get("n_heads")
        r_q = arch.get("q_lora_rank")
        r_kv = arch.get("kv_lora_rank")
        nope, rope = arch.get("qk_nope_head_dim"), arch.get("qk_rope_head_dim")
        hv = arch.get("v_head_dim")
        if not all(isinstance(x, int) for x in (r_kv, nope, rope, hv)):
            raise Unsupported(
                arch.name, "MLA activations need kv_lora_rank, qk_nope/rope_head_dim and v_head_dim"
            )
        qk = nope + rope
        out = [t("attention", "input of q and kv_a projections", c, d, needs=QKV)]
        if r_q:
            out += norm(arch, "q latent norm", r_q, 1, c)
            out.append(t("attention", "normed q latent (input of q_b)", c, r_q, needs=frozenset({"q"})))
        out += norm(arch, "kv latent norm", r_kv, 1, c)
        out.append(t("attention", "normed kv latent (input of kv_b)", c, r_kv, needs=frozenset({"k", "v"})))
        if c.flash or c.selective or c.batch == 1:
            # v is a strided view of the kv_b output: keeping it keeps all of it
            out.append(
                t("attention", "kv_b output [k_nope | v] per head (v is a view of it)", c, h * (nope + hv))
            )
        else:
            # the batched P·V matmul copies the strided v (batch > 1) and keeps the copy
            out.append(t("attention", "v per head (contiguous copy for the P·V matmul)", c, h * hv))
        out += [
            t("attention", "q = [q_nope | q_rope] per head", c, h * qk),
            t("attention", "k = [k_nope | k_rope] per head", c, h * qk),
        ]
        if c.flash:
            out += [
                t("attention", "output (flash kernel's, and the o projection's input)", c, h * hv),
                fp32("attention", "softmax logsumexp", h),
            ]
        else:
            out += [
                *scores(arch, c, h),
                t("attention", "core output (input of the o projection)", c, h * hv, needs=frozenset({"o"})),
            ]
        return out + residual_dropout(c, d, "attention")

    def qk_width(self, arch: Architecture) -> int | None:
        """nope + rope, where both are known."""
        nope, rope = arch.get("qk_nope_head_dim"), arch.get("qk_rope_head_dim")
        if nope is not None and rope is not None:
            return int(nope) + int(rope)
        return None

    def short(self, fill: Any) -> str:
        """ "MLA <kv_lora_rank>+<qk_rope_head_dim>"."""
        return f"MLA {fill.size('kv_lora_rank')}+{fill.size('qk_rope_head_dim')}"

    def engine_token_elements(self, arch: Architecture) -> int | None:
        """The latent and the RoPE key, one copy on every TP rank."""
        return (arch.get("kv_lora_rank") or 0) + (arch.get("qk_rope_head_dim") or 0)

    def vllm_token_bytes(self, arch: Architecture, layer: LayerSpec, b: float) -> float:
        """The latent at ``b``, or vLLM's fp8_ds_mla entry on a DSA layer with an fp8 cache,
        plus the layer's indexer key cache (vLLM gives it a layer spec of its own,
        ``DeepseekV32IndexerCache``, grouped with the latent's; priced here as one page)."""
        latent = (arch.get("kv_lora_rank") or 0) + (arch.get("qk_rope_head_dim") or 0)
        main = DS_MLA_FP8_BYTES if (layer.sparse and b == 1) else latent * b
        return main + indexer.vllm_index_bytes(arch, layer)

    def tp_note(self, tp: int) -> str:
        """The latent has no heads: TP replicates it; data-parallel attention would not."""
        return (
            f"MLA's latent KV has no heads to split: every TP rank holds the whole cache (×{tp} in all); "
            "data-parallel attention (--data-parallel-size with --enable-expert-parallel) would avoid that"
        )

    def profile_width(self, arch: Architecture, tp: int) -> float | None:
        """q and k per head (nope + rope), v per head, both twice, and the latent with its key."""
        h = (arch.get("n_heads") or 0) / tp
        nope, rope, hv = (arch.get(k) or 0 for k in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
        return h * (nope + rope) * 2 + h * hv * 2 + (arch.get("kv_lora_rank") or 0) + rope

    def as_attention(self, arch: Architecture, g: int) -> dict[str, Any]:
        """Per-head K and V of nope + rope (v_head_dim kept), no low-rank projections or biases."""
        nope, rope = arch.get("qk_nope_head_dim") or 0, arch.get("qk_rope_head_dim") or 0
        return {
            "n_kv_heads": g,
            "head_dim": nope + rope,
            "v_head_dim": arch.get("v_head_dim"),
            "kv_lora_rank": None,
            "q_lora_rank": None,
            "qkv_bias": False,
            "o_bias": False,
        }

    def lora_matrices(self, arch: Architecture, targets: frozenset[str]) -> list[tuple[str, int]]:
        """q: q_a and q_b (or q_proj); k or v: kv_a and kv_b, which they share."""
        out: list[tuple[str, int]] = []
        if "q" in targets:
            out.append(("q", 2 if arch.get("q_lora_rank") else 1))
        if targets & {"k", "v"}:
            out.append(("kv", 2))
        return out

    def kv_fill(self, ev: Evidence, attn: Sequence[LayerSpec]) -> Any:
        """ "mla": the latent and RoPE-key widths, the per-head q/k and v, the query's rank."""
        kv_rank, rope = ev.use("kv_lora_rank"), ev.use("qk_rope_head_dim")
        q_rank, h = ev.use("q_lora_rank"), ev.use("n_heads")
        nope, v = ev.use("qk_nope_head_dim"), ev.use("v_head_dim")
        rotated = ev.use("position") not in ("none",) and any(s.rope for s in attn)
        key = "RoPE key" if rotated else "decoupled key (not rotated: no positions)"
        detail = f"MLA: latent {kv_rank} + {key} {rope} per token, {h} heads"
        if nope is not None and rope is not None:
            detail += f"; q/k {nope + rope} ({nope} + {rope}) and v {v} per head"
        detail += f", q rank {q_rank}" if q_rank else ", full q projection"
        return ev.fill(
            "attention.kv",
            self.name,
            detail,
            {},
            {
                "kv_lora_rank": kv_rank,
                "qk_rope_head_dim": rope,
                "q_lora_rank": q_rank,
                "n_heads": h,
                "qk_nope_head_dim": nope,
                "v_head_dim": v,
            },
        )


MLA_CONSTRUCT = MLA()
