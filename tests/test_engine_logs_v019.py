"""vLLM 0.19 start-up on an H100 80GB, against published logs (tests/fixtures/engine_logs/vllm/
vllm-llmd-v019-*.json: llm-d-incubation/llm-d-planner's accuracy sweep, one ``vllm serve`` log
per deployment, dense / MoE / MLA / sliding-window models, TP 1-4, PP 2 and 4, fp8 KV).

Every expected figure is the log's (``parsed``), never slotdiff's. The accounting under test
(docs/ENGINES.md, "vLLM 0.17 and later"): the profile's torch peak is the larger of the forward
and the dummy sampler (bf16 + float32 logits, softmax probabilities and the exponential draw
over max_num_seqs × vocabulary: 14 bytes a logit, read from the release's code), plus the
fused-MoE workspace the workspace manager keeps; non-torch memory grows by the all-reduce
buffers of a TP group, not a pipeline's sends; a float32 checkpoint loads in bf16.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.cost.gpus import customized, gpu
from slotdiff.cost.memory import MemoryPlan
from slotdiff.cost.weights import effective_format
from slotdiff.deploy.engine_terms import parse_version
from slotdiff.deploy.vllm import EngineArgs, EngineFit, vllm_fit

from conftest import FIXTURES

LOGS = FIXTURES / "engine_logs" / "vllm"
GiB = 2**30
HALF = 0.005  # two decimals in the log
IDS = sorted(p.stem for p in LOGS.glob("vllm-llmd-v019-*.json"))


def fixture(fid: str) -> dict[str, Any]:
    return json.loads((LOGS / f"{fid}.json").read_text(encoding="utf-8"))


def predict(fid: str, **extra: Any) -> EngineFit:
    d = fixture(fid)
    fl, p = d["flags"], d["parsed"]
    arch = load(FIXTURES / d["config"]["corpus_file"]).arch
    device = customized(gpu("h100-sxm"), memory_gib=p["total_memory_gib"])
    kv = "float8_e4m3fn" if fl["kv_cache_dtype"] == "fp8" else "bfloat16"
    plan = MemoryPlan(arch, effective_format(arch, None)[0], kv)
    args = EngineArgs(
        version=extra.pop("version", "0.19.0"),
        gpu_memory_utilization=fl["gpu_memory_utilization"],
        max_model_len=fl["max_model_len"],
        tensor_parallel_size=fl["tensor_parallel_size"],
        pipeline_parallel_size=fl["pipeline_parallel_size"],
        kv_cache_dtype=fl["kv_cache_dtype"],
        **extra,
    )
    return vllm_fit(arch, plan, device, args)


def term(fit: EngineFit, stage: int, name: str) -> float:
    return next(t.bytes for t in fit.stages[stage].terms if t.name == name) / GiB


def test_the_sweep_is_kept_with_its_sources() -> None:
    assert len(IDS) == 15
    for fid in IDS:
        d = fixture(fid)
        assert d["id"] == fid and d["engine_version"].startswith("v0.19.0")
        assert d["source"]["url"].startswith("https://github.com/llm-d-incubation/llm-d-planner/blob/")
        assert any("Available KV cache memory" in line for line in d["logged_verbatim"])
        assert (FIXTURES / d["config"]["corpus_file"]).exists()


@pytest.mark.parametrize("fid", IDS)
def test_predicted_pool_within_5_percent(fid: str) -> None:
    # The target: every term estimated, on the logged device total. The Available line
    # is the first rank's (with PP, the first stage's).
    logged = fixture(fid)["parsed"]["available_kv_cache_gib"]
    predicted = predict(fid).stages[0].available / GiB
    assert abs(predicted - logged) <= 0.05 * logged, f"{fid}: {predicted:.2f} vs {logged}"


@pytest.mark.parametrize("fid", IDS)
def test_profile_peak_of_the_last_stage_within_a_tenth_of_a_gib(fid: str) -> None:
    # The logged 'torch peak memory increase' of the last stage (it runs the sampler) against
    # max(forward, sampler + hidden states + Triton scratch) + the MoE workspace.
    peaks = fixture(fid)["parsed"]["activation_peak_gib_by_profile"]
    fit = predict(fid)
    assert abs(term(fit, -1, "activation_peak") - max(peaks)) <= 0.1, fid


def test_llama_8b_by_hand() -> None:
    # Llama-3.1-8B-Instruct, 1 x H100 (79.19 GiB), --gpu-memory-utilization 0.95, 8,192 batched
    # tokens, 1,024 sequences. The sampler peak: 1,024 x 128,256 logits x (2 + 4 + 4 + 4) B =
    # 1,838,678,016 B; the forward's hidden states 8,192 x 4,096 x 2 B = 67,108,864 B; the
    # Triton scratch 132 x 128,256 x 4 B = 67,719,168 B: 1,973,506,048 B = 1.838 GiB, above
    # the forward's 8,192 x 2 x (2 x 4,096 + 3 x 14,336) B = 0.781 GiB. Logged: 1.89 GiB.
    fid = "vllm-llmd-v019-llama31-8b-tp1"
    fit = predict(fid)
    assert term(fit, 0, "activation_peak") * GiB == pytest.approx(1_973_506_048)
    # Pool: 79.19 x 0.95 − 14.958 (16,060,522,496 B of bf16 weights) − 1.838 − 0.3 = 58.13
    # (logged 58.11; slotdiff's 4.16 GiB sampler term before this release's reading gave 55.06).
    pool = 79.19 * 0.95 - 16_060_522_496 / GiB - 1_973_506_048 / GiB - 0.3
    assert fit.stages[0].available / GiB == pytest.approx(pool, abs=1e-6)


@pytest.mark.parametrize("fid", IDS)
def test_tokens_and_concurrency_from_the_logged_memory(fid: str) -> None:
    p = fixture(fid)["parsed"]
    lo = predict(fid, available_kv_gib=p["available_kv_cache_gib"] - HALF)
    hi = predict(fid, available_kv_gib=p["available_kv_cache_gib"] + HALF)
    if fixture(fid)["flags"]["pipeline_parallel_size"] > 1:
        # every stage was given the first stage's memory; the last (it runs the sampler) had less
        assert lo.kv_pool_tokens >= p["kv_tokens"]
        full = predict(fid).kv_pool_tokens  # every term estimated, every stage its own
        assert abs(full - p["kv_tokens"]) <= 0.05 * p["kv_tokens"]
        return
    assert lo.kv_pool_tokens <= p["kv_tokens"] <= hi.kv_pool_tokens
    assert lo.max_concurrency - 0.005 <= p["max_concurrency"] <= hi.max_concurrency + 0.005


def test_moe_workspace_is_what_a_moe_model_adds() -> None:
    # Qwen3-30B-A3B: M = 8,192 tokens, top-8, expert width 768, hidden 2,048: the workspace
    # max(M·8·2,048, M·2,048) + M·8·max(1,536, 2,048) = 268,435,456 bf16 = 0.5 GiB, on top of a
    # 151,936-word sampler; the logged peak (2.68 GiB) is 0.5 GiB above a dense model's
    # (Qwen3-8B, the same vocabulary: 2.21 GiB).
    moe, dense = predict("vllm-llmd-v019-qwen3-30b-a3b-tp1"), predict("vllm-llmd-v019-qwen3-8b-tp1")
    extra = term(moe, 0, "activation_peak") - term(dense, 0, "activation_peak")
    hidden = 8192 * (2048 - 4096) * 2 / GiB  # the dense model's wider hidden states
    assert extra == pytest.approx(0.5 + hidden, abs=0.01)


def test_pipeline_stages_have_no_all_reduce_buffers() -> None:
    for fid in ("vllm-llmd-v019-llama31-8b-pp2", "vllm-llmd-v019-llama31-8b-tp2"):
        fit = predict(fid)
        logged = fixture(fid)["parsed"]["non_torch_gib_by_profile"][0]
        assert abs(term(fit, 0, "non_torch") - logged) <= 0.25, fid


def test_float32_checkpoint_loads_in_bf16() -> None:
    # gemma-2-9b's config says float32; vLLM's --dtype auto loads bf16: 17.22 GiB logged.
    fit = predict("vllm-llmd-v019-gemma2-9b-tp1")
    assert term(fit, 0, "weights") == pytest.approx(17.22, rel=0.01)
    assert any("float32" in n for n in fit.notes)


def test_releases_before_0_17_keep_the_sorted_sampler() -> None:
    # The same deployment on 0.16 (sort-based top-k/top-p, the fitted 34 B a logit, added to the
    # forward): 5.64 vs 2.23 GiB across 0.16 -> 0.17 for Qwen3-14B in the sweep's version table.
    fid = "vllm-llmd-v019-qwen3-8b-tp1"
    new, old = predict(fid), predict(fid, version="0.16.0")
    assert term(old, 0, "activation_peak") - term(new, 0, "activation_peak") > 2.5
    assert parse_version("0.16.0") < (0, 17)


def test_fit_context_sets_max_model_len(capsys: pytest.CaptureFixture[str]) -> None:
    # --context is the served length: the concurrency line is for it, unless --max-model-len is given.
    cfg = str(FIXTURES / "corpus" / "raw" / "meta-llama__Llama-3.1-8B.json")
    main(["fit", cfg, "--engine", "vllm", "--engine-version", "0.19.0", "--context", "8K", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["engine"]["max_model_len"] == 8192 and data["context"] == 8192
    main(["fit", cfg, "--engine", "vllm", "--context", "8K", "--max-model-len", "16K", "--json"])
    assert json.loads(capsys.readouterr().out)["engine"]["max_model_len"] == 16384
    main(["fit", cfg, "--engine", "vllm", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["engine"]["max_model_len"] == 131072 == data["context"]  # the model's limit
