"""SGLang 0.5.11-0.5.23: the KV pool as its pool configurator sizes it, and what those releases
size in ways slotdiff does not model (refused in one line each).

Read from the PyPI wheels 0.5.10-0.5.23 (``model_executor/pool_configurator.py``,
``model_runner_kv_cache_mixin.py`` through 0.5.15, ``mem_cache/kv_cache_configurator.py`` from
0.5.16, ``server_args.py`` / ``arg_groups/memory_hook.py`` from 0.5.19). 0.5.11 (sglang PR
#18263) moved ``profile_max_num_token`` into ``_profile_available_bytes`` and a
``DefaultPoolConfigurator``, with the same arithmetic: ``rest = available − free × (1 −
mem_fraction_static)``, ``tokens = int(rest × 2^30) // cell_size`` floored to the page, capped by
``--max-total-tokens``. Its MHA cell (KV heads per rank × (head_dim + v_head_dim) × layers ×
bytes) and MLA cell ((kv_lora_rank + rope) × layers × bytes, DSA indexer keys added) are those of
0.5.10 through 0.5.23 for the models slotdiff prices, without speculative decoding, DCP, HiSparse,
KV sharding or the (off by default) post-capture sizing. What changed, and is refused:

* sliding-window models (Llama 4's chunked and DeepSeek-V4's compressed layers among them) go to
  ``HybridSWAPoolConfigurator`` (full + ratio × SWA cell; 0.5.12 ``DSV4PoolConfigurator``, from
  0.5.14 a chunk-capped variant), or may (``is_hybrid_swa_model``'s list grows by release, and from
  0.5.13 a config may opt in); Gemma 2/3, for which SGLang sets ``disable_hybrid_swa_memory``,
  and Mistral, Mixtral, Phi-3, Olmo 3, Cohere 2, Qwen2, StarCoder2, EXAONE 4, PhiMoE, Qwen2-MoE,
  Qwen3 and Qwen3-MoE, whose architectures are in
  none of the releases' lists, keep the default pool with every layer in full and are priced;
* an indexer on softmax attention is MiniMax's sparse pool (0.5.15);
* a DSA model's latent row comes from ``calculate_mla_kv_cache_dim`` from 0.5.17: with an fp8
  cache its size depends on the DSA kernels picked at run time; shared-top-k layers (from 0.5.18)
  and k-pools change the index keys (``dsa_layer_skips_topk``, ``index_kpool``);
* a multimodal model loses ``SGLANG_VLM_CACHE_SIZE_MB`` (and feature-transport pools) from the
  rest from 0.5.18 (``mm_runtime_reservation_gb``), by SGLang's own multimodal test (which Gemma 3
  and Llama 4 fail unless ``--enable-multimodal`` is passed: they are priced as text models);
* the default mem_fraction_static keeps 0.5.10's CUDA-graph reserve for prefill (piecewise, from
  0.5.14 ``cuda_graph_config.prefill``), on or off by model, backend and features.
"""

from __future__ import annotations

from ..constructs import latent
from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from ..schema.arch import Architecture
from .engine_terms import Version, release

RECENT_FROM = (0, 5, 11)  # the pool configurator (sglang PR #18263)
READ_THROUGH = (0, 5, 23)  # the newest release read
DSA_ROW_BY_BACKEND = (0, 5, 17)  # calculate_mla_kv_cache_dim enters the cell
MULTIMODAL_RESERVE = (0, 5, 18)  # mm_runtime_reservation_gb comes out of the rest
INDEX_ELIDED = (0, 5, 18)  # dsa_layer_skips_topk: no index keys on a shared-top-k layer


def _refuse(arch: Architecture, version: Version, what: str) -> SlotdiffError:
    """The one-line refusal naming the release and what it sizes that is not modelled."""
    return SlotdiffError(
        arch.name, f"not supported: SGLang {version.text} {what}", key=arch.key("model_type")
    )


def check_release(arch: Architecture, version: Version) -> None:
    """Refuse a release after the newest one read."""
    if version.parts[:3] > READ_THROUGH:
        through = ".".join(map(str, READ_THROUGH))
        raise _refuse(
            arch,
            version,
            f"is newer than the releases whose pool sizing was read (through {through}): "
            f"pass --engine-version {through} or earlier",
        )


def _swa_pool_off(arch: Architecture, version: Version) -> bool:
    """Whether SGLang keeps this model off its hybrid SWA pool in every release from 0.5.11, so
    that its sliding-window layers take the default pool's cell in full (schemas/
    engine_families.json): Gemma 2/3 by ``disable_hybrid_swa_memory``; Mistral, Phi-3, Olmo 3,
    Cohere 2 and others by being in none of ``is_hybrid_swa_model``'s lists, unless (from 0.5.13)
    the config opts in with an ``is_hybrid_swa`` key."""
    families = load_schema_file("engine_families.json")
    model_type = arch.config_model_type or arch.model_type
    if model_type in families["sglang_swa_pool_disabled"]["model_types"]:
        return True
    plain = families["sglang_swa_default_pool"]
    if model_type not in plain["model_types"]:
        return False
    opted = plain["opt_in_key"] in arch.unknown_keys + arch.unread_keys
    return not (opted and version >= release(plain["opt_in_from"]))


def multimodal_on(arch: Architecture) -> bool:
    """Whether SGLang serves ``arch`` as multimodal by default (``model_config.is_multimodal``):
    a vision model, except those whose architecture it turns multimodal off for unless
    ``--enable-multimodal`` is passed (Gemma 3, Llama 4; schemas/engine_families.json
    ``sglang_multimodal_off``, every release read from 0.4.9)."""
    off = load_schema_file("engine_families.json")["sglang_multimodal_off"]["model_types"]
    return arch.vision is not None and (arch.config_model_type or arch.model_type) not in off


def vision_weights_skipped(arch: Architecture, version: Version) -> bool:
    """Whether SGLang ``version``, serving ``arch`` as a text model, also leaves its vision
    tower and projector unbuilt and their weights unloaded (Llama 4 from 0.5.1:
    ``sglang_multimodal_off.skips_vision_weights``)."""
    if arch.vision is None or multimodal_on(arch):
        return False
    data = load_schema_file("engine_families.json")["sglang_multimodal_off"]
    since = data.get("skips_vision_weights", {}).get(arch.config_model_type or arch.model_type)
    return since is not None and version >= release(since)


def check_pool(arch: Architecture, version: Version, kv_dtype: str, dsa: bool) -> None:
    """Refuse, from 0.5.11, a model whose pool the release sizes in a way not modelled here
    (module docstring); ``kv_dtype`` is the cache dtype after SGLang's DSA adjustments."""
    if version < RECENT_FROM:
        return
    if any(s.chunk or s.compress for s in arch.layers) or (
        any(s.window for s in arch.layers) and not _swa_pool_off(arch, version)
    ):
        raise _refuse(  # Llama 4's chunked and DeepSeek-V4's compressed layers are SGLang SWA models
            arch,
            version,
            "may size sliding-window (chunked, compressed) layers in a separate pool "
            "(HybridSWAPoolConfigurator: full + swa_full_tokens_ratio × SWA cell), not modelled",
        )
    if any(s.sparse and not latent(s.mixer) for s in arch.layers):
        raise _refuse(arch, version, "sizes an indexer on softmax attention in its own pool, not modelled")
    if dsa:
        if kv_dtype.startswith("float8") and version >= DSA_ROW_BY_BACKEND:
            raise _refuse(
                arch,
                version,
                "sizes an fp8 DSA latent row by the DSA kernels it picks at run time "
                "(calculate_mla_kv_cache_dim: 576 or 656 B): pass --kv-cache-dtype bfloat16",
            )
        shared = version >= INDEX_ELIDED and any(s.index_shared for s in arch.layers if s.sparse)
        if arch.get("index_kpool") or shared:
            raise _refuse(
                arch, version, "sizes shared-top-k layers' and k-pooled index keys differently, not modelled"
            )
    if version >= MULTIMODAL_RESERVE and multimodal_on(arch):
        raise _refuse(
            arch,
            version,
            "takes a multimodal reserve (SGLANG_VLM_CACHE_SIZE_MB and feature-transport pools) out of "
            "the KV budget by its own multimodal test, not modelled: pass --engine-version 0.5.17 or earlier",
        )
