"""Tensors of hyper-connections (DeepSeek-V4, GLM-5.3-Flash): the mixers over ``hc_mult``
residual streams. (Shared-KV compressed attention's tensors are plain attention's construct's:
constructs/attention_tensors.py.)"""

from __future__ import annotations

from .tensor import Builder, need_int


def hyper_connections(b: Builder, n_layers: int) -> None:
    """Hyper-connections over ``hc_mult`` residual streams: per layer two mixers (before
    attention and before the FFN), each a projection of the flattened streams to the
    pre/post/comb weights ((2 + N)·N), their bias and three scales (with ``hc_no_comb``:
    pre/post only, 2·N, and two scales); one head mixer (N) unless ``hc_no_head``."""
    streams = b.arch.get("hc_mult") or 0
    if streams <= 1:
        return
    d = need_int(b.arch, "d_model")
    # Without the stream-mixing matrix (hc_no_comb: HY-V4's iHC) only pre and post weights.
    comb = not b.arch.get("hc_no_comb")
    width = (2 + streams) * streams if comb else 2 * streams
    mod = "model.layers.0.attn_hc"
    b.add("norms/hyper.fn", width, streams * d, 2 * n_layers, "linear", f"{mod}.fn")
    b.add("norms/hyper.base", width, 1, 2 * n_layers, "vector", f"{mod}.base")
    b.add("norms/hyper.scale", 3 if comb else 2, 1, 2 * n_layers, "vector", f"{mod}.scale")
    if b.arch.get("hc_no_head"):  # the streams' final collapse is a plain mean (GLM-5.3-Flash)
        return
    b.add("norms/hyper_head.fn", streams, streams * d, 1, "linear", "model.hc_head.hc_fn")
    b.add("norms/hyper_head.base", streams, 1, 1, "vector", "model.hc_head.hc_base")
    b.add("norms/hyper_head.scale", 1, 1, 1, "vector", "model.hc_head.hc_scale")
