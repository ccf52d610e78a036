"""Weights, gradients, fp32 master weights and optimizer state, with LoRA and ZeRO sharding.

Convention (ZeRO paper, Rajbhandari et al. 2020, and Megatron-LM's bf16 training): the model
runs in the training dtype (weights and gradients b bytes per parameter); with bf16/fp16
the optimizer holds an fp32 master copy of every trainable weight beside its moments, so
mixed-precision AdamW costs 2 + 2 + 4 + 8 = 16 bytes per trainable parameter. fp32 training
has no master copy (4 + 4 + 8). ZeRO-1 shards the optimizer state (master included) over the
data-parallel GPUs, ZeRO-2 the gradients too, ZeRO-3 the weights too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..cost.inventory.tensor import Tensor
from ..cost.params import ParamCount
from .setup import DTYPES, TrainSetup

# LoRA target → the inventory parts (cost.inventory) whose linear tensors it wraps
LORA_PARTS: dict[str, tuple[str, ...]] = {
    "q": ("attention/q", "attention/q_a", "attention/q_b", "attention/qkv"),
    "k": ("attention/k", "attention/kv_a", "attention/kv_b", "attention/qkv"),
    "v": ("attention/v", "attention/kv_a", "attention/kv_b", "attention/qkv"),
    "o": ("attention/o",),
    "gate": ("ffn/gate", "shared_experts/gate"),
    "up": ("ffn/up", "shared_experts/up"),
    "down": ("ffn/down", "shared_experts/down"),
    "experts": ("experts/gate", "experts/up", "experts/down"),
    "router": ("router/weight",),
}

ADAM8_MIN_SIZE = 4096  # bitsandbytes' min_8bit_size: smaller tensors keep fp32 moments
ADAM8_BLOCK = 2048  # one fp32 absmax per block, per moment


@dataclass(frozen=True)
class States:
    """Bytes of the model state, all data-parallel replicas' worth (``*_per_gpu`` after ZeRO)."""

    params: int  # the base model
    trainable: int  # what the optimizer updates (LoRA: the adapters only)
    lora_params: int
    weights: int
    gradients: int
    master: int  # fp32 copy of the trainable weights (mixed precision only)
    optimizer: int  # moments (without the master copy)
    weights_per_gpu: float
    gradients_per_gpu: float
    master_per_gpu: float
    optimizer_per_gpu: float
    gathered_per_gpu: float  # ZeRO-3: one unit's weights gathered at a time

    @property
    def per_gpu(self) -> float:
        return (
            self.weights_per_gpu
            + self.gradients_per_gpu
            + self.master_per_gpu
            + self.optimizer_per_gpu
            + self.gathered_per_gpu
        )


def lora_tensors(tensors: tuple[Tensor, ...], targets: tuple[str, ...], rank: int) -> list[Tensor]:
    """The adapters' A (r × in) and B (out × r) matrices for every wrapped linear tensor."""
    parts = {p for t in targets for p in LORA_PARTS[t]}
    out = []
    for t in tensors:
        if t.part in parts and t.kind == "linear":
            out.append(
                Tensor(f"lora/{t.part}.A", "lora", rank, t.cols, t.count, "linear", t.module, t.routed)
            )
            out.append(
                Tensor(f"lora/{t.part}.B", "lora", t.rows, rank, t.count, "linear", t.module, t.routed)
            )
    return out


def optimizer_bytes(tensors: list[Tensor] | tuple[Tensor, ...], optimizer: str) -> int:
    """Optimizer moments of these (trainable) tensors, master copy excluded."""
    total = 0
    for t in tensors:
        n = t.rows * t.cols
        if optimizer == "adamw":
            per = 8 * n
        elif optimizer == "adamw-8bit":
            per = 8 * n if n < ADAM8_MIN_SIZE else 2 * n + 2 * 4 * math.ceil(n / ADAM8_BLOCK)
        elif optimizer == "sgd-momentum":
            per = 4 * n
        else:  # sgd without momentum keeps nothing
            per = 0
        total += per * t.count
    return total


def _gathered_unit(params: ParamCount, layers: int) -> int:
    """ZeRO-3 gathers one wrapped unit at a time: an average decoder layer, or the embedding
    table / LM head when larger (parameters)."""
    outside = {"embedding", "position", "head", "vision", "connector", "audio"}
    inner = sum(t.params for t in params.tensors if t.slot not in outside and t.part != "norms/final")
    big = max((t.rows * t.cols for t in params.tensors if t.slot in ("embedding", "head")), default=0)
    return max(inner // max(layers, 1), big)


def states(params: ParamCount, setup: TrainSetup, layers: int) -> States:
    b = DTYPES[setup.dtype]
    adapters = lora_tensors(params.tensors, setup.lora_targets, setup.lora_rank) if setup.lora else []
    lora = sum(t.params for t in adapters)
    trainable_tensors = adapters if setup.lora else list(params.tensors)
    trainable = sum(t.params for t in trainable_tensors)
    weights = (params.total + lora) * b
    gradients = trainable * b
    master = trainable * 4 if setup.mixed_precision else 0
    optimizer = optimizer_bytes(trainable_tensors, setup.optimizer)
    n = setup.gpus
    z = setup.zero
    gathered = _gathered_unit(params, layers) * b if z == 3 and n > 1 else 0
    return States(
        params=params.total,
        trainable=trainable,
        lora_params=lora,
        weights=weights,
        gradients=gradients,
        master=master,
        optimizer=optimizer,
        weights_per_gpu=weights / n if z >= 3 else weights,
        gradients_per_gpu=gradients / n if z >= 2 else gradients,
        master_per_gpu=master / n if z >= 1 else master,
        optimizer_per_gpu=optimizer / n if z >= 1 else optimizer,
        gathered_per_gpu=gathered,
    )
