"""The lint's data files: valid against their schemas, and the generated files not drifted.

rules.json is the one table of rules; docs/LINT.md's rule block and ``--list-rules`` come from
it. config.schema.json is generated from the key map; check-jsonschema must agree with SD102.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from slotdiff.analysis.analyze import load as load_config
from slotdiff.cli import main
from slotdiff.core.errors import SlotdiffError
from slotdiff.core.resources import data_dir
from slotdiff.lint import configschema, engine, registry
from slotdiff.lint.policy import Policy

from conftest import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = data_dir("schemas")


def load(name: str) -> dict:
    return json.loads((SCHEMAS / name).read_text())


@pytest.mark.parametrize(
    "data,schema",
    [("rules.json", "rules.schema.json")],
)
def test_data_file_is_valid(data: str, schema: str) -> None:
    s = load(schema)
    jsonschema.Draft202012Validator.check_schema(s)
    jsonschema.Draft202012Validator(s).validate(load(data))


@pytest.mark.parametrize("name", ["config.schema.json", "policy.schema.json", "rules.schema.json"])
def test_schemas_are_valid_json_schema(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(load(name))


def test_rule_codes_are_unique_and_grouped_by_hundreds() -> None:
    codes = [r.code for r in registry.table()]
    assert len(codes) == len(set(codes))
    assert codes == sorted(codes)
    names = [r.name for r in registry.table()]
    assert len(names) == len(set(names))
    group = {"1": "error", "2": "warning"}
    for r in registry.table():
        if r.code[2] in group:
            assert r.severity == group[r.code[2]], r.code


def test_config_schema_is_generated_from_the_keymap() -> None:
    on_disk = (SCHEMAS / configschema.SCHEMA_FILE).read_text()
    assert on_disk == configschema.render(), "run: PYTHONPATH=src python tools/gen_config_schema.py"


def test_a_list_a_family_reads_per_layer_is_no_sd102() -> None:
    """hunyuan_v1_moe derives top_k from uniform(moe_topk), as HunYuanMoEV1Config takes
    ``moe_topk: int | list[int]`` (Hunyuan-A13B writes one entry per layer); ERNIE-4.5-VL reads
    moe_intermediate_size as [text, vision]: both list forms pass the schema, a string does not."""
    props = configschema.generate()["$defs"]["model"]["properties"]
    for key in ("moe_topk", "moe_intermediate_size"):
        assert "array" in props[key]["type"], key
    config = {"model_type": "hunyuan_v1_moe", "num_hidden_layers": 2, "num_experts": 8, "moe_topk": [2, 2]}
    codes = {d.code for d in _lint(config)}
    assert "SD102" not in codes
    assert "SD102" in {d.code for d in _lint({**config, "moe_topk": "2"})}


@pytest.mark.parametrize(
    ("moe_topk", "code"), [([2, "2"], "SD102"), ([], "SD102"), ([2, 1], "SD103"), ([None], "SD103")]
)
def test_a_per_layer_list_slotdiff_cannot_read_as_one_value_is_an_error(moe_topk: list, code: str) -> None:
    """The entries hold the field's type and bounds and the list is not empty (schema, SD102);
    entries that differ or are null are refused by same() naming the key (SD103), never priced
    as an unknown top-k (uniform() gave None: "MoE 8×top-None", active parameters too low)."""
    config = {"model_type": "hunyuan_v1_moe", "num_hidden_layers": 2, "num_experts": 8, "moe_topk": moe_topk}
    hits = [d for d in _lint(config) if d.code == code]
    assert hits and any("moe_topk" in d.message for d in hits)
    if code == "SD103":
        with pytest.raises(SlotdiffError, match="moe_topk"):
            load_config(config)


def _lint(config: dict) -> tuple:
    name = "config.json"
    return engine.lint([name], Policy(), texts={name: json.dumps(config).encode()}).diagnostics


def _load_tool(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def test_docs_rule_block_matches_the_table() -> None:
    gen = _load_tool("gen_lint_docs")
    current = gen.DOC.read_text()
    assert gen.render(current) == current, "run: PYTHONPATH=src python tools/gen_lint_docs.py"
    for r in registry.table():
        assert f"| `{r.code}` | {r.name} | {r.severity} |" in current


def test_list_rules_comes_from_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--list-rules"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out[1:]] == [r.code for r in registry.table()]
    assert main(["lint", "--list-rules", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["code"], r["severity"], r["what"]) for r in rows] == [
        (r.code, r.severity, r.what) for r in registry.table()
    ]


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--explain", "sd105"]) == 0
    text = capsys.readouterr().out
    info = registry.by_code()["SD105"]
    flat = " ".join(text.split())  # wrapped at the output width, at spaces only
    assert text.startswith("SD105 misspelled-key (error)") and info.why in flat and info.fix in flat
    assert main(["lint", "--explain", "SD999"]) == 2


def _check_jsonschema() -> str | None:
    return shutil.which("check-jsonschema") or (
        str(Path(sys.executable).parent / "check-jsonschema")
        if (Path(sys.executable).parent / "check-jsonschema").exists()
        else None
    )


def test_check_jsonschema_agrees_with_sd102() -> None:
    """The schema works on its own: check-jsonschema fails exactly the SD102 examples."""
    tool = _check_jsonschema()
    if tool is None:
        pytest.fail("check-jsonschema is not installed: pip install '.[test]'")
    schema = str(SCHEMAS / configschema.SCHEMA_FILE)
    files = sorted(p for p in EXAMPLES.glob("*/*/*.json") if ".base." not in p.name)
    bad = [p for p in files if p.parent.name in ("SD102",) and p.parent.parent.name == "negative"]
    parseable = [p for p in files if p.parent.name != "SD101" or p.parent.parent.name == "positive"]
    ok = subprocess.run(
        [tool, "--schemafile", schema, *map(str, (p for p in parseable if p not in bad))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for path in bad:
        res = subprocess.run(
            [tool, "--schemafile", schema, str(path)], capture_output=True, text=True, check=False
        )
        assert res.returncode == 1, f"{path}: {res.stdout}"
