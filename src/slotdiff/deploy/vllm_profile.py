"""What vLLM's profiling run allocates besides the forward, per release, read from its code.

``determine_available_memory`` subtracts the torch peak of ``profile_run``: the forward over
``max_num_batched_tokens`` tokens, then (last pipeline stage) a dummy sampler over
``max_num_seqs`` rows of logits. The forward's activations are freed when it returns; only
its output hidden states stay while the sampler runs, so the peak is the larger of the two,
not their sum. What the sampler holds per logit element, by the code of each release
(``vllm/v1/worker/gpu_model_runner.py`` ``_dummy_sampler_run``, ``vllm/v1/sample/``; the V2
runner ``vllm/v1/worker/gpu/model_runner.py`` and ``gpu/sample/``):

* V1 runner, 0.9-0.16: top-k (vocab − 1) and top-p sort the float32 logits (values and int64
  indices, cub's double buffer), then softmax and the exponential draw: about 34 B an element
  (fitted on 23278, 21348 and 20665's logs: 8.5 float32 copies), added to the forward peak;
* V1 runner, 0.17 on: with 8 or more rows the top-k/top-p mask is a Triton kernel in place
  (``apply_top_k_top_p_triton``, one float32 row per SM as scratch); the peak holds the bf16
  logits (2 B), their float32 copy (4), the softmax probabilities (4) and the exponential
  draw (4): 14 B an element;
* V2 runner (the default for Qwen3 dense from 0.22, Llama and Mistral dense from 0.23, every
  dense model from 0.25, every model from 0.29): the dummy batch needs no logits
  processing, so the sampler holds only the logits in the model dtype (2 B) until 0.32; from
  0.33 a second pass with ``SamplingParams.for_sampler_warmup()`` copies them to float32
  (+4 B): 6 B an element.

Kept after the forward, in the workspace manager's one buffer: the fused-MoE scratch and, from
0.33, a Qwen gated DeltaNet's prefill-checkpoint buffer, the larger of the two (``workspace``).
"""

from __future__ import annotations

from ..constructs import construct
from ..schema.arch import Architecture
from ..schema.precision import weight_format

FITTED_SAMPLER = 34.0  # V1 runner 0.9-0.16: bytes a logit element, fitted on three logs
V1_TRITON = 14.0  # 2 (bf16 logits) + 4 (float32) + 4 (softmax) + 4 (exponential draw)
V2_ONE_PASS = 2.0  # the logits in the model dtype
V2_WARMUP = 6.0  # + the float32 copy of the warm-up pass
SMS = 132  # the Triton top-k/top-p scratch: one float32 vocabulary row per SM (an H100's 132)

# Model types whose vLLM architecture the V2 runner takes by default before it takes every
# dense model (vllm/config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, 0.22 and 0.23).
V2_FIRST = {(0, 22): frozenset({"qwen3"}), (0, 23): frozenset({"qwen3", "llama", "mistral"})}


def runner(arch: Architecture, version: tuple[int, ...]) -> str:
    """``v1`` or ``v2``: the model runner vLLM ``version`` uses by default for ``arch`` (CUDA)."""
    moe = bool(arch.get("n_experts"))
    # a recurrent state vLLM keeps in its own pages (linear attention, Mamba)
    hybrid = any((m := construct(s.mixer)) and m.recurrent and m.vllm_kind for s, _ in arch.layer_runs)
    quantized = weight_format(arch).quantized
    if version >= (0, 29):
        return "v2"
    if version >= (0, 25):
        return "v2" if not moe and not hybrid else "v1"
    if version >= (0, 22):
        first = V2_FIRST[(0, 23) if version >= (0, 23) else (0, 22)]
        dense = not moe and not quantized and not hybrid
        return "v2" if dense and arch.model_type in first else "v1"
    return "v1"


def sampler_bytes_per_logit(arch: Architecture, version: tuple[int, ...]) -> tuple[float, str, bool]:
    """(bytes a logit element, which code path, whether it adds to the forward peak) for the
    V1 engine from 0.9 (earlier releases keep their fitted multiples, ``engine_terms``)."""
    if runner(arch, version) == "v2":
        if version >= (0, 33):
            return V2_WARMUP, "V2 runner: logits + the warm-up pass's float32 copy", False
        return V2_ONE_PASS, "V2 runner: the logits in the model dtype", False
    if version >= (0, 17):
        return V1_TRITON, "V1 runner, Triton top-k/top-p: bf16 + float32 logits, probabilities, draw", False
    return FITTED_SAMPLER, "V1 runner, sorted top-k/top-p (fitted)", True


def moe_workspace(arch: Architecture, tp: int, ep: bool, tokens: int) -> float:
    """The fused-MoE scratch the workspace manager keeps after the forward (bf16): for M tokens,
    top-k and expert width I per rank (I = f_e / TP, whole under EP), hidden K:
    max(M·k·max(I, K), M·K) + M·k·max(2I, K) elements (``fused_moe.workspace_shapes``, one
    chunk of M = the batched tokens)."""
    if not arch.get("n_experts") or not any(s.ffn == "moe" or s.ffn2 == "moe" for s, _ in arch.layer_runs):
        return 0.0
    k, fe, d = arch.get("top_k") or 0, arch.get("d_ff_expert") or 0, arch.get("d_model") or 0
    i = fe if ep else fe / tp
    m = tokens
    return (max(m * k * max(i, d), m * d) + m * k * max(2 * i, d)) * 2


def gdn_checkpoint_workspace(arch: Architecture, tp: int, tokens: int, grid: int | None) -> float:
    """The prefill-checkpoint buffer a Qwen gated DeltaNet that exports checkpoints (0.33+,
    FlashInfer's prefill in align mode: ``grid`` is then the mamba block size) asks the workspace
    manager for in the profile run (``_warmup_prefill_kernels``, run because the profile's
    forward has no attention metadata: ``get_simultaneous(_checkpoint_buffer_spec)``):
    cdiv(M, grid) states of (v heads / TP) × d_v × d_k float32; 0 where none exports."""
    if not grid:
        return 0.0
    nv = (arch.get("linear_n_v_heads") or 0) // tp
    dv, dk = arch.get("linear_v_head_dim") or 0, arch.get("linear_k_head_dim") or 0
    return float(-(-tokens // grid) * nv * dv * dk * 4)


def workspace(arch: Architecture, tp: int, ep: bool, tokens: int, grid: int | None) -> float:
    """What the workspace manager keeps after the profile run (``v1/worker/workspace.py``): one
    buffer that every ``get_simultaneous`` request views from its start, grown to the largest
    request (``_ensure_workspace_size`` frees the smaller one before allocating, so the torch
    peak holds one). The fused-MoE scratch and the GDN checkpoint buffer share it: the larger
    of the two counts, not their sum."""
    return max(moe_workspace(arch, tp, ep, tokens), gdn_checkpoint_workspace(arch, tp, tokens, grid))


def sampler_peak(
    arch: Architecture, version: tuple[int, ...], seqs: int, tokens: int
) -> tuple[float, str, bool]:
    """(bytes, why, adds) the dummy sampler holds at its peak over ``seqs`` rows, with what the
    forward leaves alive meanwhile (its ``tokens`` × d output hidden states, the Triton scratch)."""
    per, why, adds = sampler_bytes_per_logit(arch, version)
    vocab, d = arch.get("vocab") or 0, arch.get("d_model") or 0
    out = seqs * vocab * per
    if not adds:
        out += tokens * d * 2  # the dummy forward's hidden states, bf16
        if runner(arch, version) == "v1" and seqs >= 8:
            out += min(seqs, SMS) * vocab * 4
    return out, why, adds


def concurrent_batches(arch: Architecture, version: tuple[int, ...], pp: int) -> int:
    """Batches vLLM keeps in flight (``VllmConfig.max_concurrent_batches``); from 0.26 a sliding
    window or attention chunk reserves blocks for that many batches of tokens
    (``max_in_flight_tokens``, kv_cache_interface.py ``max_memory_usage_bytes``). Async
    scheduling is on by default for a generative model on the default executor: the V2 runner
    keeps PP + 1 batches, the V1 runner 2 without PP and PP with it (0.26-0.33; 0.34 has V2
    only). Before 0.26 a window reserves one batch."""
    if version < (0, 26):
        return 1
    if runner(arch, version) == "v2":
        return pp + 1
    return 2 if pp <= 1 else pp
