"""Sources: local files and folders, the bundled catalog, key positions, nested text configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotdiff.core.errors import SlotdiffError
from slotdiff.read.jsonpos import JSONInputError, parse
from slotdiff.read.source import catalog_entries, from_catalog, from_file, resolve

from conftest import RAW, raw


def test_file_and_folder(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(raw("openai-community/gpt2").read_bytes())
    assert from_file(tmp_path / "config.json").data["n_embd"] == 768
    assert resolve(str(tmp_path)).data["n_embd"] == 768


def test_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(SlotdiffError, match=r"no config\.json"):
        resolve(str(tmp_path))


def test_catalog_holds_every_published_corpus_config() -> None:
    ids = {e.repo_id for e in catalog_entries()}
    files = {p.name for p in RAW.glob("*.json")}
    assert {i.replace("/", "__") + ".json" for i in ids} == files
    for e in catalog_entries():
        served = from_catalog(e.repo_id)
        assert served.data == json.loads(raw(e.repo_id).read_text())
        assert served.origin == "catalog" and e.source in served.note


def test_trimmed_catalog_copy_says_so() -> None:
    assert "trimmed" in from_catalog("meta-llama/Llama-4-Scout-17B-16E-Instruct").note


def test_offline_repo_id_falls_back_to_catalog() -> None:
    # conftest sets HF_HUB_OFFLINE=1 and the HF cache holds nothing for this repo.
    got = resolve("Qwen/Qwen3-30B-A3B")
    assert got.origin == "catalog"
    assert "HF_HUB_OFFLINE" in got.note and "catalog" in got.note


def test_offline_unknown_repo_is_an_error() -> None:
    with pytest.raises(SlotdiffError, match="HF_HUB_OFFLINE"):
        resolve("someone/not-in-the-catalog")


def test_positions_point_at_keys() -> None:
    text = '{\n  "a": 1,\n  "text_config": {\n    "hidden_size": 4096\n  },\n  "l": [1, 2]\n}\n'
    p = parse(text)
    assert p.positions[("a",)] == (2, 3)
    assert p.positions[("text_config", "hidden_size")] == (4, 5)
    assert p.positions[("l", 1)] == (6, 12)


def test_duplicate_keys_are_recorded() -> None:
    p = parse('{"a": 1, "a": 2}')
    assert p.value == {"a": 2}
    assert p.duplicates == ((("a",), (1, 10)),)


def test_invalid_json_has_a_position() -> None:
    with pytest.raises(JSONInputError) as err:
        parse('{\n  "a": 1,\n  "b": \n}')
    assert (err.value.line, err.value.col) == (4, 1)


def test_depth_cap() -> None:
    with pytest.raises(JSONInputError, match="nesting deeper"):
        parse("[" * 100 + "]" * 100)


def test_nested_text_config() -> None:
    got = from_file(raw("llava-hf/llava-1.5-7b-hf"))
    assert got.text_path == ("text_config",)
    assert got.text["model_type"] == "llama"
