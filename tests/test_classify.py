"""Fingerprints and families: same design → same fingerprint, one facet changed → distance 1.

Expected family membership comes from the models' cards and configs (which checkpoints
share an architecture), not from slotdiff's output.
"""

from __future__ import annotations

import copy
import json

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.analysis.compare import diff
from slotdiff.slots.classify import classify, distance, families, fingerprint

from conftest import DEFAULTS, RAW, raw


def model(repo: str, **changes: object):  # type: ignore[no-untyped-def]
    data = json.loads(raw(repo).read_text())
    data.update(changes)
    return load(data)


def fp(repo: str):  # type: ignore[no-untyped-def]
    return fingerprint(load(raw(repo)).fills)


# Checkpoints of one family (sizes differ, design the same), per their model cards.
SAME_FAMILY = [
    ("openai-community/gpt2", "openai-community/gpt2-xl"),
    ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B"),
    ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.2-1B"),
    ("meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-3B"),
    ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-8B"),
    ("google/gemma-2-2b", "google/gemma-2-9b"),
]


@pytest.mark.parametrize(("a", "b"), SAME_FAMILY)
def test_sizes_of_one_family_share_a_fingerprint(a: str, b: str) -> None:
    assert fp(a) == fp(b)
    assert fp(a).id == fp(b).id


EXPECTED_FAMILY = {
    "openai-community/gpt2": "GPT-2",
    "meta-llama/Llama-2-7b-hf": "Llama 2 (MHA)",
    "meta-llama/Meta-Llama-3-8B": "Llama 3 / Mistral v0.3 (dense GQA)",
    "mistralai/Mistral-7B-Instruct-v0.3": "Llama 3 / Mistral v0.3 (dense GQA)",
    "meta-llama/Llama-3.1-70B": "Llama 3.1 / 3.2 (llama3 RoPE scaling)",
    "mistralai/Mistral-7B-v0.1": "Mistral 7B v0.1 (sliding window)",
    "mistralai/Mixtral-8x7B-v0.1": "Mixtral (MoE)",
    "Qwen/Qwen2.5-7B": "Qwen2 / Qwen2.5 (q/k/v bias)",
    "Qwen/Qwen3-0.6B": "Qwen3 (QK-norm)",
    "Qwen/Qwen3-30B-A3B": "Qwen3-MoE",
    # V2-Lite: scoring_func softmax, topk_method greedy; Kimi K2: sigmoid, noaux_tc (router facet)
    "deepseek-ai/DeepSeek-V2-Lite": "DeepSeek-V2 (MLA + MoE, softmax router)",
    "moonshotai/Kimi-K2-Instruct": "Kimi K2 (MLA + MoE, sigmoid aux-loss-free router)",
    "deepseek-ai/DeepSeek-V3": "DeepSeek-V3 (MLA + MoE + MTP)",
    "deepseek-ai/DeepSeek-V3.2": "DeepSeek-V3.2 (sparse attention)",
    "google/gemma-2-2b": "Gemma 2",
    "openai/gpt-oss-20b": "gpt-oss (sliding + sinks, MoE)",
    "Qwen/Qwen3-Next-80B-A3B-Thinking": "Qwen3-Next (gated DeltaNet hybrid, MoE)",
}

# transformers' default configs of classes whose docstring names a checkpoint of a family
# whose published config is in the corpus: the same architecture.
DEFAULTS_IN_FAMILY = {
    "gpt2.json": "GPT-2",  # GPT2Config → openai-community/gpt2
    "mistral.json": "Mistral 7B v0.1 (sliding window)",  # MistralConfig → Mistral-7B-v0.1
    "gemma2.json": "Gemma 2",
    "qwen2_5_vl.json": "Qwen2-VL / Qwen2.5-VL (M-RoPE, vision)",  # docstring names Qwen2-VL-7B
}


@pytest.mark.parametrize("repo", sorted(EXPECTED_FAMILY))
def test_corpus_lands_in_its_family(repo: str) -> None:
    m = load(raw(repo))
    cls = classify(m.arch, m.fills)
    assert not cls.is_new and cls.distance == 0
    assert cls.family is not None and cls.family.name == EXPECTED_FAMILY[repo]


@pytest.mark.parametrize("name", sorted(DEFAULTS_IN_FAMILY))
def test_transformers_defaults_land_in_the_family_they_document(name: str) -> None:
    m = load(DEFAULTS / name)
    cls = classify(m.arch, m.fills)
    assert cls.distance == 0 and cls.family.name == DEFAULTS_IN_FAMILY[name]


@pytest.mark.parametrize("path", sorted(RAW.glob("*.json")), ids=lambda p: p.name)
def test_every_published_config_has_a_known_family(path) -> None:  # type: ignore[no-untyped-def]
    # fingerprints/ is generated from the corpus by tools/fingerprints.sh: a change to the
    # fills that forgets to regenerate it shows here.
    m = load(path)
    assert classify(m.arch, m.fills).distance == 0


# One design change in a real config → a new fingerprint at distance 1 from the original
# family, naming that facet (adding experts adds their router too: two facets). (Some
# alterations land on another known design: Mistral v0.1 without its window is Mistral v0.3's
# design, so these bases are chosen where none does.)
ALTERED = [
    ("google/gemma-2-9b", {"sliding_window": None}, ("attention.range",)),  # drop sliding windows
    ("Qwen/Qwen3-8B", {"num_key_value_heads": 32}, ("attention.kv",)),  # GQA → MHA
    (
        "mistralai/Mistral-7B-v0.1",
        {"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2},
        ("ffn.experts", "ffn.router"),
    ),  # add MoE
    ("Qwen/Qwen2.5-7B", {"num_attention_heads": 28, "num_key_value_heads": 1}, ("attention.kv",)),
    ("google/gemma-2-9b", {"attn_logit_softcapping": None}, ("attention.scores",)),  # drop the cap
]


@pytest.mark.parametrize(("repo", "change", "facets"), ALTERED, ids=[a[2][0] for a in ALTERED])
def test_one_design_change_is_new_at_its_distance(repo: str, change: dict, facets: tuple) -> None:
    base = load(raw(repo))
    altered = model(repo, **change)
    cls = classify(altered.arch, altered.fills)
    assert cls.is_new
    home = classify(base.arch, base.fills).family
    assert distance(fingerprint(altered.fills), home.fingerprint) == (len(facets), facets)
    assert cls.distance <= len(facets)  # another family may be nearer still (Mixtral, here)


def test_fingerprint_ignores_sizes_and_precision() -> None:
    data = json.loads(raw("meta-llama/Meta-Llama-3-8B").read_text())
    other = copy.deepcopy(data)
    other.update(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, torch_dtype="float16")
    assert fingerprint(load(data).fills) == fingerprint(load(other).fills)


def test_family_files_have_distinct_fingerprints() -> None:
    ids = [f.fingerprint.id for f in families()]
    assert len(ids) == len(set(ids))


def test_diff_llama3_vs_llama31_names_position_only() -> None:
    result = diff(raw("meta-llama/Meta-Llama-3-8B"), raw("meta-llama/Llama-3.1-8B"))
    assert [f.facet for f in result.changed()] == ["position.encoding"]
    keys = {k.path: k for k in result.keys}
    assert keys["rope_scaling"].facet == "position.encoding"
    assert keys["rope_scaling"].new["rope_type"] == "llama3"
    assert keys["max_position_embeddings"].old == 8192 and keys["max_position_embeddings"].new == 131072


def test_diff_attributes_unknown_keys_to_no_slot() -> None:
    a = json.loads(raw("openai-community/gpt2").read_text())
    b = {**a, "my_custom_flag": True}
    result = diff(a, b)
    (key,) = [k for k in result.keys if k.path == "my_custom_flag"]
    assert key.change == "added" and key.facet is None
