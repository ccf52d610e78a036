"""Activation memory of one training step: the saved tensors of every layer, the embedding
and the loss, after recomputation and LoRA freezing, priced at the batch and context."""

from __future__ import annotations

from dataclasses import dataclass

from ..constructs import construct
from ..schema.arch import Architecture, LayerSpec
from .saved import (
    ROUTER_FP32_TYPES,
    Conventions,
    Saved,
    layer,
    norm,
)
from .setup import DTYPES, Dropout, TrainSetup

# Weight groups a saved tensor may be kept for (Saved.needs); all trainable in full fine-tuning.
ALL_GROUPS = frozenset(
    {"q", "k", "v", "o", "gate", "up", "down", "experts", "router", "norm", "embedding", "position", "head"}
)
KINDS = ("embedding", "norm", "attention", "mlp", "moe", "lora", "checkpoint", "logits")


@dataclass(frozen=True)
class Row:
    """One saved tensor of a layer design (or of the model), times the layers that have it."""

    saved: Saved
    layers: int  # 0 for the embedding and the loss (outside the decoder layers)
    bytes: int  # all layers together, at the batch and context

    def to_dict(self) -> dict[str, object]:
        s = self.saved
        return {
            "kind": s.kind,
            "name": s.name,
            "dtype": s.dtype,
            "elements_per_token": s.per_token,
            "elements_per_token_per_key": s.per_key,
            "per_sequence": s.batched,
            "layers": self.layers,
            "only_for_weights": sorted(s.needs),
            "bytes": self.bytes,
        }


@dataclass(frozen=True)
class LayerGroup:
    """Layers of one design: how many, and the bytes one of them keeps."""

    label: str
    count: int
    bytes_per_layer: int  # as kept (after recomputation)
    full_bytes_per_layer: int  # with nothing recomputed: what its backward's recompute rebuilds


@dataclass(frozen=True)
class Activations:
    rows: tuple[Row, ...]
    layers: tuple[LayerGroup, ...]
    total: int  # kept from the end of the forward to the backward
    recompute: int  # full checkpointing: one layer rebuilt during its backward (transient)
    loss_transient: int  # the logits in the training dtype and their fp32 copy, during the loss

    @property
    def peak(self) -> int:
        return self.total + max(self.recompute, self.loss_transient)

    def by_kind(self) -> dict[str, int]:
        out = dict.fromkeys(KINDS, 0)
        for r in self.rows:
            out[r.saved.kind] += r.bytes
        return {k: v for k, v in out.items() if v}


def conventions(arch: Architecture, setup: TrainSetup, dropout: Dropout) -> Conventions:
    return Conventions(
        b=DTYPES[setup.dtype],
        batch=setup.batch,
        dtype=setup.dtype,
        kernels=setup.kernels,
        flash=setup.flash,
        selective=setup.checkpointing == "selective",
        dropout=dropout,
        router_fp32=arch.model_type in ROUTER_FP32_TYPES,
    )


def trainable_groups(setup: TrainSetup) -> frozenset[str]:
    return frozenset(setup.lora_targets) if setup.lora else ALL_GROUPS


def _rope_dim(arch: Architecture) -> int:
    for mech in dict.fromkeys(m for s in arch.layers if (m := construct(s.mixer))):
        fixed = mech.rope_dim(arch)
        if fixed is not None:  # the mechanism fixes the rotated width (MLA's decoupled key)
            return fixed
    hd = arch.get("head_dim") or arch.get("d_model") // arch.get("n_heads")
    return arch.get("rotary_dim") or int(hd * (arch.get("partial_rotary_factor") or 1.0))


def embedding_entries(arch: Architecture, c: Conventions, checkpointing: str) -> list[Saved]:
    d = arch.get("d_model")
    out = [Saved("embedding", "token ids", "int64", 8, 1, needs=frozenset({"embedding"}))]
    if arch.get("position") == "learned":
        out.append(
            Saved("embedding", "position ids", "int64", 8, 1, needs=frozenset({"position"}), batched=False)
        )
    if arch.get("embed_norm"):
        out += norm(arch, "embedding norm", d, 1, c, first=True)
    if c.dropout.embedding > 0:
        out.append(Saved("embedding", "dropout mask on the embeddings", "bool", 1, d, first_input=True))
    rope = _rope_dim(arch) if arch.get("position") == "rope" else 0
    if rope and checkpointing != "full" and any(s.rope for s in arch.layers):
        out.append(Saved("embedding", "RoPE cos and sin tables", c.dtype, c.b, 2 * rope, batched=False))
    return out


def loss_entries(arch: Architecture, c: Conventions) -> list[Saved]:
    d, v = arch.get("d_model"), arch.get("vocab")
    out = norm(arch, "final norm", d, 1, c) if arch.get("final_norm") else []
    if arch.get("final_softcap"):
        out.append(Saved("logits", "tanh of the capped logits (final soft-capping)", c.dtype, c.b, v))
    return [
        *out,
        Saved("logits", "input of the LM head", c.dtype, c.b, d, needs=frozenset({"head"})),
        Saved("logits", "log-softmax of the logits (fp32, kept by the cross-entropy)", "fp32", 4, v),
        Saved("logits", "labels", "int64", 8, 1),
    ]


def adapted_matrices(arch: Architecture, spec: LayerSpec, targets: frozenset[str]) -> list[tuple[str, int]]:
    """(target, matrices per token) a LoRA adapter wraps in this layer: each adds its
    r-wide A output (the B matmul's input) per token it processes."""
    out: list[tuple[str, int]] = []
    mech = construct(spec.mixer)
    if mech and mech.softmax:
        out += mech.lora_matrices(arch, targets)
    if spec.mixer is not None and "o" in targets:
        out.append(("o", 1))
    gated = arch.get("ffn_gated")
    ffn_names = [t for t in (("gate", "up", "down") if gated else ("up", "down")) if t in targets]
    if spec.ffn == "dense":
        out += [(t, 1) for t in ffn_names]
    elif spec.ffn == "moe":
        shared = arch.get("d_ff_shared") or (arch.get("n_shared_experts") or 0)
        if shared:
            out += [(f"shared {t}", 1) for t in ffn_names]
        if "experts" in targets:
            out.append(("experts", (3 if gated else 2) * arch.get("top_k")))
        if "router" in targets:
            out.append(("router", 1))
    return out


def lora_entries(arch: Architecture, spec: LayerSpec, c: Conventions, setup: TrainSetup) -> list[Saved]:
    r = setup.lora_rank or 0
    return [
        Saved("lora", f"LoRA A output ({name}), input of B", c.dtype, c.b, n * r)
        for name, n in adapted_matrices(arch, spec, frozenset(setup.lora_targets))
    ]


def _priced(entries: list[Saved], layers: int, setup: TrainSetup) -> list[Row]:
    n = max(layers, 1)
    return [Row(s, layers, n * s.bytes_at(setup.batch, setup.context)) for s in entries]


def _label(spec: LayerSpec) -> str:
    mech = construct(spec.mixer)
    mixer = mech.label if mech else spec.mixer
    ffn = {"dense": "dense FFN", "moe": "MoE FFN"}.get(spec.ffn or "", spec.ffn)
    return " + ".join(p for p in (mixer, ffn) if p) or "empty"


def activations(arch: Architecture, setup: TrainSetup, dropout: Dropout) -> Activations:
    """What one step keeps for backward, per GPU (its micro-batch of ``setup.batch``)."""
    c = conventions(arch, setup, dropout)
    trainable = trainable_groups(setup)

    def kept(entries: list[Saved], frozen_input: bool = False) -> list[Saved]:
        return [
            s
            for s in entries
            if (not s.needs or s.needs & trainable) and not (frozen_input and s.first_input)
        ]

    frozen_embeddings = "embedding" not in trainable
    rows = _priced(kept(embedding_entries(arch, c, setup.checkpointing), frozen_embeddings), 0, setup)
    groups: list[LayerGroup] = []
    recompute = 0
    first = arch.layers[0] if arch.layers else None
    for spec, count in arch.layer_runs:
        entries = kept(layer(arch, spec, c)) + (lora_entries(arch, spec, c, setup) if setup.lora else [])
        one = sum(s.bytes_at(setup.batch, setup.context) for s in entries)
        has_first = first is not None and spec.index == first.index
        if setup.checkpointing == "full":
            kept_entries = [
                Saved("checkpoint", "layer input (kept by the checkpoint)", c.dtype, c.b, arch.get("d_model"))
            ]
            recompute = max(recompute, one)
            rows += _priced(kept_entries, count, setup)
            groups.append(
                LayerGroup(_label(spec), count, kept_entries[0].bytes_at(setup.batch, setup.context), one)
            )
            continue
        if has_first and frozen_embeddings:
            # the first layer's input does not require grad: its input norm keeps nothing
            later = count - 1
            first_entries = kept(entries, frozen_input=True)
            rows += _priced(first_entries, 1, setup)
            if later:
                rows += _priced(entries, later, setup)
        else:
            rows += _priced(entries, count, setup)
        groups.append(LayerGroup(_label(spec), count, one, one))
    rows += _priced(kept(loss_entries(arch, c)), 0, setup)
    merged: dict[Saved, Row] = {}
    for r in rows:  # one row per tensor (the first layer's may be split off above)
        old = merged.get(r.saved)
        merged[r.saved] = r if old is None else Row(r.saved, old.layers + r.layers, old.bytes + r.bytes)
    rows = [r for r in merged.values() if r.bytes]
    v = arch.get("vocab")
    tokens = setup.batch * setup.context
    transient = tokens * v * (c.b + (4 if c.b < 4 else 0))
    return Activations(tuple(rows), tuple(groups), sum(r.bytes for r in rows), recompute, transient)
