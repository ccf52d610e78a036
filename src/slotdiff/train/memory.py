"""The memory of one training step per GPU, from the config alone: weights, gradients,
optimizer state (fp32 master weights included), activations by layer kind, and whether it
fits the GPU. docs/TRAINING.md has the accounting."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..cost.layout import Layout
from ..cost.memory import MemoryPlan
from ..cost.params import count
from ..cost.weights import effective_format
from ..cost.workload import gpu
from ..schema.arch import Architecture
from .activations import Activations, activations
from .setup import Dropout, TrainSetup
from .states import States, states


@dataclass(frozen=True)
class TrainMemory:
    model: str
    model_type: str
    setup: TrainSetup
    dropout: Dropout
    states: States
    activations: Activations
    gpu_name: str
    memory_per_gpu: int
    assumptions: tuple[str, ...]
    model_share: float = 1.0  # the fullest stage's share of the weights on one GPU (TP × PP)
    activation_share: float = 1.0  # 1/TP (sequence parallelism)

    @property
    def total_per_gpu(self) -> float:
        return self.states.per_gpu + self.activations.peak * self.activation_share

    @property
    def usable_per_gpu(self) -> float:
        return self.memory_per_gpu * (1 - self.setup.reserve)

    @property
    def fits(self) -> bool:
        return self.total_per_gpu <= self.usable_per_gpu

    def to_dict(self) -> dict[str, Any]:
        s, a = self.states, self.activations
        return {
            "schema_version": 1,
            "model": self.model,
            "model_type": self.model_type,
            "setup": self.setup.to_dict(),
            "dropout": self.dropout.to_dict(),
            "params": {"total": s.params, "trainable": s.trainable, "lora": s.lora_params},
            "state_bytes": {
                "weights": s.weights,
                "gradients": s.gradients,
                "master_weights": s.master,
                "optimizer": s.optimizer,
            },
            "state_bytes_per_gpu": {
                "weights": s.weights_per_gpu,
                "gradients": s.gradients_per_gpu,
                "master_weights": s.master_per_gpu,
                "optimizer": s.optimizer_per_gpu,
                "zero3_gathered": s.gathered_per_gpu,
            },
            "activations": {
                "saved_bytes": a.total,
                "by_kind": a.by_kind(),
                "recompute_bytes": a.recompute,
                "loss_transient_bytes": a.loss_transient,
                "peak_bytes": a.peak,
                "layers": [
                    {
                        "design": g.label,
                        "count": g.count,
                        "bytes_per_layer": g.bytes_per_layer,
                        "bytes_per_layer_without_recompute": g.full_bytes_per_layer,
                    }
                    for g in a.layers
                ],
                "tensors": [r.to_dict() for r in a.rows],
            },
            "per_gpu": {
                "model_share": self.model_share,
                "activation_share": self.activation_share,
                "total_bytes": self.total_per_gpu,
                "memory_bytes": self.memory_per_gpu,
                "usable_bytes": self.usable_per_gpu,
                "fits": self.fits,
            },
            "gpu_name": self.gpu_name,
            "assumptions": list(self.assumptions),
        }


def _assumptions(arch: Architecture, setup: TrainSetup, dropout: Dropout) -> list[str]:
    b = setup.dtype
    out = [
        f"weights and gradients in {b}"
        + (", an fp32 master copy of the trainable weights in the optimizer" if setup.mixed_precision else "")
        + f"; activations saved in {b} (norm statistics, softmax logsumexp, router probabilities "
        "and the loss's log-softmax in fp32)",
        f"--batch {setup.batch} is each GPU's micro-batch; activations are not sharded by ZeRO",
        *(
            [
                f"TP={setup.tp} × PP={setup.pp}: each GPU holds the fullest stage's share of the weights, "
                "gradients and optimizer state as serving splits them (cost/layout.py), ZeRO then shards "
                "over the data-parallel GPUs; sequence parallelism divides the saved activations by TP; "
                "1F1B's first stage keeps PP micro-batches of its 1/PP of the layers (no reduction)"
            ]
            if setup.tp > 1 or setup.pp > 1
            else []
        ),
        "totals sum weights, gradients, optimizer state and the activation peak "
        "(saved tensors + the larger of the loss's transient logits and the recomputed layer)",
        f"not counted: CUDA context, allocator fragmentation, communication buckets "
        f"(a {setup.reserve:.0%} reserve is kept for them)",
    ]
    if setup.kernels == "fused":
        out.append(
            "fused kernels: norms keep their input and fp32 rstd, activations their input, "
            "the softmax its output in the training dtype, dropout a 1-byte mask"
        )
    else:
        out.append(
            "transformers' PyTorch modules as written: RMSNorm keeps an fp32 copy of its input and the "
            "normalized tensor, eager softmax an fp32 copy"
        )
    if setup.flash:
        out.append("flash attention: q, k, v, output and logsumexp, no s × s matrix")
        if setup.checkpointing == "selective":
            out.append(
                "selective recomputation drops only the s × s terms, which flash attention never keeps"
            )
    elif setup.checkpointing == "selective":
        out.append("no flash attention, but selective recomputation rebuilds the s × s softmax from q, k, v")
    else:
        masks = " (and the dropout mask and dropped copy)" if dropout.attention > 0 else ""
        out.append(f"no flash attention: the s × s softmax probabilities of every head are kept{masks}")
    if setup.lora:
        out.append(
            f"LoRA rank {setup.lora_rank} on {', '.join(setup.lora_targets)}; base weights frozen in {b} "
            "(no gradients or optimizer state); a frozen matmul keeps no input, elementwise ops "
            "still keep theirs"
        )
    if not any(dropout.to_dict()[k] for k in ("attention", "residual", "embedding")):
        out.append("no dropout in the config, so no dropout masks")
    if arch.vision:
        out.append("vision tower: its weights and state are counted, its activations are not")
    if arch.get("mtp_layers"):
        out.append("MTP modules are not counted (transformers does not build them)")
    if arch.get("quantization_config"):
        out.append(f"the checkpoint is quantized; training is priced with its weights in {b}")
    return out


def train_memory(arch: Architecture, setup: TrainSetup, dropout: Dropout | None = None) -> TrainMemory:
    """Price one training step of ``arch`` under ``setup`` per GPU."""
    dropout = dropout or Dropout()
    params = count(arch)
    acts = activations(arch, setup, dropout)
    st = states(params, setup, len(arch.layers))
    device = gpu(setup.gpu)
    share = 1.0
    if setup.tp > 1 or setup.pp > 1:
        # the layout's fullest stage, as the serving commands split the same tensors
        plan = MemoryPlan(arch, replace(effective_format(arch, None)[0], base_dtype="bfloat16"), "bfloat16")
        held = max(w + e for w, e, _, _ in plan.stages(Layout(setup.tp, setup.pp), 1))
        whole = sum(w + e for w, e, _, _ in plan.stages(Layout(), 1))
        share = held / whole if whole else 1.0
        st = replace(
            st,
            weights_per_gpu=st.weights_per_gpu * share,
            gradients_per_gpu=st.gradients_per_gpu * share,
            master_per_gpu=st.master_per_gpu * share,
            optimizer_per_gpu=st.optimizer_per_gpu * share,
            gathered_per_gpu=st.gathered_per_gpu * share,
        )
    return TrainMemory(
        model=arch.name,
        model_type=arch.model_type,
        setup=setup,
        dropout=dropout,
        states=st,
        activations=acts,
        gpu_name=device.name,
        memory_per_gpu=device.memory_bytes,
        assumptions=tuple(_assumptions(arch, setup, dropout)),
        model_share=share,
        activation_share=1 / setup.tp,
    )
