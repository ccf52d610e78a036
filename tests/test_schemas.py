"""Data files are valid against their JSON Schemas, and every report validates too."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from slotdiff.analysis.analyze import analyze
from slotdiff.core.resources import data_dir
from slotdiff.read.source import from_file
from slotdiff.schema.keymap import known_model_types, transformers_defaults

from conftest import all_corpus

SCHEMAS = data_dir("schemas")


def schema(name: str) -> dict:
    data = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(data)
    return data


def validate(instance: object, name: str) -> None:
    jsonschema.Draft202012Validator(schema(name)).validate(instance)


def test_keymap_and_model_type_files() -> None:
    km = schema("keymap.schema.json")
    jsonschema.Draft202012Validator(km).validate(json.loads((SCHEMAS / "keymap.json").read_text()))
    mt = jsonschema.Draft202012Validator({**km["$defs"]["model_type"], "$defs": km["$defs"]})
    files = sorted((SCHEMAS / "model_types").glob("*.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        mt.validate(data)
        assert data["model_type"] == path.stem


def test_keymap_model_type_files_name_known_layer_rules() -> None:
    from slotdiff.schema.layers import RULES

    for path in (SCHEMAS / "model_types").glob("*.json"):
        for step in json.loads(path.read_text()).get("layers", []):
            assert step["rule"] in RULES, f"{path.name}: {step['rule']}"


@pytest.mark.parametrize(
    "name,schema_name", [("slots.json", "slots.schema.json"), ("gpus.json", "gpus.schema.json")]
)
def test_data_file(name: str, schema_name: str) -> None:
    validate(json.loads((SCHEMAS / name).read_text()), schema_name)


def test_fingerprint_files() -> None:
    for path in sorted(data_dir("fingerprints").glob("*.json")):
        validate(json.loads(path.read_text()), "fingerprint.schema.json")


@pytest.mark.parametrize("path", all_corpus(), ids=lambda p: p.name)
def test_every_corpus_config_reports_valid_json(path: Path) -> None:
    report = analyze(from_file(path))
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False, default=str))
    validate(data, "report.schema.json")


def test_train_numerics_names_only_known_families() -> None:
    """The per-family numerics table validates, and each model_type it lists is one transformers
    or the key map knows (a typo would silently price that family with the default dtype)."""
    data = json.loads((SCHEMAS / "train_numerics.json").read_text())
    jsonschema.Draft202012Validator(schema("train_numerics.schema.json")).validate(data)
    known = set(transformers_defaults()) | set(known_model_types())
    listed = [t for key in ("router_fp32", "softmax_in_dtype", "norm_fp32") for t in data[key]["model_types"]]
    assert listed and not [t for t in listed if t not in known]
    assert data["python_activation_saves"]["saves"]["gelu_new"] == 4  # x, tanh(.), x/2, 1 + tanh(.)
