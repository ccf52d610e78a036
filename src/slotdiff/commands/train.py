"""The memory of training MODEL, per GPU: weights, gradients, optimizer state (fp32 master
weights included), activations by layer kind (what autograd keeps for backward), and
whether it fits the GPU. docs/TRAINING.md has the accounting and how it was checked.

Exit status 1 when it does not fit.
"""

from __future__ import annotations

import argparse
import sys

from ..analysis.analyze import load
from ..render.train import render_train, render_train_markdown
from ..train.dropout import dropout_of
from ..train.memory import train_memory
from ..train.setup import (
    CHECKPOINTING,
    DEFAULT_LORA_TARGETS,
    DTYPES,
    KERNELS,
    OPTIMIZERS,
    RESERVE_FRACTION,
    TrainSetup,
    lora_targets,
)
from .argtypes import COUNT, RESERVE, TOKENS, WHOLE, WHOLE0
from .options import add_style_arguments, write_json

EPILOG = """\
examples:
  slotdiff train meta-llama/Meta-Llama-3-8B --context 8192
  slotdiff train meta-llama/Meta-Llama-3-8B --checkpointing full --zero 3 --gpus 8
  slotdiff train Qwen/Qwen3-30B-A3B --lora-rank 16 --lora-targets attention --json
  slotdiff train openai-community/gpt2 --context 1024 --batch 8 --no-flash-attention --dtype fp32
optimizers: adamw (fp32 moments), adamw-8bit (bitsandbytes block-wise), sgd (no momentum,
no state), sgd-momentum (one fp32 buffer)
LoRA targets: q, k, v, o, gate, up, down, experts, router; "attention" = q,k,v,o;
"all-linear" = q,k,v,o,gate,up,down (the default)
"""
EXIT_1 = "does not fit"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="config.json, a folder holding one, or a Hub repo id")
    g = parser.add_argument_group("workload")
    g.add_argument("--gpu", default="h100-sxm", help="GPU preset (slotdiff gpus lists them)")
    g.add_argument(
        "--gpus",
        "--data-parallel-size",
        "-dp",
        type=WHOLE,
        default=1,
        help="data-parallel GPUs (ZeRO shards over them)",
    )
    g.add_argument("--tensor-parallel-size", "-tp", type=WHOLE, default=1, help="TP degree (default 1)")
    g.add_argument("--pipeline-parallel-size", "-pp", type=WHOLE, default=1, help="PP stages (default 1)")
    g.add_argument("--batch", type=COUNT, default=1, help="sequences per GPU (micro-batch, default 1)")
    g.add_argument("--context", type=TOKENS, default=8192, help="tokens per sequence (default 8192)")
    g.add_argument("--dtype", choices=list(DTYPES), default="bf16", help="training precision (default bf16)")
    t = parser.add_argument_group("training")
    t.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adamw", help="default adamw")
    t.add_argument(
        "--checkpointing",
        choices=list(CHECKPOINTING),
        default="none",
        help="activation recomputation: full keeps each layer's input, selective drops the s×s terms",
    )
    t.add_argument(
        "--flash-attention",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="flash attention keeps O(s) per head; without it the s×s softmax is kept (default on)",
    )
    t.add_argument(
        "--kernels",
        choices=list(KERNELS),
        default="fused",
        help="fused norm/activation/softmax kernels (default), or transformers' PyTorch modules as written",
    )
    t.add_argument(
        "--lora-rank", type=WHOLE, default=None, help="train LoRA adapters of this rank, base frozen"
    )
    t.add_argument(
        "--lora-targets",
        default=DEFAULT_LORA_TARGETS,
        help=f"projections LoRA wraps (default {DEFAULT_LORA_TARGETS})",
    )
    t.add_argument("--zero", type=WHOLE0, default=0, help="ZeRO stage 0-3 over --gpus")
    t.add_argument(
        "--reserve",
        type=RESERVE,
        default=RESERVE_FRACTION,
        help=f"share of each GPU kept for what is not counted (default {RESERVE_FRACTION:g})",
    )
    add_style_arguments(parser, "train.schema.json")


def setup_from(args: argparse.Namespace) -> TrainSetup:
    return TrainSetup(
        batch=args.batch,
        context=args.context,
        dtype=args.dtype,
        optimizer=args.optimizer,
        checkpointing=args.checkpointing,
        flash=args.flash_attention,
        kernels=args.kernels,
        lora_rank=args.lora_rank,
        lora_targets=lora_targets(args.lora_targets),
        zero=args.zero,
        gpus=args.gpus,
        tp=args.tensor_parallel_size,
        pp=args.pipeline_parallel_size,
        gpu=args.gpu,
        reserve=args.reserve,
    )


def run(args: argparse.Namespace) -> int:
    setup = setup_from(args)
    model = load(args.model)
    result = train_memory(model.arch, setup, dropout_of(model.raw.data, model.arch.text_path))
    data = result.to_dict()
    if args.style == "json":
        write_json(data)
    elif args.style == "markdown":
        sys.stdout.write(render_train_markdown(data))
    else:
        sys.stdout.write(render_train(data, args.width))
    return 0 if result.fits else 1
