"""vLLM's KV-cache layout from a config: per-layer specs, page sizes, the hybrid allocator's
groups, and the token and concurrency lines it logs (docs/SERVING.md, sections 2-3).

Everything here is exact given the config and the engine flags; the memory the pool gets
(``available``) is the estimated part, in ``deploy.engine_terms``.

A page is one block of ``block_size`` tokens for one layer: ``2 · block · kv_heads_per_rank ·
head_size · dtype_bytes`` for softmax attention (kv_heads_per_rank = max(1, g // TP): heads
replicate once TP exceeds them), ``block · (kv_lora_rank + qk_rope_head_dim) · dtype_bytes``
for MLA (one latent, not split by TP), and a mamba/linear-attention layer's whole state in
one page. Layer types form groups of ``group_size`` layers; ``num_blocks = available //
page // group_size``, every layer paying a page per block. Types whose pages differ (Gemma-4's
sliding and global layers) are first evened as vLLM evens them (``kvunify``).
"""

from __future__ import annotations

import math

from ..constructs import construct
from ..constructs.base import Construct
from ..core.errors import SlotdiffError
from ..schema.arch import Architecture, LayerSpec
from ..schema.precision import canonical_dtype, storage_bits
from .engine_terms import Version
from .kvpages import KVLayout, Spec
from .kvunify import unify_pages


def head_size(arch: Architecture, layer: LayerSpec) -> int:
    return (
        layer.head_dim
        or arch.get("head_dim")
        or (arch.get("d_model") or 0) // max(1, arch.get("n_heads") or 1)
    )


def attention_token_bytes(arch: Architecture, layer: LayerSpec, tp: int, kv_bytes: float) -> float:
    """Bytes per token of one softmax layer on one TP rank: 2 · max(1, g // TP) · head_size · b."""
    g = layer.n_kv_heads or arch.get("n_kv_heads") or arch.get("n_heads") or 1
    hv = arch.get("v_head_dim") or head_size(arch, layer)
    return max(1, g // tp) * (head_size(arch, layer) + hv) * kv_bytes


def mamba_page(arch: Architecture, layer: LayerSpec, tp: int, conv_bytes: float, state_bytes: float) -> float:
    """One recurrent layer's state on a TP rank, as its construct sizes vLLM's page (the
    convolution's kernel − 1 inputs per channel and the recurrent state)."""
    mech = construct(layer.mixer)
    return mech.vllm_state_page(arch, layer, tp, conv_bytes, state_bytes) if mech else 0.0


def _group_ratio(version: Version) -> float:
    """How many more layers the largest type may have than the smallest for vLLM to take its
    count as the group size (fewer padding layers) rather than the smallest type's
    (``_get_kv_cache_groups_uniform_page_size``, v1/core/kv_cache_utils.py): never before 0.12
    (the smallest count always), under 1.25× in 0.12-0.17, under 1.5× from 0.18."""
    if version >= (0, 18):
        return 1.5
    if version >= (0, 12):
        return 1.25
    return 1.0


def _align_mode(version: Version, hybrid: bool, prefix_caching: bool) -> bool:
    """Whether vLLM runs ``mamba_cache_mode = "align"``: prefix caching, on for hybrid models by
    default from 0.26 (``ModelConfig.is_prefix_caching_supported``, then
    ``MambaModelConfig.verify_and_update_config``); an attention-free model keeps it off."""
    return hybrid and prefix_caching and version.v1 and version >= (0, 26)


def _checkpoint_grid(
    arch: Architecture, mambas: list[LayerSpec], version: Version, chip: str | None
) -> int | None:
    """The LCM of the recurrent layers' checkpoint alignments, None unless every one declares
    one (``get_mamba_prefill_checkpoint_alignment``: only then do layers export checkpoints)."""
    aligns = []
    for s in mambas:
        mech = construct(s.mixer)
        aligns.append(mech.vllm_checkpoint_alignment(arch, s, version.parts, chip) if mech else None)
    if not aligns or any(a is None for a in aligns):
        return None
    return math.lcm(*(a for a in aligns if a is not None))


def _mamba_pages(
    arch: Architecture,
    layer: LayerSpec,
    version: Version,
    align_mode: bool,
    grid: int | None = None,
    chip: str | None = None,
) -> int:
    """Pages one request holds of a recurrent layer (``MambaSpec.max_memory_usage_bytes``): one,
    or in align mode 2 + its prefill-checkpoint blocks: its own kind's, or one where it declares
    a checkpoint alignment and every recurrent layer does (``grid``; the gated DeltaNet's
    ``get_kv_cache_spec`` from 0.33)."""
    if not align_mode:
        return 1  # mamba_cache_mode "none": one page (--no-enable-prefix-caching too)
    mech = construct(layer.mixer)
    extra = mech.vllm_checkpoint_blocks(arch, layer, version.parts) if mech else 0
    if mech and grid is not None and mech.vllm_checkpoint_alignment(arch, layer, version.parts, chip):
        extra = 1
    if extra is None:
        raise SlotdiffError(
            arch.name,
            f"in vLLM {version.text} its {layer.mixer} layers' prefill-checkpoint blocks (prefix "
            "caching's align mode) depend on the kernel chosen at run time, which is not modelled; "
            "--no-enable-prefix-caching sizes it as vLLM runs without prefix caching",
        )
    return 2 + extra


def _latent(arch: Architecture, layer: LayerSpec) -> Construct | None:
    """The layer's construct where it caches a latent of its own (vLLM's MLA spec), else None."""
    mech = construct(layer.mixer)
    return mech if mech and mech.engine_token_elements(arch) is not None else None


def _hybrid_alignment(version: Version, latent: bool, block: int) -> int:
    """The multiple of tokens vLLM rounds a hybrid model's attention block to when it raises it
    to hold a mamba page (``block`` = the flag's or the backend's default):
    ``HybridAttentionMambaModelConfig.verify_and_update_config`` (models/config.py) to 0.19,
    ``Platform.update_block_size_for_backend`` (platforms/interface.py) from 0.20.

    * 0.10-0.11: 16;
    * 0.12-0.19: 16, 64 for MLA (128 only with --attention-backend CUTLASS_MLA);
    * 0.20 on: the larger of the backend's smallest kernel block and the configured block
      (the flag, else the backend's preferred size), for MLA at least 128 from 0.27.
    """
    if version >= (0, 20):
        return max(16, block, 128 if latent and version >= (0, 27) else 0)
    if version >= (0, 12):
        return 64 if latent else 16
    return 16


def _kind(arch: Architecture, layer: LayerSpec, version: Version, hybrid_manager: bool) -> str | None:
    if layer.kv_shared:
        return None
    mech = construct(layer.mixer)
    if mech and mech.engine_token_elements(arch) is not None:  # a latent cache: its own kind
        return mech.vllm_kind
    if mech and mech.recurrent and mech.vllm_kind:  # a recurrent state in one page
        return mech.vllm_kind if version.v1 else None
    if mech and mech.cross:
        return mech.vllm_kind if not version.v1 else None  # V0 sizes cross-attention layers like any other
    if not (mech and mech.softmax) and layer.shared_block is None:
        return None
    if layer.window and hybrid_manager:
        return "sliding"
    if layer.chunk and hybrid_manager:
        return "chunked"
    return "full"


def _refuse_unpriced_indexers(arch: Architecture, layers: tuple[LayerSpec, ...]) -> None:
    """vLLM keeps a DSA indexer's keys in a cache of their own; slotdiff prices DeepSeek-V3.2's
    (on MLA, ``indexer.vllm_index_bytes``) and refuses the others rather than leave them out."""
    own = [s for s in layers if s.sparse and not s.index_shared]
    if own and arch.get("index_kpool"):
        raise SlotdiffError(
            arch.name,
            "its indexer compresses keys into pools (index_kpool): vLLM's pooled indexer cache "
            "and its tail buffer are not modelled",
        )
    if any((m := construct(s.mixer)) is None or not m.latent_kv for s in own):
        raise SlotdiffError(
            arch.name, "an indexer on softmax attention keeps a key cache in vLLM that is not modelled"
        )


def kv_layout(
    arch: Architecture,
    layers: tuple[LayerSpec, ...],
    tp: int,
    kv_dtype: str,
    version: Version,
    block_size: int | None,
    default_block: int,
    hybrid_manager: bool = True,
    prefix_caching: bool = True,
    chip: str | None = None,
) -> KVLayout:
    """The cache layout of ``layers`` (one pipeline stage) on one TP rank (``prefix_caching``:
    vLLM's default; off, a hybrid's recurrent layers hold one page a request; ``chip``: the
    GPU's architecture, where a layer's prefill kernel depends on it)."""
    b = storage_bits(kv_dtype) / 8
    model_dtype = canonical_dtype(arch.get("dtype")) or "bfloat16"
    conv_b = storage_bits(model_dtype) / 8
    state_b = storage_bits(canonical_dtype(arch.get("ssm_state_dtype")) or model_dtype) / 8
    manager = hybrid_manager and version.v1 and version >= (0, 9)
    _refuse_unpriced_indexers(arch, layers)
    typed = [(k, s) for s in layers if (k := _kind(arch, s, version, manager))]
    attn = [s for k, s in typed if k != "mamba"]
    mambas = [s for k, s in typed if k == "mamba"]
    block = block_size or default_block
    note = f"--block-size {block}" if block_size else f"block size {block} (the default here)"
    align_mode = _align_mode(version, bool(attn), prefix_caching)
    grid = _checkpoint_grid(arch, mambas, version, chip) if align_mode and mambas else None
    if mambas and attn:
        latent = _latent(arch, attn[0])
        if latent:  # an MLA page per token, whatever the TP degree
            per_token = latent.vllm_token_bytes(arch, attn[0], b)
        else:
            per_token = attention_token_bytes(arch, attn[0], tp, b)
        mpage = max(mamba_page(arch, s, tp, conv_b, state_b) for s in mambas)
        if mpage <= 0 or per_token <= 0:  # a size from absent keys: refused, never a 0-token block
            what = "recurrent state" if mpage <= 0 else "attention KV per token"
            raise SlotdiffError(
                arch.name, f"its {what} on a TP={tp} rank sizes to 0 bytes, so vLLM's page cannot be sized"
            )
        align = _hybrid_alignment(version, latent is not None, block)
        if grid:  # align mode: internal prefill checkpoints land on block boundaries
            align = math.lcm(align, grid)
        needed = align * math.ceil(mpage / (align * per_token))
        if needed > block:  # vLLM raises a block too small for a mamba page, even one set by flag
            block = needed
            note = f"attention block size raised to {block} tokens so a page holds a mamba state (as vLLM)"
        if grid:
            note += (
                f"; its recurrent layers export prefill checkpoints on this GPU's prefill kernel: blocks "
                f"aligned to {grid} tokens, one page more a request (align mode, prefix caching)"
            )
    specs: list[Spec] = []
    for k, s in typed:
        mech = construct(s.mixer)
        if mech and k == mech.vllm_kind and mech.engine_token_elements(arch) is not None:
            specs.append(Spec(k, int(block * mech.vllm_token_bytes(arch, s, b))))
        elif k == "mamba":
            specs.append(Spec("mamba", 0))
        else:
            window = s.window if k == "sliding" else s.chunk if k == "chunked" else None
            specs.append(Spec(k, int(block * attention_token_bytes(arch, s, tp, b)), window))
    if mambas:  # the mamba page is padded up to the attention page
        attn_page = max((x.page_bytes for x in specs if x.kind != "mamba"), default=0)
        mpage = int(max(mamba_page(arch, s, tp, conv_b, state_b) for s in mambas))
        held = [_mamba_pages(arch, s, version, align_mode, grid, chip) for k, s in typed if k == "mamba"]
        it = iter(held)
        specs = [
            Spec("mamba", max(attn_page, mpage), pages=next(it)) if x.kind == "mamba" else x for x in specs
        ]
    ckpt = block if grid else None  # mamba_block_size = block_size in align mode
    if any(x.page_bytes <= 0 for x in specs):  # a page from absent keys: refused, never divided by
        zero = next(x.kind for x in specs if x.page_bytes <= 0)
        raise SlotdiffError(
            arch.name,
            f"its {zero} layers' page on a TP={tp} rank sizes to 0 bytes, so vLLM's pool cannot be sized",
        )
    kinds: list[Spec] = []
    members: list[int] = []
    for x in specs:
        if x not in kinds:
            kinds.append(x)
            members.append(0)
        members[kinds.index(x)] += 1
    n = len(specs)
    if len(kinds) <= 1:
        return KVLayout(block, tuple(specs), n, ((0, n),) if n else (), tuple(kinds), note, 0, ckpt)
    if version >= (0, 11) and all(x.window is None and x.kind != "mamba" for x in kinds):
        # One type (FullAttentionSpec and its MLA subclass) whose layers' pages differ: from 0.11
        # vLLM keeps them in one group (UniformTypeKVCacheSpecs), num_blocks = K // Σ pages
        # (kv_cache_utils.get_kv_cache_config_from_groups).
        return KVLayout(block, tuple(specs), n, ((0, n),), tuple(kinds), note, 0, ckpt)
    if len({x.page_bytes for x in kinds}) > 1:  # vLLM evens them (kvunify), or says why not
        even = unify_pages(arch, kinds, version, tp, block)
        specs = [even[x] for x in specs]
        kinds = [even[x] for x in kinds]
    small, large = min(members), max(members)
    size = large if large < small * _group_ratio(version) else small
    groups: list[tuple[int, int]] = []
    padded = 0
    for k, n in enumerate(members):
        whole, rest = divmod(n, size)
        groups += [(k, size)] * whole + ([(k, rest)] if rest else [])
        padded += (size - rest) if rest else 0
    return KVLayout(block, tuple(specs), size, tuple(groups), tuple(kinds), note, padded, ckpt)
