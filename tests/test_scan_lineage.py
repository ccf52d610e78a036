"""Lineage from model cards, pipeline-tag presets, and sizes on record from before depth was
kept: the parts of the scan report that the simulated week (test_scan_week.py) does not
reach, against the fake Hub on 127.0.0.1 where a request is involved."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotdiff.core.errors import UsageError
from slotdiff.scan.engine import run_scan
from slotdiff.scan.lineage import parse_card
from slotdiff.scan.pipelines import expand_pipeline_tags, lm_pipeline_tags, not_lm_pipeline_tags
from slotdiff.scan.sizes import comparable, size_changes
from test_scan import isolated
from test_scan_week import LLAMA3, config, options, repo

from hubserver import Fault, HubServer


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    with isolated(monkeypatch, tmp_path):
        yield


# ------------------------------------------------------------------------- model cards


def test_card_relation_declared_listed_or_inferred() -> None:
    card = "---\nbase_model: a/b\nbase_model_relation: adapter\n---\n# x\n"
    assert (parse_card(card).bases, parse_card(card).relation, parse_card(card).relation_from) == (
        ("a/b",),
        "adapter",
        "card",
    )
    merged = parse_card("---\nbase_model: [a/b, c/d]\n---\n")
    assert merged.bases == ("a/b", "c/d") and merged.relation == "merge"
    tagged = parse_card("---\nbase_model: a/b\n---\n", tags=["base_model:quantized:a/b"])
    assert (tagged.relation, tagged.relation_from) == ("quantized", "tags")
    quant = parse_card("---\nbase_model: a/b\n---\n", config=lambda: {"quantization_config": {"bits": 4}})
    assert (quant.relation, quant.relation_from) == ("quantized", "config")
    assert parse_card("---\nbase_model: a/b\n---\n").relation == "finetune"
    assert parse_card("# no front matter\n").bases == ()


def test_hostile_or_broken_cards_are_no_lineage() -> None:
    # YAML is read safely: a python tag is refused, never constructed.
    evil = parse_card('---\nbase_model: !!python/object/apply:os.system ["touch /tmp/pwned"]\n---\n')
    assert evil.bases == () and "unreadable" in (evil.note or "")
    assert parse_card("---\n: : :\n---\n").bases == ()
    ids = parse_card('---\nbase_model: ["../etc", "<x>/y", "ok/fine", 7]\n---\n')
    assert ids.bases == ("ok/fine",)  # only valid repo ids


def test_a_failing_card_leaves_the_verdict_and_notes_why(tmp_path: Path) -> None:
    down = Fault.server_error(503, times=None, files=("README.md",))
    with HubServer([repo("org/m", config(LLAMA3), 1, faults=[down])]) as hub:
        (rec,) = run_scan(options(hub, tmp_path)).records
        assert rec.verdict == "known" and rec.figures["params"] > 0
        assert rec.lineage["bases"] == [] and "503" in rec.lineage["note"]
        cards = hub.count(filename="README.md")
        assert 1 < cards <= 3  # retried under the scan's policy, then given up


def test_no_cards_reads_none(tmp_path: Path) -> None:
    with HubServer([repo("org/m", config(LLAMA3), 1, {"base_model": LLAMA3})]) as hub:
        (rec,) = run_scan(options(hub, tmp_path, cards=False)).records
        assert rec.verdict == "known" and rec.lineage is None
        assert hub.count(filename="README.md") == 0


# ------------------------------------------------------------------------ pipeline tags


def test_presets_come_from_the_data_file() -> None:
    data = json.loads((Path(__file__).resolve().parent.parent / "schemas" / "scan.json").read_text())
    assert expand_pipeline_tags("lm") == tuple(data["pipeline_presets"]["lm"]["tags"])
    assert expand_pipeline_tags("text-generation, image-text-to-text,lm")[:2] == (
        "text-generation",
        "image-text-to-text",
    )
    assert expand_pipeline_tags(None) == ()
    assert not lm_pipeline_tags() & not_lm_pipeline_tags()
    for bad in ("", ",", "Text Generation", "a/b"):
        with pytest.raises(UsageError):
            expand_pipeline_tags(bad)


def test_several_tags_are_merged_newest_first_and_capped(tmp_path: Path) -> None:
    repos = [
        repo(f"t/m{i}", config(LLAMA3), hours=i + 1, pipeline_tag=tag)
        for i, tag in enumerate(["text-generation", "image-text-to-text", "any-to-any"] * 3)
    ]
    with HubServer(repos, page_size=2) as hub:
        got = run_scan(options(hub, tmp_path, pipeline_tag="lm", limit=7, state=None, cards=False))
        assert [r.repo_id for r in got.records] == [f"t/m{i}" for i in range(7)]


# ----------------------------------------------------------------------------- sizes


def test_sizes_on_record_without_depth_are_compared_without_it() -> None:
    now = {"layers": {"n_layers": 48}, "embedding.table": {"d_model": 4096}}
    old = {"embedding.table": {"d_model": 4096}}  # an earlier scan's state, before depth
    assert comparable(now, old) == old
    assert size_changes(now, [old]) == []
    assert size_changes(now, [{"layers": {"n_layers": 32}, "embedding.table": {"d_model": 4096}}]) == [
        {"facet": "layers", "size": "n_layers", "was": 32, "now": 48}
    ]


def test_an_unreadable_model_type_is_news_once(tmp_path: Path) -> None:
    from test_scan_week import NOVEL

    with HubServer([repo("novel/one", NOVEL, hours=30)]) as hub:
        (first,) = run_scan(options(hub, tmp_path, cards=False)).records
        assert first.verdict == "new_model_type" and "d_embed" in first.unreadable["unread_keys"]
        hub.add(repo("novel/two", {**NOVEL, "n_blocks": 48}, hours=1))
        recs = {r.repo_id: r for r in run_scan(options(hub, tmp_path, cards=False)).records}
        two = recs["novel/two"]
        # Reported as new in the scan that met it; later copies say why they are not read.
        assert (two.verdict, two.reason) == ("skipped", "unreadable")
        assert "first seen by an earlier scan" in two.detail and two.unreadable["unread_keys"]
