"""Gated short convolution (LFM2's conv layers): a depthwise convolution between input
projections and an output projection; its state is the last ``short_conv_kernel`` inputs per
channel, in the model dtype (transformers keeps the whole window); vLLM keeps the last
kernel − 1 in one mamba page (``short_conv_state_shape``)."""

from __future__ import annotations

from ..schema.arch import Architecture, LayerSpec
from .base import Construct
from .tensor import Builder, need_int


class ShortConv(Construct):
    """LFM2's gated short convolution."""

    name = "conv"
    label = "conv"
    softmax = False
    vllm_kind = "mamba"

    def mixer_state(self, arch: Architecture, variant: str | None) -> tuple[int, int]:
        """The convolution window: d × kernel in the model dtype."""
        return 0, (arch.get("d_model") or 0) * (arch.get("short_conv_kernel") or 0)

    def vllm_state_page(
        self, arch: Architecture, layer: LayerSpec, tp: int, conv_bytes: float, state_bytes: float
    ) -> float:
        """vLLM's page for one conv layer on a TP rank (``short_conv_state_shape`` over
        ``hidden_size`` and ``conv_L_cache``): kernel − 1 inputs of d / TP channels, in the
        cache dtype."""
        d = arch.get("d_model") or 0
        kernel = arch.get("short_conv_kernel") or 0
        return d // tp * max(0, kernel - 1) * conv_bytes

    def tensors(self, b: Builder, n: int, layer: LayerSpec) -> None:
        """in_proj to B, C, x; the depthwise conv; out_proj."""
        short_conv(b, n)


SHORT_CONV = ShortConv()


def short_conv(b: Builder, n: int) -> None:
    """Gated short convolution (LFM2): in_proj to B, C, x; depthwise conv; out_proj."""
    a = b.arch
    d = need_int(a, "d_model")
    kernel = need_int(a, "short_conv_kernel")
    bias = bool(a.get("short_conv_bias"))
    mod = "model.layers.0.conv"
    b.add("attention/conv.in_proj", 3 * d, d, n, "linear", f"{mod}.in_proj")
    b.add("attention/conv.conv", d, kernel, n, "conv", f"{mod}.conv")
    b.add("attention/conv.out_proj", d, d, n, "linear", f"{mod}.out_proj")
    if bias:
        b.add("attention/conv.in_proj.bias", 3 * d, 1, n, "vector", f"{mod}.in_proj")
        b.add("attention/conv.conv.bias", d, 1, n, "vector", f"{mod}.conv")
        b.add("attention/conv.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
