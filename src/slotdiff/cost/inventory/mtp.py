"""Tensors of DeepSeek-style MTP modules, counted apart from the main model."""

from __future__ import annotations

from ...constructs import construct
from ...schema.arch import Architecture
from .ffn import dense_ffn, moe
from .tensor import Builder, Tensor, need_int


def mtp_tensors(arch: Architecture) -> tuple[Tensor, ...]:
    """Tensors of the MTP modules (DeepSeek-V3 style), counted apart from the main model.

    Each module: two RMSNorms on the inputs, a 2d→d projection, one decoder layer shaped like
    the model's last layer, and a final norm; embedding and head are shared with the trunk.
    """
    n = arch.get("mtp_layers") or 0
    if not n or arch.get("mtp_style") != "deepseek":
        return ()
    last = arch.layers[-1]
    sub = Builder(arch)
    d = need_int(arch, "d_model")
    mech = construct(last.mixer)
    if mech and mech.softmax:
        mech.tensors(sub, n, last)
    if last.ffn == "moe":
        moe(sub, n)
    elif last.ffn == "dense":
        dense_ffn(sub, n, last.d_ff or need_int(arch, "d_ff"))
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
