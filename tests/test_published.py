"""slotdiff against transformers on real published configs (tools/published.py).

Every file under tests/fixtures/conformance/published/ is a config.json as its owner published it,
copied verbatim from a public repository (repository, commit and path recorded), with
transformers' figures for it computed by the harness's own oracle code. These tests hold slotdiff
to every row: exact, or a refusal that names the part slotdiff cannot count; a row transformers
cannot build is never "verified". The rows that fail only for a reason another piece of work owns
are listed in one place, tests/fixtures/conformance/published_known.json, each pinned to its
present state. Lint must agree with the config classes on the same files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from slotdiff.lint import engine
from slotdiff.lint.policy import Policy

from conftest import RAW, tool

ROOT = Path(__file__).resolve().parents[1]


conformance = tool("conformance")
harness = tool("harness")
published = tool("published")
ROWS = published.load_rows()
BY_ID = {row["hf_id"]: row for row in ROWS}
KNOWN = published.read_known()

#: Error-level lint findings on published files that are true: the file as stored is not what
#: its class reads (hand-written or trimmed by the repository that keeps it). (Hub id, code): why.
FINDINGS: dict[tuple[str, str], str] = {
    ("EleutherAI/gpt-j-6b", "SD102"): "MLC's preset adds rope_scaling {'rope_type': 'gptj'}, "
    "no RoPE type transformers has",
    ("MiniMaxAI/MiniMax-M3", "SD116"): "remote-code model_type 'minimax_m3', no auto_map in this copy",
    ("MiniMaxAI/MiniMax-M3", "SD103"): "read by common key names (remote code): its per-layer "
    "moe_layer_freq is not one of them",
    ("XiaomiMiMo/MiMo-7B-Base", "SD116"): "remote-code model_type 'mimo', no auto_map in this copy",
    ("internlm/internlm2_5-7b-chat", "SD116"): "remote-code model_type 'internlm2', no auto_map in "
    "MLC's preset",
    ("openbmb/MiniCPM-MoE-8x2B", "SD116"): "remote-code model_type 'minicpm', no auto_map in MLC's preset",
    ("stepfun-ai/Step-3.7-Flash", "SD116"): "hand-written flat keys: Step3p7Config reads only "
    "text_config, so sliding_window and num_experts are ignored (transformers builds the default model)",
    ("stepfun-ai/Step-3.7-Flash-FP8", "SD116"): "as Step-3.7-Flash",
    ("tencent/Hunyuan-A13B-Instruct", "SD103"): "remote-code model_type 'hunyuan', read by common key "
    "names: its per-layer moe_intermediate_size list is not one of them (the hunyuan_v1_moe port "
    "ignores the key)",
    ("tiiuae/Falcon-H1-0.5B-Base", "SD103"): "Megatron-Bridge's trimmed copy drops mamba_d_ssm, so "
    "FalconH1Config's default 1024 SSM channels meet 24 heads; transformers refuses it as well",
    ("tclf90/GLM-4.1V-9B-Thinking-AWQ", "SD116"): "flat text keys, no text_config: Glm4vConfig builds "
    "glm4v_text's defaults (which are this model's shape, so the figures still agree)",
}


@pytest.fixture(scope="module")
def verdicts() -> dict[str, Any]:
    return {v.hf_id: v for v in published.current()}


def test_every_row_has_its_provenance() -> None:
    """Hub id, repository, commit, path, completeness and notes; the file is named after the id."""
    for path in sorted(published.PUBLISHED.glob("*.json")):
        row = json.loads(path.read_text(encoding="utf-8"))
        source = row["source"]
        assert path.name == published.file_name(row["hf_id"]), path.name
        assert re.fullmatch(r"[^/\s]+/[^/\s]+", source["repo"]), row["hf_id"]
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), row["hf_id"]
        assert source["path"] and isinstance(source["complete"], bool) and isinstance(source["notes"], str)
        assert isinstance(row["config"], dict) and row["config"].get("model_type"), row["hf_id"]
    assert len(ROWS) >= 100


def test_references_are_current() -> None:
    """Each reference was computed for the stored config, with the registry reference's versions."""
    versions = conformance.read_json(conformance.REFERENCE)["versions"]
    stale = [row["hf_id"] for row in ROWS if not published.is_current(row, versions)]
    assert not stale, "run `python tools/conformance.py published refresh`: " + ", ".join(stale)


def test_corpus_configs_are_published_rows() -> None:
    """The corpus configs (tests/fixtures/corpus/raw) are checked through the same rows."""
    for path in sorted(RAW.glob("*.json")):
        hf_id = path.stem.replace("__", "/", 1)
        assert hf_id in BY_ID, hf_id
        stored = harness._decode(BY_ID[hf_id]["config"])
        assert json.dumps(stored) == json.dumps(json.loads(path.read_text(encoding="utf-8"))), hf_id


def test_every_published_config_is_exact_or_refused_naming_the_part(verdicts: dict[str, Any]) -> None:
    """No wrong figure, no error and no refusal that does not name what slotdiff cannot count,
    outside the known failures."""
    failing = {
        hf_id: why
        for hf_id, v in verdicts.items()
        if hf_id not in KNOWN["rows"] and (why := published.failure(v))
    }
    assert not failing, "\n".join(f"{k}: {v}" for k, v in sorted(failing.items()))


def test_known_failures_are_as_listed(verdicts: dict[str, Any]) -> None:
    """Each known failure is still what published_known.json says (status, wrong figures, trust),
    and names a listed class; a row that is now exact is taken off the list."""
    for hf_id, entry in KNOWN["rows"].items():
        assert hf_id in verdicts, f"{hf_id}: no such published row"
        assert entry["class"] in KNOWN["classes"], hf_id
        got = published.known_state(verdicts[hf_id])
        want = {k: entry[k] for k in ("status", "wrong", "trust")}
        assert got == want, f"{hf_id}: now {verdicts[hf_id].summary()}; update published_known.json"


def test_no_wrong_answer_is_verified(verdicts: dict[str, Any]) -> None:
    """A config whose figures differ from transformers' is never marked verified (known failures
    that still are say so in published_known.json, pinned by the test above)."""
    bad = [
        v.hf_id
        for v in verdicts.values()
        if v.status == "wrong" and v.trust == "verified" and v.hf_id not in KNOWN["rows"]
    ]
    assert not bad


def test_configs_transformers_cannot_build_are_never_verified(verdicts: dict[str, Any]) -> None:
    """Without a reference there is nothing slotdiff's figures were checked against."""
    assert not [v.hf_id for v in verdicts.values() if v.status == "no reference" and v.trust == "verified"]


def test_mimo_v2_flash_is_exact(verdicts: dict[str, Any]) -> None:
    """Issue 25's target: MiMo-V2-Flash as published (a 0/1 moe_layer_freq list transformers
    ignores), 308.78B parameters in transformers 5.24."""
    v = verdicts["XiaomiMiMo/MiMo-V2-Flash"]
    assert v.status == "exact", v.summary()
    assert BY_ID["XiaomiMiMo/MiMo-V2-Flash"]["reference"]["params"]["total"] == 308_778_768_832


@pytest.fixture(scope="module")
def lint_run(tmp_path_factory: pytest.TempPathFactory) -> engine.Run:
    folder = tmp_path_factory.mktemp("published")
    for row in ROWS:
        text = json.dumps(harness._decode(row["config"]), indent=2)  # Infinity as the source writes it
        (folder / published.file_name(row["hf_id"])).write_text(text, encoding="utf-8")
    return engine.lint(sorted(str(p) for p in folder.glob("*.json")), Policy())


def test_lint_agrees_with_the_config_classes(lint_run: engine.Run) -> None:
    """No error on a published config but the true findings: a list form a class accepts is no
    SD102, MLA fields of a model without MLA are no SD115, a key the class does not read is no
    SD105 misspelling of another class's key, a legacy layer type is no SD103."""
    errors = {
        (Path(d.path).stem.replace("__", "/", 1), d.code)
        for d in lint_run.diagnostics
        if d.severity == "error"
    }
    assert errors == set(FINDINGS), sorted(errors ^ set(FINDINGS))


def test_mimo_v2_flash_lints_clean(lint_run: engine.Run) -> None:
    """Issue 25's target: no error on MiMo-V2-Flash's published config."""
    mine = [d for d in lint_run.diagnostics if Path(d.path).stem == "XiaomiMiMo__MiMo-V2-Flash"]
    assert not [d.code for d in mine if d.severity == "error"]


# transformers' side ------------------------------------------------------------------------

#: Recomputed on every run: a small dense model end to end (meta count and a real-cache forward
#: of the tiny copy in the published shape).
FRESH = "openai-community/gpt2"


@pytest.fixture(scope="module")
def oracle() -> ModuleType:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    registry = conformance._registry()
    if registry.versions() != BY_ID[FRESH]["reference"]["versions"]:
        pytest.skip(
            f"references are for {BY_ID[FRESH]['reference']['versions']}, installed {registry.versions()}"
        )
    from oracle import published as oracle_published

    return oracle_published


def test_reference_is_fresh(oracle: ModuleType) -> None:
    """transformers, run now, gives the stored reference for a published row."""
    row = BY_ID[FRESH]
    fresh = oracle.reference(row["config"])
    stored = row["reference"]
    assert stored["config_sha256"] == published.config_digest(row["config"])
    for key in ("status", "params", "kv_form", "kv_config"):
        assert fresh.get(key) == stored.get(key), key
    for key in ("bytes_per_token", "state_bytes", "dtypes"):
        assert fresh["kv"][key] == stored["kv"][key], key


def test_legacy_layer_types_are_transformers(oracle: ModuleType) -> None:
    """The legacy layer-type names slotdiff reads are the ones every transformers config renames."""
    from transformers import configuration_utils

    from slotdiff.core.resources import load_schema_file

    table = load_schema_file("config_keys.json")["legacy_layer_types"]
    assert table == dict(configuration_utils._LEGACY_LAYER_TYPE_REMAP)
