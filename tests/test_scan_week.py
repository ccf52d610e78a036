"""A simulated Hub week, scanned as a team watching the Hub would: what the report tells them.

Against the fake Hub (tests/hubserver.py, 127.0.0.1 only) with the bundled family files.
Figures are held to hand arithmetic written here (Llama-3-8B's tensors counted by shape),
never to slotdiff's own output; verdicts and differences to what each config was built to
change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotdiff.core.jsonout import Stream
from slotdiff.scan.engine import ScanOptions, run_scan
from slotdiff.scan.html import render_html
from slotdiff.scan.markdown import _trimmed
from slotdiff.scan.report import render_markdown, render_terminal, to_dict
from slotdiff.scan.verdict import VERDICTS
from test_scan import FAST, isolated

from conftest import raw
from hubserver import HubServer, Repo, model_card

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime.now(UTC)
LLAMA3 = "meta-llama/Meta-Llama-3-8B"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    with isolated(monkeypatch, tmp_path):
        yield


def config(repo_id: str, **changes: Any) -> dict[str, Any]:
    data = json.loads(raw(repo_id).read_text(encoding="utf-8"))
    data.update(changes)
    return data


def repo(repo_id: str, cfg: Any, hours: float, card: dict[str, Any] | None = None, **kw: Any) -> Repo:
    files: dict[str, Any] = {} if cfg is None else {"config.json": cfg}
    if card is not None:
        files["README.md"] = model_card(**card)
    return Repo(repo_id, files=files, created_at=NOW - timedelta(hours=hours), **kw)


# Llama-3-8B by hand: per layer q 4096², k and v 4096×1024, o 4096², gate/up/down 3×4096×14336,
# two RMSNorm weights of 4096; embedding and untied head 128256×4096 each; final norm 4096.
LAYER = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336 + 2 * 4096
OUTSIDE = 2 * 128256 * 4096 + 4096
LLAMA3_PARAMS = 32 * LAYER + OUTSIDE  # 8,030,261,248 (transformers' meta build says the same)
KV_PER_LAYER = 2 * 8 * 128 * 2  # K and V, 8 KV heads of 128, bf16

NOVEL = {  # a new architecture whose keys the schema layer does not know (no width, no depth)
    "model_type": "novel_lm",
    "architectures": ["NovelForCausalLM"],
    "d_embed": 4096,
    "n_blocks": 40,
    "n_q_heads": 32,
    "vocab_size": 128256,
    "intermediate_size": 14336,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}


def week() -> list[Repo]:
    biased = config(LLAMA3, attention_bias=True)
    awq = config(LLAMA3, quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128})
    return [
        repo(LLAMA3, config(LLAMA3), hours=100, downloads=50_000),
        repo("up/llama3-48l", config(LLAMA3, num_hidden_layers=48), hours=2),
        repo("q/llama3-8b-awq", awq, 3, {"base_model": LLAMA3, "base_model_relation": "quantized"}),
        repo("ft/llama3-8b-chat", config(LLAMA3, bos_token_id=128000), 4, {"base_model": LLAMA3}),
        repo("novel/lm-1", NOVEL, hours=5),
        repo("yarn/llama31-yarn", config("meta-llama/Llama-3.1-8B", rope_scaling=YARN), hours=6),
        repo("moe/qwen3-256e", config("Qwen/Qwen3-30B-A3B", num_experts=256), hours=7),
        repo("a/biased-ft", biased, 8, {"base_model": "some/base-not-listed"}),
        repo(
            "b/biased-q",
            biased,
            9,
            {"base_model": "some/base-not-listed", "base_model_relation": "quantized"},
        ),
        repo("adapter/lora", None, 10, {"base_model": LLAMA3, "base_model_relation": "adapter"}),
        repo("mm/llama-vlm", config(LLAMA3, vocab_size=128264), 11, pipeline_tag="image-text-to-text"),
        repo("img/classifier", {"model_type": "vit"}, 12, pipeline_tag="image-classification"),
    ]


def options(hub: HubServer, tmp: Path, **kw: Any) -> ScanOptions:
    base: dict[str, Any] = {
        "since": "7d",
        "workers": 4,
        "timeout": 2.0,
        "deadline": 10.0,
        "retry": FAST,
        "state": tmp / "state.json",
        "endpoint": hub.url,
        "cache_dir": str(tmp / "hf-cache"),
        "token": None,
    }
    base.update(kw)
    return ScanOptions(**base)


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("week")
    with pytest.MonkeyPatch.context() as mp, isolated(mp, tmp), HubServer(week()) as hub:
        result = run_scan(options(hub, tmp, pipeline_tag="lm"))
        data = json.loads(json.dumps(to_dict(result)))
        yield {"result": result, "data": data, "log": list(hub.log)}


def _models(scanned: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["repo_id"]: m for m in scanned["data"]["models"]}


def test_lm_preset_lists_every_language_model_tag_and_no_other(scanned) -> None:
    listed = {m["repo_id"] for m in scanned["data"]["models"]}
    assert "mm/llama-vlm" in listed  # image-text-to-text: a multimodal LM
    assert "img/classifier" not in listed  # image-classification: not asked for
    tags = scanned["data"]["scan"]["filters"]["pipeline_tags"]
    assert {"text-generation", "image-text-to-text", "any-to-any", "audio-text-to-text"} <= set(tags)
    # One listing per tag, each filtered by the server.
    asked = {e.query.get("pipeline_tag", [None])[0] for e in scanned["log"] if e.kind == "list"}
    assert asked == set(tags)


def test_each_entry_carries_the_pipelines_figures(scanned) -> None:
    models = _models(scanned)
    f = models[LLAMA3]["figures"]
    assert f["params"] == f["active_params"] == LLAMA3_PARAMS == 8_030_261_248
    assert f["weight_bytes"] == 2 * LLAMA3_PARAMS  # bf16
    assert f["kv_bytes_per_token"] == 32 * KV_PER_LAYER == 131_072
    # 16.06 GB of weights and 1.07 GB of KV at 8192 tokens fit one 80 GB H100.
    assert (f["gpu"], f["fits"], f["min_gpus"]) == ("h100-sxm", True, 1)
    assert f["trust"] == "verified" and f["trust_reasons"] == []

    deep = models["up/llama3-48l"]["figures"]
    assert deep["params"] == 48 * LAYER + OUTSIDE == 11_520_053_248
    assert deep["kv_bytes_per_token"] == 48 * KV_PER_LAYER
    # The AWQ copy: same parameters; the linear layers at 4 bits plus, per group of 128 weights,
    # an fp16 scale and a 4-bit zero point; embedding, head and norms stay bf16.
    q = models["q/llama3-8b-awq"]["figures"]
    linear = 32 * (LAYER - 2 * 4096)
    bf16 = 2 * (2 * 128256 * 4096 + 32 * 2 * 4096 + 4096)
    assert q["params"] == LLAMA3_PARAMS
    assert q["weight_bytes"] == linear // 2 + linear // 128 * (2 + 0.5) + bf16 == 5_727_854_592


def test_novelty_order_with_unreadable_new_model_types_first(scanned) -> None:
    verdicts = [m["verdict"] for m in scanned["data"]["models"]]
    assert verdicts == sorted(verdicts, key=VERDICTS.index)
    first = scanned["data"]["models"][0]
    assert first["repo_id"] == "novel/lm-1" and first["verdict"] == "new_model_type"
    unread = first["unreadable"]
    assert {"d_embed", "n_blocks", "n_q_heads"} <= set(unread["unread_keys"])
    assert "d_model" in unread["why"]
    # The nearest model_type by key overlap is the best Jaccard over transformers' config classes.
    defaults = json.loads((ROOT / "schemas" / "defaults.json").read_text())
    keys = set(NOVEL)
    scores = {
        t: len(keys & set(d)) / len(keys | set(d))
        for t, d in defaults.items()
        if not t.startswith("_") and isinstance(d, dict) and len(d) >= 3
    }
    near = unread["nearest_by_keys"]
    assert near["overlap"] == pytest.approx(max(scores.values()), abs=1e-3)
    assert scores[near["model_type"]] == pytest.approx(max(scores.values()))


def test_sizes_count_for_dense_models_and_every_difference_has_values(scanned) -> None:
    models = _models(scanned)
    deep = models["up/llama3-48l"]
    assert deep["verdict"] == "new_sizes"
    assert {"facet": "layers", "size": "n_layers", "was": 32, "now": 48} in deep["size_changes"]
    moe = models["moe/qwen3-256e"]
    assert moe["verdict"] == "new_sizes"
    assert {"facet": "ffn.experts", "size": "experts", "was": 128, "now": 256} in moe["size_changes"]
    yarn = models["yarn/llama31-yarn"]
    assert yarn["verdict"] == "new_fingerprint"
    (rope,) = [d for d in yarn["nearest"]["differs"] if d["facet"] == "position.encoding"]
    assert "llama3 scaling ×8" in rope["was"] and "yarn scaling ×4" in rope["now"]
    md = render_markdown(scanned["data"])
    assert "layers 32 → 48" in md and "experts 128 → 256" in md
    assert "RoPE θ=5e5, llama3 scaling ×8 → RoPE θ=5e5, yarn scaling ×4" in md
    term = render_terminal(scanned["data"], width=100)
    assert "layers 32 → 48" in term


def test_derivatives_are_grouped_under_their_base(scanned) -> None:
    models = _models(scanned)
    assert models["q/llama3-8b-awq"]["lineage"] == {
        "bases": [LLAMA3],
        "relation": "quantized",
        "relation_from": "card",
        "note": None,
    }
    assert models["ft/llama3-8b-chat"]["lineage"]["relation"] == "finetune"  # inferred: no relation
    groups = {g["base"]: g for g in scanned["data"]["lineage"]}
    llama = groups[LLAMA3]
    assert llama["in_scan"] and llama["count"] == 3
    assert llama["by_relation"] == {"adapter": 1, "finetune": 1, "quantized": 1}
    other = groups["some/base-not-listed"]
    assert not other["in_scan"] and other["count"] == 2
    md = render_markdown(scanned["data"])
    # Known derivatives fold into their base's row; the design seen only in derivatives of a
    # base outside the scan is one entry, with the other derivative counted under it.
    known = md.split("### Known family (")[1].split("\n### ")[0]
    (row,) = [line for line in known.splitlines() if line.startswith("| [")]
    assert row.startswith(f"| [{LLAMA3}]") and "(+2 derivatives (1 finetune, 1 quantized))" in row
    designs = md.split("### New fingerprint")[1].split("\n### ")[0].split("#### ")
    entry = next(part for part in designs if "a/biased-ft" in part or "b/biased-q" in part)
    assert entry.count("- **[") == 1 and "1 derivative (1 quantized)" in entry


def test_markdown_and_html_read_the_models_twice_and_hold_none_but_the_novel(scanned) -> None:
    # A 50,000-model report is spooled from the journal, never held: the renderers get the
    # models as a Stream and may read it twice (the novel sections and the known models'
    # lineage, then a row per model). The text must be the one the list gives.
    data = scanned["data"]
    reads = []

    def models() -> Iterator[dict[str, Any]]:
        reads.append(len(reads))
        return iter(json.loads(json.dumps(data["models"])))

    streamed = {**data, "models": Stream(models, len(data["models"]))}
    assert render_markdown(streamed) == render_markdown(data) and len(reads) == 2
    reads.clear()
    assert render_html(streamed) == render_html(data) and len(reads) == 2


@given(st.lists(st.sampled_from(["", " ", "\t", "a", "b ", "c\nd", "\n", "e\n\n"]), max_size=12))
def test_markdown_lines_are_trimmed_as_one_joined_string_would_be(lines: list[str]) -> None:
    assert "".join(_trimmed(iter(lines))) == "\n".join(lines).rstrip() + "\n"


def test_report_validates_against_its_schema(scanned) -> None:
    schema = json.loads((ROOT / "schemas" / "scan-report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(scanned["data"])


def test_cards_are_one_bounded_get_each(scanned) -> None:
    cards = [e for e in scanned["log"] if e.filename == "README.md"]
    by_repo: dict[str, int] = {}
    for e in cards:
        by_repo[e.repo_id] = by_repo.get(e.repo_id, 0) + 1
    assert all(n == 1 for n in by_repo.values()) and "adapter/lora" in by_repo
    assert all(e.method == "GET" for e in cards)
