"""Does MODEL fit on N GPUs at a context? The verdict for a parallel layout (refused with the
reason when an engine would refuse it), the most concurrent sequences at that context, the
longest context for one sequence, the fewest GPUs of a valid layout, the decode bound; with
``--engine vllm`` or ``--engine sglang``, the KV pool, tokens and maximum concurrency that
engine would print at start-up (docs/SERVING.md). Exit status 1 when it does not fit.
"""

from __future__ import annotations

import argparse
import sys

from ..analysis.analyze import load
from ..cost.layout import Layout
from ..deploy.engine_terms import DEFAULT_SGLANG, DEFAULT_VLLM
from ..deploy.fit import fit
from ..deploy.serving import RESERVE_FRACTION
from ..deploy.vllm import EngineArgs, model_len
from ..render.fit import render_fit
from .argtypes import COUNT, GIB, GIB0, POSITIVE, RESERVE, SHARE, TOKENS, WHOLE
from .options import (
    add_layout_arguments,
    add_style_arguments,
    add_workload_arguments,
    layout_from,
    workload_from,
    write_json,
)

EPILOG = f"""\
examples:
  slotdiff fit meta-llama/Llama-3.1-70B --gpu h100 --gpus 8 --context 131072
  slotdiff fit deepseek-ai/DeepSeek-V3 --gpu h200 --gpus 8 --context 32768 --kv-dtype fp8
  slotdiff fit Qwen/Qwen3-8B --gpu rtx-4090 --dtype int4 --json
  slotdiff fit meta-llama/Llama-3.1-8B --engine vllm --max-model-len 32768 --gpu-memory-utilization 0.9
  slotdiff fit Qwen/Qwen3-30B-A3B --engine vllm --available-kv-gib 10.55 --kv-cache-dtype fp8
engines: --engine-version defaults to vLLM {DEFAULT_VLLM} / SGLang {DEFAULT_SGLANG} accounting
"""
EXIT_1 = "does not fit (or the layout is invalid)"
DEFAULT_CONTEXT = 8192


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    parser.add_argument(
        "--reserve",
        type=RESERVE,
        default=RESERVE_FRACTION,
        help=f"share of each GPU kept for the runtime without --engine (default {RESERVE_FRACTION:g})",
    )
    parser.add_argument("--mtp", action="store_true", help="load the MTP modules beside the weights")
    add_style_arguments(parser, "fit.schema.json")
    add_layout_arguments(parser)
    eng = parser.add_argument_group("engine (--engine: size the KV pool as that engine does)")
    eng.add_argument("--engine", choices=("vllm", "sglang"), help="predict this engine's start-up KV pool")
    eng.add_argument("--engine-version", help="release whose accounting to follow (e.g. 0.10.1, 0.6.4)")
    eng.add_argument("--use-v1", action="store_true", default=None, help="vLLM: the V1 engine before 0.8")
    eng.add_argument("--gpu-memory-utilization", type=SHARE, default=0.9, help="vLLM (default 0.9)")
    eng.add_argument("--mem-fraction-static", type=SHARE, help="SGLang (default: its rule for the release)")
    eng.add_argument(
        "--max-model-len", type=TOKENS, help="default: --context when given, else the model's context limit"
    )
    eng.add_argument(
        "--max-num-seqs",
        type=COUNT,
        help="default: the engine's for the release and GPU (SGLang: --max-running-requests)",
    )
    eng.add_argument("--max-num-batched-tokens", type=TOKENS, help="SGLang: --chunked-prefill-size")
    eng.add_argument("--block-size", type=WHOLE, help="tokens per KV block (SGLang: --page-size)")
    eng.add_argument("--kv-cache-dtype", default="auto", help="auto, fp8, fp8_e4m3, fp8_e5m2")
    eng.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs")
    eng.add_argument(
        "--disable-hybrid-kv-cache-manager",
        action="store_true",
        help="vLLM: sliding layers sized as full ones",
    )
    eng.add_argument("--kv-cache-memory", type=GIB, metavar="GIB", help="vLLM 0.11+: a fixed pool, GiB")
    eng.add_argument("--max-total-tokens", type=TOKENS, help="SGLang: cap on the pool's tokens")
    eng.add_argument("--max-mamba-cache-size", type=WHOLE, help="SGLang: recurrent-state slots (hybrids)")
    eng.add_argument(
        "--mamba-ssm-dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="SGLang: the recurrent state's dtype (default float32)",
    )
    eng.add_argument(
        "--mamba-full-memory-ratio",
        type=POSITIVE,
        default=0.9,
        help="SGLang 0.5.4+: state pool / KV pool with the radix cache on (default 0.9)",
    )
    eng.add_argument("--disable-radix-cache", action="store_true", help="SGLang: no prefix cache")
    eng.add_argument(
        "--no-enable-prefix-caching",
        action="store_true",
        help="vLLM: prefix caching off (a hybrid's recurrent layers then hold one page a request, "
        "not align mode's two and its checkpoints)",
    )
    meas = parser.add_argument_group(
        "measured terms (GiB, from a start-up log) instead of slotdiff's estimates"
    )
    meas.add_argument("--non-torch-gib", type=GIB0, help="non-torch memory (CUDA context, NCCL buffers)")
    meas.add_argument("--activation-gib", type=GIB0, help="activation peak of the profiling forward")
    meas.add_argument("--cuda-graph-gib", type=GIB0, help="CUDA-graph memory (vLLM 0.21+)")
    meas.add_argument("--weights-gib", type=GIB, help="weights as loaded per rank ('Model loading took')")
    meas.add_argument(
        "--available-kv-gib", type=GIB0, help="the logged 'Available KV cache memory': tokens become exact"
    )
    meas.add_argument("--free-gib", type=GIB, help="SGLang: free memory before the weights load")
    add_workload_arguments(parser)
    parser.set_defaults(context=None)  # given or not decides max_model_len (see run)


def _engine_args(args: argparse.Namespace, layout: Layout) -> EngineArgs | None:
    if not args.engine:
        return None
    return EngineArgs(
        engine=args.engine,
        version=args.engine_version,
        use_v1=args.use_v1,
        tensor_parallel_size=layout.tp,
        pipeline_parallel_size=layout.pp,
        data_parallel_size=layout.dp,
        enable_expert_parallel=layout.ep,
        gpu_memory_utilization=args.gpu_memory_utilization,
        mem_fraction_static=args.mem_fraction_static,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        block_size=args.block_size,
        kv_cache_dtype=args.kv_cache_dtype,
        enforce_eager=args.enforce_eager,
        hybrid_kv_cache_manager=not args.disable_hybrid_kv_cache_manager,
        enable_prefix_caching=not args.no_enable_prefix_caching,
        kv_cache_memory_gib=args.kv_cache_memory,
        max_total_tokens=args.max_total_tokens,
        max_mamba_cache_size=args.max_mamba_cache_size,
        mamba_ssm_dtype=args.mamba_ssm_dtype,
        mamba_full_memory_ratio=args.mamba_full_memory_ratio,
        disable_radix_cache=args.disable_radix_cache,
        non_torch_gib=args.non_torch_gib,
        activation_gib=args.activation_gib,
        cuda_graph_gib=args.cuda_graph_gib,
        weights_gib=args.weights_gib,
        available_kv_gib=args.available_kv_gib,
        free_gib=args.free_gib,
    )


def run(args: argparse.Namespace) -> int:
    layout = layout_from(args)
    arch = load(args.model).arch
    if args.engine:
        # --context is the length the user serves: vLLM's max_model_len unless that is given;
        # without --context, the engine's own default (the model's limit) is the context too.
        if args.max_model_len is None and args.context is not None:
            args.max_model_len = args.context
        if args.context is None:
            args.context = args.max_model_len or model_len(arch, None)
    elif args.context is None:
        args.context = DEFAULT_CONTEXT
    wl = workload_from(args, layout=layout)
    result = fit(arch, wl, layout.gpus, args.reserve, args.mtp, layout, _engine_args(args, layout))
    if args.style == "json":
        write_json(result.to_dict())
    else:
        sys.stdout.write(render_fit(result, args.style, args.width))
    return 0 if result.fits else 1
