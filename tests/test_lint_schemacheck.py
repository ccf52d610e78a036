"""lint/schemacheck: the compiled config schema says "valid" exactly where jsonschema does.

SD102 skips jsonschema for a config the compiled check accepts, so a config the check
accepts and jsonschema rejects would lose its diagnostics. Each case here runs both on the
same value: every fixture config, every lint example, and each key of the corpus set to
values of every JSON type and to the edges of its range.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slotdiff.lint.configschema import validator
from slotdiff.lint.schemacheck import accepts, compile_schema, compiled

from conftest import CORPUS, EXAMPLES, FIXTURES

# Values of every JSON type, and numbers at the edges the schema's bounds test.
VALUES: tuple[Any, ...] = (
    None, True, False, 0, 1, -1, 2.0, 1.5, 0.0, -0.0, 1e308, float("inf"), float("nan"),
    10**30, "", "x", "8", "llama3", "bfloat16", [], [1], ["a"], [None], [1.5, "b"], {}, {"a": 1},
    {"rope_type": "yarn", "factor": 0}, {"type": "llama-3"}, {"full_attention": {"factor": -1}},
)  # fmt: skip


def _configs() -> Iterator[tuple[str, Any]]:
    for path in sorted(FIXTURES.rglob("*.json")) + sorted(EXAMPLES.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue  # SD101's files: no JSON to validate
        yield str(path.relative_to(FIXTURES.parent)), data
        if isinstance(data, dict) and isinstance(data.get("config"), dict):  # a published record
            yield f"{path.name}:config", data["config"]


def _agree(data: Any) -> None:
    assert accepts(data) == validator().is_valid(data), json.dumps(data, default=str)[:300]


def test_the_config_schema_compiles() -> None:
    """Every keyword of schemas/config.schema.json is one the check implements (else every
    file would go to jsonschema: correct, and as slow as before)."""
    assert compiled() is not None


@pytest.mark.parametrize("name,data", list(_configs()), ids=lambda v: v if isinstance(v, str) else "")
def test_fixture_configs(name: str, data: Any) -> None:
    _agree(data)


def _corpus() -> list[dict[str, Any]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(CORPUS.glob("*/*.json"))]


def test_every_corpus_key_at_every_value() -> None:
    """Each key the corpus writes (top level, text_config, rope blocks), on the first config
    that has it, set to each value above; and each key removed."""
    done: set[tuple[str, ...]] = set()
    cases = 0
    for base in _corpus():
        scopes: list[tuple[str, ...]] = [()]
        for key, value in base.items():
            if isinstance(value, dict):
                scopes.append((key,))
                scopes += [(key, k) for k, v in value.items() if isinstance(v, dict)]
        for scope in scopes:
            node: Any = base
            for part in scope:
                node = node[part]
            for key in list(node):
                if (*scope, key) in done:
                    continue
                done.add((*scope, key))
                for value in (*VALUES, "<removed>"):
                    data = copy.deepcopy(base)
                    target = data
                    for part in scope:
                        target = target[part]
                    if value == "<removed>":
                        del target[key]
                    else:
                        target[key] = value
                    _agree(data)
                    cases += 1
    assert cases > 5000


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_top_level_values(value: Any) -> None:
    _agree(value)
    _agree({"model_type": value})
    _agree({"model_type": "llama", "text_config": value})
    _agree({"model_type": "llama", "rope_parameters": {"full_attention": {"sliding_attention": value}}})


def test_unknown_keywords_leave_it_to_jsonschema() -> None:
    assert compile_schema({"type": "object", "oneOf": [{"type": "object"}]}) is None
    assert compile_schema({"$ref": "https://example.com/other.json"}) is None
    assert compile_schema({"enum": [1, True]}) is None
    assert compile_schema({"properties": {"a": {"type": "integer"}}}) is not None


def test_schema_file_is_the_one_checked(tmp_path: Path) -> None:
    """The compiled check rejects what the schema's own hand-kept parts forbid."""
    assert not accepts({"model_type": ""})  # minLength
    assert not accepts({"hidden_size": 4096})  # required: model_type
    assert not accepts({"model_type": "llama", "torch_dtype": "bf16"})  # the dtype enum
    assert not accepts({"model_type": "llama", "auto_map": {"AutoConfig": 3}})  # additionalProperties
    assert accepts({"model_type": "llama", "hidden_size": 4096.0})  # 4096.0 is an integer
    assert not accepts({"model_type": "llama", "hidden_size": True})  # a bool is not
