"""The tensors autograd keeps for backward, layer kind by layer kind, from the config alone.

Each :class:`Saved` is one tensor per token (or per token and attended key, for the s × s
score matrices): its width, bytes per element, and which weights' gradients alone need it
(a matmul keeps its input only to form its weight's gradient; an elementwise op keeps what
its input gradient needs, which backward through a frozen layer still needs). The
accounting starts from Korthikanti et al. 2022 and is written out in docs/TRAINING.md;
tests/test_oracle_train.py checks it against what torch saves for transformers' own models.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.resources import load_schema_file
from ..cost.inventory.tensor import Unsupported
from ..schema.arch import Architecture, LayerSpec
from .setup import Dropout

ALWAYS: frozenset[str] = frozenset()
QKV = frozenset({"q", "k", "v"})


def _numerics(name: str) -> frozenset[str]:
    """The model_types ``schemas/train_numerics.json`` lists under ``name`` (family data, not code)."""
    return frozenset(load_schema_file("train_numerics.json")[name]["model_types"])


# Families whose saved tensors differ in dtype from the default, and the activations that
# keep more than their input: each entry's reason is in the data file.
ROUTER_FP32_TYPES = _numerics("router_fp32")
SOFTMAX_IN_DTYPE_TYPES = _numerics("softmax_in_dtype")
NORM_FP32_TYPES = _numerics("norm_fp32")
PYTHON_ACTIVATION_SAVES: dict[str, int] = dict(
    load_schema_file("train_numerics.json")["python_activation_saves"]["saves"]
)

SUPPORTED_MIXERS = ("attention", "mla", None)


@dataclass(frozen=True)
class Saved:
    """One tensor kept for backward: ``per_token`` (+ ``per_key`` × keys) elements per token."""

    kind: str  # embedding | norm | attention | mlp | moe | logits | lora | checkpoint
    name: str
    dtype: str  # bf16 / fp16 / fp32 / int64 / bool
    nbytes: int  # per element
    per_token: int = 0
    per_key: int = 0  # elements per token per attended key (the s × s terms)
    needs: frozenset[str] = ALWAYS  # weights whose gradient alone needs it; empty: always kept
    batched: bool = True  # False: one copy per step, not per sequence (RoPE tables)
    first_input: bool = False  # the first layer's input norm: nothing saved if its input is frozen

    def bytes_at(self, batch: int, context: int) -> int:
        rows = (batch if self.batched else 1) * context
        return rows * (self.per_token + self.per_key * context) * self.nbytes


@dataclass(frozen=True)
class Conventions:
    """How the layers run: dtype, kernels, attention kernel, recomputation, dropout."""

    b: int  # bytes per element of the training dtype
    batch: int  # sequences per GPU: a batched matmul copies a strided view only when > 1
    dtype: str  # its name (bf16 / fp16 / fp32)
    kernels: str  # fused | transformers
    flash: bool
    selective: bool
    dropout: Dropout
    router_fp32: bool = False

    @property
    def eager(self) -> bool:
        return self.kernels == "transformers"


def _t(kind: str, name: str, c: Conventions, per_token: int = 0, per_key: int = 0, **kw: object) -> Saved:
    return Saved(kind, name, c.dtype, c.b, per_token, per_key, **kw)  # type: ignore[arg-type]


def _fp32(kind: str, name: str, per_token: int = 0, per_key: int = 0, **kw: object) -> Saved:
    return Saved(kind, name, "fp32", 4, per_token, per_key, **kw)  # type: ignore[arg-type]


def _mask(kind: str, name: str, per_token: int = 0, per_key: int = 0) -> Saved:
    return Saved(kind, name, "bool", 1, per_token, per_key)


def norm(
    arch: Architecture, name: str, width: int, rows: int, c: Conventions, first: bool = False
) -> list[Saved]:
    """A norm over ``rows`` vectors of ``width`` per token: what its backward keeps.

    Fused kernels (and torch's native LayerNorm) keep the input and fp32 per-row statistics
    (rstd; LayerNorm also the mean). transformers' RMSNorm is written out in Python: it keeps
    an fp32 copy of the input, the fp32 rstd and the normalized tensor before the weight
    (the last only for the weight's gradient). The output is kept by whoever consumes it.
    """
    n = width * rows
    layernorm = arch.get("norm") == "layernorm"
    stats = 2 if layernorm else 1
    if c.eager and not layernorm:
        weight_input = (
            _fp32(
                "norm",
                f"{name}: normalized in fp32, before (1 + weight)",
                n,
                needs=frozenset({"norm"}),
                first_input=first,
            )
            if arch.model_type in NORM_FP32_TYPES
            else _t(
                "norm",
                f"{name}: normalized, before the weight",
                c,
                n,
                needs=frozenset({"norm"}),
                first_input=first,
            )
        )
        return [
            _fp32("norm", f"{name}: input in fp32", n, first_input=first),
            _fp32("norm", f"{name}: rstd", rows, first_input=first),
            weight_input,
        ]
    return [
        _t("norm", f"{name}: input", c, n, first_input=first),
        _fp32("norm", f"{name}: {'mean and rstd' if layernorm else 'rstd'}", rows * stats, first_input=first),
    ]


def _scores(arch: Architecture, c: Conventions, h: int) -> list[Saved]:
    """The s × s terms an attention without a flash kernel keeps (none under selective
    recomputation: the core is recomputed from q, k, v)."""
    if c.flash or c.selective:
        return []
    out = []
    if arch.get("attn_softcap"):
        out.append(_t("attention", "tanh of the capped scores (logit soft-capping)", c, per_key=h))
    out.append(_t("attention", "softmax probabilities P (s × s per head)", c, per_key=h))
    if c.eager and c.b < 4 and arch.model_type not in SOFTMAX_IN_DTYPE_TYPES:
        out.append(_fp32("attention", "softmax output in fp32 (transformers' eager upcast)", per_key=h))
    if c.dropout.attention > 0:
        out.append(_mask("attention", "dropout mask on P", per_key=h))
        out.append(_t("attention", "P after dropout (the P·V input)", c, per_key=h))
    return out


def _residual_dropout(c: Conventions, d: int, kind: str) -> list[Saved]:
    if c.dropout.residual <= 0:
        return []
    return [_mask(kind, f"dropout mask on the {kind} output", d)]


def attention(arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
    """Softmax attention (MHA / GQA / MQA): q, k, v, the output, and the scores without flash."""
    d = arch.get("d_model")
    h = arch.get("n_heads")
    g = spec.n_kv_heads or arch.get("n_kv_heads") or h
    hd = spec.head_dim or arch.get("head_dim") or d // h
    hv = arch.get("v_head_dim") or hd
    out = [_t("attention", "input of the q/k/v projections", c, d, needs=QKV)]
    if arch.get("qk_norm"):
        per_head = arch.get("qk_norm_kind") in ("head", "head_separate")
        out += norm(arch, "q norm", hd if per_head else h * hd, h if per_head else 1, c)
        out += norm(arch, "k norm", hd if per_head else g * hd, g if per_head else 1, c)
    if c.flash:
        out += [
            _t("attention", "q (after RoPE)", c, h * hd),
            _t("attention", "k (after RoPE), KV heads", c, g * hd),
            _t("attention", "v, KV heads", c, g * hv),
            _t("attention", "output (flash kernel's, and the o projection's input)", c, h * hv),
            _fp32("attention", "softmax logsumexp", h),
        ]
    elif c.selective:
        out += [
            _t("attention", "q (after RoPE)", c, h * hd),
            _t("attention", "k (after RoPE), KV heads", c, g * hd),
            _t("attention", "v, KV heads", c, g * hv),
            _t("attention", "core output (input of the o projection)", c, h * hv, needs=frozenset({"o"})),
        ]
    else:
        grouped = " expanded to every query head" if g < h else ""
        out += [
            _t("attention", "q (after RoPE)", c, h * hd),
            _t("attention", f"k (after RoPE){grouped}", c, h * hd),
            _t("attention", f"v{grouped}", c, h * hv),
            *_scores(arch, c, h),
            _t("attention", "P·V output (input of the o projection)", c, h * hv, needs=frozenset({"o"})),
        ]
    return out + _residual_dropout(c, d, "attention")


def mla(arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
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
    out = [_t("attention", "input of q and kv_a projections", c, d, needs=QKV)]
    if r_q:
        out += norm(arch, "q latent norm", r_q, 1, c)
        out.append(_t("attention", "normed q latent (input of q_b)", c, r_q, needs=frozenset({"q"})))
    out += norm(arch, "kv latent norm", r_kv, 1, c)
    out.append(_t("attention", "normed kv latent (input of kv_b)", c, r_kv, needs=frozenset({"k", "v"})))
    if c.flash or c.selective or c.batch == 1:
        # v is a strided view of the kv_b output: keeping it keeps all of it
        out.append(
            _t("attention", "kv_b output [k_nope | v] per head (v is a view of it)", c, h * (nope + hv))
        )
    else:
        # the batched P·V matmul copies the strided v (batch > 1) and keeps the copy
        out.append(_t("attention", "v per head (contiguous copy for the P·V matmul)", c, h * hv))
    out += [
        _t("attention", "q = [q_nope | q_rope] per head", c, h * qk),
        _t("attention", "k = [k_nope | k_rope] per head", c, h * qk),
    ]
    if c.flash:
        out += [
            _t("attention", "output (flash kernel's, and the o projection's input)", c, h * hv),
            _fp32("attention", "softmax logsumexp", h),
        ]
    else:
        out += [
            *_scores(arch, c, h),
            _t("attention", "core output (input of the o projection)", c, h * hv, needs=frozenset({"o"})),
        ]
    return out + _residual_dropout(c, d, "attention")


def _gated(kind: str, label: str, f: int, c: Conventions, rows: int = 1, down: str = "down") -> list[Saved]:
    """gate → act → × up → down over ``rows`` tokens' worth per token (top-k for experts)."""
    return [
        _t(kind, f"{label}gate output (activation input)", c, rows * f),
        _t(kind, f"{label}activation output", c, rows * f),
        _t(kind, f"{label}up output", c, rows * f),
        _t(kind, f"{label}act × up (input of down)", c, rows * f, needs=frozenset({down})),
    ]


def _ungated(arch: Architecture, kind: str, label: str, f: int, c: Conventions, rows: int = 1) -> list[Saved]:
    act = arch.get("activation")
    n = PYTHON_ACTIVATION_SAVES.get(act, 1) if c.eager else 1
    names = ["fc output (activation input)", "tanh", "x / 2", "1 + tanh"]
    return [_t(kind, f"{label}{names[i]}", c, rows * f) for i in range(n)] + [
        _t(kind, f"{label}activation output (input of down)", c, rows * f, needs=frozenset({"down"}))
    ]


def dense_ffn(arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
    d = arch.get("d_model")
    f = spec.d_ff or arch.get("d_ff")
    gated = arch.get("ffn_gated")
    out = [_t("mlp", "input of the FFN", c, d, needs=frozenset({"gate", "up"} if gated else {"up"}))]
    out += _gated("mlp", "", f, c) if gated else _ungated(arch, "mlp", "", f, c)
    return out + _residual_dropout(c, d, "mlp")


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
    out = [_t("moe", "input of the router (and shared experts)", c, d, needs=frozenset(needs))]
    if c.router_fp32:
        out.append(_fp32("moe", "router input in fp32", d, needs=frozenset({"router"})))
    out += [
        _fp32("moe", "router probabilities", e),
        Saved("moe", "top-k expert indices", "int64", 8, k),
        _fp32("moe", "top-k weights (normalization)", k + 1),
        Saved("moe", "dispatch and combine indices", "int64", 8, 3 * k),
        _fp32("moe", "routing weights of the dispatched copies", k),
        _t("moe", "dispatched token copies (experts' input)", c, k * d, needs=frozenset({"experts"})),
    ]
    if arch.get("ffn_gated"):
        out += _gated("moe", "experts: ", fe, c, rows=k, down="experts")
    else:
        out += _ungated(arch, "moe", "experts: ", fe, c, rows=k)
    out.append(_t("moe", "experts' outputs (× routing weight)", c, k * d))
    if f_shared:
        out += _gated("moe", "shared experts: ", f_shared, c)
        if arch.get("shared_expert_gate"):
            out += [_t("moe", "shared experts' output (× gate)", c, d), _t("moe", "shared expert gate", c, 1)]
    return out + _residual_dropout(c, d, "mlp")


def _unmodeled_structure(arch: Architecture, spec: LayerSpec) -> str | None:
    """Attention structures the activation model does not cover (their saved tensors differ
    from a plain attention's): mixture-of-attention experts (JetMoE), shared-KV compressed
    attention (DeepSeek-V4), indexer layers (MiniMax-M3) and hyper-connection streams."""
    if arch.get("attn_experts"):
        return "mixture-of-attention experts"
    if arch.get("attn_shared_kv") or spec.compress:
        return "shared-KV compressed attention"
    if spec.sparse and spec.mixer == "attention":
        return "an indexer on softmax attention"
    if (arch.get("hc_mult") or 0) > 1:
        return "hyper-connection residual streams"
    return None


def layer(arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
    """Everything one decoder layer keeps for backward (no recomputation of the layer)."""
    what = (
        f"{spec.mixer} layers"
        if spec.mixer not in SUPPORTED_MIXERS
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
    if spec.mixer is not None:
        if placement in ("pre", "post", "sandwich", "parallel", "parallel2"):
            out += norm(arch, "attention norm", d, 1, c, first=True)
        out += attention(arch, spec, c) if spec.mixer == "attention" else mla(arch, spec, c)
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
