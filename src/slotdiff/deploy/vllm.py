"""vLLM's KV pool at start-up, per rank and version: the memory it gets, its blocks, the
"GPU KV cache size: N tokens" and "Maximum concurrency for L tokens per request" lines.

Per rank: ``K = T · u − W − A − N`` (− G from 0.20, where CUDA graphs are estimated before
the pool is sized), ``num_blocks = K // page // group_size`` (``kvspec``); every rank is set
to the fewest blocks of any rank, so the pool is the binding (fullest) pipeline stage's.
``K`` may instead come from the log (``--available-kv-gib``: then tokens and concurrency
are exact) or be fixed by ``--kv-cache-memory`` (vLLM 0.11+).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import SlotdiffError, UsageError
from ..core.resources import load_schema_file
from ..cost.context import context_limit
from ..cost.gpus import GPU
from ..cost.layout import Layout, stage_sizes
from ..cost.memory import MemoryPlan
from ..schema.arch import Architecture
from ..schema.precision import weight_format
from . import engine_terms as et
from .kvpages import KVLayout
from .kvspec import kv_layout
from .kvunify import kernel_block_refusal, unify_note
from .vllm_profile import concurrent_batches

GiB = et.GiB


@dataclass(frozen=True)
class Term:
    """One memory term of a rank's budget."""

    name: str
    bytes: float
    how: str  # estimate | flag | log | config | device
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bytes": self.bytes,
            "gib": self.bytes / GiB,
            "how": self.how,
            "note": self.note,
        }


@dataclass(frozen=True)
class StagePool:
    """One pipeline stage's rank: its budget, the memory left for KV, its blocks."""

    stage: int
    layers: int
    terms: tuple[Term, ...]
    available: float
    blocks: int
    kv: KVLayout

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "layers": self.layers,
            "terms": [t.to_dict() for t in self.terms],
            "available_kv_bytes": self.available,
            "num_blocks": self.blocks,
            "page_bytes": self.kv.page,
            "group_size": self.kv.group_size,
            "groups": self.kv.num_groups,
            "group_block_sizes": [self.kv.kinds[k].block or self.kv.block_size for k, _ in self.kv.groups],
        }


@dataclass(frozen=True)
class EngineArgs:
    """The engine flags that bear on memory, named as vLLM / SGLang name them."""

    engine: str = "vllm"
    version: str | None = None
    use_v1: bool | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    gpu_memory_utilization: float = 0.9
    mem_fraction_static: float | None = None  # SGLang
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None  # SGLang: page size
    kv_cache_dtype: str = "auto"
    enforce_eager: bool = False
    hybrid_kv_cache_manager: bool = True
    enable_prefix_caching: bool = True  # vLLM: --no-enable-prefix-caching turns it off
    kv_cache_memory_gib: float | None = None
    max_total_tokens: int | None = None  # SGLang
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    cuda_graph_gib: float | None = None
    weights_gib: float | None = None
    available_kv_gib: float | None = None
    free_gib: float | None = None  # SGLang: free memory before the weights load
    max_mamba_cache_size: int | None = None  # SGLang: the recurrent-state pool's slots
    mamba_ssm_dtype: str = "float32"  # SGLang: the temporal state's dtype
    mamba_full_memory_ratio: float = 0.9  # SGLang: state pool / KV pool with the radix cache
    disable_radix_cache: bool = False  # SGLang

    @property
    def layout(self) -> Layout:
        return Layout(
            self.tensor_parallel_size,
            self.pipeline_parallel_size,
            self.data_parallel_size,
            self.enable_expert_parallel,
        )


@dataclass(frozen=True)
class EngineFit:
    """What the engine would log at start-up for one deployment."""

    engine: str
    version: str
    layout: Layout
    gpu: str
    max_model_len: int
    max_num_seqs: int
    batched_tokens: int
    kv_cache_dtype: str
    block_size: int
    stages: tuple[StagePool, ...]
    binding: int
    kv_pool_bytes: float
    kv_pool_tokens: int
    max_concurrency: float
    needed_bytes: int
    estimated_max_model_len: int | None
    notes: tuple[str, ...] = field(default=())

    @property
    def fits_one_request(self) -> bool:
        return self.kv_pool_bytes >= self.needed_bytes and self.kv_pool_bytes > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "engine_version": self.version,
            "layout": self.layout.to_dict(),
            "gpu": self.gpu,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.batched_tokens,
            "kv_cache_dtype": self.kv_cache_dtype,
            "block_size": self.block_size,
            "kv_pool_bytes": self.kv_pool_bytes,
            "kv_pool_gib": self.kv_pool_bytes / GiB,
            "kv_pool_tokens": self.kv_pool_tokens,
            "max_concurrency": self.max_concurrency,
            "needed_bytes_for_max_model_len": self.needed_bytes,
            "fits_one_request": self.fits_one_request,
            "estimated_max_model_len": self.estimated_max_model_len,
            "binding_stage": self.binding,
            "stages": [s.to_dict() for s in self.stages],
            "notes": list(self.notes),
        }


def kv_dtype_of(arch: Architecture, flag: str) -> str:
    """``auto`` = the model's dtype (fp32 and fp16 checkpoints: fp16 / their own); fp8* = 1 byte."""
    if flag == "auto":
        base = arch.get("dtype")
        return "float16" if base in ("float16", "float32") else "bfloat16"
    if flag in ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla"):
        return "float8_e5m2" if flag == "fp8_e5m2" else "float8_e4m3fn"
    if flag in ("bfloat16", "bf16", "float16", "fp16", "half"):
        return "float16" if flag in ("float16", "fp16", "half") else "bfloat16"
    raise UsageError(
        f"--kv-cache-dtype {flag!r}: expected auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16 or float16"
    )


def model_len(arch: Architecture, flag: int | None) -> int:
    if flag is not None:
        if flag < 1:
            raise UsageError(f"--max-model-len must be at least 1, got {flag}")
        return flag
    limit = context_limit(arch).tokens
    if limit is None:
        raise UsageError(f"{arch.name}: the config states no context limit: pass --max-model-len")
    return limit


def _stage_layers(arch: Architecture, pp: int) -> list[tuple]:
    out, start = [], 0
    for size in stage_sizes(arch.n_layers, pp):
        out.append(arch.layers[start : start + size])
        start += size
    return out


def _check_served(arch: Architecture, version: et.Version) -> None:
    """Refuse a release that does not serve the model: one before its architecture entered
    vLLM's registry, or one after the registry names the last that did
    (schemas/engine_families.json)."""
    families = load_schema_file("engine_families.json")
    removed = families["vllm_removed"]["model_types"]
    added = families["vllm_added"]["model_types"]
    for model_type in (arch.config_model_type, arch.model_type):
        last, first = removed.get(model_type or ""), added.get(model_type or "")
        if last and version.parts[:2] > et.release(last)[:2]:  # its patches too
            raise SlotdiffError(
                arch.name,
                f"vLLM {version.text} does not serve {model_type} models (served until {last}): "
                f"pass --engine-version {last.rsplit('.', 1)[0]} or earlier",
                key=arch.key("model_type"),
            )
        if first and version.parts[:2] < et.release(first)[:2]:
            raise SlotdiffError(
                arch.name,
                f"vLLM {version.text} does not serve {model_type} models (first served in {first}): "
                f"pass --engine-version {first.rsplit('.', 1)[0]} or later",
                key=arch.key("model_type"),
            )


def vllm_fit(arch: Architecture, plan: MemoryPlan, gpu: GPU, args: EngineArgs) -> EngineFit:
    """vLLM's start-up figures for ``arch`` on ``gpu`` with ``args``."""
    version = et.parse_version(args.version or et.DEFAULT_VLLM, args.use_v1)
    _check_served(arch, version)
    layout = args.layout
    notes: list[str] = []
    if plan.fmt.base_dtype == "float32":
        # dtype auto: vLLM loads a float32 checkpoint in bf16 (fp16 before Ampere: the same
        # bytes; config/model.py _resolve_auto_dtype)
        plan = MemoryPlan(arch, replace(plan.fmt, base_dtype="bfloat16"), plan.kv_dtype)
        notes.append("the checkpoint is float32: vLLM (--dtype auto) loads it in bf16")
    u = et.check_fraction(args.gpu_memory_utilization, "--gpu-memory-utilization")
    length = model_len(arch, args.max_model_len)
    multimodal = arch.vision is not None
    tokens, seqs, why = et.vllm_defaults(version, gpu, length, multimodal)
    tokens = args.max_num_batched_tokens or tokens
    seqs = args.max_num_seqs or seqs
    kv_flag, kv_note = args.kv_cache_dtype, None
    if kv_flag == "auto":
        resolved, kv_note = et.vllm_auto_kv_dtype(arch, version)
        if resolved == "nvfp4":  # a packed fp4 page with fp8 block scales: not modelled
            raise SlotdiffError(
                arch.name,
                f"vLLM {version.text} resolves --kv-cache-dtype auto to nvfp4 for this ModelOpt "
                "checkpoint, whose packed cache page slotdiff does not model: pass --kv-cache-dtype",
            )
        kv_flag = resolved or kv_flag
    kv_dtype = kv_dtype_of(arch, kv_flag)
    block_default, block_why = et.vllm_block_size(arch, version, gpu)
    if block_default is None and not args.block_size:
        raise SlotdiffError(arch.name, f"not supported: {block_why}")
    notes = [f"vLLM {version.text} {'V1' if version.v1 else 'V0'} accounting", why, *notes]
    if kv_note:
        notes.append(kv_note)
    if not args.block_size:
        notes.append(f"block size {block_why}")
    if multimodal and args.activation_gib is None:
        # vLLM profiles the encoder with its largest multimodal batch; slotdiff does not model
        # that term (12126, Llama-3.2-11B-Vision: 36.6 GiB logged), so the pool is an upper bound.
        notes.append(
            "not modelled: vLLM also profiles the vision encoder with its largest image batch "
            "(36.6 GiB for Llama-3.2-11B-Vision on an H100); the pool is an upper bound: pass the "
            "logged activation peak with --activation-gib"
        )
    if (
        args.weights_gib is None
        and gpu.architecture == "hopper"
        and weight_format(arch).kind == "mxfp4"
        and version >= (0, 10)
    ):
        # gpt-oss-120b on an H100: 65.97 GiB loaded in 0.10.1, 64.38 in 0.14.1, 60.77 of checkpoint
        notes.append(
            "not modelled: vLLM repacks MXFP4 expert weights for Hopper's kernels, which holds 6-9% "
            "more than the checkpoint; pass the logged 'Model loading took' with --weights-gib"
        )
    total = gpu.visible
    requested = total * u
    stages = []
    for s, (w, e, _kv, _st) in enumerate(plan.stages(layout, length)):
        last = s == layout.pp - 1
        layers = tuple(_stage_layers(arch, layout.pp)[s])
        kv = kv_layout(
            arch,
            layers,
            layout.tp,
            kv_dtype,
            version,
            args.block_size,
            block_default,
            args.hybrid_kv_cache_manager,
            args.enable_prefix_caching,
            gpu.architecture,
        )
        terms = [
            Term("total_gpu_memory", total, "flag" if "memory" in gpu.custom else "device"),
            Term("requested", requested, "config", f"total × gpu_memory_utilization {u:g}"),
        ]
        weights = w + (e / layout.dp if layout.ep else e)
        terms.append(_term("weights", weights, et.gib(args.weights_gib), "checkpoint bytes on this rank"))
        terms.append(
            _term("non_torch", et.non_torch(gpu, layout), et.gib(args.non_torch_gib), "CUDA context, NCCL")
        )
        peak, fwd, sampler, how = et.activation(arch, layout, tokens, seqs, version, last, kv.checkpoint_grid)
        if args.activation_gib is not None:
            terms.append(Term("activation_peak", args.activation_gib * GiB, "flag"))
        else:
            terms.append(
                Term(
                    "activation_peak",
                    peak,
                    "estimate",
                    f"{tokens:,} batched tokens {fwd / GiB:.2f} GiB, sampler over {seqs:,} sequences "
                    f"{sampler / GiB:.2f} GiB: {how}",
                )
            )
        graphs = et.cuda_graphs(version, gpu, args.enforce_eager)
        terms.append(_term("cuda_graphs", graphs, et.gib(args.cuda_graph_gib), "subtracted from 0.20"))
        if args.available_kv_gib is not None:
            avail, how = args.available_kv_gib * GiB, "log"
        elif args.kv_cache_memory_gib is not None:
            avail, how = args.kv_cache_memory_gib * GiB, "flag"
        else:
            avail = requested - sum(t.bytes for t in terms[2:])
            how = "estimate"
        terms.append(Term("available_kv_cache_memory", avail, how))
        if why := kernel_block_refusal(arch, version, gpu, kv_dtype, args.block_size):
            raise SlotdiffError(arch.name, why)
        stages.append(StagePool(s, len(layers), tuple(terms), avail, kv.num_blocks(avail), kv))
    binding = min(range(len(stages)), key=lambda i: (stages[i].blocks, i))
    pool = stages[binding]
    blocks = min(x.blocks for x in stages)
    # what a sliding window or attention chunk reserves beside its window: the batches in flight
    inflight = tokens * concurrent_batches(arch, version.parts, layout.pp)
    conc = pool.kv.concurrency(blocks, length, inflight, version)
    needed = max(x.kv.needed_bytes(length, inflight) for x in stages)
    est = None
    if pool.available < needed:
        est = min(x.kv.max_model_len(x.available, inflight, length) for x in stages)
        notes.append(
            f"vLLM refuses to start: one request at max_model_len {length:,} needs {needed / GiB:.2f} GiB "
            f"of KV cache, more than the {pool.available / GiB:.2f} GiB available; the longest it holds "
            f"is {est:,}"
        )
    if pool.kv.padded_layers:
        notes.append(f"the hybrid allocator adds {pool.kv.padded_layers} padding layers to even the groups")
    if not args.block_size and pool.kv.block_size != block_default:
        notes.append(pool.kv.block_note)
    if even := unify_note(pool.kv, version):
        notes.append(even)
    return EngineFit(
        engine="vllm",
        version=version.text,
        layout=layout,
        gpu=gpu.id,
        max_model_len=length,
        max_num_seqs=seqs,
        batched_tokens=tokens,
        kv_cache_dtype=kv_dtype,
        block_size=pool.kv.block_size,
        stages=tuple(stages),
        binding=binding,
        kv_pool_bytes=pool.available,
        kv_pool_tokens=pool.kv.tokens_line(blocks, conc, length, version),
        max_concurrency=conc,
        needed_bytes=needed,
        estimated_max_model_len=est,
        notes=tuple(notes),
    )


def _term(name: str, estimate: float, flag: float | None, note: str) -> Term:
    return Term(name, flag, "flag") if flag is not None else Term(name, estimate, "estimate", note)
