"""vLLM's cache as its specs and groups hold it: one layer's ``Spec`` (kind, page, window,
the pages a request holds) and a stage's ``KVLayout`` (block size, groups, the pool's blocks,
token and concurrency lines). ``kvspec`` builds them from a config; ``kvunify`` evens pages."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .engine_terms import Version


@dataclass(frozen=True)
class Spec:
    """One layer's cache as vLLM specifies it."""

    kind: str  # full | sliding | chunked | mla | mamba
    page_bytes: int  # one block of this layer
    window: int | None = None  # sliding window / attention chunk, tokens
    pages: int = 1  # mamba: the pages one request holds (align mode: 2 + checkpoint blocks)
    block: int = 0  # its own block once vLLM raised it to even the pages (0: the layout's)
    padded: int = 0  # the page it had before vLLM padded it to the largest (0: not padded)

    def blocks_per_request(self, block: int, max_model_len: int, batched_tokens: int) -> int:
        """Blocks one request at ``max_model_len`` needs (``max_memory_usage_bytes / page``), at
        its own block size where vLLM raised it; ``batched_tokens``: the tokens in flight a
        sliding window or attention chunk reserves for."""
        block = self.block or block
        if self.kind == "mamba":
            return self.pages
        if self.kind == "sliding" and self.window:
            return math.ceil(min(self.window - 1 + batched_tokens, max_model_len) / block) + 1
        if self.kind == "chunked" and self.window:
            return math.ceil(min(self.window + batched_tokens, max_model_len) / block)
        return math.ceil(max_model_len / block)


@dataclass(frozen=True)
class KVLayout:
    """vLLM's cache layout for one pipeline stage of one rank."""

    block_size: int
    specs: tuple[Spec, ...]  # one per layer that holds cache
    group_size: int
    groups: tuple[tuple[int, int], ...]  # (index into kinds, layers in the group)
    kinds: tuple[Spec, ...]  # distinct specs
    block_note: str
    padded_layers: int = 0
    # vLLM's mamba block size where the recurrent layers export prefill checkpoints (align mode:
    # the attention block, get_mamba_prefill_checkpoint_grid), else None
    checkpoint_grid: int | None = None

    @property
    def page(self) -> int:
        return self.kinds[0].page_bytes if self.kinds else 0

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    def num_blocks(self, available: float) -> int:
        """Blocks the pool gets from ``available`` bytes (0 when nothing caches)."""
        if not self.kinds or available <= 0:
            return 0
        if self.num_groups == 1:  # one type: each layer its own page (a uniform-type group)
            return int(available // sum(s.page_bytes for s in self.specs))
        return int(available // self.page // self.group_size)

    def bytes_per_token(self) -> float:
        """Pool bytes one cached token takes when every layer pays a page (the token line)."""
        if self.num_groups == 1:
            return sum(s.page_bytes for s in self.specs) / self.block_size
        return self.page * self.group_size * self.num_groups / self.block_size if self.kinds else 0.0

    def blocks_per_request(self, max_model_len: int, batched_tokens: int) -> int:
        return sum(
            self.kinds[k].blocks_per_request(self.block_size, max_model_len, batched_tokens)
            for k, _ in self.groups
        )

    def needed_bytes(self, max_model_len: int, batched_tokens: int) -> int:
        """``check_enough_kv_cache_memory``: Σ over layers of one request's blocks × page."""
        return sum(
            s.blocks_per_request(self.block_size, max_model_len, batched_tokens) * s.page_bytes
            for s in self.specs
        )

    def tokens_line(self, blocks: int, concurrency: float, max_model_len: int, version: Version) -> int:
        """What vLLM logs as the pool's size in tokens (``# GPU blocks`` × block before 0.8)."""
        if not self.kinds:
            return 0
        if version.v1 and version >= (0, 20, 1):  # _report_kv_cache_config, from 0.20.1
            return int(concurrency * max_model_len)
        if version.v1 and version >= (0, 8) and self.num_groups > 1:
            return blocks // self.num_groups * self.block_size
        return blocks * self.block_size

    def concurrency(self, blocks: int, max_model_len: int, batched_tokens: int, version: Version) -> float:
        if not self.kinds:
            return 0.0
        if not version.v1 or version < (0, 8):
            return blocks * self.block_size / max_model_len
        return blocks / self.blocks_per_request(max_model_len, batched_tokens)

    def max_model_len(self, available: float, batched_tokens: int, limit: int) -> int:
        """``estimate_max_model_len``: the longest request the pool holds (binary search)."""
        lo, hi = 0, limit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.needed_bytes(mid, batched_tokens) <= available:
                lo = mid
            else:
                hi = mid - 1
        return lo
