"""Training memory (slotdiff train) against figures from outside the code: Korthikanti et al.
2022's per-layer formula, the seed article's Llama-3-8B anchor, the adapter counts PEFT prints,
the ZeRO paper's bytes per parameter, and hand arithmetic written out here. The same
accounting is checked against what torch saves in tests/test_oracle_train.py."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cli import COMMANDS, main
from slotdiff.core.errors import SlotdiffError, UsageError
from slotdiff.core.resources import data_dir
from slotdiff.cost.params import count
from slotdiff.train import TrainSetup, train_memory
from slotdiff.train.activations import activations
from slotdiff.train.dropout import dropout_of
from slotdiff.train.setup import Dropout, lora_targets
from slotdiff.train.states import optimizer_bytes, states

from conftest import DEFAULTS, raw

LLAMA8 = "meta-llama/Meta-Llama-3-8B"
GB, GiB = 1e9, 2**30


def model(repo: str):
    return load(raw(repo))


def acts(repo: str, **setup):
    m = model(repo)
    return activations(m.arch, TrainSetup(**setup), dropout_of(m.raw.data, m.arch.text_path))


def per_layer(repo: str, **setup) -> int:
    (group,) = acts(repo, **setup).layers
    return group.bytes_per_layer


# --- Korthikanti et al. 2022: sbh(34 + 5as/h) per layer -------------------------------------
# Their model is GPT-2's: LayerNorm, MHA, GELU (4h), dropout 0.1 on attention probabilities and
# on every sublayer output, 16-bit activations, 1-byte masks. GPT-2 small: h 768, a 12.
S, H, A = 1024, 768, 12
LN_STATS = 2 * 2 * 4  # two LayerNorms per layer, mean and rstd in fp32 per token (not in the paper)


def test_gpt2_without_flash_is_korthikanti() -> None:
    paper = S * 1 * H * (34 + 5 * A * S / H)
    got = per_layer("openai-community/gpt2", context=S, flash=False)
    assert got == paper + LN_STATS * S


def test_selective_recomputation_drops_the_5as_over_h_term() -> None:
    got = per_layer("openai-community/gpt2", context=S, flash=False, checkpointing="selective")
    assert got == 34 * S * H + LN_STATS * S


def test_flash_attention_is_the_selective_figure_plus_its_logsumexp() -> None:
    # no s × s matrix and no dropout mask on it (the kernel regenerates it from its RNG seed);
    # the softmax's fp32 logsumexp, one per head and token, is what it keeps instead
    got = per_layer("openai-community/gpt2", context=S, flash=True)
    assert got == 34 * S * H + 4 * A * S + LN_STATS * S


def test_full_recomputation_keeps_the_layer_input() -> None:
    a = acts("openai-community/gpt2", context=S, checkpointing="full")
    assert a.layers[0].bytes_per_layer == 2 * S * H
    assert a.recompute == a.layers[0].full_bytes_per_layer


# --- Llama-3-8B: the seed's anchor and the adapted formula, line by line --------------------
D, KV, F, HEADS, VOCAB, L, CTX = 4096, 1024, 14336, 32, 128256, 32, 8192
LLAMA_TOKEN_LAYER = (
    2 * (2 * D + 4)  # two RMSNorms: input (bf16) + rstd (fp32)
    + 2 * D  # the q/k/v projections' input (the norm's output)
    + 2 * D
    + 2 * KV
    + 2 * KV  # q, k, v after RoPE (GQA: k, v at 8 KV heads)
    + 2 * D  # flash-attention output = the o projection's input
    + 4 * HEADS  # logsumexp, fp32
    + 2 * D  # the FFN's input
    + 4 * 2 * F  # SwiGLU: gate output, SiLU output, up output, their product (down's input)
)  # = 168,072 bytes per token per layer


def test_llama3_8b_layer_by_hand() -> None:
    assert LLAMA_TOKEN_LAYER == 168_072
    assert per_layer(LLAMA8) == LLAMA_TOKEN_LAYER * CTX


def test_llama3_8b_seed_anchor_without_checkpointing() -> None:
    """Seed 001: batch 1, 8,192 tokens, bf16, no gradient checkpointing: about 40 GB of
    activations. The layers come to 44.06 GB (41.0 GiB); the logits' fp32 log-softmax adds 4.2 GB."""
    a = acts(LLAMA8)
    final_norm = (2 * D + 4) * CTX
    layers = a.total - a.by_kind()["logits"] - a.by_kind()["embedding"] - final_norm
    assert layers == LLAMA_TOKEN_LAYER * CTX * L
    assert 40 * GB * 0.9 <= layers <= 40 * GB * 1.12
    assert a.by_kind()["logits"] == CTX * (4 * VOCAB + 8 + 2 * D)  # log-softmax, labels, head input


def test_llama3_8b_seed_anchor_with_checkpointing() -> None:
    """Seed 001: with checkpointing about 8 GB: each layer's input (2.15 GB) + the logits'
    log-softmax (4.2 GB) kept, + one layer rebuilt during its backward (1.38 GB)."""
    a = acts(LLAMA8, checkpointing="full")
    assert a.by_kind()["checkpoint"] == 2 * D * CTX * L
    assert a.recompute == LLAMA_TOKEN_LAYER * CTX
    assert 8 * GB * 0.85 <= a.total + a.recompute <= 8 * GB * 1.15
    assert a.total + a.recompute < acts(LLAMA8).total / 5  # "a few GB" against ~48


def test_no_flash_adds_the_score_matrix_and_expanded_kv() -> None:
    flash, eager = per_layer(LLAMA8), per_layer(LLAMA8, flash=False)
    # + softmax P (h·s per token, bf16) + k and v expanded from 8 to 32 heads − the logsumexp
    assert eager - flash == CTX * (2 * HEADS * CTX + 2 * 2 * (D - KV) - 4 * HEADS)


def test_transformers_modules_keep_more_than_fused_kernels() -> None:
    # transformers' RMSNorm keeps an fp32 copy of its input (4 B), the fp32 rstd and the
    # normalized tensor before the weight (2 B), where a fused kernel keeps input (2 B) + rstd
    fused, hf = per_layer(LLAMA8), per_layer(LLAMA8, kernels="transformers")
    assert hf - fused == CTX * 2 * (4 * D + 2 * D - 2 * D)
    # its eager softmax is fp32, then cast for P·V: both kept
    eager_hf = per_layer(LLAMA8, kernels="transformers", flash=False)
    assert eager_hf - hf == CTX * (4 * HEADS * CTX + 2 * HEADS * CTX + 2 * 2 * (D - KV) - 4 * HEADS)


def test_fp32_doubles_the_activation_elements() -> None:
    bf16, fp32 = per_layer(LLAMA8), per_layer(LLAMA8, dtype="fp32")
    fp32_stats = CTX * (2 * 4 + 4 * HEADS)  # rstd and logsumexp are fp32 either way
    assert fp32 - fp32_stats == 2 * (bf16 - fp32_stats)


# --- MoE and MLA, by hand ------------------------------------------------------------------


def test_qwen3_moe_layer_by_hand() -> None:
    d, h, g, hd, e, k, fe = 2048, 32, 4, 128, 128, 8, 768
    norms = 2 * (2 * d + 4)
    attention = (
        2 * d  # q/k/v input
        + (2 * h * hd + 4 * h)
        + (2 * g * hd + 4 * g)  # QK-norm inputs + rstd per head
        + 2 * h * hd
        + 2 * g * hd
        + 2 * g * hd
        + 2 * h * hd
        + 4 * h  # q, k, v, out, logsumexp
    )
    moe = (
        2 * d  # router input
        + 4 * e
        + 8 * k
        + 4 * (k + 1)  # router probabilities, top-k indices, normalized weights
        + 8 * 3 * k
        + 4 * k  # dispatch/combine indices, routing weights of the copies
        + 2 * k * d  # the k copies of the token sent to its experts
        + 2 * k * 4 * fe  # each expert's SwiGLU on its copy: gate, act, up, product
        + 2 * k * d  # the k expert outputs (kept by the × routing-weight)
    )
    assert per_layer("Qwen/Qwen3-30B-A3B") == (norms + attention + moe) * CTX


def test_deepseek_v3_mla_layer_by_hand() -> None:
    d, h, r_q, r_kv, nope, rope, hv = 7168, 128, 1536, 512, 128, 64, 128
    a = acts("deepseek-ai/DeepSeek-V3")
    dense = next(g for g in a.layers if "dense" in g.label)
    norms = 2 * (2 * d + 4)
    mla = (
        2 * d  # input of q_a and kv_a
        + (2 * r_q + 4)
        + 2 * r_q  # q latent norm: input + rstd; its output (q_b's input)
        + (2 * r_kv + 4)
        + 2 * r_kv  # kv latent norm: input + rstd; its output (kv_b's input)
        + 2 * h * (nope + hv)  # kv_b output, kept whole (v is a view of it)
        + 2 * h * (nope + rope) * 2  # q and k per head ([nope | rope], k_rope broadcast to every head)
        + 2 * h * hv
        + 4 * h  # flash output, logsumexp
    )
    ffn = 2 * d + 4 * 2 * 18432
    assert dense.bytes_per_layer == (norms + mla + ffn) * CTX


# --- LoRA: frozen matmuls keep no input ----------------------------------------------------


def test_lora_adapter_counts_are_what_peft_prints() -> None:
    """PEFT prints "trainable params: 41,943,040" for Llama-3-8B at r=16 on every linear
    projection and 3,407,872 at r=8 on q_proj, v_proj: r·(in + out) per wrapped matrix."""
    params = count(model(LLAMA8).arch)
    full = states(params, TrainSetup(lora_rank=16, lora_targets=lora_targets("all-linear")), L)
    assert full.trainable == full.lora_params == 41_943_040
    qv = states(params, TrainSetup(lora_rank=8, lora_targets=lora_targets("q,v")), L)
    assert qv.trainable == 32 * 8 * ((D + D) + (D + KV)) == 3_407_872


def test_lora_activations_drop_only_weight_gradient_inputs() -> None:
    full = acts(LLAMA8)
    lora = acts(LLAMA8, lora_rank=16, lora_targets=("q", "v"))
    dropped = (
        8  # token ids (the embedding is frozen)
        + (2 * D + 4)  # the first layer's input norm: its input does not require grad
        + 2 * D  # the LM head's input
    ) + L * (
        2 * D  # the FFN input: gate and up frozen
        + 2 * F  # down's input: down frozen
    )
    added = L * 2 * 16 * 2  # A's output on q and on v, r bf16 per token
    # o_proj's input is the flash output, which the kernel keeps anyway
    assert full.total - lora.total == CTX * (dropped - added)


def test_lora_state_is_the_adapters_only() -> None:
    m = model(LLAMA8)
    r = train_memory(m.arch, TrainSetup(lora_rank=16))
    n, p = 41_943_040, 8_030_261_248
    assert r.states.weights == 2 * (p + n)
    assert (r.states.gradients, r.states.master, r.states.optimizer) == (2 * n, 4 * n, 8 * n)


# --- optimizer, master weights, ZeRO ------------------------------------------------------


def test_mixed_precision_adamw_is_16_bytes_per_parameter() -> None:
    """ZeRO paper: 2Ψ weights + 2Ψ gradients + 12Ψ (fp32 master, momentum, variance)."""
    p = 8_030_261_248
    s = train_memory(model(LLAMA8).arch, TrainSetup()).states
    assert (s.weights, s.gradients, s.master, s.optimizer) == (2 * p, 2 * p, 4 * p, 8 * p)
    s32 = train_memory(model(LLAMA8).arch, TrainSetup(dtype="fp32")).states
    assert (s32.weights, s32.gradients, s32.master, s32.optimizer) == (4 * p, 4 * p, 0, 8 * p)


def test_sgd_states() -> None:
    p = 8_030_261_248
    arch = model(LLAMA8).arch
    assert train_memory(arch, TrainSetup(optimizer="sgd")).states.optimizer == 0
    assert train_memory(arch, TrainSetup(optimizer="sgd-momentum")).states.optimizer == 4 * p


def test_adamw_8bit_is_block_wise() -> None:
    """bitsandbytes: two uint8 moments + one fp32 absmax per 2048 values each; tensors under
    4096 values keep fp32 moments."""
    params = count(model(LLAMA8).arch)
    q = next(t for t in params.tensors if t.part == "attention/q")
    norm = next(t for t in params.tensors if t.part == "norms/final")
    n = 4096 * 4096
    assert optimizer_bytes([q], "adamw-8bit") == 32 * (2 * n + 2 * 4 * (n // 2048))
    assert optimizer_bytes([norm], "adamw-8bit") == 2 * 4096 + 2 * 4 * 2  # 4096 values: 8-bit
    small = type(norm)("x", "norms", 4095, 1, 1, "vector", "x")
    assert optimizer_bytes([small], "adamw-8bit") == 8 * 4095


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_stages_shard_in_order(stage: int) -> None:
    p = 8_030_261_248
    s = train_memory(model(LLAMA8).arch, TrainSetup(zero=stage, gpus=8)).states
    assert s.master_per_gpu == 4 * p / (8 if stage >= 1 else 1)
    assert s.optimizer_per_gpu == 8 * p / (8 if stage >= 1 else 1)
    assert s.gradients_per_gpu == 2 * p / (8 if stage >= 2 else 1)
    assert s.weights_per_gpu == 2 * p / (8 if stage >= 3 else 1)
    # ZeRO-3 gathers one unit at a time: here the 128,256 × 4096 embedding table
    assert s.gathered_per_gpu == (2 * VOCAB * D if stage == 3 else 0)


def test_activations_are_per_gpu_micro_batch() -> None:
    one, four = acts(LLAMA8), acts(LLAMA8, batch=4, zero=3, gpus=8)
    rope_tables = 2 * 2 * 128 * CTX  # cos and sin, one copy whatever the batch
    assert four.total - rope_tables == 4 * (one.total - rope_tables)


# --- dropout from the config ---------------------------------------------------------------


def test_dropout_is_read_from_the_family_keys() -> None:
    gpt2 = model("openai-community/gpt2")
    d = dropout_of(gpt2.raw.data, gpt2.arch.text_path)
    assert (d.attention, d.residual, d.embedding) == (0.1, 0.1, 0.1)
    assert d.keys == {"attention": "attn_pdrop", "residual": "resid_pdrop", "embedding": "embd_pdrop"}
    llama = model(LLAMA8)
    assert dropout_of(llama.raw.data) == Dropout(keys={"attention": "attention_dropout"})


def test_dropout_of_a_nested_text_config() -> None:
    vl = model("Qwen/Qwen3-VL-30B-A3B-Instruct")
    assert vl.arch.text_path == ("text_config",)
    d = dropout_of({"text_config": {"attention_dropout": 0.25}}, ("text_config",))
    assert d.attention == 0.25 and d.keys == {"attention": "text_config.attention_dropout"}


def test_residual_dropout_adds_one_byte_masks() -> None:
    m = model(LLAMA8)
    setup = TrainSetup()
    base = activations(m.arch, setup, Dropout()).layers[0].bytes_per_layer
    drop = activations(m.arch, setup, Dropout(residual=0.1)).layers[0].bytes_per_layer
    assert drop - base == CTX * 2 * D  # after attention and after the FFN


# --- refusals and the command --------------------------------------------------------------


def test_unmodeled_mixers_are_refused() -> None:
    arch = load(DEFAULTS / "mamba.json").arch
    with pytest.raises(SlotdiffError, match="mamba"):
        train_memory(arch, TrainSetup())


@pytest.mark.parametrize(
    "kwargs",
    [{"zero": 4}, {"gpus": 0}, {"dtype": "fp8"}, {"optimizer": "lion"}, {"lora_rank": 0}, {"reserve": 1.0}],
)
def test_bad_setups_are_usage_errors(kwargs: dict) -> None:
    with pytest.raises(UsageError):
        TrainSetup(**kwargs)


def test_lora_target_names() -> None:
    assert lora_targets("attention") == ("q", "k", "v", "o")
    assert lora_targets("v,q,experts") == ("q", "v", "experts")
    with pytest.raises(UsageError, match="unknown target 'qkv'"):
        lora_targets("qkv")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def schema() -> dict:
    return json.loads((data_dir("schemas") / "train.schema.json").read_text())


@pytest.mark.parametrize(
    "argv",
    [
        [LLAMA8],
        [LLAMA8, "--checkpointing", "full", "--zero", "3", "--gpus", "8", "--optimizer", "adamw-8bit"],
        ["openai-community/gpt2", "--context", "1024", "--no-flash-attention", "--dtype", "fp32"],
        ["Qwen/Qwen3-30B-A3B", "--lora-rank", "16", "--lora-targets", "attention,experts"],
        ["deepseek-ai/DeepSeek-V3", "--kernels", "transformers", "--checkpointing", "selective"],
    ],
    ids=["llama", "llama zero3", "gpt2 fp32", "qwen3 lora", "dsv3"],
)
def test_json_validates_and_text_reads_at_100_columns(argv: list[str], capsys) -> None:
    argv = [raw(argv[0]).as_posix(), *argv[1:]]
    code, out, err = run(["train", *argv, "--json"], capsys)
    assert code in (0, 1), err
    data = json.loads(out)
    jsonschema.Draft202012Validator(schema()).validate(data)
    assert code == (0 if data["per_gpu"]["fits"] else 1)
    total = sum(data["state_bytes_per_gpu"].values()) + data["activations"]["peak_bytes"]
    assert math.isclose(data["per_gpu"]["total_bytes"], total)
    assert sum(t["bytes"] for t in data["activations"]["tensors"]) == data["activations"]["saved_bytes"]
    code, text, _ = run(["train", *argv, "--width", "100"], capsys)
    assert "assumes:" in text and max(len(line) for line in text.splitlines()) <= 100
    code, md, _ = run(["train", *argv, "--markdown"], capsys)
    assert md.startswith("## Training memory")


def test_fit_verdict_and_exit_status(capsys) -> None:
    code, out, _ = run(["train", str(raw(LLAMA8))], capsys)
    assert code == 1 and "DOES NOT FIT" in out  # 128 GB of state alone on one 80 GB H100
    code, out, _ = run(["train", str(raw(LLAMA8)), "--lora-rank", "16", "--checkpointing", "full"], capsys)
    assert code == 0 and "FITS" in out


def test_usage_errors_exit_2(capsys) -> None:
    assert COMMANDS["train"] == "slotdiff.commands.train"
    code, _, err = run(["train", str(raw(LLAMA8)), "--zero", "5"], capsys)
    assert code == 2 and "--zero" in err
    code, _, err = run(["train", str(DEFAULTS / "mamba.json")], capsys)
    assert code == 2 and "not modeled" in err
