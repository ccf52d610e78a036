"""What a training run is priced for: batch, context, dtype, optimizer, recomputation, LoRA,
ZeRO sharding and the attention kernel, checked once so the accounting can trust them.

docs/TRAINING.md states every convention named here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import UsageError
from ..cost.workload import MAX_BATCH, MAX_CONTEXT, gpu

# --dtype: the training precision (weights, gradients and activations), bytes per element.
DTYPES: Mapping[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}
DTYPE_NAMES: Mapping[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}

# --optimizer: (state bytes per trainable parameter, what the state is)
OPTIMIZERS: Mapping[str, str] = {
    "adamw": "AdamW: first and second moments in fp32 (8 bytes per parameter)",
    "adamw-8bit": (
        "AdamW 8-bit (bitsandbytes, block-wise): both moments as uint8 with one fp32 absmax per "
        "2048 values each (2 + 8/2048 bytes per parameter); tensors under 4096 values keep fp32 moments"
    ),
    "sgd": "SGD without momentum: no state",
    "sgd-momentum": "SGD with momentum: one fp32 buffer (4 bytes per parameter)",
}

CHECKPOINTING = ("none", "selective", "full")
KERNELS = ("fused", "transformers")

# LoRA targets: the projections an adapter may wrap (transformers' module names in brackets)
LORA_TARGETS: Mapping[str, str] = {
    "q": "query projection (q_proj; MLA: q_proj or q_a_proj + q_b_proj)",
    "k": "key projection (k_proj; MLA: kv_a_proj_with_mqa + kv_b_proj, shared with v)",
    "v": "value projection (v_proj; MLA: kv_a_proj_with_mqa + kv_b_proj, shared with k)",
    "o": "attention output projection (o_proj)",
    "gate": "FFN gate projection (gate_proj), dense and shared-expert FFNs",
    "up": "FFN up projection (up_proj / c_fc), dense and shared-expert FFNs",
    "down": "FFN down projection (down_proj / c_proj), dense and shared-expert FFNs",
    "experts": "every routed expert's gate, up and down projections",
    "router": "the MoE router (gate)",
}
LORA_ALIASES: Mapping[str, tuple[str, ...]] = {
    "attention": ("q", "k", "v", "o"),
    "all-linear": ("q", "k", "v", "o", "gate", "up", "down"),
}
DEFAULT_LORA_TARGETS = "all-linear"

MAX_GPUS = 1 << 20
MAX_LORA_RANK = 1 << 20

# Share of each GPU left out of the verdict: the CUDA context, allocator fragmentation and
# communication buckets, none of which the accounting counts.
RESERVE_FRACTION = 0.10


def lora_targets(text: str) -> tuple[str, ...]:
    """``"all-linear"`` / ``"attention"`` / ``"q,v"`` → the target names, in LORA_TARGETS order."""
    names: set[str] = set()
    for part in (p.strip() for p in text.split(",")):
        if part in LORA_ALIASES:
            names.update(LORA_ALIASES[part])
        elif part in LORA_TARGETS:
            names.add(part)
        else:
            choices = ", ".join([*LORA_ALIASES, *LORA_TARGETS])
            raise UsageError(f"--lora-targets: unknown target {part!r}; choose from {choices}")
    return tuple(t for t in LORA_TARGETS if t in names)


@dataclass(frozen=True)
class Dropout:
    """Dropout probabilities the config sets (0.0: no dropout, so no masks)."""

    attention: float = 0.0  # on the softmax probabilities
    residual: float = 0.0  # on each sublayer's output before the residual add
    embedding: float = 0.0  # on the embedding output
    keys: Mapping[str, str] = field(default_factory=dict)  # which config key set each

    def to_dict(self) -> dict[str, Any]:
        return {
            "attention": self.attention,
            "residual": self.residual,
            "embedding": self.embedding,
            "keys": dict(self.keys),
        }


@dataclass(frozen=True)
class TrainSetup:
    """One training step's configuration, per GPU (``batch`` is each GPU's micro-batch)."""

    batch: int = 1
    context: int = 8192
    dtype: str = "bf16"
    optimizer: str = "adamw"
    checkpointing: str = "none"
    flash: bool = True
    kernels: str = "fused"
    lora_rank: int | None = None
    lora_targets: tuple[str, ...] = LORA_ALIASES[DEFAULT_LORA_TARGETS]
    zero: int = 0
    gpus: int = 1  # data-parallel GPUs (ZeRO shards over them)
    gpu: str = "h100-sxm"
    tp: int = 1  # tensor parallel (Megatron-style, with sequence parallelism)
    pp: int = 1  # pipeline stages (1F1B)
    reserve: float = RESERVE_FRACTION

    def __post_init__(self) -> None:
        if not 1 <= self.batch <= MAX_BATCH:
            raise UsageError(f"--batch must be 1..{MAX_BATCH:,}, got {self.batch}")
        if not 1 <= self.context <= MAX_CONTEXT:
            raise UsageError(f"--context must be 1..{MAX_CONTEXT:,}, got {self.context}")
        for name, value, choices in (
            ("--dtype", self.dtype, tuple(DTYPES)),
            ("--optimizer", self.optimizer, tuple(OPTIMIZERS)),
            ("--checkpointing", self.checkpointing, CHECKPOINTING),
            ("--kernels", self.kernels, KERNELS),
        ):
            if value not in choices:
                raise UsageError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        if self.lora_rank is not None and not 1 <= self.lora_rank <= MAX_LORA_RANK:
            raise UsageError(f"--lora-rank must be 1..{MAX_LORA_RANK:,}, got {self.lora_rank}")
        if self.lora_rank is not None and not self.lora_targets:
            raise UsageError("--lora-targets names no projection")
        if self.zero not in (0, 1, 2, 3):
            raise UsageError(f"--zero must be 0, 1, 2 or 3, got {self.zero}")
        if not 1 <= self.gpus <= MAX_GPUS:
            raise UsageError(f"--gpus must be 1..{MAX_GPUS:,}, got {self.gpus}")
        for flag, n in (("--tensor-parallel-size", self.tp), ("--pipeline-parallel-size", self.pp)):
            if not 1 <= n <= MAX_GPUS:
                raise UsageError(f"{flag} must be 1..{MAX_GPUS:,}, got {n}")
        if not 0.0 <= self.reserve < 1.0:
            raise UsageError(f"--reserve must be in [0, 1), got {self.reserve}")
        gpu(self.gpu)

    @property
    def bytes_per_element(self) -> int:
        return DTYPES[self.dtype]

    @property
    def lora(self) -> bool:
        return self.lora_rank is not None

    @property
    def mixed_precision(self) -> bool:
        """bf16/fp16 training keeps an fp32 master copy of the trainable weights."""
        return DTYPES[self.dtype] < 4

    def to_dict(self) -> dict[str, Any]:
        return {
            "batch_per_gpu": self.batch,
            "context": self.context,
            "dtype": self.dtype,
            "optimizer": self.optimizer,
            "optimizer_state": OPTIMIZERS[self.optimizer],
            "checkpointing": self.checkpointing,
            "flash_attention": self.flash,
            "kernels": self.kernels,
            "lora_rank": self.lora_rank,
            "lora_targets": list(self.lora_targets) if self.lora else [],
            "zero_stage": self.zero,
            "gpus": self.gpus,
            "tensor_parallel_size": self.tp,
            "pipeline_parallel_size": self.pp,
            "total_gpus": self.gpus * self.tp * self.pp,
            "gpu": self.gpu,
            "reserve_fraction": self.reserve,
        }
