"""SGLang's recurrent-state pool at start-up (``MambaPool`` inside ``HybridReqToTokenPool``),
which ``ModelRunner.profile_max_num_token`` takes out of the rest before the KV token pool is
sized, read from the 0.5.2-0.5.6 wheels (PyPI ``sglang``: ``model_executor/model_runner.py``,
``configs/mamba_utils.py``, ``configs/{qwen3_next,falcon_h1,nemotron_h,kimi_linear}.py``,
``server_args.py``).

One request's state is, over the recurrent layers on a TP rank, the convolution window in
bf16 (``CONV_DTYPE``) plus the temporal state in ``--mamba-ssm-dtype`` (float32 by default,
whatever the config says); each layer's shape is its construct's ``sglang_state``. The pool
holds ``max_mamba_cache_size`` such states:

* fixed (0.5.2-0.5.3 always; 0.5.4-0.5.6 when the radix cache is off, which SGLang forces for
  Falcon-H1 and Nemotron-H, ``mamba2_config``, and for Kimi Linear): ``--max-mamba-cache-size``,
  else ``--max-running-requests``, else 512;
* split (0.5.4-0.5.6, Qwen3-Next with the radix cache on): the state takes
  ``rest × r / (1 + r)`` with ``r = --mamba-full-memory-ratio`` (0.9), ``max_mamba_cache_size
  = that // per request`` (a given ``--max-mamba-cache-size`` is overwritten).

The KV tokens are then ``(rest − max_mamba_cache_size × per request) // cell_size``, the cell
over the full-attention layers only. Speculative decoding's extra states and DP attention's
split are not modelled; a recurrent model SGLang has no mamba-ish config for is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..constructs import construct
from ..core.errors import SlotdiffError
from ..schema.arch import Architecture
from .engine_terms import Version

# model_type → the first release whose ModelRunner sizes its state pool (is_hybrid_gdn in
# 0.5.2-0.5.3, mambaish_config from 0.5.4)
MAMBAISH = {
    "qwen3_next": (0, 5, 2),
    "falcon_h1": (0, 5, 3),
    "nemotron_h": (0, 5, 4),
    "kimi_linear": (0, 5, 5),
}
RATIO_FROM = (0, 5, 4)  # mamba_full_memory_ratio's split, with the radix cache on
READ_THROUGH = (0, 5, 6)  # the newest release whose pool accounting was read
RADIX_OFF = {"falcon_h1", "nemotron_h", "kimi_linear"}  # SGLang disables their radix cache
DEFAULT_SLOTS = 512
SSM_BYTES = {"float32": 4, "bfloat16": 2}
CONV_BYTES = 2  # bf16, CONV_DTYPE


@dataclass(frozen=True)
class StateFlags:
    """The SGLang flags that size the state pool."""

    max_mamba_cache_size: int | None = None
    mamba_ssm_dtype: str = "float32"
    mamba_full_memory_ratio: float = 0.9
    disable_radix_cache: bool = False
    max_running_requests: int | None = None


@dataclass(frozen=True)
class StatePool:
    """The state pool on one rank: its slots, one request's bytes, what it takes, and why."""

    slots: int
    per_request: int
    layers: int
    bytes: float
    how: str
    radix: bool  # the radix cache is on: SGLang admits slots // 3 running requests

    @property
    def max_running(self) -> int:
        """max_num_reqs' cap: slots // MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (3) with the
        radix cache (0.5.4+), slots without it."""
        return self.slots // 3 if self.radix else self.slots


def model_type(arch: Architecture) -> str:
    """The model_type SGLang's config class is picked by (the text model's for a composite)."""
    return arch.model_type


def first_release(arch: Architecture, mt: str) -> tuple[int, ...] | None:
    """The first release that serves ``arch`` with a state pool: Nemotron-H's MoE layers ("E")
    only from 0.5.6 (``configs/nemotron_h.py`` knows M, * and - before)."""
    first = MAMBAISH.get(mt)
    if mt == "nemotron_h" and any(s.ffn == "moe" for s in arch.layers):
        return (0, 5, 6)
    return first


def per_request(arch: Architecture, tp: int, ssm_dtype: str) -> tuple[int, int]:
    """(bytes of one request's state on a TP rank, recurrent layers): ``mamba_cache_per_req``."""
    ssm = SSM_BYTES.get(ssm_dtype)
    if ssm is None:
        raise SlotdiffError("slotdiff", f"--mamba-ssm-dtype {ssm_dtype!r}: expected float32 or bfloat16")
    total, layers = 0, 0
    for s in arch.layers:
        for mixer in (s.mixer, s.parallel):
            mech = construct(mixer)
            if not (mech and mech.recurrent):
                continue
            shape = mech.sglang_state(arch, s, tp)
            if shape is None:
                what = f"{s.variant} {mixer}" if s.variant else mixer
                raise SlotdiffError(
                    arch.name,
                    f"not supported: SGLang has no recurrent-state shape for {what} layers",
                    key=arch.key("model_type"),
                )
            conv, temporal = shape
            total += conv * CONV_BYTES + temporal * ssm
            layers += 1
    return total, layers


def recurrent_layers(arch: Architecture) -> bool:
    """Any layer with a fixed per-sequence state (its mixer or a parallel one)."""
    return any(
        (m := construct(x)) is not None and m.recurrent for s in arch.layers for x in (s.mixer, s.parallel)
    )


def check_served(arch: Architecture, version: Version, tp: int) -> bool:
    """False for a model without recurrent layers; True where SGLang ``version`` sizes its state
    pool; a one-line refusal otherwise."""
    if not recurrent_layers(arch):
        return False
    mt = model_type(arch)
    first = first_release(arch, mt)
    if first is None:
        raise SlotdiffError(
            arch.name,
            f"not supported: SGLang sizes no recurrent-state pool for {mt} (its hybrids through "
            f"{'.'.join(map(str, READ_THROUGH))}: {', '.join(sorted(MAMBAISH))})",
            key=arch.key("model_type"),
        )
    if version < first:
        raise SlotdiffError(
            arch.name,
            f"not supported: SGLang serves this {mt} model from {'.'.join(map(str, first))}, "
            f"not {version.text}",
            key=arch.key("model_type"),
        )
    if version.parts[:3] > READ_THROUGH:
        raise SlotdiffError(
            arch.name,
            f"not supported: SGLang {version.text}'s recurrent-state pool is read only through "
            f"{'.'.join(map(str, READ_THROUGH))}: pass --engine-version 0.5.6 or earlier",
            key=arch.key("model_type"),
        )
    if mt == "kimi_linear" and "linear_attn_config" not in arch.key("linear_n_v_heads"):
        raise SlotdiffError(  # KimiLinearConfig.mamba2_cache_params and is_kda_layer read only it
            arch.name,
            "not supported: SGLang reads Kimi Linear's KDA layers and state from linear_attn_config, "
            "which this config does not have",
            key=arch.key("model_type"),
        )
    nk = arch.get("linear_n_k_heads") or 0
    if mt == "qwen3_next" and version < RATIO_FROM and nk % tp:
        raise SlotdiffError(  # 0.5.2-0.5.3's hybrid_gdn_params shard conv_dim without extra groups
            arch.name,
            f"not supported: SGLang {version.text} shards {nk} key heads over TP {tp} without "
            "the extra groups later releases add; its state size is not reproduced",
            key=arch.key("model_type"),
        )
    return True


def state_pool(
    arch: Architecture, version: Version, tp: int, rest: float, flags: StateFlags
) -> StatePool | None:
    """SGLang's ``handle_max_mamba_cache`` for ``arch`` on one rank, ``rest`` the bytes
    ``profile_max_num_token`` holds before it; None for a model without recurrent layers."""
    if not check_served(arch, version, tp):
        return None
    mt = model_type(arch)
    per, layers = per_request(arch, tp, flags.mamba_ssm_dtype)
    radix = version >= RATIO_FROM and not flags.disable_radix_cache and mt not in RADIX_OFF
    if radix and per:
        r = flags.mamba_full_memory_ratio
        slots = max(0, int((rest * r / (1 + r)) // per))
        how = f"rest × {r:g} / (1 + {r:g}) // {per:,} B a request (--mamba-full-memory-ratio)"
    else:
        slots = flags.max_mamba_cache_size or flags.max_running_requests or DEFAULT_SLOTS
        why = (
            "--max-mamba-cache-size"
            if flags.max_mamba_cache_size
            else "--max-running-requests"
            if flags.max_running_requests
            else f"SGLang's default {DEFAULT_SLOTS}"
        )
        off = "radix cache off" if version >= RATIO_FROM else "before 0.5.4"
        how = f"{slots:,} slots ({why}; {off})"
    return StatePool(slots, per, layers, float(slots * per), how, radix)
