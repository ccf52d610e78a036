"""Parameter tensors of an architecture, one entry per kind of tensor, from the config alone.

The list is an ordered breakdown with slash-named parts (``attention/q``, ``experts/up``)
in the manner of nanoGPT's sizing notebook: totals are sums of named parts, every part is
a whole tensor shape times a count, so weight bytes (with quantization block scales) and
per-token FLOPs can be computed from the same list. Mixer kinds (softmax attention, MLA,
linear attention, Mamba) each have their own tensor set; facts that differ by family
(biases, norms, fused projections, gates) come from the key map's model_type files.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.errors import SlotdiffError
from ..schema.arch import Architecture
from .inventory.decoder import tensors
from .inventory.mtp import mtp_tensors
from .inventory.tensor import PARTS, Tensor, Unsupported
from .inventory.towers import audio_counted, extra_config_keys, vision_inactive, vision_tensors


@dataclass(frozen=True)
class ParamCount:
    """Parameter totals and the breakdown by slot part."""

    total: int  # what transformers instantiates (MTP modules excluded)
    active: int  # per token: routed experts at top_k / n_experts
    by_part: tuple[tuple[str, int], ...]
    mtp: int | None  # MTP modules, counted separately; None when their structure is not known

    tensors: tuple[Tensor, ...]
    embedding_lookup: int = 0  # embedding-table params a token only gathers (0 when tied to the head)
    # Parts of the model left out of every figure, each with why (a tower slotdiff has no
    # data for): the figures are the rest of the model's, and say so.
    excluded: tuple[str, ...] = ()
    # Weights that weight-tied layers run again: in the FLOPs, not in any count above.
    reused: tuple[Tensor, ...] = ()
    # Zero-compute (identity) experts among the router's choices (LongCat-Flash): ``active``
    # takes all top_k picks to be computing experts, the most a token can use.
    active_is_maximum: bool = False

    @property
    def active_without_embedding(self) -> int:
        """Active parameters less the gathered embedding table: what most model cards quote
        as "activated" (gpt-oss, DeepSeek, Llama 4, Kimi); Qwen's cards count the table."""
        return self.active - self.embedding_lookup

    def part(self, name: str) -> int:
        return dict(self.by_part).get(name, 0)


def active_fraction(arch: Architecture) -> float:
    """Share of routed-expert weights one token uses: top_k / n_experts."""
    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    return k / e if e else 1.0


def count(arch: Architecture, mtp_of: tuple[Tensor, ...] | None = None) -> ParamCount:
    """Count parameters exactly (total, active, by part) from the config alone.

    ``mtp_of``: ``mtp_tensors(arch)`` when the caller already has them (the cost pass).
    """
    refused = arch.v("unsupported")
    if refused.value:
        raise Unsupported(arch.name, f"cannot count parameters: {refused.value}", key=arch.key("unsupported"))

    e, k = arch.get("n_experts") or 0, arch.get("top_k") or 0
    if e and k > e and any(s.ffn == "moe" or s.ffn2 == "moe" for s in arch.layers):
        # No router picks more experts than exist; pricing it would report active > total.
        raise SlotdiffError(
            arch.name, f"routes each token to {k} experts but there are only {e}", key=arch.key("top_k")
        )
    excluded: list[str] = []
    counted_audio = False
    tower_idle = 0
    try:
        tower = vision_tensors(arch)
        tower_idle = vision_inactive(arch)
        counted_audio = audio_counted(arch)
    except Unsupported as err:  # the text decoder's figures still stand
        tower = ()
        excluded.append(f"the vision tower ({_tower_name(arch)}): {err.reason}")
    # An audio encoder the composite's data counts (an `audio` entry, or an extra tower read
    # from the audio config) is in ``tower`` already; any other is named as excluded.
    if arch.audio is not None and not (counted_audio or (tower and arch.audio[0] in extra_config_keys(arch))):
        key, audio_type = arch.audio
        excluded.append(f"the audio tower ({audio_type or key}): slotdiff has no data for audio encoders")
    built = tensors(arch)
    reused = tuple(t for t in built if t.reused)
    ts = (tuple(t for t in built if not t.reused) if reused else built) + tower
    by: dict[str, int] = {p: 0 for p in PARTS}
    for t in ts:
        by[t.slot] = by.get(t.slot, 0) + t.params
    total = sum(by.values())
    routed = sum(t.params for t in ts if t.routed)
    active = total - routed + (routed * k // e if e else 0) - tower_idle
    mtp: int | None = sum(t.params for t in (mtp_tensors(arch) if mtp_of is None else mtp_of))
    if (arch.get("mtp_layers") or 0) and arch.get("mtp_style") != "deepseek":
        mtp = None  # the config names MTP modules but not their tensors
    lookup = 0 if arch.get("tie_embeddings") else sum(t.params for t in ts if t.part == "embedding/tokens")
    maximum = bool(arch.get("n_zero_experts")) and bool(arch.get("top_k"))
    return ParamCount(
        total,
        active,
        tuple((p, v) for p, v in by.items() if v),
        mtp,
        ts,
        lookup,
        tuple(excluded),
        reused,
        maximum,
    )


def _tower_name(arch: Architecture) -> str:
    vis = arch.vision or {}
    value = vis.get("model_type")
    return str(value.value) if value is not None and value.value else "vision_config"
