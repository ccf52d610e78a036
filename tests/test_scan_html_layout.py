"""The scan's HTML report as a reader at a laptop sees it (issue 30, item 12), in real Chromium.

At 1280 and 1024 pixels nothing scrolls sideways (every cell of the entries table is measured
in the browser), a class label takes at most a few lines, the derivatives section says what the
Markdown's does, a quantized copy is listed under its base rather than beside it, a
vision-language repo is shown by its own model_type, and an adapter repo is an adapter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from slotdiff.scan.engine import run_scan
from slotdiff.scan.html import render_html
from slotdiff.scan.report import render_markdown, to_dict
from test_scan import isolated
from test_scan_html import chromium, hostile  # noqa: F401
from test_scan_week import LLAMA3, NOW, config, options, repo, week
from webdriver import Chromium

from conftest import raw
from hubserver import HubServer, Repo, model_card

VL = "Qwen/Qwen3-VL-30B-A3B-Instruct"
ADAPTER = {
    "peft_type": "LORA",
    "r": 16,
    "target_modules": ["q_proj", "v_proj"],
    "base_model_name_or_path": LLAMA3,
}


def extra() -> list[Repo]:
    return [
        Repo("vl/qwen3-vl", files={"config.json": json.loads(raw(VL).read_text())}, created_at=NOW),
        # a LoRA whose card names its base but no relation: the file says adapter
        Repo(
            "lora/by-file",
            files={"adapter_config.json": ADAPTER, "README.md": model_card(base_model=LLAMA3)},
            created_at=NOW,
        ),
        # the listing's library says so without a request
        Repo(
            "lora/by-library",
            files={"adapter_config.json": ADAPTER, "README.md": model_card(base_model=LLAMA3)},
            created_at=NOW,
            library_name="peft",
        ),
        # a model of its own with a card naming a base and no relation stays a finetune
        repo("ft/no-relation", config(LLAMA3, bos_token_id=128001), 1, {"base_model": LLAMA3}),
    ]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("layout")
    with (
        pytest.MonkeyPatch.context() as mp,
        isolated(mp, tmp),
        HubServer([*week(), *hostile(), *extra()]) as hub,
    ):
        data = json.loads(json.dumps(to_dict(run_scan(options(hub, tmp, pipeline_tag="lm")))))
    path = tmp / "report.html"
    path.write_text(render_html(data), encoding="utf-8")
    yield {"data": data, "path": path, "md": render_markdown(data)}


def models(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["repo_id"]: m for m in report["data"]["models"]}


WIDTHS = """return (() => {
  const doc = document.documentElement, view = doc.clientWidth;
  const cells = [...document.querySelectorAll('#entries th, #entries td')];
  const out = cells.filter(c => c.getBoundingClientRect().right > view + 0.5).map(c => c.textContent);
  // a class label's line boxes (the cell itself is as tall as its row)
  const labels = [...document.querySelectorAll('#entries td.c span.lbl')];
  const classes = labels.map(c => c.getClientRects().length);
  return {view, scroll: doc.scrollWidth, out, classLines: Math.max(...classes)};
})()"""


@pytest.mark.parametrize(("width", "lines"), [(1280, 2), (1024, 4)])
def test_no_horizontal_overflow_and_compact_class_cells(report, chromium, width: int, lines: int) -> None:  # noqa: F811
    with Chromium(*chromium, width=width, height=900) as browser:
        browser.open(report["path"])
        got = browser.run(WIDTHS)
    assert got["view"] <= width and got["scroll"] <= got["view"], got
    assert got["out"] == [], got["out"]  # no cell of the table beyond the window's right edge
    assert 1 <= got["classLines"] <= lines, got  # a class label on a few lines, not 7-9


def test_derivatives_section_matches_the_markdown(report, chromium) -> None:  # noqa: F811
    md = report["md"]
    block = md[md.index("### Derivatives by base model") :].split("\n\n")[1]
    md_rows = [line for line in block.splitlines()[2:] if line.startswith("|")]
    md_bases = [re.search(r"\[([^\]]+)\]", r).group(1) for r in md_rows]
    with Chromium(*chromium) as browser:
        browser.open(report["path"])
        bases = browser.run(
            "return [...document.querySelectorAll('#derivatives tbody tr')].map(r => r.cells[0].textContent)"
        )
        counts = browser.run(
            "return [...document.querySelectorAll('#derivatives tbody tr')].map(r => r.cells[2].textContent)"
        )
    assert bases == md_bases and LLAMA3 in bases
    llama = next(g for g in report["data"]["lineage"] if g["base"] == LLAMA3)
    assert counts[bases.index(LLAMA3)] == str(llama["count"])


def test_quantized_copy_is_folded_under_its_base(report, chromium) -> None:  # noqa: F811
    with Chromium(*chromium) as browser:
        browser.open(report["path"])
        rows = browser.run(
            "return [...document.querySelectorAll('#entries tbody tr')]"
            ".map(r => r.cells[0].getAttribute('data-sort'))"
        )
        under = browser.run(
            "const r = [...document.querySelectorAll('#entries tbody tr')]"
            f".find(r => r.cells[0].getAttribute('data-sort') === {json.dumps(LLAMA3)});"
            "return [...r.querySelectorAll('details li a')].map(a => a.textContent)"
        )
    assert "q/llama3-8b-awq" not in rows and LLAMA3 in rows
    assert "q/llama3-8b-awq" in under


def test_vl_repo_is_shown_by_its_own_model_type(report, chromium) -> None:  # noqa: F811
    m = models(report)["vl/qwen3-vl"]
    assert (m["model_type"], m["repo_model_type"]) == ("qwen3_vl_moe_text", "qwen3_vl_moe")
    with Chromium(*chromium) as browser:
        browser.open(report["path"])
        shown = browser.run(
            "const r = [...document.querySelectorAll('#entries tbody tr')]"
            ".find(r => r.cells[0].getAttribute('data-sort') === 'vl/qwen3-vl');"
            "return r.cells[2].textContent"
        )
    assert shown == "qwen3_vl_moe"
    assert "`qwen3_vl_moe_text`" not in report["md"]


def test_adapter_repos_are_adapters_not_finetunes(report) -> None:
    ms = models(report)
    assert ms["lora/by-file"]["lineage"]["relation"] == "adapter"
    assert ms["lora/by-file"]["lineage"]["relation_from"] == "files"
    assert ms["lora/by-library"]["lineage"]["relation"] == "adapter"
    assert ms["ft/no-relation"]["lineage"]["relation"] == "finetune"
    llama = next(g for g in report["data"]["lineage"] if g["base"] == LLAMA3)
    assert llama["by_relation"]["adapter"] == 3  # adapter/lora (declared) and the two above
