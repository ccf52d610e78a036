"""slotdiff on the published shapes of every conformance row (tools/forms.py, issue 25 point 1).

tests/fixtures/conformance/forms.json holds, per registry row, the forms a published file takes
(minimal; per-layer lists left to their scalar keys; each structural key dropped), each with the
row whose transformers reference is its truth, and slotdiff's stored result on it. These tests

(a) hold every form to exact, or a refusal that names the part slotdiff cannot count, outside the
    failures listed with a class in forms_known.json; a wrong form is never "verified" (slotdiff
    run now on each wrong form);
(b) recompute slotdiff on a sample of forms and compare with the stored results, so the stored
    results cannot drift from what slotdiff says (``python tools/forms.py report`` rewrites them);
(c) recompute the forms of two types with transformers and compare them with the stored ones.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import tool

ROOT = Path(__file__).resolve().parents[1]


conformance = tool("conformance")
forms = tool("forms")
STORED = forms.read()
KNOWN = conformance.read_json(forms.KNOWN)
HOW = "run `python tools/forms.py report` (and `refresh` after a reference refresh) and commit forms.json"

#: Forms recomputed on every run (b): the shapes issue 25 found wrong, and a composite.
FIXED_SAMPLE: tuple[str, ...] = (
    "glm_moe_dsa|minimal",
    "glm_moe_dsa|lists",
    "glm_moe_dsa|drop:layer_types",
    "qwen2_moe|minimal",
    "qwen2_moe|drop:use_sliding_window",
    "llava|minimal",
    "deepseek_v4|minimal",
    "llama|drop:head_dim",
    # one form per class fixed after issue 25's first pass: refusal, loop count, derivations,
    # composite sub-configs
    "blt|minimal",
    "dory|minimal",
    "dots3_note_text|minimal",
    "dots3_note|drop:text_config.per_layer_config",
    "glm5_next|minimal",
    "mistral3|minimal",
    "shieldgemma2|minimal",
    "gemma4_unified_assistant|drop:text_config.num_kv_shared_layers",
    "hunyuan_vl|drop:vision_config.text_hidden_size",
    "molmo2|drop:adapter_config.text_hidden_size",
    # pattern strings, and forms measured on their own (equal to no stored row)
    "nemotron_h|pattern:layers_block_type",
    "glm_moe_dsa|pattern:indexer_types",
    "paligemma|drop:text_config.hidden_size",
    "dory|lists",
    # per-layer lists as the integer their class derives them from
    "qwen3_next|int:layer_types",
    "cohere2|int:layer_types",
    "mistral_large4|int:text_config.no_rope_layers",
)
ROTATING = 12


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return conformance.read_json(conformance.REFERENCE)


def test_every_built_row_has_current_forms(reference: dict[str, Any]) -> None:
    """Each built registry row has its forms, computed for the row's config as stored."""
    assert STORED["versions"] == reference["versions"]
    missing = []
    for row in conformance.rows(reference):
        entry = STORED["rows"].get(row.id)
        if entry is None or entry["digest"] != forms.row_digest(row):
            missing.append(row.id)
    assert not missing, f"{HOW}: {missing[:10]}"


def test_every_form_has_a_result() -> None:
    """Each form with a truth (a stored row's reference or its own) has slotdiff's stored result,
    and only those; a form without one is one transformers refuses to build, with its reason."""
    want = {f"{r}|{n}" for r, e in STORED["rows"].items() for n, s in e["forms"].items() if forms.compared(s)}
    rest = [s for e in STORED["rows"].values() for s in e["forms"].values() if not forms.compared(s)]
    assert all(s.get("rejected") for s in rest)
    assert want == set(STORED["results"]), HOW


def test_forms_are_exact_or_documented_refusals() -> None:
    """No wrong figure, no error and no unexplained refusal outside forms_known.json."""
    bad = forms.failing(STORED["results"], KNOWN)
    assert not bad, "\n".join(f"{k}: {v}" for k, v in sorted(bad.items())[:40])


def test_known_form_failures_are_as_listed() -> None:
    """Each listed failure is still what forms_known.json says, under a listed class."""
    for form_id, entry in KNOWN.get("forms", {}).items():
        got = STORED["results"].get(form_id)
        assert got is not None, f"{form_id}: no such form"
        assert entry["class"] in KNOWN["classes"], form_id
        assert (got["status"], got.get("wrong", [])) == (entry["status"], entry.get("wrong", [])), form_id


def test_no_wrong_form_is_verified() -> None:
    """A form slotdiff gets wrong is never reported as verified."""
    assert not forms.wrong_and_verified(STORED)


def _sample() -> list[str]:
    ids = sorted(STORED["results"])
    year, week, _ = datetime.date.today().isocalendar()
    start = (year * 53 + week) * 7919
    rotating = [ids[(start + 104729 * i) % len(ids)] for i in range(ROTATING)] if ids else []
    return [*FIXED_SAMPLE, *rotating]


@pytest.fixture(scope="module")
def form_rows(reference: dict[str, Any]) -> dict[str, Any]:
    return {row.id: row for row in forms.form_rows(STORED, reference)}


@pytest.mark.parametrize("form_id", _sample())
def test_stored_results_are_slotdiffs(form_id: str, form_rows: dict[str, Any]) -> None:
    """slotdiff, run now on the form, gives the stored result."""
    assert form_id in form_rows, form_id
    assert forms.outcome(form_rows[form_id]) == STORED["results"][form_id], HOW


@pytest.mark.parametrize("model_type", ["glm_moe_dsa", "qwen2_moe"])
def test_forms_are_transformers(model_type: str, reference: dict[str, Any]) -> None:
    """transformers, run now, gives the stored forms of this type (which keys each drops, and
    which row's reference is the truth)."""
    pytest.importorskip("transformers")
    registry = conformance._registry()
    if registry.versions() != reference["versions"]:
        pytest.skip(f"forms are for {reference['versions']}, installed {registry.versions()}")
    ignored = frozenset(conformance.read_json(ROOT / "schemas" / "keymap.json")["ignored"])
    fresh = forms.forms_of_type(reference["types"][model_type], model_type, ignored)
    stored = {k: v for k, v in STORED["rows"].items() if k.split(":")[0] == model_type}
    assert fresh == stored


def test_minimal_form_of_a_default_row_is_its_bare_name(reference: dict[str, Any]) -> None:
    """The minimal form of llama's default keeps only model_type and architectures:
    LlamaConfig() is that config."""
    spec = STORED["rows"]["llama"]["forms"]["minimal"]
    llama = next(r for r in conformance.rows(reference) if r.id == "llama")
    assert spec["truth"] == "llama"
    assert set(llama.config) - set(spec["drop"]) == {"model_type", "architectures"}


@pytest.mark.parametrize(
    ("model_type", "list_key", "values"),
    [
        ("nemotron_h", "layers_block_type", ["linear_attention", "moe", "full_attention", "mlp", "moe"]),
        ("nemotron_h", "mtp_layers_block_type", ["full_attention", "moe", "mlp"]),
        ("glm_moe_dsa", "indexer_types", ["full", "shared", "shared", "full"]),
        ("glm5_next", "indexer_types", ["full", "shared", "full", "shared"]),
        ("mistral_large4", "indexer_types", ["shared", "full", "full", "shared"]),
    ],
)
def test_pattern_strings_are_what_the_classes_read_back(
    model_type: str, list_key: str, values: list[str]
) -> None:
    """The pattern string a pattern form writes for a mixed list is one transformers' config
    class turns back into that list (the rows' own lists are often uniform: all 'F')."""
    pytest.importorskip("transformers")
    conformance._registry()
    from oracle import hf_oracle

    nested = model_type in ("glm5_next", "mistral_large4")
    node = {list_key: values}
    [(_, pattern_path, text)] = forms.pattern_forms({"text_config": node} if nested else node)
    assert len(text) == len(values)
    sub = {pattern_path[-1]: text, "num_hidden_layers": len(values)}
    if list_key == "layers_block_type":
        sub.pop("num_hidden_layers")
    config = {"model_type": model_type, **({"text_config": sub} if nested else sub)}
    built = hf_oracle._config_object(config).to_dict()
    assert (built["text_config"] if nested else built)[list_key] == values


def test_every_int_key_is_one_a_class_derives_a_list_from() -> None:
    """Each integer the int forms try is popped by some transformers config class's
    ``__post_init__`` (the list is kept honest as transformers changes), and int forms exist."""
    pytest.importorskip("transformers")
    from transformers import CONFIG_MAPPING

    read = {k for model_type in CONFIG_MAPPING for k in forms._int_keys(model_type)}
    assert read == set(forms.INT_KEYS)
    assert any(name.startswith("int:") for e in STORED["rows"].values() for name in e["forms"])
