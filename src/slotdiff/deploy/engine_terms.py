"""The memory terms of an engine's KV-pool sizing that a config does not determine, as
explicit estimates with their data points (docs/SERVING.md, section 5), and the engine
defaults they depend on (batched tokens, sequences, block size) by version.

Every estimate is overridable by the flag named beside it; the fixture logs in
``tests/fixtures/engine_logs/`` are the data points.

* ``N`` non-torch memory (``--non-torch-gib``): 0.3 GiB (CUDA context, cuBLAS workspace;
  logged 0.16-0.35 GiB on one GPU: 12126, 10517, 13061, 20665), plus 1.8 GiB when the
  ranks talk over NVLink or Infinity Fabric (NCCL and custom all-reduce buffers: +1.79 GiB
  from TP=1 to TP=2 in 10511; 21348's TP=4 pool on the vLLM and SGLang sides); PCIe-only
  cards add nothing measurable (13061, 20665).
* ``A`` activation peak of the profiling forward (``--activation-gib``): the batched
  tokens × the widest live activations per token (residual and normed input, 2·d, plus
  the widest of attention's q/k/v/output and the FFN's gate-up + activation, per TP rank;
  MoE: top_k copies of the expert width, chunked at 32K tokens), plus on the last pipeline
  stage the sampler: max_num_seqs × vocabulary × 4 B × m, m = 1.5 in V0 (10517, 10511,
  13061), 5 in V1 before 0.9 (12569), 8.5 from V1 0.9 (23278, 21348, 20665's two stages);
  from 0.17 the bytes the sampler holds per logit are read from each release's code and the
  peak is the larger of forward and sampler (``vllm_profile``).
  A vision or audio encoder's profile is not modelled (12126: 36.6 GiB).
* ``G`` CUDA-graph memory, subtracted from vLLM 0.20 (``--cuda-graph-gib``; 0 with
  ``--enforce-eager`` or on ROCm): 0.5 GiB (0.09-0.73 GiB on 24 GB cards).
* ``T`` the device total as the runtime reports it: the preset's visible memory
  (H100 SXM 79.22 GiB as vLLM logs it) or ``--gpu-mem``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..constructs import construct, latent
from ..core.errors import UsageError
from ..cost.gpus import GPU, gpus, settled_capability
from ..cost.layout import Layout
from ..schema.arch import Architecture, LayerSpec
from . import vllm_profile

GiB = 2**30
NON_TORCH = 0.3 * GiB
NON_TORCH_LINKED = 1.8 * GiB  # multi-GPU over NVLink / Infinity Fabric
LINKED = 300e9  # a link this fast (bidirectional B/s) is NVLink-class, not PCIe
CUDA_GRAPHS = 0.5 * GiB
MOE_CHUNK = 32768  # VLLM_FUSED_MOE_CHUNK_SIZE
SAMPLER_COPIES = {"v0": 1.5, "v1-early": 5.0, "v1": 8.5}
DEFAULT_VLLM = "0.34"  # the newest release read (vllm_profile)
DEFAULT_SGLANG = "0.5.5"


@dataclass(frozen=True)
class Version:
    """An engine release as (major, minor, patch) with V1 on or off (vLLM)."""

    parts: tuple[int, ...]
    v1: bool
    text: str

    def __ge__(self, other: object) -> bool:
        return self.parts >= tuple(other)  # type: ignore[arg-type]

    def __lt__(self, other: object) -> bool:
        return self.parts < tuple(other)  # type: ignore[arg-type]

    @property
    def sampler(self) -> str:
        if not self.v1:
            return "v0"
        return "v1" if self >= (0, 9) else "v1-early"


def release(text: str) -> tuple[int, ...]:
    """``0.5.18`` (a release as the data files write it) → (0, 5, 18), to compare a Version with."""
    return tuple(int(x) for x in text.split("."))


def parse_version(text: str, use_v1: bool | None = None) -> Version:
    """``0.10.1.1`` / ``v0.6.4.post1`` → Version; V1 is vLLM's default from 0.8."""
    m = re.fullmatch(r"v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,3}))?(?:[.+-].*)?", text.strip())
    if not m:
        raise UsageError(f"--engine-version {text!r}: expected a release like 0.11 or 0.6.4.post1")
    parts = tuple(int(x) for x in m.groups() if x is not None)
    v1 = parts >= (0, 8) if use_v1 is None else use_v1
    return Version(parts, v1, text.strip())


def compute_capability(gpu: GPU) -> tuple[int, int] | None:
    """CUDA compute capability: a preset's from ``schemas/gpus.json`` (by its id, also when
    flags changed its memory or speed); a user's GPU file's as that file states it; else as
    the GPU's architecture settles it (``cost.gpus``: Hopper sm90, Ada sm89), else None; None
    for ROCm."""
    if "file" in gpu.custom:
        return gpu.compute_capability
    preset = gpus().get(gpu.id.rstrip("*"))
    if preset:
        return preset.compute_capability
    return settled_capability(gpu.architecture) if gpu.vendor == "NVIDIA" else None


def rocm(gpu: GPU) -> bool:
    return gpu.vendor == "AMD"


def vllm_defaults(version: Version, gpu: GPU, max_model_len: int, multimodal: bool) -> tuple[int, int, str]:
    """vLLM's max_num_batched_tokens and max_num_seqs when not given, and why."""
    if not version.v1:
        if max_model_len > 32768 and not multimodal:
            return 2048, 256, "V0: chunked prefill on past 32K tokens, 2,048 batched tokens, 256 sequences"
        n = max(max_model_len, 2048)
        return n, 256, f"V0 without chunked prefill: batched tokens = max(max_model_len, 2048) = {n:,}"
    if version < (0, 9):
        return 2048, 1024, "V1 before 0.9 (vllm serve): 2,048 batched tokens, 1,024 sequences"
    big = gpu.visible >= 70 * GiB and not gpu.id.startswith("a100")
    if big:
        return 8192, 1024, "V1 serve on a ≥70 GiB GPU (not A100): 8,192 batched tokens, 1,024 sequences"
    return 2048, 256, "V1 serve on a smaller GPU or an A100: 2,048 batched tokens, 256 sequences"


def vllm_block_size(arch: Architecture, version: Version, gpu: GPU) -> tuple[int | None, str]:
    """The default block size vLLM's attention backend picks (None, with why, where it
    depends on a compute capability the GPU's file does not state)."""
    if not any(latent(s.mixer) for s, _ in arch.layer_runs):  # a latent cache runs on vLLM's MLA backends
        return 16, "16 (CUDA default)"
    cc = compute_capability(gpu)
    if any(s.sparse for s, _ in arch.layer_runs):
        return 64, "64 (sparse MLA)"
    if cc is None and gpu.architecture == "blackwell" and version >= (0, 11):
        return None, (
            f"vLLM {version.text} picks an MLA model's block size by compute capability (sm100: "
            "CUTLASS MLA, 128-token blocks; other parts: 16), which this GPU's file does not state: "
            "add compute_capability to the file, or pass --block-size"
        )
    if cc and cc[0] == 10 and version >= (0, 11):
        return 128, "128 (CUTLASS MLA on Blackwell)"
    if cc == (9, 0) and version >= (0, 7, 3):
        return 64, "64 (FlashMLA on Hopper)"
    return 16, "16 (Triton MLA)"


def non_torch(gpu: GPU, layout: Layout) -> float:
    """The CUDA context, plus the all-reduce / all-to-all buffers of a TP or EP group over
    NVLink or Infinity Fabric (a pipeline's point-to-point sends need none: 0.07 GiB logged
    per stage in llm-d-planner's v0.19 PP=2 and PP=4 runs)."""
    group = layout.tp > 1 or (layout.ep and layout.ep_size > 1)
    linked = group and (gpu.link_bytes_per_s or 0) >= LINKED
    return NON_TORCH + (NON_TORCH_LINKED if linked else 0.0)


def _attention_width(arch: Architecture, s: LayerSpec, tp: int) -> float:
    mech = construct(s.mixer)
    width = mech.profile_width(arch, tp) if mech else None
    if width is not None:  # the mechanism's own (MLA's latent, linear attention's heads)
        return width
    h = (arch.get("n_heads") or 0) / tp
    hd = s.head_dim or arch.get("head_dim") or 0
    g = max(1.0, (s.n_kv_heads or arch.get("n_kv_heads") or 0) / tp)
    return (2 * h + 2 * g) * hd


def _ffn_width(arch: Architecture, s: LayerSpec, layout: Layout, tokens: int) -> float:
    tp = layout.tp
    if s.ffn == "moe" or s.ffn2 == "moe":
        k, fe, d = arch.get("top_k") or 0, arch.get("d_ff_expert") or 0, arch.get("d_model") or 0
        per = k * (3 * fe / (1 if layout.ep else tp) + d)
        per = per * min(tokens, MOE_CHUNK) / tokens if tokens else per
        shared = (arch.get("d_ff_shared") or (arch.get("n_shared_experts") or 0) * fe) * 3 / tp
        return per + shared
    if s.ffn == "dense":
        return 3 * (s.d_ff or arch.get("d_ff") or 0) / tp
    return 0.0


def activation_per_token(arch: Architecture, layout: Layout, tokens: int) -> float:
    """Bytes of the widest activations one token of the profiling forward holds (bf16)."""
    d = arch.get("d_model") or 0
    widest = max(
        (
            max(_attention_width(arch, s, layout.tp), _ffn_width(arch, s, layout, tokens))
            for s, _ in arch.layer_runs
        ),
        default=0.0,
    )
    return 2 * (2 * d + widest)


def activation(
    arch: Architecture,
    layout: Layout,
    tokens: int,
    seqs: int,
    version: Version,
    last_stage: bool,
    checkpoint_grid: int | None = None,
) -> tuple[float, float, float, str]:
    """(peak, forward, sampler, how) of the profiling run, bytes per rank: before 0.17 the
    forward and the fitted sampler term add up; from 0.17 the peak is the larger of the
    forward and what the sampler holds (``vllm_profile``, read from each release's code), with
    the workspace kept after the forward (``checkpoint_grid``: the mamba block size where the
    gated DeltaNet layers export prefill checkpoints, ``KVLayout.checkpoint_grid``)."""
    forward = tokens * activation_per_token(arch, layout, tokens)
    vocab = arch.get("vocab") or 0
    read = version.v1 and version >= (0, 17)  # the accounting read from the code (vllm_profile)
    if read and layout.pp > 1:  # the hidden states and residual a stage sends or receives
        forward += 2 * tokens * (arch.get("d_model") or 0) * 2
    if not last_stage:
        return forward, forward, 0.0, "forward"
    if version.v1 and version >= (0, 9):
        sampler, why, adds = vllm_profile.sampler_peak(arch, version.parts, seqs, tokens)
        if not adds:
            # the workspace (MoE scratch, GDN checkpoints) and the stage's hidden-state buffers
            # outlive the forward
            sampler += vllm_profile.workspace(arch, layout.tp, layout.ep, tokens, checkpoint_grid)
            if layout.pp > 1:
                sampler += 2 * tokens * (arch.get("d_model") or 0) * 2
            return max(forward, sampler), forward, sampler, f"larger of forward and sampler ({why})"
        return forward + sampler, forward, sampler, f"forward + sampler ({why})"
    sampler = seqs * vocab * 4 * SAMPLER_COPIES[version.sampler]
    return forward + sampler, forward, sampler, "forward + sampler (fitted)"


def cuda_graphs(version: Version, gpu: GPU, eager: bool) -> float:
    """The CUDA-graph estimate subtracted before the pool is sized: from 0.20, where
    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 (0 in 0.19)."""
    if eager or rocm(gpu) or not version.v1 or version < (0, 20):
        return 0.0
    return CUDA_GRAPHS


def sglang_server_defaults(version: Version, gpu: GPU, tp: int) -> tuple[int, int]:
    """SGLang's ``chunked_prefill_size`` and ``cuda_graph_max_bs`` when not given, by the GPU's
    memory (``server_args.py``: ``__post_init__`` up to 0.5.2, ``_handle_gpu_memory_settings``
    from 0.5.3, ``arg_groups/memory_hook.py`` from 0.5.19; ``gpu_mem`` is nvidia-smi's total, taken
    here as the runtime's): unchanged through 0.5.23 but below 35 GiB from 0.5.20."""
    mem = gpu.visible / GiB
    if version < (0, 4, 9):  # 0.3.6-0.4.6: chunked 2,048 under 25,000 MB, else 8,192
        return (2048 if mem * 1024 < 25_000 else 8192), 160
    if version < (0, 5, 3):  # 0.4.9-0.5.2: 2,048 under 35 GiB, 16,384 from 160 GiB
        chunked = 2048 if mem < 35 else 8192 if mem < 160 else 16384
        return chunked, (8 if tp < 4 else 80) if mem < 35 else 160
    if mem < 20:
        return 2048, 8
    if mem < 35 and version >= (0, 5, 20):  # arg_groups/memory_hook.py from 0.5.20 (RTX 5090)
        return 4096, 48 if tp < 4 else 160
    if mem < 35:  # 0.5.3-0.5.4: 16 graphs below TP 4; 24 from 0.5.5
        return 2048, (16 if version < (0, 5, 5) else 24) if tp < 4 else 80
    if mem < 60:
        return 4096, 32 if tp < 4 else 160
    if mem < 160:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def sglang_mem_fraction(
    version: Version, gpu: GPU, layout: Layout, chunked_prefill: int, cuda_graph_bs: int
) -> tuple[float, str]:
    """SGLang's default ``--mem-fraction-static`` by release (``server_args.py``), without its
    speculative-decoding and DP-attention terms; rounded to 3 decimals from 0.4.9 as SGLang
    rounds it. 0.5.10 reserves piecewise-CUDA-graph memory by model: not modelled (refused by
    the caller)."""
    mem = gpu.visible / GiB
    p = layout.tp * layout.pp
    if version < (0, 4, 6) or (version < (0, 4, 9) and mem <= 80):
        table = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
        frac = next(f for n, f in table if layout.tp >= n)
        return frac, f"by TP size ({layout.tp}): {frac}"
    if version < (0, 4, 9):
        return (mem - 13) / mem, "(memory − 13 GiB) / memory"
    if version < (0, 5, 3):
        reserved = 2.8 + p / 10 if mem < 35 else 9.5 + p / 2 if mem < 90 else 12 + p / 2 if mem < 160 else 32
        return round((mem - reserved) / mem, 3), f"(memory − {reserved:g} GiB reserved) / memory"
    # MiB terms: 512 + 1.5 × chunked-prefill tokens + 2 × CUDA-graph batch, then TP·PP/8 GiB
    reserved = (512 + 1.5 * max(chunked_prefill, 2048) + 2 * cuda_graph_bs) / 1024 + p / 8
    reserved = max(reserved, 10.0) if mem > 60 else reserved
    return (
        round((mem - reserved) / mem, 3),
        f"(memory − {reserved:.2f} GiB reserved) / memory; CUDA-graph batch {cuda_graph_bs}",
    )


def gib(x: float | None) -> float | None:
    return None if x is None else x * GiB


def check_fraction(value: float, flag: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{flag} must be a number in (0, 1], got {value!r}")
    if not 0 < value <= 1:
        raise UsageError(f"{flag} must be in (0, 1], got {value:g}")
    return float(value)


def check_ratio(value: float) -> float:
    """SGLang's ``--mamba-full-memory-ratio``: a positive number (above 1 is legal)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise UsageError(f"--mamba-full-memory-ratio must be a positive number, got {value!r}")
    return float(value)


def vllm_auto_kv_dtype(arch: Architecture, version: Version) -> tuple[str | None, str | None]:
    """What ``--kv-cache-dtype auto`` resolves to for a ModelOpt checkpoint, from vLLM 0.14
    (``resolve_kv_cache_dtype_string`` → ``get_kv_cache_quant_algo_string``, read in 0.14.1
    and 0.33.0): (vLLM's cache dtype, a note), or (None, note or None) for the model's dtype.
    ``kv_cache_scheme`` first (8-bit float, not dynamic → fp8; from 0.20 4-bit float → nvfp4),
    then ``kv_cache_quant_algo`` (fp8 → fp8_e4m3; from 0.20 nvfp4); anything else → auto."""
    q = arch.get("quantization_config")
    if version < (0, 14) or not isinstance(q, Mapping):
        return None, None
    method = q.get("quant_method")
    if not isinstance(method, str) or not method.startswith("modelopt"):
        return None, None
    inner = q.get("quantization", q)
    inner = inner if isinstance(inner, Mapping) else q
    algo = (
        inner.get("kv_cache_scheme")
        or q.get("kv_cache_scheme")
        or inner.get("kv_cache_quant_algo")
        or q.get("kv_cache_quant_algo")
    )
    fp4 = version >= (0, 20)  # MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP gains nvfp4 in 0.20
    if isinstance(algo, Mapping):
        if algo.get("dynamic") is False and algo.get("num_bits") == 8 and algo.get("type") == "float":
            algo = "fp8"
        elif fp4 and algo.get("num_bits") == 4 and algo.get("type") == "float":
            algo = "nvfp4"
        else:
            return None, f"vLLM {version.text} falls back to auto for the checkpoint's KV scheme {dict(algo)}"
    if not isinstance(algo, str):
        return None, None
    mapped = {"fp8": "fp8_e4m3", **({"nvfp4": "nvfp4"} if fp4 else {})}.get(algo.lower())
    if mapped is None:
        return None, f"vLLM {version.text} falls back to auto for the checkpoint's KV algorithm {algo[:24]!r}"
    return (
        mapped,
        f"--kv-cache-dtype auto: vLLM {version.text} takes the ModelOpt checkpoint's KV scheme ({mapped})",
    )
