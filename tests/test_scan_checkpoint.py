"""The scan checks each count against the checkpoint's stored count the listing carries (the
Hub's ``safetensors`` field, asked with ``expand``: no request per model), reports match /
differs / no safetensors / not compared per entry, per week the share that match, and the
disagreements first in every format (issue 26, item 5)."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from slotdiff.scan.engine import run_scan
from slotdiff.scan.html import iter_html
from slotdiff.scan.report import render_markdown, render_terminal, to_dict
from test_scan import LLAMA3, config, isolated, make_families, options, repo

from hubserver import HubServer

LLAMA3_PARAMS = 8_030_261_248  # DESIGN.md's anchor: what the published checkpoint stores


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("scan-ck")
    make_families(tmp / "families")
    stored = {"BF16": LLAMA3_PARAMS}
    repos = [
        repo("a/llama-match", config(LLAMA3), hours=1, safetensors=stored),
        # one layer less in the config than in the weights: 218,112,000 parameters a layer
        repo(
            "b/llama-edit", config(LLAMA3, num_hidden_layers=31), hours=2, safetensors={"BF16": LLAMA3_PARAMS}
        ),
        repo("c/llama-no-st", config(LLAMA3), hours=3),
        repo(
            "d/deepseek-fp8",
            config("deepseek-ai/DeepSeek-V3.2"),
            hours=4,
            safetensors={"BF16": 3_918_786_560, "F8_E4M3": 680_571_043_840, "F32": 41_108_088},
        ),
    ]
    with pytest.MonkeyPatch.context() as mp, isolated(mp, tmp), HubServer(repos) as hub:
        result = run_scan(options(hub, tmp, state=None))
        yield {"data": to_dict(result), "log": list(hub.log)}


def test_each_entry_is_checked_from_the_listing(scanned: dict) -> None:
    models = {m["repo_id"]: m for m in scanned["data"]["models"]}
    check = {rid: m["checkpoint"]["status"] for rid, m in models.items()}
    assert check == {
        "a/llama-match": "match",
        "b/llama-edit": "differs",
        "c/llama-no-st": "no safetensors",
        "d/deepseek-fp8": "not compared",
    }
    edit = models["b/llama-edit"]["checkpoint"]
    assert edit["stored_params"] - edit["expected_params"] == 218_112_000  # one Llama-3-8B layer
    assert models["d/deepseek-fp8"]["checkpoint"]["why"].startswith("quantized")
    # no request per model for the counts: the listing had them
    assert not [e for e in scanned["log"] if e.kind == "info"]


def test_weekly_share_and_disagreements_first(scanned: dict) -> None:
    data = scanned["data"]
    schema = json.loads((Path(__file__).parents[1] / "schemas" / "scan-report.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(data)), schema)
    ck = data["checkpoints"]
    assert [d["repo_id"] for d in ck["differs"]] == ["b/llama-edit"]
    (week,) = ck["weeks"]
    assert (week["compared"], week["match"], week["share"], week["no_safetensors"]) == (2, 1, 0.5, 1)
    for text in (
        render_terminal(data, width=200),
        render_markdown(data),
        html.unescape("".join(iter_html(data))),
    ):
        first = text.index("counts that differ from the checkpoint (1): b/llama-edit")
        assert first < text.index("a/llama-match")
        assert "1 of 2 counts equal the checkpoint's (50%)" in text
