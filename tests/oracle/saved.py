"""What autograd really keeps for backward: the bytes of every tensor saved during a forward.

:func:`saved_for_backward` runs one training forward (loss included) of a model under
``torch.autograd.graph.saved_tensors_hooks`` and records every saved tensor's *storage*:
tensors that share storage (views, ``.to()`` no-ops, a tensor saved by two ops) count once,
at the size of the whole storage (a saved view keeps all of it alive). Parameters and
buffers are left out (their bytes are the weights, counted apart). Each storage is
attributed to the innermost module running when it was first saved, so the totals split by
layer kind. :func:`flash_attention` is a stand-in for a flash-attention kernel on CPU: the
output is computed by the math path, but only (q, k, v, out, logsumexp) are saved, which is
what FlashAttention-2 keeps for its backward.

Nothing here reads slotdiff (tests/oracle/README.md: the oracle is independent).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass
class Saved:
    """Storages saved for backward: bytes in total and by the module that first saved them."""

    total: int = 0
    by_module: dict[str, int] = field(default_factory=dict)
    tensors: list[tuple[str, tuple[int, ...], str, int]] = field(default_factory=list)

    def where(self, *needles: str) -> int:
        """Bytes saved inside modules whose name contains any of ``needles``."""
        return sum(v for k, v in self.by_module.items() if any(n in k for n in needles))


@contextmanager
def _module_stack(model: nn.Module) -> Iterator[list[str]]:
    stack: list[str] = ["<top>"]
    handles = []
    for name, mod in model.named_modules():
        label = name or "<top>"

        def pre(_m: nn.Module, _a: Any, label: str = label) -> None:
            stack.append(label)

        def post(_m: nn.Module, _a: Any, _o: Any) -> None:
            stack.pop()

        handles.append(mod.register_forward_pre_hook(pre))
        handles.append(mod.register_forward_hook(post))
    try:
        yield stack
    finally:
        for h in handles:
            h.remove()


def saved_for_backward(model: nn.Module, **inputs: Any) -> tuple[Saved, Any]:
    """Run ``model(**inputs)`` in training mode; return (what autograd saved, the output)."""
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    result = Saved()
    seen: set[int] = set()
    keep: list[torch.Tensor] = []  # hold every saved tensor: no address is reused meanwhile

    with _module_stack(model) as stack:

        def pack(t: torch.Tensor) -> torch.Tensor:
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            keep.append(t)
            if ptr in own or ptr in seen or storage.nbytes() == 0:
                return t
            seen.add(ptr)
            where = stack[-1]
            result.total += storage.nbytes()
            result.by_module[where] = result.by_module.get(where, 0) + storage.nbytes()
            result.tensors.append(
                (where, tuple(t.shape), str(t.dtype).removeprefix("torch."), storage.nbytes())
            )
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(**inputs)
    return result, out


class _FlashAttention(torch.autograd.Function):
    """softmax(q kᵀ · scale + causal mask) v; saves q, k, v, out and the fp32 logsumexp only."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
        rep = q.shape[1] // k.shape[1]  # GQA: the kernel indexes K/V heads, it does not copy them
        acc = torch.promote_types(q.dtype, torch.float32)  # fp32 accumulation, as the kernels
        kk = k.repeat_interleave(rep, dim=1).to(acc)
        vv = v.repeat_interleave(rep, dim=1).to(acc)
        s = q.to(acc) @ kk.transpose(-1, -2) * scale
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        # [batch, seq, heads, dim], the layout a flash kernel writes (o_proj reads it as is)
        out = (torch.exp(s - lse[..., None]) @ vv).to(q.dtype).transpose(1, 2).contiguous()
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        rep = q.shape[1] // k.shape[1]
        acc = torch.promote_types(q.dtype, torch.float32)
        qf, kf, vf = q.to(acc), k.to(acc).repeat_interleave(rep, 1), v.to(acc).repeat_interleave(rep, 1)
        n = q.shape[-2]
        s = (qf @ kf.transpose(-1, -2) * ctx.scale).masked_fill(
            torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")
        )
        p = torch.exp(s - lse[..., None])  # recomputed, as the kernel does
        g = grad.to(acc).transpose(1, 2)
        dv = p.transpose(-1, -2) @ g
        dp = g @ vf.transpose(-1, -2)
        ds = p * (dp - (g * out.to(acc).transpose(1, 2)).sum(-1, keepdim=True))
        dq = ds @ kf * ctx.scale
        dk = ds.transpose(-1, -2) @ qf * ctx.scale
        b, hk, sk, _ = k.shape
        dk = dk.view(b, hk, rep, sk, -1).sum(2)
        dv = dv.view(b, hk, rep, sk, -1).sum(2)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def flash_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **_: Any,
) -> tuple[torch.Tensor, None]:
    """An attention function for transformers' ``AttentionInterface``: causal, no dropout.

    Inputs are [batch, heads, seq, head_dim]; the output is [batch, seq, heads, dim], as
    transformers' attention functions return it.
    """
    scale = scaling if scaling is not None else 1 / math.sqrt(query.shape[-1])
    return _FlashAttention.apply(query, key, value, scale), None


def register_flash() -> str:
    """Register :func:`flash_attention` with transformers; return its implementation name."""
    from transformers import AttentionInterface

    AttentionInterface.register("kernel_standin", flash_attention)
    return "kernel_standin"


# --------------------------------------------------------------------------------------------
# Stand-ins for fused kernels: what Apex / Transformer Engine / Megatron save, run on CPU
# --------------------------------------------------------------------------------------------


class _FusedRMSNorm(torch.autograd.Function):
    """y = x · rsqrt(mean(x²) + eps) · w; saves the (contiguous) input, w and the fp32 rstd,
    as Apex's FusedRMSNorm and Transformer Engine's RMSNorm do."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float) -> torch.Tensor:
        x = x.contiguous()
        acc = torch.promote_types(x.dtype, torch.float32)
        rstd = torch.rsqrt(x.to(acc).pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        ctx.offset = offset
        return ((x.to(acc) * rstd) * (weight.to(acc) + offset)).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, rstd = ctx.saved_tensors
        xf, g = x.to(rstd.dtype), grad.to(rstd.dtype)
        w = weight.to(rstd.dtype) + ctx.offset
        xhat = xf * rstd
        gw = g * w
        dx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
        dw = (g * xhat).reshape(-1, x.shape[-1]).sum(0)
        return dx.to(x.dtype), dw.to(weight.dtype), None, None


def _rms_forward(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    eps = getattr(module, "variance_epsilon", None) or getattr(module, "eps", 1e-6)
    offset = 1.0 if type(module).__name__.startswith("Gemma") else 0.0  # Gemma scales by (1 + w)
    return _FusedRMSNorm.apply(x, module.weight, float(eps), offset)


def _native_dropout(
    x: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
) -> torch.Tensor:
    if not training or p == 0.0:
        return x
    return torch.native_dropout(x, p, True)[0]


@contextmanager
def fused_kernels(model: nn.Module) -> Iterator[None]:
    """Run ``model`` with the kernels a fused training stack uses: RMSNorm modules as
    :class:`_FusedRMSNorm`, the tanh-GELU as torch's native ``gelu(approximate="tanh")`` (one
    saved input), and dropout as ``native_dropout`` (the CUDA path: a 1-byte bool mask; on CPU
    ``F.dropout`` would keep the mask in the input's dtype)."""
    patched: list[tuple[nn.Module, Any]] = []
    for mod in model.modules():
        name = type(mod).__name__
        if name.endswith("RMSNorm") and getattr(mod, "weight", None) is not None:
            patched.append((mod, mod.forward))
            mod.forward = _rms_forward.__get__(mod)
        elif name == "NewGELUActivation":  # GPT-2's tanh-GELU written out in Python
            patched.append((mod, mod.forward))
            mod.forward = lambda x: torch.nn.functional.gelu(x, approximate="tanh")
    original = torch.nn.functional.dropout
    torch.nn.functional.dropout = _native_dropout
    try:
        yield
    finally:
        torch.nn.functional.dropout = original
        for mod, forward in patched:
            mod.forward = forward


@contextmanager
def native_dropout() -> Iterator[None]:
    """Dropout as ``native_dropout`` (1-byte bool mask, the CUDA path) for an unpatched model."""
    original = torch.nn.functional.dropout
    torch.nn.functional.dropout = _native_dropout
    try:
        yield
    finally:
        torch.nn.functional.dropout = original


class LoraLinear(nn.Module):
    """PEFT's LoRA ``Linear`` forward: base(x) + B(A(x)) · alpha/r, base frozen, no LoRA dropout."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float = 16.0) -> None:
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(base.in_features, rank, bias=False, dtype=base.weight.dtype)
        self.lora_B = nn.Linear(rank, base.out_features, bias=False, dtype=base.weight.dtype)
        nn.init.normal_(self.lora_B.weight, std=0.02)  # PEFT starts B at zero; any value saves the same
        self.scaling = alpha / rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base_layer(x) + self.lora_B(self.lora_A(x)) * self.scaling


def add_lora(model: nn.Module, rank: int, targets: set[str]) -> int:
    """Freeze every parameter, then wrap the ``nn.Linear`` modules whose last name is in
    ``targets`` (e.g. ``{"q_proj", "v_proj"}``) with :class:`LoraLinear`; return how many."""
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = 0
    for _name, mod in list(model.named_modules()):
        for child_name, child in list(mod.named_children()):
            if child_name in targets and isinstance(child, nn.Linear):
                setattr(mod, child_name, LoraLinear(child, rank))
                wrapped += 1
    return wrapped


def _selective(inner: Any) -> Any:
    """An attention function that recomputes ``inner``'s core in backward (Korthikanti's
    selective recomputation): only its tensor inputs (q, k, v) are kept."""
    from torch.utils.checkpoint import checkpoint

    def attend(
        module: nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, None]:
        def core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return inner(module, q, k, v, attention_mask, **kwargs)[0]

        return checkpoint(core, query, key, value, use_reentrant=True), None

    return attend


def measure_training(
    cfg: dict[str, Any],
    *,
    overrides: dict[str, Any] | None = None,
    num_layers: int | None = None,
    batch: int = 2,
    seq: int = 64,
    dtype: str = "bfloat16",
    attention: str = "eager",
    kernels: str = "transformers",
    checkpointing: str = "none",
    lora: tuple[int, set[str]] | None = None,
    tiny: tuple[Any, type, dict[str, Any]] | None = None,
    backward: bool = False,
) -> dict[str, Any]:
    """Build a tiny real copy of ``cfg`` (``hf_oracle.tiny_text_config``), run one training
    forward with labels and ``use_cache=False`` (as training scripts set it: GPT-2's cache layer
    would copy K and V, and attention would keep the copies) and return what autograd saved.

    ``attention``: ``eager`` (the s × s scores kept), ``sdpa`` (torch's CPU flash kernel where it
    applies), ``standin`` (:func:`flash_attention`) or ``selective`` (eager, its core recomputed).
    ``kernels``: ``transformers`` (modules as written; dropout as on CUDA) or ``fused``
    (:func:`fused_kernels`). ``checkpointing``: ``none`` or ``full`` (transformers'
    activation checkpointing of every decoder layer, re-entrant so the kept inputs are seen).
    ``lora``: (rank, target module names) to freeze the base and add adapters. ``tiny``: the
    result of ``tiny_text_config(cfg, num_layers, overrides)`` when the caller has it already.
    ``backward``: also run the backward (that the saved tensors are all it needs).
    """
    from transformers import AttentionInterface
    from transformers.models.llama.modeling_llama import eager_attention_forward

    from .hf_oracle import _DTYPES, tiny_text_config

    tiny_config, cls, info = tiny or tiny_text_config(cfg, num_layers, overrides)
    impl = attention
    if attention == "standin":
        impl = register_flash()
    elif attention == "selective":
        AttentionInterface.register("selective_eager", _selective(eager_attention_forward))
        impl = "selective_eager"
    torch.manual_seed(0)
    model = cls._from_config(copy.deepcopy(tiny_config), dtype=_DTYPES[dtype], attn_implementation=impl)
    model.train()
    if checkpointing == "full":
        # transformers 5.24 renamed gradient_checkpointing_enable (now a deprecated alias)
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": True})
    if lora:
        add_lora(model, *lora)
    gen = torch.Generator().manual_seed(1234)
    ids = torch.randint(0, tiny_config.vocab_size, (batch, seq), generator=gen)
    with fused_kernels(model) if kernels == "fused" else native_dropout():
        saved, out = saved_for_backward(model, input_ids=ids, labels=ids, use_cache=False)
    if backward:
        out.loss.backward()
    return {"saved": saved, "tiny_config": info["tiny_config"], "loss": float(out.loss.detach())}
