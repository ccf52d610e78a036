"""What issue 29 asked the reports to show, checked end to end: the parameter table by part,
layers, the longest context and its KV beside the workload's (text, Markdown, JSON); raw key
changes in ``diff`` attributed to their slots; an unknown model_type read like the known one
it is; the new facets priced; every multimodal family's image path; schemas/routers.json as
tools/gen_routers.py writes it.

Expected figures come from the seeds or the configs themselves (Llama-3.1-8B: 32 layers,
131,072 positions, 128256 × 4096 embedding; 16 GiB of KV at 128K in seed 000).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import analyze, load
from slotdiff.analysis.compare import diff
from slotdiff.cost.images import injection_unit
from slotdiff.cost.inventory.tensor import Unsupported
from slotdiff.cost.kv import kv_cost
from slotdiff.cost.params import count
from slotdiff.render import markdown, terminal
from slotdiff.slots.classify import classify

from conftest import raw, tool

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "tests" / "fixtures" / "corpus" / "raw"
GiB = 1024**3


def test_text_and_markdown_show_parts_layers_and_the_longest_context() -> None:
    report = analyze(raw("meta-llama/Llama-3.1-8B"))
    text = terminal.render(report, width=200)
    md = markdown.render(report)
    for out in (text, md):
        assert "layers 32" in out
        assert "longest context 131,072 tokens" in out
        assert "KV cache 16 GiB there" in out  # seed 000: 128 KiB × 131072 = 16 GiB
        assert "beside 1 GiB at the workload's 8,192" in out
        assert "525.3M" in out  # embedding 128256 × 4096 (seed 000)
        assert "5.64B" in out  # FFN 32 × 3 × 4096 × 14336
    assert "parameters by part" in text
    assert "| part | params | share |" in md
    shape = report.to_dict()["shape"]
    assert shape == {
        "layers": 32,
        "max_context": {"tokens": 131072, "source": "max_position_embeddings"},
        "kv_bytes_at_max_context": 16 * GiB,
        "state_bytes_per_sequence": 0,
    }


def test_diff_attributes_layer_count_vocabulary_and_widths_to_their_slots() -> None:
    result = diff(raw("openai-community/gpt2"), raw("meta-llama/Llama-3.1-8B"))
    facet = {k.path: k.facet for k in result.keys}
    # the issue: "12 -> 32 layers never shows"; both configs name their depth, each its own way
    assert facet["n_layer"] == facet["num_hidden_layers"] == "norm.residual"
    assert facet["vocab_size"] == "embedding.table"
    assert facet["num_attention_heads"] == facet["num_key_value_heads"] == "attention.kv"
    assert facet["intermediate_size"] == "ffn.activation"
    assert facet["rope_theta"] == "position.encoding"
    old = {k.path: k.old for k in result.keys}
    new = {k.path: k.new for k in result.keys}
    assert old["n_layer"] == 12 and new["num_hidden_layers"] == 32
    assert new["vocab_size"] == 128256 and old["vocab_size"] == 50257
    # what is left unattributed carries no structure (dropout, token ids, cache flags)
    assert all(k.facet or k.free for k in result.keys)
    assert len(result.keys) > 30  # key by key, never one replaced root


def renamed(repo: str, model_type: str) -> dict[str, Any]:
    config = json.loads(raw(repo).read_text())
    config["model_type"] = model_type
    config["architectures"] = ["RenamedForCausalLM"]
    return config


def test_a_renamed_qwen3_moe_is_nearest_qwen3_moe_with_its_qk_norm() -> None:
    model = load(renamed("Qwen/Qwen3-30B-A3B", "qwen3_moe_renamed"))
    cls = classify(model.arch, model.fills)
    assert not model.arch.known_model_type and cls.new_model_type
    assert cls.family is not None and cls.family.name == "Qwen3-MoE" and cls.distance == 0
    assert cls.read_as == "qwen3_moe"
    assert "QK-norm" in cls.label
    assert model.fills["attention.qk_norm"].kind == "qk-norm"
    # the config's own sizes are kept: 128 experts, 8 per token, 48 layers (its config.json)
    assert model.fills["ffn.experts"].size("experts") == 128 and model.arch.n_layers == 48
    text = terminal.render(analyze(model), width=200)
    assert "new model_type 'qwen3_moe_renamed': nearest family Qwen3-MoE, same design" in text
    assert "read as qwen3_moe" in text


TEXT_ONLY = [p for p in sorted(RAW.glob("*.json")) if "text_config" not in json.loads(p.read_text())]


@pytest.mark.parametrize("path", TEXT_ONLY, ids=lambda p: p.stem)
def test_every_published_config_renamed_lands_on_its_own_family(path: Path) -> None:
    """A corpus config under a model_type nobody knows is classified as the original is."""
    original = load(path)
    home = classify(original.arch, original.fills)
    data = json.loads(path.read_text())
    data["model_type"] = "renamed_lm"
    copy = load(data)
    cls = classify(copy.arch, copy.fills)
    if home.distance != 0:
        return  # the original is not an exact known design: nothing to land on
    assert cls.family is not None and cls.family.name == home.family.name
    assert cls.distance == 0 and cls.new_model_type


def test_a_renamed_config_that_matches_no_family_keeps_the_common_reading() -> None:
    config = renamed("Qwen/Qwen3-30B-A3B", "something_new")
    config["num_local_experts"] = config.pop("num_experts")  # Mixtral's name: no family's whole set
    config["hidden_act"] = "gelu"  # a design no known family has with these keys
    model = load(config)
    assert model.arch.donor is None
    assert any("read by their common names" in n for n in model.arch.notes)


@pytest.mark.parametrize(
    ("repo", "facet", "moves_params"),
    [
        ("Qwen/Qwen3-Next-80B-A3B-Thinking", "attention.gate", True),  # the q projection's gate half
        ("google/gemma-2-9b", "attention.scores", False),  # a cap and a scalar: elementwise
    ],
)
def test_new_facets_are_priced_through_the_counterfactual_path(
    repo: str, facet: str, moves_params: bool
) -> None:
    report = analyze(raw(repo))
    change = next(c for c in report.changes if c.facet == facet)
    assert change.rule and change.deltas
    assert (change.deltas["params"] > 0) is moves_params
    assert change.deltas["kv_bytes_per_token"] == 0


def test_the_attention_gate_costs_what_the_widened_query_projection_holds() -> None:
    # Qwen3-Next: q_proj is d × 2·h·hd instead of d × h·hd on each full-attention layer
    config = json.loads(raw("Qwen/Qwen3-Next-80B-A3B-Thinking").read_text())
    d, h, hd = config["hidden_size"], config["num_attention_heads"], config["head_dim"]
    layers = config["num_hidden_layers"] // config["full_attention_interval"]
    change = next(
        c for c in analyze(raw("Qwen/Qwen3-Next-80B-A3B-Thinking")).changes if c.facet == "attention.gate"
    )
    assert change.deltas["params"] == layers * d * h * hd


def _conformance() -> Any:
    return tool("conformance")


def test_every_multimodal_family_of_the_harness_has_its_image_path_priced() -> None:
    conformance = _conformance()
    reference = conformance.read_json(conformance.REFERENCE)
    seen: dict[str, int] = {}
    for row in conformance.rows(reference):
        if ":" in row.id:
            continue
        try:
            model = load(row.config)
        except Exception:  # refused configs are not this test's subject
            continue
        if model.arch.vision is None or not model.fills["modality.input"].kind.startswith("vision"):
            continue  # text only, or a tower for another input (Evolla reads protein)
        try:
            params = count(model.arch)
        except Unsupported:
            continue  # the tower is refused honestly: nothing is priced
        kv = kv_cost(model.arch, 1).bytes_per_token
        unit = injection_unit(model.arch, params, kv)
        kind = model.fills["modality.input"].kind
        expected = "cross-attention" if kind.endswith("cross-attention") else "tokens"
        assert unit.method == expected, row.id
        assert unit.decoder_input_bytes_per_state == 2 * model.arch.get("d_model"), row.id
        assert unit.flops_per_state > 0 and unit.kv_bytes_per_state >= 0, row.id
        seen[unit.method] = seen.get(unit.method, 0) + 1
    assert seen.get("tokens", 0) > 40 and seen.get("cross-attention", 0) >= 1


def test_slotdiff_image_prints_the_injection_for_a_family_without_an_image_rule(tmp_path: Path) -> None:
    conformance = _conformance()
    config = conformance.read_json(conformance.REFERENCE)["types"]["unlimited_ocr"]["rows"]["default"][
        "config"
    ]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    out = subprocess.run(
        [sys.executable, "-m", "slotdiff", "image", str(path), "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["injection"]["method"] == "tokens" and data["images"] == []
    assert "not described" in data["images_unsupported"]


def test_routers_json_is_what_the_tool_reads_from_transformers() -> None:
    pytest.importorskip("transformers")
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_routers.py")], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == json.loads((ROOT / "schemas" / "routers.json").read_text())
