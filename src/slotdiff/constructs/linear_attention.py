"""Linear attention, the recurrent mixers whose state is a matrix per head (or a vector per
channel): Gated DeltaNet (Qwen3-Next, Qwen3.5), KDA (Kimi Linear), lightning attention
(MiniMax-01), Griffin's RG-LRU (RecurrentGemma), RWKV-4's time mix and xLSTM's mLSTM, picked by
``LayerSpec.variant``. It caches no KV: a fixed state per sequence (and its convolution's last
inputs), what vLLM keeps in one mamba page; its tensors are below.
"""

from __future__ import annotations

from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from ..schema.arch import Architecture, LayerSpec
from .base import Construct
from .mamba import sglang_mamba2_shape
from .tensor import Builder, Unsupported, need_int


class LinearAttention(Construct):
    """Linear attention and the other matrix- or vector-state recurrences, by variant."""

    name = "linear_attention"
    label = "linear_attention"
    softmax = False
    vllm_kind = "mamba"
    recurrent_heads = True

    def mixer_state(self, arch: Architecture, variant: str | None) -> tuple[int, int]:
        """(held in the state dtype, held in the model dtype): delta-rule states the first;
        convolution windows, and lightning attention's d×d state (which transformers keeps in
        the model dtype), the second."""
        d = arch.get("d_model") or 0
        if variant == "lightning":
            h = arch.get("n_heads") or 0
            hd = arch.get("head_dim") or (d // h if h else 0)
            return 0, h * hd * hd
        if variant == "rglru":
            # The RG-LRU state (lru_width, fp32) and the conv window over x.
            lru = arch.get("recurrent_width") or 0
            return lru, lru * max((arch.get("linear_conv_kernel") or 1) - 1, 0)
        if variant == "rwkv":
            # RWKV-4: numerator, denominator and running max of the WKV recurrence (fp32), and
            # the previous token of the time mix and the channel mix (token shift).
            return 3 * (arch.get("recurrent_width") or d), 2 * d
        if variant == "mlstm":
            # Per head the matrix memory C (dk × dv), the normaliser n (dk) and the stabiliser m.
            h = arch.get("linear_n_v_heads") or 0
            dk, dv = arch.get("linear_k_head_dim") or 0, arch.get("linear_v_head_dim") or 0
            return h * (dk * dv + dk + 1), 0
        nk, nv = arch.get("linear_n_k_heads") or 0, arch.get("linear_n_v_heads") or 0
        dk, dv = arch.get("linear_k_head_dim") or 0, arch.get("linear_v_head_dim") or 0
        kernel = arch.get("linear_conv_kernel") or 0
        return nv * dk * dv, (2 * nk * dk + nv * dv) * kernel

    def vllm_checkpoint_blocks(
        self, arch: Architecture, layer: LayerSpec, version: tuple[int, ...]
    ) -> int | None:
        """From 0.29 Kimi-K3's and GLM-5-Next's own KDA layers export prefill checkpoints where
        their kernel can, chosen at run time, so None; a model vLLM serves with its generic KDA
        (Kimi Linear, by the file's model_type: schemas/engine_families.json) exports none.
        A gated DeltaNet's checkpoint block goes with its alignment (``vllm_checkpoint_alignment``,
        by GPU), not here. Lightning: none."""
        variant = layer.variant or "gated_deltanet"
        if variant == "kda" and version >= (0, 29):
            generic = load_schema_file("engine_families.json")["vllm_generic_kda"]["model_types"]
            return 0 if (arch.config_model_type or arch.model_type) in generic else None
        return 0

    def vllm_checkpoint_alignment(
        self, arch: Architecture, layer: LayerSpec, version: tuple[int, ...], chip: str | None
    ) -> int | None:
        """From vLLM 0.33 a Qwen gated DeltaNet (``QwenGatedDeltaNetAttention``, by model_type:
        schemas/engine_families.json) whose prefill runs on FlashInfer's kernel declares 64
        tokens and then holds one prefill-checkpoint page (``_resolve_gdn_prefill_backend``:
        FlashInfer on Hopper; on Blackwell with d_k 128 only under a CUDA 13 runtime, which
        slotdiff cannot see, so refused; Triton elsewhere: none)."""
        if (layer.variant or "gated_deltanet") != "gated_deltanet" or version < (0, 33):
            return None
        gdn = load_schema_file("engine_families.json")["vllm_gdn_checkpoints"]
        if (arch.config_model_type or arch.model_type) not in gdn["model_types"]:
            return None
        release = ".".join(map(str, version))
        kernel = gdn["prefill_kernel_by_architecture"].get(chip or "")
        if kernel is None:
            why = (
                f"the GPU's architecture ({chip or 'not stated'}) is not one slotdiff knows vLLM's kernel for"
            )
        elif kernel == "flashinfer_if_cuda13" and arch.get("linear_k_head_dim") == 128:
            why = "on it FlashInfer's kernel runs only under a CUDA 13 runtime, which slotdiff cannot see"
        else:
            return gdn["alignment"] if kernel == "flashinfer" else None
        raise SlotdiffError(
            arch.name,
            f"in vLLM {release} its gated DeltaNet layers hold a prefill-checkpoint page (prefix "
            f"caching's align mode) only where their prefill kernel is FlashInfer's, and {why}; "
            "pick a GPU preset, or --no-enable-prefix-caching sizes it as vLLM runs without prefix "
            "caching",
        )

    def vllm_state_page(
        self, arch: Architecture, layer: LayerSpec, tp: int, conv_bytes: float, state_bytes: float
    ) -> float:
        """A layer's state on a TP rank as vLLM shapes it: lightning attention's heads / TP ×
        head_dim × head_dim in the model dtype (``linear_attention_state_shape``); a gated
        DeltaNet's or KDA's convolution's kernel − 1 inputs per channel and heads × d_k × d_v
        (KDA's in float32, as vLLM keeps it in every release that serves it).
        RG-LRU, RWKV and mLSTM have no vLLM model, so no page: a one-line refusal, not 0."""
        if layer.variant == "lightning":
            h = arch.get("n_heads") or 0
            hd = arch.get("head_dim") or ((arch.get("d_model") or 0) // h if h else 0)
            return (h // tp) * hd * hd * conv_bytes
        if layer.variant in ("rglru", "rwkv", "mlstm"):
            raise SlotdiffError(
                arch.name,
                f"vLLM serves no model with {layer.variant} linear attention: no state page to size",
                key=arch.key("model_type"),
            )
        nk, nv = (arch.get("linear_n_k_heads") or 0) // tp, (arch.get("linear_n_v_heads") or 0) // tp
        dk, dv = arch.get("linear_k_head_dim") or 0, arch.get("linear_v_head_dim") or 0
        kernel = arch.get("linear_conv_kernel") or 0
        conv = (2 * nk * dk + nv * dv) * max(0, kernel - 1)
        if layer.variant == "kda":  # kda_state_dtype: the recurrent state in float32 whatever the model's
            state_bytes = 4
        return conv * conv_bytes + nv * dk * dv * state_bytes

    def sglang_state(self, arch: Architecture, layer: LayerSpec, tp: int) -> tuple[int, int] | None:
        """A gated DeltaNet as SGLang's ``Mamba2StateShape`` (Qwen3-Next: inner = v heads ×
        d_v, groups = k heads, state = d_k); KDA as its ``KimiLinearStateShape`` (q, k and v
        windows, heads × d × d); None for lightning, RG-LRU, RWKV and mLSTM (no SGLang shape)."""
        nk, nv = arch.get("linear_n_k_heads") or 0, arch.get("linear_n_v_heads") or 0
        dk, dv = arch.get("linear_k_head_dim") or 0, arch.get("linear_v_head_dim") or 0
        kernel = arch.get("linear_conv_kernel") or 0
        variant = layer.variant or "gated_deltanet"
        if variant == "gated_deltanet":
            return sglang_mamba2_shape(arch, tp, nv * dv, nk, nv, dv, dk, kernel)
        if variant == "kda":  # groups = heads: every channel count is a multiple of the heads
            conv, _ = sglang_mamba2_shape(arch, tp, nv * dv, 0, nv, dv, dv, kernel)
            return 3 * conv, nv // tp * dv * dv
        return None

    def profile_width(self, arch: Architecture, tp: int) -> float | None:
        """q, k, v and their gates per rank (the profile run's activations)."""
        nk, nv = (arch.get("linear_n_k_heads") or 0) / tp, (arch.get("linear_n_v_heads") or 0) / tp
        dk, dv = arch.get("linear_k_head_dim") or 0, arch.get("linear_v_head_dim") or 0
        return 2 * (2 * nk * dk + 2 * nv * dv)

    def tensors(self, b: Builder, n: int, layer: LayerSpec) -> None:
        """The tensor set of ``layer.variant``."""
        linear_attention(b, n, layer)


LINEAR_ATTENTION = LinearAttention()


def linear_attention(b: Builder, n: int, layer: LayerSpec) -> None:
    """Linear-attention layers; ``layer.variant`` picks the tensor set."""
    a = b.arch
    variant = layer.variant or "gated_deltanet"
    d = need_int(a, "d_model")
    mod = "model.layers.0.linear_attn"
    if variant == "gated_deltanet":
        # Gated DeltaNet (Qwen3-Next, Qwen3.5): q/k/v/z projections (fused or split), a
        # depthwise conv over q/k/v, per-v-head decay (A_log, dt_bias), a gated RMSNorm.
        nk, nv = need_int(a, "linear_n_k_heads"), need_int(a, "linear_n_v_heads")
        dk, dv = need_int(a, "linear_k_head_dim"), need_int(a, "linear_v_head_dim")
        kernel = need_int(a, "linear_conv_kernel")
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
        h, hd = need_int(a, "n_heads"), need_int(a, "head_dim")
        mod = "model.layers.0.self_attn"
        b.add("attention/linear.qkv", 3 * h * hd, d, n, "linear", f"{mod}.qkv_proj")
        b.add("attention/linear.gate", h * hd, d, n, "linear", f"{mod}.output_gate")
        b.add("attention/linear.norm", h * hd, 1, n, "vector", f"{mod}.norm")
        b.add("attention/linear.out", d, h * hd, n, "linear", f"{mod}.out_proj")
        return
    if variant == "kda":
        # Kimi Delta Attention (Kimi Linear): q/k/v, a depthwise conv over them, a low-rank
        # per-channel forget gate (f_a, f_b, dt_bias, per-head A_log), a beta projection, a
        # low-rank output gate (g_a, g_b) into a gated RMSNorm; with linear_full_rank_gates
        # both gates are one full-rank projection from d (Bailing hybrid).
        nh, hd = need_int(a, "linear_n_v_heads"), need_int(a, "linear_v_head_dim")
        kernel = need_int(a, "linear_conv_kernel")
        proj = nh * hd
        mod = "model.layers.0.self_attn"
        for name in ("q", "k", "v"):
            b.add(f"attention/linear.{name}", proj, d, n, "linear", f"{mod}.{name}_proj")
        b.add("attention/linear.conv", 3 * proj, kernel, n, "conv", f"{mod}.conv1d")
        full = a.get("linear_full_rank_gates")  # Bailing hybrid: f_proj and g_proj from d
        if full:
            b.add("attention/linear.f", proj, d, n, "linear", f"{mod}.forget_gate.f_proj")
        else:
            b.add("attention/linear.f_a", hd, d, n, "linear", f"{mod}.forget_gate.f_a_proj")
            b.add("attention/linear.f_b", proj, hd, n, "linear", f"{mod}.forget_gate.f_b_proj")
        b.add("attention/linear.dt_bias", proj, 1, n, "vector", f"{mod}.forget_gate.dt_bias")
        b.add("attention/linear.A_log", nh, 1, n, "vector", f"{mod}.forget_gate.A_log")
        b.add("attention/linear.beta", nh, d, n, "linear", f"{mod}.b_proj")
        if full:
            b.add("attention/linear.g", proj, d, n, "linear", f"{mod}.g_proj")
        else:
            b.add("attention/linear.g_a", hd, d, n, "linear", f"{mod}.g_a_proj")
            b.add("attention/linear.g_b", proj, hd, n, "linear", f"{mod}.g_b_proj")
        b.add("attention/linear.norm", hd, 1, n, "vector", f"{mod}.o_norm")
        b.add("attention/linear.out", d, proj, n, "linear", f"{mod}.o_proj")
        return
    if variant == "rglru":
        rglru(b, n)
        return
    if variant == "rwkv":
        rwkv_time_mix(b, n)
        return
    if variant == "mlstm":
        mlstm(b, n)
        return
    raise Unsupported(
        a.name,
        f"cannot count parameters of {variant.replace('_', ' ')} layers yet",
        key=a.key("layer_types"),
    )


def rglru(b: Builder, n: int) -> None:
    """Griffin's recurrent block (RecurrentGemma): two biased input branches of ``lru_width``
    (y: the GELU gate, x: the recurrence), a biased depthwise causal conv on x, the RG-LRU
    (a per-channel recurrence ``recurrent_param`` and block-diagonal input and recurrence
    gates of n_heads blocks of lru_width / n_heads, with biases), a biased output projection."""
    a = b.arch
    d, h = need_int(a, "d_model"), need_int(a, "n_heads")
    lru, kernel = need_int(a, "recurrent_width"), need_int(a, "linear_conv_kernel")
    if lru % h:
        why = f"lru_width {lru} is not a multiple of {h} heads"
        raise Unsupported(a.name, why, key=a.key("recurrent_width"))
    block = lru // h
    mod = "model.layers.0.temporal_block"
    for name in ("y", "x"):
        b.add(f"attention/rglru.linear_{name}", lru, d, n, "linear", f"{mod}.linear_{name}")
        b.add(f"attention/rglru.linear_{name}.bias", lru, 1, n, "vector", f"{mod}.linear_{name}")
    b.add("attention/rglru.conv", lru, kernel, n, "conv", f"{mod}.conv_1d")
    b.add("attention/rglru.conv.bias", lru, 1, n, "vector", f"{mod}.conv_1d")
    b.add("attention/rglru.recurrent_param", lru, 1, n, "vector", f"{mod}.rg_lru.recurrent_param")
    for gate in ("input", "recurrent"):
        gmod = f"{mod}.rg_lru.{gate}_gate_weight"
        b.add(f"attention/rglru.{gate}_gate", block, block, n * h, "linear", gmod)
        b.add(f"attention/rglru.{gate}_gate.bias", lru, 1, n, "vector", gmod)
    b.add("attention/rglru.linear_out", d, lru, n, "linear", f"{mod}.linear_out")
    b.add("attention/rglru.linear_out.bias", d, 1, n, "vector", f"{mod}.linear_out")


def rwkv_time_mix(b: Builder, n: int) -> None:
    """RWKV-4's time mix (the attention of an RWKV block): key, value and receptance
    projections to ``recurrent_width`` and an output projection back, no biases; a learned
    per-channel decay and first-token bonus; token-shift interpolation vectors for k, v, r."""
    a = b.arch
    d, w = need_int(a, "d_model"), need_int(a, "recurrent_width")
    mod = "rwkv.blocks.0.attention"
    for name in ("key", "value", "receptance"):
        b.add(f"attention/rwkv.{name}", w, d, n, "linear", f"{mod}.{name}")
    b.add("attention/rwkv.output", d, w, n, "linear", f"{mod}.output")
    b.add("attention/rwkv.time_decay", w, 1, n, "vector", f"{mod}.time_decay")
    b.add("attention/rwkv.time_first", w, 1, n, "vector", f"{mod}.time_first")
    b.add("attention/rwkv.time_mix", d, 1, 3 * n, "vector", f"{mod}.time_mix_key")


def mlstm(b: Builder, n: int) -> None:
    """xLSTM's mLSTM layer: q/k (linear_n_k_heads × linear_k_head_dim), v and a sigmoid
    output gate (heads × linear_v_head_dim), with qkv_bias; per-head input and forget gate
    pre-activations (always biased); a per-head norm over v (biased with qkv_bias) and an
    output projection (o_bias)."""
    a = b.arch
    d = need_int(a, "d_model")
    h = need_int(a, "linear_n_v_heads")
    qk = need_int(a, "linear_n_k_heads") * need_int(a, "linear_k_head_dim")
    v = h * need_int(a, "linear_v_head_dim")
    bias = bool(a.get("qkv_bias"))
    mod = "backbone.blocks.0.mlstm_layer"
    for name, rows in (("q", qk), ("k", qk), ("v", v), ("ogate", v)):
        b.add(f"attention/mlstm.{name}", rows, d, n, "linear", f"{mod}.{name}")
        if bias:
            b.add(f"attention/mlstm.{name}.bias", rows, 1, n, "vector", f"{mod}.{name}")
    for gate in ("igate", "fgate"):
        b.add(f"attention/mlstm.{gate}", h, d, n, "linear", f"{mod}.{gate}_preact")
        b.add(f"attention/mlstm.{gate}.bias", h, 1, n, "vector", f"{mod}.{gate}_preact")
    b.add("attention/mlstm.norm", v, 1, n, "vector", f"{mod}.multihead_norm")
    if bias:
        b.add("attention/mlstm.norm.bias", v, 1, n, "vector", f"{mod}.multihead_norm")
    b.add("attention/mlstm.out", d, v, n, "linear", f"{mod}.out_proj")
    if a.get("o_bias"):
        b.add("attention/mlstm.out.bias", d, 1, n, "vector", f"{mod}.out_proj")
