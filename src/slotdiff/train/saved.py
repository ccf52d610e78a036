"""The tensors autograd keeps for backward, layer kind by layer kind, from the config alone.

Each :class:`Saved` is one tensor per token (or per token and attended key, for the s × s
score matrices): its width, bytes per element, and which weights' gradients alone need it
(a matmul keeps its input only to form its weight's gradient; an elementwise op keeps what
its input gradient needs, which backward through a frozen layer still needs). The
accounting starts from Korthikanti et al. 2022 and is written out in docs/TRAINING.md;
tests/test_oracle_train.py checks it against what torch saves for transformers' own models.
"""

from __future__ import annotations

from dataclasses import replace

from ..constructs import construct, softmax
from ..constructs.saved import (
    NORM_FP32_TYPES,
    PYTHON_ACTIVATION_SAVES,
    QKV,
    ROUTER_FP32_TYPES,
    SOFTMAX_IN_DTYPE_TYPES,
    Conventions,
    Saved,
    fp32,
    norm,
    residual_dropout,
    t,
)
from ..constructs.tensor import Unsupported
from ..schema.arch import Architecture, LayerSpec

__all__ = [
    "NORM_FP32_TYPES",
    "QKV",
    "ROUTER_FP32_TYPES",
    "SOFTMAX_IN_DTYPE_TYPES",
    "Conventions",
    "Saved",
    "layer",
    "norm",
]


def _gated(kind: str, label: str, f: int, c: Conventions, rows: int = 1, down: str = "down") -> list[Saved]:
    """gate → act → × up → down over ``rows`` tokens' worth per token (top-k for experts)."""
    return [
        t(kind, f"{label}gate output (activation input)", c, rows * f),
        t(kind, f"{label}activation output", c, rows * f),
        t(kind, f"{label}up output", c, rows * f),
        t(kind, f"{label}act × up (input of down)", c, rows * f, needs=frozenset({down})),
    ]


def _ungated(arch: Architecture, kind: str, label: str, f: int, c: Conventions, rows: int = 1) -> list[Saved]:
    act = arch.get("activation")
    n = PYTHON_ACTIVATION_SAVES.get(act, 1) if c.eager else 1
    names = ["fc output (activation input)", "tanh", "x / 2", "1 + tanh"]
    return [t(kind, f"{label}{names[i]}", c, rows * f) for i in range(n)] + [
        t(kind, f"{label}activation output (input of down)", c, rows * f, needs=frozenset({"down"}))
    ]


def dense_ffn(arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
    d = arch.get("d_model")
    f = spec.d_ff or arch.get("d_ff")
    gated = arch.get("ffn_gated")
    out = [t("mlp", "input of the FFN", c, d, needs=frozenset({"gate", "up"} if gated else {"up"}))]
    out += _gated("mlp", "", f, c) if gated else _ungated(arch, "mlp", "", f, c)
    return out + residual_dropout(c, d, "mlp")


def moe_ffn(arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
    """Router (softmax, top-k), the tokens' copies dispatched to their k experts, each
    expert's SwiGLU on its tokens, the weighted outputs, and the shared experts."""
    d = arch.get("d_model")
    e, k = arch.get("n_experts"), arch.get("top_k")
    fe = arch.get("d_ff_expert") or arch.get("d_ff")
    if not all(isinstance(x, int) and x > 0 for x in (e, k, fe)):
        raise Unsupported(arch.name, "MoE activations need the expert count, top-k and expert width")
    n_shared = arch.get("n_shared_experts") or 0
    f_shared = arch.get("d_ff_shared") or n_shared * fe
    needs = {"router"} | ({"gate", "up"} if f_shared else set())
    out = [t("moe", "input of the router (and shared experts)", c, d, needs=frozenset(needs))]
    if c.router_fp32:
        out.append(fp32("moe", "router input in fp32", d, needs=frozenset({"router"})))
    out += [
        fp32("moe", "router probabilities", e),
        Saved("moe", "top-k expert indices", "int64", 8, k),
        fp32("moe", "top-k weights (normalization)", k + 1),
        Saved("moe", "dispatch and combine indices", "int64", 8, 3 * k),
        fp32("moe", "routing weights of the dispatched copies", k),
        t("moe", "dispatched token copies (experts' input)", c, k * d, needs=frozenset({"experts"})),
    ]
    if arch.get("ffn_gated"):
        out += _gated("moe", "experts: ", fe, c, rows=k, down="experts")
    else:
        out += _ungated(arch, "moe", "experts: ", fe, c, rows=k)
    out.append(t("moe", "experts' outputs (× routing weight)", c, k * d))
    if f_shared:
        out += _gated("moe", "shared experts: ", f_shared, c)
        if arch.get("shared_expert_gate"):
            out += [t("moe", "shared experts' output (× gate)", c, d), t("moe", "shared expert gate", c, 1)]
    return out + residual_dropout(c, d, "mlp")


def _unmodeled_structure(arch: Architecture, spec: LayerSpec) -> str | None:
    """Attention structures the activation model does not cover (their saved tensors differ
    from a plain attention's): mixture-of-attention experts (JetMoE), shared-KV compressed
    attention (DeepSeek-V4), indexer layers (MiniMax-M3) and hyper-connection streams."""
    if arch.get("attn_experts"):
        return "mixture-of-attention experts"
    if arch.get("attn_shared_kv") or spec.compress:
        return "shared-KV compressed attention"
    mech = construct(spec.mixer)
    why = mech.unmodeled(spec) if mech else None
    if why:
        return why
    if (arch.get("hc_mult") or 0) > 1:
        return "hyper-connection residual streams"
    return None


def layer(arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
    """Everything one decoder layer keeps for backward (no recomputation of the layer)."""
    what = (
        f"{spec.mixer} layers"
        if spec.mixer is not None and not softmax(spec.mixer)
        else f"a {spec.parallel} mixer beside the attention"
        if spec.parallel
        else "a weight-shared block"
        if spec.shared_block is not None
        else f"a second ({spec.ffn2}) FFN"
        if spec.ffn2
        else _unmodeled_structure(arch, spec)
    )
    if what:
        raise Unsupported(arch.name, f"training activations of {what} are not modeled (layer {spec.index})")
    placement = arch.get("norm_placement")
    d = arch.get("d_model")
    out: list[Saved] = []
    mech = construct(spec.mixer)  # any other than softmax attention was refused above
    if mech is not None and mech.softmax:
        if placement in ("pre", "post", "sandwich", "parallel", "parallel2"):
            out += norm(arch, "attention norm", d, 1, c, first=True)
        out += mech.saved(arch, spec, c)
        if placement == "sandwich":
            out += norm(arch, "post-attention norm", d, 1, c)
    if spec.ffn is not None:
        ffn = dense_ffn(arch, spec, c) if spec.ffn == "dense" else moe_ffn(arch, spec, c)
        if placement == "parallel" and spec.mixer is not None:
            # one norm feeds both sublayers: the FFN reads the tensor the q/k/v projections
            # read, kept once and needed by either side's weights
            out = [replace(x, needs=x.needs | ffn[0].needs) if x.needs == QKV else x for x in out]
            ffn = ffn[1:]
        elif placement == "parallel2" and spec.mixer is not None:
            # a second norm of the same input: the input is stored once
            out += [s for s in norm(arch, "FFN norm", d, 1, c) if "input" not in s.name or "fp32" in s.name]
        else:
            out += norm(arch, "FFN norm", d, 1, c, first=spec.mixer is None)
        out += ffn
        if placement == "sandwich":
            out += norm(arch, "post-FFN norm", d, 1, c)
    return [s for s in out if s.per_token or s.per_key]
