"""SGLang's KV pool at start-up (``ModelRunner.profile_max_num_token`` and
``init_memory_pool``, v0.3.6-0.5.x): the tokens of "KV Cache is allocated. #tokens: N,
K size: X GB" and ``max_total_num_tokens``.

``rest = available − free · (1 − mem_fraction_static)``, where ``free`` is the free memory
measured after the distributed set-up and before the weights load (the minimum over TP
ranks) and ``available`` the free memory after them; ``max_total_num_tokens = rest //
cell_size``, with ``cell_size`` the bytes of one token over this rank's layers (MHA/GQA:
heads per rank × head_dim × layers × 2 × dtype bytes; MLA: (kv_lora_rank + rope) × layers ×
dtype bytes), capped by ``--max-total-tokens`` and floored to a multiple of the page size.
A recurrent hybrid first loses its state pool (``sglang_state``: ``handle_max_mamba_cache``,
0.5.2-0.5.6) and its cell counts the full-attention layers only. 0.5.11-0.5.23 size the same
pool through a pool configurator (``sglang_recent``, which refuses what they size otherwise).
"""

from __future__ import annotations

from dataclasses import replace

from ..constructs import construct, latent
from ..constructs.indexer import engine_index_bytes
from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from ..cost.gpus import GPU
from ..cost.layout import Layout
from ..cost.memory import MemoryPlan
from ..schema.arch import Architecture
from ..schema.precision import storage_bits
from . import engine_terms as et
from .engine_terms import Version
from .kvpages import KVLayout, Spec
from .sglang_kv import check_modelopt_start, sglang_auto_kv
from .sglang_recent import check_pool, check_release, multimodal_on, vision_weights_skipped
from .sglang_state import StateFlags, check_served, recurrent_layers, state_pool
from .vllm import EngineArgs, EngineFit, StagePool, Term, kv_dtype_of, model_len

GiB = et.GiB
SGLANG_CONTEXT = 0.5 * GiB  # CUDA context before the pool's "free" is measured, one GPU
FRACTION_READ_THROUGH = (0, 5, 9)  # the newest whose default mem_fraction_static is modelled


V_HEAD_FROM = (0, 5, 7)  # profile_max_num_token's MHA cell takes v_head_dim (head_dim twice before)
INDEXER_FROM = (0, 5, 4)  # the DSA indexer's keys join the MLA cell
DSA_PAGE = ((0, 5, 3), (0, 5, 5))  # releases that set page 64 (and fp8 on Blackwell) for any DSA model


def dsa(arch: Architecture) -> bool:
    """A DeepSeek sparse-attention model: an indexer of its own on some latent layer."""
    return bool(arch.get("index_head_dim")) and any(s.sparse and latent(s.mixer) for s in arch.layers)


def dsa_served(arch: Architecture, version: Version) -> bool:
    """``is_deepseek_nsa`` in ``version``: the config's architecture among those it names."""
    since = load_schema_file("engine_families.json")["sglang_deepseek_nsa"]["since"]
    return any(
        version >= et.release(release) and arch.model_type in types for release, types in since.items()
    )


def cell_size(arch: Architecture, tp: int, kv_dtype: str, version: Version) -> tuple[float, int, float]:
    """(bytes per token, layers, K bytes per token) of SGLang's pool on one rank, as
    ``ModelRunner.profile_max_num_token`` (0.5.7+: ``get_cell_size_per_token``) computes it:

    * its layers: every hidden layer (``num_effective_layers``, whatever its mixer), a
      recurrent hybrid's full-attention layers only (``full_attention_layer_ids``);
    * MHA/GQA: ``get_num_kv_heads(tp)`` = max(1, the model's KV heads // TP) × (head_dim +
      head_dim) × bytes, the model's one head_dim (``hf_text_config.head_dim``, else hidden /
      heads) on every layer; from 0.5.7 head_dim + v_head_dim;
    * MLA: (kv_lora_rank + qk_rope_head_dim) × bytes, on every rank; a DSA model adds from
      0.5.4 its indexer's keys, index_head_dim + index_head_dim // 128 × 4 scale bytes (uint8)."""
    b = storage_bits(kv_dtype) / 8
    mechs = [construct(s.mixer) for s in arch.layers]
    full = [s for s, m in zip(arch.layers, mechs, strict=True) if m and (m.softmax or m.latent_kv)]
    layers = len(full) if recurrent_layers(arch) else len(arch.layers)
    mla = next((m for m in mechs if m and m.engine_token_elements(arch) is not None), None)
    if mla is not None:  # a latent cache (MLA): the same on every rank
        per = mla.engine_token_elements(arch) * b
        if dsa(arch) and version >= INDEXER_FROM:
            per += engine_index_bytes(arch)
        return per * layers, layers, 0.0
    g = arch.get("n_kv_heads") or arch.get("n_heads") or 1
    h = arch.get("n_heads") or 1
    hd = arch.get("head_dim") or (arch.get("d_model") or 0) // h
    hv = (arch.get("v_head_dim") or hd) if version >= V_HEAD_FROM else hd
    k = max(1, g // tp) * hd * b
    return (k + max(1, g // tp) * hv * b) * layers, layers, k


def swa_split(arch: Architecture, version: Version, tokens: int) -> tuple[int, int] | None:
    """``set_num_token_hybrid`` (0.5.2-0.5.6) where gpt-oss's hybrid SWA pool may be on (SGLang
    turns it off when it picks the triton_kernel MoE backend, which depends on the install):
    full = int(tokens × layers / (0.8 × sliding + full layers)), swa = int(full × 0.8)
    (``--swa-full-tokens-ratio`` 0.8). None elsewhere: Gemma 2/3 and Olmo 3 have it off, Llama 4
    needs ``--hybrid-kvcache-ratio`` (schemas/engine_families.json)."""
    pool = load_schema_file("engine_families.json")["sglang_hybrid_swa_pool"]["model_types"]
    if arch.model_type not in pool or not ((0, 5, 2) <= version.parts[:3] <= (0, 5, 6)):
        return None
    sliding = sum(1 for s in arch.layers if s.window)
    if not sliding:
        return None
    ratio = 0.8
    full = int(tokens * len(arch.layers) / (ratio * sliding + len(arch.layers) - sliding))
    return full, int(full * ratio)


def dsa_defaults(
    arch: Architecture, version: Version, gpu: GPU, args: EngineArgs, page: int, kv_dtype: str
) -> tuple[int, str, float | None]:
    """What ``_handle_model_specific_adjustments`` (``server_args.py``) sets for a DeepSeek NSA
    model on CUDA/ROCm: (page size, KV dtype, a forced mem_fraction_static). 0.5.3-0.5.5 set
    page 64 over any --page-size and fp8_e4m3 on compute capability 10+ (0.5.3-0.5.4 over the
    flag, 0.5.5 only for auto); 0.5.3 also sets mem_fraction_static 0.8. From 0.5.6 the block
    runs only for some architectures (``hf_config.architectures[0]``, which slotdiff does not
    keep): the page size and KV dtype must be passed."""
    mt = arch.model_type
    if not dsa_served(arch, version):
        raise SlotdiffError(
            arch.name,
            f"not supported: SGLang {version.text} has no DeepSeek sparse-attention pool for {mt} "
            "(is_deepseek_nsa)",
            key=arch.key("model_type"),
        )
    if version.parts[:3] > DSA_PAGE[-1]:
        if args.block_size is None or args.kv_cache_dtype == "auto":
            raise SlotdiffError(
                arch.name,
                f"not supported: SGLang {version.text} picks a DSA model's page size and KV dtype by "
                "its config's architecture: pass --block-size (64 with the NSA backend) and --kv-cache-dtype",
                key=arch.key("model_type"),
            )
        return page, kv_dtype, None
    cc = et.compute_capability(gpu)
    # Blackwell (sm100 and sm120 alike) by the capability, or by a GPU file's architecture.
    blackwell = cc[0] >= 10 if cc else gpu.architecture == "blackwell"
    if blackwell and (version < (0, 5, 5) or args.kv_cache_dtype == "auto"):
        kv_dtype = "float8_e4m3fn"
    return 64, kv_dtype, 0.8 if version < (0, 5, 4) else None


def default_fraction(
    arch: Architecture, version: Version, gpu: GPU, layout: Layout, chunked: int, graph_bs: int
) -> tuple[float, str]:
    """``--mem-fraction-static``'s default: the release's rule (``engine_terms``), then for a
    model SGLang serves as multimodal (a vision tower, but not Gemma 3 or Llama 4, for which it
    turns multimodal off by default: ``sglang_recent.multimodal_on``) ×0.90 in 0.4.9 and from
    0.4.10 ``adjust_mem_fraction_for_vlm`` (×0.95 × clamp(1 − 0.1 × (ViT layers × hidden² /
    (24 × 1024²) − 1), 0.8, 1.05), read from the config's ``vision_config.num_hidden_layers``
    and ``hidden_size``, 24 and 1024 where absent). 0.5.10 adds a piecewise-CUDA-graph reserve
    that depends on the model (kept through 0.5.23 as the prefill CUDA graph's): refused."""
    if version.parts[:3] > FRACTION_READ_THROUGH:
        raise SlotdiffError(
            arch.name,
            f"not supported: SGLang {version.text}'s default --mem-fraction-static reserves "
            "piecewise (prefill) CUDA-graph memory by model, backend and features (from 0.5.10): "
            "pass --mem-fraction-static",
        )
    frac, why = et.sglang_mem_fraction(version, gpu, layout, chunked, graph_bs)
    if not multimodal_on(arch) or version < (0, 4, 9):  # Gemma 3, Llama 4: multimodal off by default
        return frac, why
    if version < (0, 4, 10):
        return frac * 0.9, f"{why}; × 0.90 for a vision model"
    sizes = []
    for name, key, default in (("layers", "num_hidden_layers", 24), ("hidden", "hidden_size", 1024)):
        v = arch.vision.get(name)
        read = getattr(v, "keys", ()) or ()
        if v is None or v.value is None:
            sizes.append(default)
        elif read in ((), (f"vision_config.{key}",)) and isinstance(v.value, int):
            sizes.append(v.value)
        else:  # SGLang reads the HF object's attribute of that name; another key is not mapped here
            raise SlotdiffError(
                arch.name,
                f"not supported: SGLang sizes its vision-model fraction by vision_config.{key}, which "
                f"this config names {'/'.join(read) or 'otherwise'}: pass --mem-fraction-static",
            )
    ratio = sizes[0] * sizes[1] ** 2 / (24 * 1024**2)
    factor = 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return frac * factor, f"{why}; × {factor:.4f} for its ViT (adjust_mem_fraction_for_vlm)"


def sglang_fit(arch: Architecture, plan: MemoryPlan, gpu: GPU, args: EngineArgs) -> EngineFit:
    """SGLang's start-up pool for ``arch`` on ``gpu`` with ``args`` (TP only; PP stages are
    taken as the fullest)."""
    version = et.parse_version(args.version or et.DEFAULT_SGLANG)
    layout = args.layout
    length = model_len(arch, args.max_model_len)
    page = args.block_size or 1
    forced_frac = None
    check_release(arch, version)
    check_modelopt_start(arch, version, et.rocm(gpu))  # a ModelOpt checkpoint it does not start on
    kv_flag, kv_note = args.kv_cache_dtype, None
    if kv_flag == "auto":  # a ModelOpt checkpoint's FP8 KV, from 0.5.3 (sglang_kv)
        resolved, kv_note = sglang_auto_kv(arch, version, et.rocm(gpu))
        kv_flag = resolved or kv_flag
    kv_dtype = kv_dtype_of(arch, kv_flag)
    if dsa(arch):
        page, kv_dtype, forced_frac = dsa_defaults(arch, version, gpu, args, page, kv_dtype)
    check_served(arch, version, layout.tp)  # a recurrent hybrid SGLang does not size: refused first
    check_pool(arch, version, kv_dtype, dsa(arch))  # 0.5.11+: what the configurator sizes otherwise
    default_chunked, graph_bs = et.sglang_server_defaults(version, gpu, layout.tp)
    chunked = args.max_num_batched_tokens or default_chunked
    if forced_frac is not None:
        frac, frac_why = forced_frac, "SGLang 0.5.3 sets 0.8 for DeepSeek NSA, whatever is passed"
    elif args.mem_fraction_static is not None:
        frac = et.check_fraction(args.mem_fraction_static, "--mem-fraction-static")
        frac_why = "--mem-fraction-static"
    else:
        frac, frac_why = default_fraction(arch, version, gpu, layout, chunked, graph_bs)
    linked = et.non_torch(gpu, layout) - et.NON_TORCH
    free_est = gpu.visible - SGLANG_CONTEXT - linked
    free = args.free_gib * GiB if args.free_gib is not None else free_est
    if vision_weights_skipped(arch, version):  # Llama 4 served as text: no tower built or loaded
        plan = MemoryPlan(replace(plan.arch, vision=None), plan.fmt, plan.kv_dtype, plan.mtp, plan.select)
    w, e, _kv, _st = max(plan.stages(layout, length), key=lambda x: x[0] + x[1])
    weights = (
        args.weights_gib * GiB if args.weights_gib is not None else w + (e / layout.dp if layout.ep else e)
    )
    available = free - weights
    rest = available - free * (1 - frac)
    if args.available_kv_gib is not None:
        rest = args.available_kv_gib * GiB
    cell, layers, k_token = cell_size(arch, layout.tp, kv_dtype, version)
    flags = StateFlags(
        args.max_mamba_cache_size,
        args.mamba_ssm_dtype,
        et.check_ratio(args.mamba_full_memory_ratio),
        args.disable_radix_cache,
        args.max_num_seqs,
    )
    state = state_pool(arch, version, layout.tp, rest, flags)
    kv_rest = rest - state.bytes if state else rest
    tokens = int(kv_rest // cell) if cell and kv_rest > 0 else 0
    if args.max_total_tokens is not None:
        tokens = min(tokens, args.max_total_tokens)
    tokens = tokens // page * page
    terms = (
        Term(
            "free_before_weights",
            free,
            "flag" if args.free_gib is not None else "estimate",
            "device total − CUDA context − NCCL buffers",
        ),
        Term(
            "weights",
            weights,
            "flag" if args.weights_gib is not None else "estimate",
            "checkpoint bytes on this rank",
        ),
        Term(
            "reserved_by_fraction",
            free * (1 - frac),
            "flag" if args.mem_fraction_static is not None else "config",
            f"free × (1 − mem_fraction_static {frac:.3f}: {frac_why})",
        ),
        Term(
            "rest",
            rest,
            "log" if args.available_kv_gib is not None else "estimate",
            "available − free × (1 − mem_fraction_static)",
        ),
    )
    if state:
        terms += (Term("recurrent_state", state.bytes, "config", state.how),)
    spec = Spec("full", int(cell * page))
    kv = KVLayout(page, (spec,), 1, ((0, 1),), (spec,), f"page size {page}")
    pool = StagePool(0, layers, terms, kv_rest, tokens // page, kv)
    k_size = (tokens + page) * k_token * layers
    notes = [
        f"SGLang {version.text} accounting; mem_fraction_static {frac:.3f} ({frac_why})",
        f"cell size {cell:,.0f} B per token over {layers} layers on each of {layout.tp} TP ranks",
    ]
    if kv_note:
        notes.append(kv_note)
    if vision_weights_skipped(arch, version):
        notes.append(
            f"SGLang {version.text} serves it as a text model (no --enable-multimodal): the vision "
            "tower and projector are neither built nor loaded, so the weights are the text model's"
        )
    if k_size:
        notes.append(f"K buffer {k_size / GiB:.2f} GB (+ as much V), as SGLang logs it (GB = 2^30 B)")
    swa = swa_split(arch, version, tokens)
    if swa:
        notes.append(
            f"with SGLang's hybrid SWA pool (gpt-oss when its MoE backend is not triton_kernel: no "
            f"triton_kernels package, EP > 1, or MXFP4 on Blackwell) it logs full_layer_tokens={swa[0]}, "
            f"swa_layer_tokens={swa[1]} and max_total_num_tokens={swa[0]:,} instead"
        )
    concurrency = tokens / length if length else 0.0
    if state:
        notes.append(
            f"Mamba Cache is allocated. max_mamba_cache_size: {state.slots:,} ({state.per_request:,} B a "
            f"request over {state.layers} recurrent layers, --mamba-ssm-dtype {flags.mamba_ssm_dtype}); "
            f"at most {state.max_running:,} running requests"
        )
        concurrency = min(concurrency, state.max_running)
    return EngineFit(
        engine="sglang",
        version=version.text,
        layout=layout,
        gpu=gpu.id,
        max_model_len=length,
        max_num_seqs=args.max_num_seqs or 0,
        batched_tokens=chunked,
        kv_cache_dtype=kv_dtype,
        block_size=page,
        stages=(pool,),
        binding=0,
        kv_pool_bytes=kv_rest,
        kv_pool_tokens=tokens,
        max_concurrency=concurrency,
        needed_bytes=int(cell * length),
        estimated_max_model_len=None,
        notes=tuple(notes),
    )
