"""slotdiff choose: verdicts, precision, layout, ranking and credits on hand-checkable targets.

Expected figures come from outside slotdiff: published parameter counts, the configs' own
sizes with the formulas written out here, and the KV anchors of DESIGN.md (DeepSeek-V3
70,272 B/token, Llama-3-70B 320 KiB, Qwen3-30B-A3B 96 KiB).
"""

from __future__ import annotations

import csv
import json
import math

import jsonschema
import pytest

from slotdiff.cli import COMMANDS, main
from slotdiff.core.resources import catalog_dir, data_dir
from test_imports import HEAVY, imported

from conftest import all_corpus, raw

GiB = 2**30
H100_USABLE = 80 * GiB * 0.9  # the preset's 80 GiB, 10% kept for the runtime
H200_USABLE = 141 * GiB * 0.9

LLAMA70 = str(raw("meta-llama/Llama-3.1-70B"))
LLAMA8 = str(raw("meta-llama/Llama-3.1-8B"))
QWEN_MOE = str(raw("Qwen/Qwen3-30B-A3B"))
DSV2L = str(raw("deepseek-ai/DeepSeek-V2-Lite"))
DSV3 = str(raw("deepseek-ai/DeepSeek-V3"))
GPT2 = str(raw("openai-community/gpt2"))

# Llama-3.1-70B: 70.55B parameters (model card / safetensors index); vocabulary 128,256 and
# hidden 8,192 (its config), embedding and head untied.
L70_PARAMS = 70.55e9
L70_TABLES = 2 * 128256 * 8192  # embedding + head: kept in bf16 by every quantized format
L70_KV_PER_TOKEN = 80 * 2 * 8 * 128 * 2  # layers × (K, V) × KV heads × head_dim × bf16 = 320 KiB


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def choose_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code, out, err = run(["choose", *argv, "--json"], capsys)
    assert code in (0, 1), err
    data = json.loads(out)
    jsonschema.Draft202012Validator(schema()).validate(data)
    return code, data


def schema() -> dict:
    data = json.loads((data_dir("schemas") / "choose.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(data)
    return data


def only(data: dict) -> dict:
    assert len(data["candidates"]) == 1
    return data["candidates"][0]


def by_name(data: dict) -> dict[str, dict]:
    return {c["name"]: c for c in data["candidates"]}


def test_registered() -> None:
    assert COMMANDS["choose"] == "slotdiff.commands.choose"


def test_llama70b_does_not_fit_one_h100_at_bf16(capsys) -> None:
    code, data = choose_json(["--candidates", LLAMA70, "--no-catalog", "--precisions", "bf16"], capsys)
    c = only(data)
    assert code == 1 and c["verdict"] == "no_fit"
    bf16 = c["rungs"][0]
    assert bf16["precision"] == "bf16" and not bf16["fits"]
    assert bf16["weights_bytes"] == pytest.approx(L70_PARAMS * 2, rel=1e-3)  # ≈ 141 GB
    assert L70_PARAMS * 2 > H100_USABLE
    assert "weights 141.1" in c["why"] and "77.31 GB usable" in c["why"]
    assert bf16["min_gpus"] == 2 and bf16["min_gpus_layout"]["label"] == "TP=2"


def test_llama70b_fits_one_h100_at_int4(capsys) -> None:
    code, data = choose_json(["--candidates", LLAMA70, "--no-catalog", "--precisions", "bf16,int4"], capsys)
    c = only(data)
    assert code == 0 and c["verdict"] == "fits" and c["precision"] == "int4"
    # int4 linears: 4 bits + an fp16 scale and a 4-bit zero point per group of 128.
    linears = L70_PARAMS - L70_TABLES
    int4 = linears * (4 + 20 / 128) / 8 + L70_TABLES * 2
    assert c["rungs"][1]["weights_bytes"] == pytest.approx(int4, rel=2e-3)  # ≈ 39.8 GB
    assert c["layout"]["label"] == "TP=1"
    credit = c["credits"][0]
    assert credit["facet"] == "precision.weights" and credit["decisive"]


def test_llama70b_default_ladder_picks_fp8_on_one_h100(capsys) -> None:
    _, data = choose_json(["--candidates", LLAMA70, "--no-catalog", "--context", "8192"], capsys)
    c = only(data)
    # fp8 linears at 1 byte (+ one fp32 scale per 128×128 tile) and the tables in bf16,
    # plus one sequence's KV at 8,192 tokens: under the 77.3 GB usable.
    fp8 = (L70_PARAMS - L70_TABLES) * (1 + 4 / 128**2) + L70_TABLES * 2
    need = fp8 + 8192 * L70_KV_PER_TOKEN
    assert need < H100_USABLE < L70_PARAMS * 2
    assert c["precision"] == "fp8" and c["verdict"] == "fits"
    assert c["rungs"][1]["needed_bytes_per_gpu"] == pytest.approx(need, rel=2e-3)
    facets = {cr["facet"]: cr for cr in c["credits"]}
    # Without GQA (64 KV heads instead of 8) the KV alone grows 8×: it no longer fits.
    kv = facets["attention.kv"]
    assert kv["label"] == "GQA 64/8" and kv["decisive"] and kv["effect"] == "saves"
    assert kv["this"]["kv_bytes_per_token"] == L70_KV_PER_TOKEN
    assert kv["counterfactual"]["kv_bytes_per_token"] == 8 * L70_KV_PER_TOKEN
    assert "does not fit" in kv["without"]


@pytest.mark.parametrize("gpus", [2, 4])
def test_llama70b_fits_several_h100_at_bf16_with_tp(gpus: int, capsys) -> None:
    _, data = choose_json(["--candidates", LLAMA70, "--no-catalog", "--gpus", str(gpus)], capsys)
    c = only(data)
    assert c["verdict"] == "fits" and c["precision"] == "bf16"
    assert c["layout"]["label"] == f"TP={gpus}"
    per_gpu = L70_PARAMS * 2 / gpus + 8192 * L70_KV_PER_TOKEN / gpus  # 8 KV heads split over TP
    assert c["rungs"][0]["needed_bytes_per_gpu"] == pytest.approx(per_gpu, rel=2e-3)
    assert per_gpu < H100_USABLE


def test_mla_against_gqa_at_128k(capsys) -> None:
    argv = ["--candidates", f"{DSV3},{LLAMA70}", "--no-catalog", "--gpu", "h200", "--gpus", "8"]
    _, data = choose_json([*argv, "--context", "128K", "--optimise", "kv"], capsys)
    ds, ll = data["candidates"]
    assert ds["name"] == DSV3 and ll["name"] == LLAMA70  # least KV first
    mla = 61 * (512 + 64) * 2  # layers × (latent + RoPE key) × bf16: DESIGN.md's 70,272 B
    assert ds["kv"]["bytes_per_token"] == mla == 70272
    assert ds["kv"]["bytes_at_context"] == mla * 131072  # ≈ 8.6 GiB
    assert ll["kv"]["bytes_per_token"] == L70_KV_PER_TOKEN == 320 * 1024
    assert ll["kv"]["bytes_at_context"] == 40 * GiB
    # 671B parameters at about a byte (fp8) over TP=8, plus the latent cache every TP rank holds
    assert 671e9 / 8 + mla * 131072 < H200_USABLE
    assert ds["verdict"] == ll["verdict"] == "fits"
    credit = next(cr for cr in ds["credits"] if cr["facet"] == "attention.kv")
    assert credit["label"] == "MLA" and credit["effect"] == "saves"
    # MHA counterfactual: 128 heads of K (nope 128 + rope 64) and V (128) per layer.
    assert credit["counterfactual"]["kv_bytes_per_token"] == 61 * 128 * (192 + 128) * 2
    assert credit["text"].startswith("MLA: KV 68.62 KiB/token instead of 4.77 MiB")
    # the quantized checkpoint is tried as shipped, then only narrower formats
    assert [r["precision"] for r in ds["rungs"]] == ["fp8 (checkpoint)", "int4"]
    assert len(ds["skipped_precisions"]) == 2


FOUR = f"{LLAMA8},{QWEN_MOE},{DSV2L},{LLAMA70}"


def test_ordering_follows_optimise(capsys) -> None:
    base = ["--candidates", FOUR, "--no-catalog", "--gpu", "h100", "--gpus", "2"]
    names = {LLAMA8: "l8", QWEN_MOE: "q30", DSV2L: "v2l", LLAMA70: "l70"}

    def order(key: str) -> list[str]:
        _, data = choose_json([*base, "--optimise", key], capsys)
        assert all(c["verdict"] == "fits" for c in data["candidates"])
        return [names[c["name"]] for c in data["candidates"]]

    # published sizes: 70.6B, 30.5B, 15.7B, 8.0B
    assert order("params") == ["l70", "q30", "v2l", "l8"]
    # KV per token: V2-Lite 27 × (512 + 64) × 2 = 31,104 B; Qwen3-30B-A3B 96 KiB; Llama-3.1-8B
    # 32 × 2 × 8 × 128 × 2 = 128 KiB; Llama-3.1-70B 320 KiB
    assert 27 * 576 * 2 < 96 * 1024 < 32 * 2 * 8 * 128 * 2 < L70_KV_PER_TOKEN
    assert order("kv") == ["v2l", "q30", "l8", "l70"]
    _, data = choose_json([*base, "--optimise", "decode-ms"], capsys)
    steps = [c["decode"]["step_ms"] for c in data["candidates"]]
    assert steps == sorted(steps)
    assert order("tokens-per-s") == order("decode-ms")  # one batch: tokens/s = batch / step
    _, data = choose_json([*base, "--optimise", "gpus"], capsys)
    fewest = [c["min_gpus"] for c in data["candidates"]]
    assert fewest == sorted(fewest) and fewest[-1] == 2  # only the 70B needs both at bf16
    _, data = choose_json([*base, "--optimise", "max-batch"], capsys)
    most = [c["max_batch"] for c in data["candidates"]]
    assert most == sorted(most, reverse=True)


def test_latency_budget_moves_the_precision(capsys) -> None:
    # Llama-3.1-8B at batch 1, 8K on an H100: 4.80 ms at bf16 (COSTS.md's anchor for Llama-3-8B);
    # at fp8 it reads the linears at 1 byte, the head in bf16 and the KV: ~2.7 ms.
    table = 128256 * 4096
    linears = 8.03e9 - 2 * table
    fp8_read = linears + table * 2 + 8192 * 128 * 1024
    argv = ["--candidates", LLAMA8, "--no-catalog", "--max-decode-ms", "4"]
    code, data = choose_json(argv, capsys)
    c = only(data)
    assert code == 0 and c["precision"] == "fp8"
    assert c["rungs"][0]["decode"]["step_ms"] == pytest.approx(4.80, abs=0.01)
    assert "> the 4.00 ms budget" in c["rungs"][0]["reason"]
    assert c["decode"]["step_ms"] == pytest.approx(fp8_read / 3.35e12 * 1e3, rel=0.02)
    assert c["credits"][0]["facet"] == "precision.weights" and c["credits"][0]["decisive"]
    code, data = choose_json(["--candidates", LLAMA8, "--no-catalog", "--max-decode-ms", "1"], capsys)
    c = only(data)
    assert code == 1 and c["verdict"] == "too_slow" and c["precision"] == "int4"  # the fastest
    code, data = choose_json(["--candidates", LLAMA8, "--no-catalog", "--min-tokens-per-s", "1e6"], capsys)
    assert code == 1 and only(data)["verdict"] == "too_slow"


def test_concurrency_is_batch(capsys) -> None:
    _, a = choose_json(["--candidates", LLAMA8, "--no-catalog", "--concurrency", "16"], capsys)
    _, b = choose_json(["--candidates", LLAMA8, "--no-catalog", "--batch", "16"], capsys)
    assert a["target"]["batch"] == 16 and a["candidates"] == b["candidates"]


def test_unreachable_repo_id_is_listed_with_its_reason(capsys) -> None:
    code, data = choose_json(["--candidates", "someorg/no-such-model", "--no-catalog"], capsys)
    c = only(data)
    assert code == 1 and c["verdict"] == "not_priced" and c["origin"] == "unread"
    assert c["name"] == "someorg/no-such-model" and "HF_HUB_OFFLINE" in c["why"]
    code, out, _ = run(
        ["choose", "--candidates", "someorg/no-such-model,./nowhere.json", "--no-catalog"], capsys
    )
    assert code == 1 and "someorg/no-such-model" in out and "HF_HUB_OFFLINE" in out
    assert "nowhere" in out


def catalog_ids() -> list[str]:
    with open(catalog_dir() / "index.tsv", encoding="utf-8", newline="") as fh:
        return [row["repo_id"] for row in csv.DictReader(fh, delimiter="\t")]


def test_whole_catalog_every_entry_once(capsys) -> None:
    _, data = choose_json(["--gpu", "h100", "--context", "8192"], capsys)
    names = [c["name"] for c in data["candidates"]]
    assert sorted(names) == sorted(catalog_ids())
    assert sum(data["counts"].values()) == len(names)
    assert [c["rank"] for c in data["candidates"]] == list(range(1, len(names) + 1))
    groups = [c["verdict"] for c in data["candidates"]]
    order = ["fits", "too_slow", "no_fit", "short_context", "not_priced"]
    assert groups == sorted(groups, key=order.index)
    nofit = [min(r["min_gpus"] for r in c["rungs"]) for c in data["candidates"] if c["verdict"] == "no_fit"]
    assert nofit == sorted(nofit) and nofit  # closest to fitting first
    every = by_name(data)
    # GLM-4.5 at int4 (92 layers, 355B params: ≈ 186 GB) needs more than 2 H100s
    assert min(r["min_gpus"] for r in every["zai-org/GLM-4.5"]["rungs"]) > 355e9 * 0.52 / H100_USABLE
    k3 = every["moonshotai/Kimi-K3"]  # a structure slotdiff does not count: listed, with why
    assert k3["verdict"] == "not_priced" and "cannot count parameters" in k3["why"]
    assert every["openai-community/gpt2"]["verdict"] == "short_context"  # 1,024 positions
    assert "1,024-token limit" in every["openai-community/gpt2"]["why"]
    kimi = every["moonshotai/Kimi-K2-Instruct"]["trust"]  # remote code: not checked
    assert kimi["status"] == "unverified" and any("remote code" in r for r in kimi["reasons"])
    assert every["meta-llama/Llama-3.1-8B"]["trust"]["status"] == "verified"
    assert "capability on a task is not in a config" in data["ranked_by"]


def test_named_repo_id_replaces_its_catalog_copy(capsys) -> None:
    _, data = choose_json(["--candidates", "meta-llama/Llama-3.1-8B"], capsys)
    names = [c["name"] for c in data["candidates"]]
    assert names.count("meta-llama/Llama-3.1-8B") == 1
    assert by_name(data)["meta-llama/Llama-3.1-8B"]["named"]


def test_modality_image_keeps_the_vision_models(capsys) -> None:
    _, data = choose_json(["--modality", "image", "--gpu", "h200", "--gpus", "8"], capsys)
    vision = {  # the catalog's image-text models, by their model cards
        "Qwen/Qwen3-VL-30B-A3B-Instruct",
        "Qwen/Qwen3.5-35B-A3B",
        "google/gemma-4-26B-A4B",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "moonshotai/Kimi-K3",
        "llava-hf/llava-1.5-7b-hf",
    }
    assert {c["name"] for c in data["candidates"]} == vision
    assert {e["name"] for e in data["excluded"]} == set(catalog_ids()) - vision


def test_text_and_markdown(capsys) -> None:
    argv = ["choose", "--candidates", FOUR + f",{GPT2},someorg/x", "--no-catalog", "--max-decode-ms", "10"]
    code, out, err = run([*argv, "--width", "100"], capsys)
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 100
    code, wide, _ = run(argv, capsys)  # piped without --width: 120 columns
    assert code == 0 and max(len(line) for line in wide.splitlines()) <= 120
    assert "what bought it" in out and "why not" in out and "assumes:" in out
    assert "capability on a task is not in a config" in out
    code, md, _ = run([*argv, "--markdown"], capsys)
    assert md.startswith("## Choosing a model") and "| # | model |" in md


def test_usage_errors_exit_2(capsys) -> None:
    for argv, word in (
        (["--precisions", "bf17"], "bf17"),
        (["--dtype", "fp8", "--precisions", "bf16"], "--precisions"),
        (["--no-catalog"], "--candidates"),
        (["--optimise", "vibes"], "--optimise"),
        (["--gpus", "0"], "--gpus"),
        (["--max-decode-ms", "-1"], "--max-decode-ms"),
    ):
        code, _, err = run(["choose", *argv], capsys)
        assert code == 2 and word in err and len(err.strip().splitlines()) == 1, (argv, err)


def test_dtype_tries_one_format(capsys) -> None:
    _, data = choose_json(["--candidates", LLAMA70, "--no-catalog", "--dtype", "int4"], capsys)
    c = only(data)
    assert [r["precision"] for r in c["rungs"]] == ["int4"] and c["verdict"] == "fits"


def test_json_loads_no_heavy_library_and_the_table_only_rich() -> None:
    assert imported("choose", "--json") & HEAVY == set()
    assert imported("choose") & HEAVY <= {"rich"}


def test_unmodelled_checkpoint_format_is_said_and_the_ladder_reprices(tmp_path, capsys) -> None:
    data = json.loads(raw("meta-llama/Llama-3.1-8B").read_text())
    data["quantization_config"] = {"quant_method": "hqq", "nbits": 4}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    _, out = choose_json(["--candidates", str(path), "--no-catalog"], capsys)
    c = only(out)
    assert any("not modelled" in s for s in c["skipped_precisions"])
    assert [r["precision"] for r in c["rungs"]] == ["bf16", "fp8", "int4"]
    # bf16: the published 8.03B parameters at 2 bytes
    assert c["rungs"][0]["weights_bytes"] == pytest.approx(8.03e9 * 2, rel=2e-3)


def test_moe_beside_a_dense_ffn_is_priced_as_one_wider_dense_ffn(capsys) -> None:
    # Gemma 4's experts run beside a dense FFN (2,112 wide); without them, one dense FFN of
    # equal active width: 2,112 + top-8 × 704. transformers builds that model at 4,384,167,472
    # parameters (enable_moe_block=False, intermediate_size=7,744, on the meta device).
    _, data = choose_json(["--candidates", str(raw("google/gemma-4-26B-A4B")), "--no-catalog"], capsys)
    moe = next(cr for cr in only(data)["credits"] if cr["facet"] == "ffn.experts")
    assert "not priced" not in moe["text"] and moe["effect"] == "costs"
    assert moe["counterfactual"]["params"] == 4_384_167_472


def test_every_corpus_config_gets_a_verdict(capsys) -> None:
    files = [str(p) for p in all_corpus()]
    argv = ["--candidates", ",".join(files), "--no-catalog", "--gpus", "8", "--context", "32K"]
    _, data = choose_json([*argv, "--batch", "4", "--max-decode-ms", "5"], capsys)
    assert len(data["candidates"]) == len(files)
    for c in data["candidates"]:
        assert c["why"], c["name"]
        if c["verdict"] in ("fits", "too_slow"):
            assert c["decode"]["step_ms"] > 0 and c["layout"]["gpus"] <= 8, c["name"]
            assert all(math.isfinite(r["weights_bytes"]) for r in c["rungs"] if r["weights_bytes"])
