#!/usr/bin/env bash
# Regenerate fingerprints/ with `slotdiff fingerprint` (family files are never written by hand).
# Each family is written from its exemplar config in the bundled catalog or, for families
# without a published config in the corpus, from transformers' default config for that
# model_type (tests/fixtures/corpus/transformers-defaults; the exemplar recorded is the
# checkpoint that config class documents, and the file says so in "notes").
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
export SLOTDIFF_NO_BUNDLE=1  # the family files come from schemas/ itself, not an older bundle
out=${1:-fingerprints}
fp() { python3 -m slotdiff fingerprint "$1" --name "$2" --out "$out" --force "${@:3}" >/dev/null; }
d=tests/fixtures/corpus/transformers-defaults
dflt() { fp "$d/$1.json" "$2" --exemplar-id "$3" --note "fills from transformers' default $1 config (the checkpoint its docstring names: $3), not a published file"; }

# Published configs (bundled catalog)
fp openai-community/gpt2 "GPT-2" --exemplar openai-community/gpt2-xl
fp meta-llama/Llama-2-7b-hf "Llama 2 (MHA)"
fp meta-llama/Meta-Llama-3-8B "Llama 3 / Mistral v0.3 (dense GQA)" --exemplar mistralai/Mistral-7B-Instruct-v0.3
fp meta-llama/Llama-3.1-8B "Llama 3.1 / 3.2 (llama3 RoPE scaling)" --exemplar meta-llama/Llama-3.1-70B \
  --exemplar meta-llama/Llama-3.2-1B --exemplar meta-llama/Llama-3.2-3B
fp meta-llama/Llama-4-Scout-17B-16E-Instruct "Llama 4 (chunked + NoPE, MoE, vision)"
fp mistralai/Mistral-7B-v0.1 "Mistral 7B v0.1 (sliding window)"
fp mistralai/Mixtral-8x7B-v0.1 "Mixtral (MoE)"
fp Qwen/Qwen2.5-7B "Qwen2 / Qwen2.5 (q/k/v bias)"
fp Qwen/Qwen3-8B "Qwen3 (QK-norm)" --exemplar Qwen/Qwen3-0.6B
fp Qwen/Qwen3-30B-A3B "Qwen3-MoE"
fp Qwen/Qwen3-Next-80B-A3B-Thinking "Qwen3-Next (gated DeltaNet hybrid, MoE)"
fp Qwen/Qwen3-VL-30B-A3B-Instruct "Qwen3-VL-MoE (vision)"
fp Qwen/Qwen3.5-35B-A3B "Qwen3.5-MoE (gated DeltaNet hybrid, vision, MTP)"
fp deepseek-ai/DeepSeek-V2-Lite "DeepSeek-V2 (MLA + MoE, softmax router)"
fp moonshotai/Kimi-K2-Instruct "Kimi K2 (MLA + MoE, sigmoid aux-loss-free router)"
fp deepseek-ai/DeepSeek-V3 "DeepSeek-V3 (MLA + MoE + MTP)"
fp deepseek-ai/DeepSeek-V3.2 "DeepSeek-V3.2 (sparse attention)"
fp google/gemma-2-9b "Gemma 2" --exemplar google/gemma-2-2b
fp google/gemma-4-26B-A4B "Gemma 4 (MoE beside dense, vision)"
fp microsoft/phi-2 "Phi-2 (parallel block)"
fp microsoft/Phi-3-mini-4k-instruct "Phi-3 (sliding window)"
fp llava-hf/llava-1.5-7b-hf "LLaVA-1.5 (CLIP + Llama 2)"
fp openai/gpt-oss-20b "gpt-oss (sliding + sinks, MoE)"
fp zai-org/GLM-4.5 "GLM-4.5 (MoE + MTP)"
fp MiniMaxAI/MiniMax-M2.5 "MiniMax-M2 (MoE, full attention)"
fp moonshotai/Kimi-K3 "Kimi K3 (KDA + MLA hybrid, vision)"
fp nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 "Nemotron-H (Mamba-2 hybrid, MoE)"

# transformers defaults (no published config in the corpus)
dflt bamba "Bamba (Mamba-2 + MLP)" ibm-ai-platform/Bamba-9B
dflt bloom "BLOOM (ALiBi)" bigscience/bloom
dflt cohere "Command R (parallel block)" CohereForAI/c4ai-command-r-v01
dflt dbrx "DBRX (MoE)" transformers-community/dbrx-instruct
dflt ernie4_5_moe "ERNIE 4.5 MoE" baidu/ERNIE-4.5-21B-A3B-PT
dflt exaone4 "EXAONE 4 (post-norm, local/global)" LGAI-EXAONE/EXAONE-4.0-32B
dflt falcon "Falcon (MQA, parallel)" tiiuae/falcon-7b
dflt falcon_h1 "Falcon-H1 (parallel Mamba-2 + attention)" tiiuae/Falcon-H1-1.5B-Deep-Instruct
dflt mamba "Mamba" state-spaces/mamba-2.8b
dflt mamba2 "Mamba-2" state-spaces/mamba2-2.8b
dflt gemma "Gemma (GeGLU)" google/gemma-7b
dflt gemma3_text "Gemma 3" google/gemma-3-4b-it
dflt gemma3 "Gemma 3 (vision)" google/gemma-3-4b-it
dflt gpt_neox "GPT-NeoX (parallel residual)" EleutherAI/gpt-neox-20b
dflt granitemoe "Granite MoE" ibm-granite/granite-3.0-3b-a800m-base
dflt hunyuan_v1_moe "Hunyuan MoE" tencent/Hunyuan-A13B-Instruct
dflt internvl "InternVL (vision)" OpenGVLab/InternVL3-1B-hf
dflt jamba "Jamba (Mamba + attention, MoE)" ai21labs/Jamba-v0.1
dflt kimi_linear "Kimi Linear (KDA + MLA)" moonshotai/Kimi-Linear-48B-A3B-Instruct
dflt longcat_flash "LongCat-Flash (zero experts)" meituan-longcat/LongCat-Flash-Chat
dflt minimax "MiniMax-01 (lightning attention hybrid)" MiniMaxAI/MiniMax-Text-01-hf
dflt mllama "Llama 3.2 Vision (cross-attention)" meta-llama/Llama-3.2-11B-Vision
dflt mpt "MPT (ALiBi)" mosaicml/mpt-7b
dflt olmo2 "OLMo 2 (post-norm, QK-norm)" allenai/OLMo-2-1124-7B
dflt olmoe "OLMoE" allenai/OLMoE-1B-7B-0924
dflt opt "OPT" facebook/opt-350m
dflt qwen2_vl "Qwen2-VL / Qwen2.5-VL (M-RoPE, vision)" Qwen/Qwen2-VL-7B-Instruct
dflt stablelm "StableLM" stabilityai/stablelm-3b-4e1t
dflt starcoder2 "StarCoder2" bigcode/starcoder2-7b
dflt zamba2 "Zamba2 (Mamba-2 + shared attention)" Zyphra/Zamba2-2.7B
dflt smollm3 "SmolLM3 (NoPE every 4th layer)" HuggingFaceTB/SmolLM3-3B
