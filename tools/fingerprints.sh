#!/usr/bin/env bash
# Regenerate fingerprints/ with `slotdiff fingerprint` (family files are never written by hand).
# Each family is written from its exemplar config in the bundled catalog, or, for families
# without a published config in the corpus, from transformers' defaults for that model_type
# (tests/fixtures/corpus/transformers-defaults; the exemplar named is the checkpoint that
# config class documents).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
out=${1:-fingerprints}
fp() { python3 -m slotdiff fingerprint "$1" --name "$2" --out "$out" --force "${@:3}"; }
d=tests/fixtures/corpus/transformers-defaults
fp openai-community/gpt2 "GPT-2" --exemplar openai-community/gpt2-xl
fp meta-llama/Llama-2-7b-hf "Llama 2 (MHA)"
fp meta-llama/Meta-Llama-3-8B "Llama 3 / Mistral v0.3 (dense GQA)" --exemplar mistralai/Mistral-7B-Instruct-v0.3
fp meta-llama/Llama-3.1-8B "Llama 3.1 / 3.2 (llama3 RoPE scaling)" --exemplar meta-llama/Llama-3.1-70B \
  --exemplar meta-llama/Llama-3.2-1B --exemplar meta-llama/Llama-3.2-3B
fp mistralai/Mistral-7B-v0.1 "Mistral 7B v0.1 (sliding window)"
fp mistralai/Mixtral-8x7B-v0.1 "Mixtral (MoE)"
fp Qwen/Qwen2.5-7B "Qwen2 / Qwen2.5 (q/k/v bias)"
fp Qwen/Qwen3-8B "Qwen3 (QK-norm)" --exemplar Qwen/Qwen3-0.6B
fp Qwen/Qwen3-30B-A3B "Qwen3-MoE"
fp deepseek-ai/DeepSeek-V2-Lite "DeepSeek-V2 / Kimi K2 (MLA + MoE)" --exemplar moonshotai/Kimi-K2-Instruct
fp deepseek-ai/DeepSeek-V3 "DeepSeek-V3 (MLA + MoE + MTP)"
fp deepseek-ai/DeepSeek-V3.2 "DeepSeek-V3.2 (sparse attention)"
fp google/gemma-2-9b "Gemma 2" --exemplar google/gemma-2-2b
