"""slotdiff against transformers' own registry of decoder LMs (tools/conformance.py).

The reference (tests/fixtures/conformance/reference.json) holds transformers' figures for
the default config and the variants of every decoder ``model_type`` transformers 5.24
builds; expected.json records which rows slotdiff matches. These tests

(a) hold slotdiff to expected.json: an exact row that stops being exact fails, and so does a
    row that becomes exact (or changes how it is wrong) while expected.json still lists it
    otherwise: run ``python tools/conformance.py report`` and commit what it writes;
(b) recompute transformers' figures for a small sample of rows (meta builds and one tiny
    real-cache forward) and compare them with the stored ones, so the reference cannot drift
    from what transformers computes;
(c) check that docs/COVERAGE.md is exactly what ``report`` writes.

(a) and (c) run slotdiff only; (b) needs torch and transformers at the reference's versions.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import tool

ROOT = Path(__file__).resolve().parents[1]


conformance = tool("conformance")
harness = tool("harness")

#: Rows recomputed on every run (b): a dense default, an MoE default (active params), a
#: multimodal default (vision tower in the total), variants of each kind, an MoE whose
#: expert tensors disagree on the expert count, and one real-cache KV row with both
#: attention KV and recurrent state.
FIXED_SAMPLE: tuple[str, ...] = (
    "llama",
    "qwen3_moe",
    "llava",
    "gpt2:tie_word_embeddings=false",
    "qwen3_moe:num_key_value_heads=1",
    "qwen3_moe:decoder_sparse_step=2",
    "longcat_flash",  # expert tensors of two lengths: the unread rows are transformers' shapes
)
KV_SAMPLE = "lara_mini"
#: How many more meta-only rows (b) draws, changing every ISO week.
ROTATING = 2


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return conformance.read_json(conformance.REFERENCE)


@pytest.fixture(scope="module")
def results(reference: dict[str, Any]) -> list[Any]:
    return conformance.evaluate(reference)


@pytest.fixture(scope="module")
def diff(results: list[Any]) -> dict[str, list[str]]:
    return conformance.changes(conformance.read_json(conformance.EXPECTED), results)


# (a) ----------------------------------------------------------------------------------------

HOW = (
    "run `python tools/conformance.py report` and commit docs/COVERAGE.md, expected.json "
    "and schemas/coverage.json"
)


def test_exact_rows_stay_exact(diff: dict[str, list[str]]) -> None:
    """A row whose four figures equalled transformers' still does."""
    assert not diff["regressed"], "no longer exact:\n" + "\n".join(diff["regressed"])


def test_non_exact_rows_are_listed_as_they_are(diff: dict[str, list[str]]) -> None:
    """Every non-exact row is in expected.json with its status and wrong figures, and only those."""
    assert not diff["now_exact"], f"now exact ({HOW}):\n" + "\n".join(diff["now_exact"])
    assert not diff["changed"], f"status changed ({HOW}):\n" + "\n".join(diff["changed"])
    assert not diff["new"] and not diff["gone"], (
        f"rows added or removed ({HOW}): {diff['new'] + diff['gone']}"
    )


def test_refused_rows_say_why() -> None:
    """A refused or failing row carries the reason slotdiff gave."""
    expected = conformance.read_json(conformance.EXPECTED)["rows"]
    silent = [k for k, e in expected.items() if e["status"] in ("refused", "error") and not e.get("reason")]
    assert not silent


def test_expected_numbers_are_transformers() -> None:
    """expected.json records statuses only; the numbers live in reference.json (transformers')."""
    expected = conformance.read_json(conformance.EXPECTED)["rows"]
    assert all(set(e) <= {"status", "wrong", "reason"} for e in expected.values())


# (c) ----------------------------------------------------------------------------------------


def test_the_run_time_coverage_table_is_current(reference: dict[str, Any], results: list[Any]) -> None:
    """schemas/coverage.json, which every report's trust level reads, is what `report` writes."""
    want = conformance.coverage_table(reference, results)
    assert conformance.read_json(conformance.COVERAGE_JSON) == want, HOW


def test_coverage_md_is_current(reference: dict[str, Any], results: list[Any]) -> None:
    """docs/COVERAGE.md is what `report` writes from the stored reference and today's slotdiff."""
    excluded = conformance.read_json(conformance.EXCLUDED)
    published = tool("published")
    section = published.section(published.current(), published.read_known())
    shapes = tool("forms").section(tool("forms").read(), published.current())
    want = conformance.render(reference, excluded, results, [*section, *shapes])
    assert conformance.COVERAGE.read_text(encoding="utf-8") == want, HOW


def test_excluded_types_have_reasons(reference: dict[str, Any]) -> None:
    """Every registry type is either a decoder row or excluded with a reason derived from its class."""
    excluded = conformance.read_json(conformance.EXCLUDED)["types"]
    marked = {mt for mt, e in reference["types"].items() if e["status"] == "excluded"}
    assert marked == set(excluded)
    assert all(e["reason"] and e["kind"] for e in excluded.values())


# (b) ----------------------------------------------------------------------------------------


def _rotating(reference: dict[str, Any]) -> list[str]:
    """``ROTATING`` meta-only rows of cheap types, a different draw every ISO week."""
    cheap = sorted(
        row.id
        for row in conformance.rows(reference)
        if row.kv_config is None and reference["types"][row.model_type].get("seconds", 99) < 2
    )
    if not cheap:
        return []
    year, week, _ = datetime.date.today().isocalendar()
    start = (year * 53 + week) * 7919
    return [cheap[(start + 101 * i) % len(cheap)] for i in range(ROTATING)]


def _sample() -> list[str]:
    reference = conformance.read_json(conformance.REFERENCE)
    return [*FIXED_SAMPLE, KV_SAMPLE, *_rotating(reference)]


@pytest.fixture(scope="module")
def registry(reference: dict[str, Any]) -> ModuleType:
    """The transformers side, when the installed versions are the reference's."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    module = conformance._registry()
    if module.versions() != reference["versions"]:
        pytest.skip(f"reference is for {reference['versions']}, installed {module.versions()}")
    return module


@pytest.mark.parametrize("row_id", _sample())
def test_reference_is_fresh(row_id: str, reference: dict[str, Any], registry: ModuleType) -> None:
    """transformers, run now, gives the stored config and figures for this row."""
    model_type, _, variant = row_id.partition(":")
    stored = {r.id: r for r in conformance.rows(reference)}[row_id]
    with_kv = row_id == KV_SAMPLE  # one real forward; the other rows are meta builds only
    entry = registry.reference_for_type(model_type, kv=with_kv, only={variant or "default"})
    fresh = entry["rows"][variant or "default"]
    assert fresh["config"] == stored.config
    for key in ("total", "active", "parts", "experts", "model_class", "unread_expert_params"):
        assert fresh["params"].get(key) == stored.reference["params"].get(key), key
    if with_kv:
        assert fresh["kv_config"] == stored.kv_config
        kv, old = fresh["kv"], stored.reference["kv"]
        assert (kv["bytes_per_token"], kv["state_bytes"], kv["dtypes"]) == (
            old["bytes_per_token"],
            old["state_bytes"],
            old["dtypes"],
        )


def test_kv_sample_is_a_real_cache_row(reference: dict[str, Any]) -> None:
    """The KV row of the freshness sample measures both attention KV and recurrent state."""
    row = reference["types"][KV_SAMPLE]["rows"]["default"]
    assert row["kv"]["bytes_per_token"] > 0 and row["kv"]["state_bytes"] > 0


def test_delta_round_trip() -> None:
    """Stored configs are edits of their default; applying the edits gives the config back."""
    base = {"a": 1, "b": {"c": [1, 2], "d": None}, "e": "x"}
    other = {"a": 2, "b": {"c": [1, 2, 3]}, "f": {"g": 1.5}}
    assert harness.apply_delta(base, conformance.delta(base, other)) == other
    assert base == {"a": 1, "b": {"c": [1, 2], "d": None}, "e": "x"}
