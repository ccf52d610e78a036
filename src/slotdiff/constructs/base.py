"""What a sequence-mixing mechanism answers for the stages above: the one interface every
construct module implements, so cost/, train/, slots/ and deploy/ ask a construct, never
branch on a mixer's name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..schema.arch import Architecture, LayerSpec
from .saved import Conventions, Saved
from .tensor import Builder


class Evidence(Protocol):
    """The slot stage's evidence collector (slots/fill.Collector), as a construct uses it."""

    def use(self, name: str) -> Any: ...

    def fill(
        self,
        facet: str,
        kind: str,
        detail: str,
        attrs: dict[str, Any] | None = None,
        sizes: dict[str, Any] | None = None,
    ) -> Any: ...


class Construct:
    """A sequence-mixing mechanism: its tensors, its KV cache or recurrent state, its FLOPs,
    what training keeps for backward and how the slot table names it. Subclasses override
    what differs; a recurrent one (``softmax = False``) answers only the state and tensor hooks."""

    name = ""  # the LayerSpec.mixer that selects it
    plain = False  # plain softmax attention (per-head K and V), what the counterfactuals turn others into
    softmax = True  # softmax attention over a KV cache; False: a recurrence with a fixed state
    recurrent_heads = False  # its linear / SSM heads are what tensor parallelism splits
    ssm = False  # a state-space model (Mamba), not linear attention or a convolution
    cross = False  # attends to another modality's states (no cache of its own tokens)
    label = ""  # how tables name a layer of it ("MLA")
    # The cache has no heads to split: every tensor-parallel rank holds all of it (MLA's latent).
    latent_kv = False
    # transformers runs decode in another form than engines do (FlopsCost reports it beside).
    transformers_form = False
    # vLLM's KV-cache spec kind for a full-range layer (kvspec); a recurrent state's page kind
    # ("mamba"), None where vLLM keeps none.
    vllm_kind: str | None = "full"

    # What the cost report notes about a model with such layers ("" none).
    price_note = ""

    @property
    def recurrent(self) -> bool:
        """A recurrence with a fixed state per sequence instead of a KV cache."""
        return not self.softmax and not self.cross

    def kv_kind(self, layer: LayerSpec) -> str:
        """The KVCost.by_kind bucket of a layer: its range (full, sliding, chunked)."""
        return "sliding" if layer.window else "chunked" if layer.chunk else "full"

    def kv_elements(self, arch: Architecture, layer: LayerSpec) -> int:
        """Elements the mixer caches per token on a layer with its own K/V."""
        raise NotImplementedError

    def mixer_state(self, arch: Architecture, variant: str | None) -> tuple[int, int]:
        """A recurrent mixer's fixed state per sequence for ``variant``: (in the state dtype, in
        the model dtype); none for softmax attention."""
        return 0, 0

    def state_elements(self, arch: Architecture, layer: LayerSpec) -> tuple[int, int]:
        """Fixed per-sequence state of a layer: (in the state dtype, in the model dtype)."""
        return self.mixer_state(arch, layer.variant)

    def vllm_state_page(
        self, arch: Architecture, layer: LayerSpec, tp: int, conv_bytes: float, state_bytes: float
    ) -> float:
        """A recurrent layer's state on a TP rank: the one page vLLM keeps for it."""
        raise NotImplementedError

    def vllm_checkpoint_blocks(
        self, arch: Architecture, layer: LayerSpec, version: tuple[int, ...]
    ) -> int | None:
        """Extra pages a request holds for a recurrent layer's prefill checkpoints in vLLM's
        align mode (``MambaSpec.num_prefill_checkpoint_blocks``): 0 where the layer exports
        none, None where it depends on the kernel vLLM picks at run time (not modelled)."""
        return 0

    def vllm_checkpoint_alignment(
        self, arch: Architecture, layer: LayerSpec, version: tuple[int, ...], chip: str | None
    ) -> int | None:
        """The token alignment a recurrent layer declares for the prefill checkpoints it exports
        in vLLM's align mode (``MambaBase.get_prefill_checkpoint_alignment``) on a GPU of
        architecture ``chip``: None where it declares none (vLLM's default)."""
        return None

    def sglang_state(self, arch: Architecture, layer: LayerSpec, tp: int) -> tuple[int, int] | None:
        """A recurrent layer's state on a TP rank as SGLang shapes it (``configs/mamba_utils``):
        (convolution-window elements, kept in bf16; temporal-state elements, kept in
        ``--mamba-ssm-dtype``); None where SGLang has no state shape for it."""
        return None

    def shared_kv_elements(self, arch: Architecture, layer: LayerSpec) -> int:
        """Elements cached per token on a layer that reads an earlier layer's K/V."""
        return 0

    def selected_read(self, arch: Architecture, layer: LayerSpec, elems: int, span: int) -> int | None:
        """Elements one decode step reads of a layer's cache when it reads fewer than the span
        holds (a top-k selection); None: it reads all ``elems × span``."""
        return None

    def qk_v_dims(self, arch: Architecture, layer: LayerSpec, absorbed: bool) -> tuple[int, int, int]:
        """(heads, q·k width, v width) of the score and mix products."""
        raise NotImplementedError

    def reexpand_flops(self, arch: Architecture, layer: LayerSpec, keys: int) -> int:
        """FLOPs transformers' form spends on top of the decompressed one per decode token."""
        return 0

    def rope_dim(self, arch: Architecture) -> int | None:
        """The rotated width per head, where the mechanism fixes it (None: the model's)."""
        return None

    def tensors(self, b: Builder, n: int, layer: LayerSpec) -> None:
        """Add the tensors of ``n`` mixers shaped like ``layer`` to ``b``."""
        raise NotImplementedError

    def unmodeled(self, spec: LayerSpec) -> str | None:
        """What of this layer training's activation model does not cover (None: all of it)."""
        return None

    def saved(self, arch: Architecture, spec: LayerSpec, c: Conventions) -> list[Saved]:
        """What the mixer keeps for backward in training, per token."""
        raise NotImplementedError

    def lora_matrices(self, arch: Architecture, targets: frozenset[str]) -> list[tuple[str, int]]:
        """(target, matrices per token) LoRA adapters wrap on the mixer's input side."""
        raise NotImplementedError

    def qk_width(self, arch: Architecture) -> int | None:
        """The width q·k runs over, for the score-scaling fill (None: the head_dim's)."""
        return None

    def short(self, fill: Any) -> str:
        """The fingerprint's short name of its attention.kv fill ("MLA 512+64")."""
        return self.label

    def engine_token_elements(self, arch: Architecture) -> int | None:
        """Elements per token an engine's pool (vLLM, SGLang) caches for a layer, where the
        mechanism fixes it whatever the TP degree; None: per KV head, split by TP."""
        return None

    def vllm_token_bytes(self, arch: Architecture, layer: LayerSpec, b: float) -> float:
        """Bytes per token of a layer's page in vLLM at ``b`` bytes per element (latent caches)."""
        raise NotImplementedError

    def tp_note(self, tp: int) -> str:
        """The fit's note on a latent cache that ``tp`` tensor-parallel ranks each hold whole."""
        raise NotImplementedError

    def profile_width(self, arch: Architecture, tp: int) -> float | None:
        """Activation width per token of the layer in vLLM's profile run on one of ``tp`` ranks
        (None: per-head softmax attention's)."""
        return None

    def as_attention(self, arch: Architecture, g: int) -> dict[str, Any]:
        """Canonical fields that turn the mechanism into plain attention with ``g`` KV heads
        (the attention.kv counterfactual)."""
        raise NotImplementedError

    def kv_fill(self, ev: Evidence, attn: Sequence[LayerSpec]) -> Any:
        """The attention.kv facet's fill for layers ``attn`` (the first one's mechanism)."""
        raise NotImplementedError
