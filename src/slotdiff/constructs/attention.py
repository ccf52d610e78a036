"""Plain softmax attention (MHA / GQA / MQA), the default mechanism: K and V per KV head
cached per token (V at its own width where v_head_dim differs; once where one head is read as
both, DeepSeek-V4's shared KV), q·k and p·v over the keys a layer sees, what training keeps
for backward, LoRA's q/k/v, the attention.kv fill (MHA, GQA, MQA). Its family options' extra
state (ZAYA's CCA convolutions, Inkling's short convolutions) is here too; its tensors are in
attention_tensors.py, its lightning indexer's cache and FLOPs in indexer.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..schema.arch import Architecture, LayerSpec
from . import attention_tensors, indexer
from .base import Construct, Evidence
from .saved import QKV, Conventions, Saved, fp32, norm, residual_dropout, scores, t
from .tensor import Builder


def kv_head_elements(arch: Architecture, layer: LayerSpec) -> int:
    """K and V per token of one layer's KV heads (also a weight-shared block's, Zamba2)."""
    g = layer.n_kv_heads or arch.get("n_kv_heads") or 0
    hd = layer.head_dim or arch.get("head_dim") or 0
    hv = arch.get("v_head_dim") or hd
    # K and V are cached as two tensors even where the model computes V = K (Gemma 4's
    # global layers), as transformers' cache stores them.
    return g * (hd + hv)


class Attention(Construct):
    """Softmax attention with per-head K and V."""

    name = "attention"
    label = "attention"
    plain = True

    def kv_elements(self, arch: Architecture, layer: LayerSpec) -> int:
        """K and V per KV head, or a shared K=V head once; and an indexer's key (MiniMax-M3)."""
        if arch.get("attn_shared_kv"):
            # One head read as both key and value, cached once (its compressed entries are
            # counted by compressed_kv_elements, per compress tokens); a layer without a
            # compressor may go through a generic cache that keeps key and value apart.
            twice = arch.get("shared_kv_split_cache") and not layer.compress
            return (2 if twice else 1) * (layer.head_dim or arch.get("head_dim") or 0)
        return kv_head_elements(arch, layer) + indexer.own_index_elements(arch, layer)

    def state_elements(self, arch: Architecture, layer: LayerSpec) -> tuple[int, int]:
        """ZAYA's CCA and Inkling's short convolutions keep their last inputs: (in the state
        dtype, in the model dtype) per sequence."""
        rec = conv = 0
        if arch.get("attn_cca"):
            # ZAYA's CCA keeps the q/k conv inputs (cca_time0 + cca_time1 - 2 positions) and the
            # previous token's delayed value half, both in the model dtype.
            h = layer.n_heads or arch.get("n_heads") or 0
            g = layer.n_kv_heads or arch.get("n_kv_heads") or 0
            hd = layer.head_dim or arch.get("head_dim") or 0
            taps = (arch.get("cca_time0") or 1) - 1 + (arch.get("cca_time1") or 1) - 1
            conv += (h + g) * hd * taps + g * hd // 2
        if arch.get("kv_short_conv") or arch.get("residual_short_convs"):
            # Inkling's short convolutions around softmax attention keep their last kernel inputs,
            # in the state dtype: the keys' and values' (g·hd each) and the d-wide residual ones.
            kernel = arch.get("short_conv_kernel") or 0
            g = layer.n_kv_heads or arch.get("n_kv_heads") or 0
            hd = layer.head_dim or arch.get("head_dim") or 0
            kv = 2 * g * hd if arch.get("kv_short_conv") else 0
            rec += kernel * (kv + (arch.get("residual_short_convs") or 0) * (arch.get("d_model") or 0))
        return rec, conv

    def qk_v_dims(self, arch: Architecture, layer: LayerSpec, absorbed: bool) -> tuple[int, int, int]:
        """head_dim for q·k, v_head_dim (else head_dim) for p·v."""
        h = layer.n_heads or arch.get("n_heads") or 0
        hd = layer.head_dim or arch.get("head_dim") or 0
        return h, hd, arch.get("v_head_dim") or hd

    def tensors(self, b: Builder, n: int, layer: LayerSpec) -> None:
        attention_tensors.attention(b, n, layer)

    def unmodeled(self, spec: LayerSpec) -> str | None:
        """An indexer on softmax attention (MiniMax-M3) keeps tensors not modeled."""
        return "an indexer on softmax attention" if spec.sparse else None

    def saved(self, arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
        """Softmax attention (MHA / GQA / MQA): q, k, v, the output, and the scores without flash."""
        d = arch.get("d_model")
        h = arch.get("n_heads")
        g = spec.n_kv_heads or arch.get("n_kv_heads") or h
        hd = spec.head_dim or arch.get("head_dim") or d // h
        hv = arch.get("v_head_dim") or hd
        out = [t("attention", "input of the q/k/v projections", c, d, needs=QKV)]
        if arch.get("qk_norm"):
            per_head = arch.get("qk_norm_kind") in ("head", "head_separate")
            out += norm(arch, "q norm", hd if per_head else h * hd, h if per_head else 1, c)
            out += norm(arch, "k norm", hd if per_head else g * hd, g if per_head else 1, c)
        if c.flash:
            out += [
                t("attention", "q (after RoPE)", c, h * hd),
                t("attention", "k (after RoPE), KV heads", c, g * hd),
                t("attention", "v, KV heads", c, g * hv),
                t("attention", "output (flash kernel's, and the o projection's input)", c, h * hv),
                fp32("attention", "softmax logsumexp", h),
            ]
        elif c.selective:
            out += [
                t("attention", "q (after RoPE)", c, h * hd),
                t("attention", "k (after RoPE), KV heads", c, g * hd),
                t("attention", "v, KV heads", c, g * hv),
                t("attention", "core output (input of the o projection)", c, h * hv, needs=frozenset({"o"})),
            ]
        else:
            grouped = " expanded to every query head" if g < h else ""
            out += [
                t("attention", "q (after RoPE)", c, h * hd),
                t("attention", f"k (after RoPE){grouped}", c, h * hd),
                t("attention", f"v{grouped}", c, h * hv),
                *scores(arch, c, h),
                t("attention", "P·V output (input of the o projection)", c, h * hv, needs=frozenset({"o"})),
            ]
        return out + residual_dropout(c, d, "attention")

    def lora_matrices(self, arch: Architecture, targets: frozenset[str]) -> list[tuple[str, int]]:
        """One fused qkv adapter, or one per targeted q, k, v."""
        if arch.get("fused_qkv") and targets & {"q", "k", "v"}:
            return [("qkv", 1)]
        return [(x, 1) for x in ("q", "k", "v") if x in targets]

    def kv_fill(self, ev: Evidence, attn: Sequence[LayerSpec]) -> Any:
        """ "mha", "gqa" or "mqa" by the query and KV head counts, and layers with their own."""
        h, g, hd = ev.use("n_heads"), ev.use("n_kv_heads"), ev.use("head_dim")
        kind = "mha" if g == h else ("mqa" if g == 1 else "gqa")
        detail = f"{kind.upper()} {h}/{g}, head_dim {hd}"
        layer_g = {s.n_kv_heads for s in attn if s.n_kv_heads}
        if layer_g:
            detail += f" (some layers {'/'.join(str(x) for x in sorted(layer_g))} KV heads)"
        return ev.fill("attention.kv", kind, detail, {}, {"n_heads": h, "n_kv_heads": g, "head_dim": hd})


ATTENTION = Attention()
