"""vLLM's page-size unification: how a hybrid whose layer types' pages differ (Gemma-4's sliding
layers, 256-wide heads × 8 KV heads, beside its global layers, 512-wide × 2) is still cut into
groups of one page size, release by release (docs/ENGINES.md, section 3).

``unify_kv_cache_spec_page_size`` (v1/core/kv_cache_utils.py from 0.12, kv_cache_planning.py
from 0.33) keeps the largest page and, for every smaller one that divides it, multiplies that
layer's block size by the ratio, so its page (block · bytes a token) grows to the largest. A
page that does not divide raises NotImplementedError in 0.12-0.23; 0.24-0.28 pad it instead
only where the attention backend indexes pages by block stride (``indexes_kv_by_block_stride``,
backend- and layout-dependent); from 0.29 a non-MLA attention page is padded to the largest
(``page_size_padded``, its block kept). Before 0.12 ``get_kv_cache_groups`` raised
NotImplementedError for any hybrid whose pages differ. The groups then follow as for one page
size (``_get_kv_cache_groups_uniform_page_size``), and each group's blocks per request use its
own block size (``max_memory_usage_bytes`` of the unified spec).

From 0.29 ``_get_packed_kv_cache_groups`` runs first, but only for a block-outermost KV layout;
the CUDA backends Gemma-4 runs on (FlashAttention, Triton) declare none, so the default
preference (LBNHC, layer-outermost) is taken and the unified path above sizes the pool.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..constructs import construct
from ..core.errors import SlotdiffError
from ..schema.arch import Architecture
from .engine_terms import Version, compute_capability
from .kvpages import KVLayout, Spec

PER_HEAD = ("full", "sliding", "chunked")  # vLLM's per-head attention specs, the pages it may pad

if TYPE_CHECKING:
    from ..cost.gpus import GPU


def unify_pages(
    arch: Architecture, kinds: list[Spec], version: Version, tp: int, block: int
) -> dict[Spec, Spec]:
    """Each distinct spec (all at ``block`` tokens) mapped to the spec vLLM ``version`` gives it
    once pages are evened (the identity where they already are); refused with vLLM's reason
    where it cannot even them."""
    pages = {k.page_bytes for k in kinds}
    if len(pages) <= 1:
        return {k: k for k in kinds}
    listed = ", ".join(f"{k.kind} {k.page_bytes:,} B" for k in kinds)
    if version < (0, 12):
        raise SlotdiffError(
            arch.name,
            f"vLLM {version.text} cannot serve it: its layer types' pages differ on a TP={tp} rank "
            f"({listed}) and get_kv_cache_groups raises NotImplementedError (page sizes are evened "
            "from 0.12, unify_kv_cache_spec_page_size)",
        )
    if any(k.kind == "mamba" for k in kinds):
        raise SlotdiffError(
            arch.name,
            f"its attention layer types' pages differ on a TP={tp} rank ({listed}) beside recurrent "
            f"layers: how vLLM {version.text} pads the mamba page to them is not modelled",
        )
    top = max(pages)
    out: dict[Spec, Spec] = {}
    for k in kinds:
        if k.page_bytes == top:
            out[k] = k
        elif top % k.page_bytes == 0:
            out[k] = replace(k, page_bytes=top, block=block * (top // k.page_bytes))
        elif version >= (0, 29) and k.kind in PER_HEAD:
            out[k] = replace(k, page_bytes=top, padded=k.page_bytes)
        else:
            raise SlotdiffError(arch.name, _no_divide(version, k, top, tp))
    return out


def _no_divide(version: Version, k: Spec, top: int, tp: int) -> str:
    """Why vLLM ``version`` cannot even a page that does not divide the largest."""
    head = (
        f"its {k.kind} page ({k.page_bytes:,} B on a TP={tp} rank) does not divide the largest "
        f"({top:,} B), so vLLM {version.text}"
    )
    if k.kind not in PER_HEAD:
        return f"{head} cannot even it by block size, and a latent page is never padded (NotImplementedError)"
    if version >= (0, 24):
        return (
            f"{head} pads it only where the attention backend indexes pages by block stride "
            "(indexes_kv_by_block_stride), which depends on the backend and layout: not modelled"
        )
    return f"{head} raises NotImplementedError (unify_kv_cache_spec_page_size evens pages by block size only)"


def kernel_block_refusal(
    arch: Architecture, version: Version, gpu: GPU, kv_dtype: str, flag: int | None
) -> str | None:
    """Why the default block of a model whose attention layers' head sizes differ (Gemma-4) is
    the kernel's choice, not 16: Gemma4Config (models/config.py) then forces FlashAttention 4 on
    every layer where it is built (else Triton, block 16), and FA4 prefers 128-token pages for a
    model head size of 256 on Blackwell (flash_attn.py ``_get_fa4_hd256_block_size``, from 0.29)
    and 64-token pages for 512-wide heads with an fp8 cache on Hopper
    (``_get_sm90_fa4_fp8_kv_block_size``, from 0.31). Whether FA4 is built cannot be told from
    a config: refused unless --block-size says."""
    sizes = {
        s.head_dim or arch.get("head_dim")
        for s in arch.layers
        if (m := construct(s.mixer)) and m.softmax and not m.latent_kv
    }
    if flag or len(sizes) < 2:
        return None
    cc = compute_capability(gpu)  # a GPU file's Hopper is sm90 whatever its name (cost.gpus)
    fp8 = kv_dtype.startswith("float8")
    if cc is None and gpu.architecture == "blackwell" and version >= (0, 29) and arch.get("head_dim") == 256:
        return (
            f"in vLLM {version.text} its default block size on Blackwell depends on the compute "
            "capability (sm100/sm110 with FlashAttention 4 built: 128-token pages for its 256-wide "
            "heads; sm120 or Triton: 16), which this GPU's file does not state: pass the logged block "
            "size with --block-size"
        )
    if cc and cc[0] in (10, 11) and version >= (0, 29) and arch.get("head_dim") == 256:
        why = "128-token pages for its 256-wide heads on Blackwell"
    elif cc and cc[0] == 9 and fp8 and version >= (0, 31) and 512 in sizes:
        why = "64-token pages for its 512-wide heads with an fp8 cache on Hopper"
    else:
        return None
    return (
        f"in vLLM {version.text} its default block size depends on whether FlashAttention 4 is built "
        f"(it then takes {why}; Triton takes 16), which a config cannot tell: pass the logged "
        "block size with --block-size"
    )


def unified(kv: KVLayout) -> bool:
    """Whether any of the layout's pages were evened (a raised block or a padded page)."""
    return any(s.block or s.padded for s in kv.kinds)


def unify_note(kv: KVLayout, version: Version) -> str | None:
    """One line saying how vLLM evened the pages: each type's block, or the page it was padded from."""
    if not unified(kv):
        return None
    parts = [
        f"{s.kind} padded from {s.padded:,} B"
        if s.padded
        else f"{s.kind} {s.block or kv.block_size}-token blocks"
        for s in kv.kinds
    ]
    return (
        f"vLLM {version.text} evens the layer types' pages to {kv.page:,} B "
        f"(unify_kv_cache_spec_page_size): {', '.join(parts)}"
    )
