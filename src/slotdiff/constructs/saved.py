"""The unit of training's activation accounting: one tensor autograd keeps for backward
(:class:`Saved`), how the layers run (:class:`Conventions`), and the pieces every layer kind
shares (norms, the score matrices, dropout masks), so each construct module writes its own
mixer's saved tensors. docs/TRAINING.md has the accounting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..core.resources import load_schema_file
from ..schema.arch import Architecture


class DropoutRates(Protocol):
    """The dropout probabilities a config sets (train/setup.Dropout)."""

    @property
    def attention(self) -> float: ...

    @property
    def residual(self) -> float: ...

    @property
    def embedding(self) -> float: ...


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
    dropout: DropoutRates
    router_fp32: bool = False

    @property
    def eager(self) -> bool:
        return self.kernels == "transformers"


def t(kind: str, name: str, c: Conventions, per_token: int = 0, per_key: int = 0, **kw: object) -> Saved:
    return Saved(kind, name, c.dtype, c.b, per_token, per_key, **kw)  # type: ignore[arg-type]


def fp32(kind: str, name: str, per_token: int = 0, per_key: int = 0, **kw: object) -> Saved:
    return Saved(kind, name, "fp32", 4, per_token, per_key, **kw)  # type: ignore[arg-type]


def mask(kind: str, name: str, per_token: int = 0, per_key: int = 0) -> Saved:
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
            fp32(
                "norm",
                f"{name}: normalized in fp32, before (1 + weight)",
                n,
                needs=frozenset({"norm"}),
                first_input=first,
            )
            if arch.model_type in NORM_FP32_TYPES
            else t(
                "norm",
                f"{name}: normalized, before the weight",
                c,
                n,
                needs=frozenset({"norm"}),
                first_input=first,
            )
        )
        return [
            fp32("norm", f"{name}: input in fp32", n, first_input=first),
            fp32("norm", f"{name}: rstd", rows, first_input=first),
            weight_input,
        ]
    return [
        t("norm", f"{name}: input", c, n, first_input=first),
        fp32("norm", f"{name}: {'mean and rstd' if layernorm else 'rstd'}", rows * stats, first_input=first),
    ]


def scores(arch: Architecture, c: Conventions, h: int) -> list[Saved]:
    """The s × s terms an attention without a flash kernel keeps (none under selective
    recomputation: the core is recomputed from q, k, v)."""
    if c.flash or c.selective:
        return []
    out = []
    if arch.get("attn_softcap"):
        out.append(t("attention", "tanh of the capped scores (logit soft-capping)", c, per_key=h))
    out.append(t("attention", "softmax probabilities P (s × s per head)", c, per_key=h))
    if c.eager and c.b < 4 and arch.model_type not in SOFTMAX_IN_DTYPE_TYPES:
        out.append(fp32("attention", "softmax output in fp32 (transformers' eager upcast)", per_key=h))
    if c.dropout.attention > 0:
        out.append(mask("attention", "dropout mask on P", per_key=h))
        out.append(t("attention", "P after dropout (the P·V input)", c, per_key=h))
    return out


def residual_dropout(c: Conventions, d: int, kind: str) -> list[Saved]:
    if c.dropout.residual <= 0:
        return []
    return [mask(kind, f"dropout mask on the {kind} output", d)]
