"""``slotdiff scan --write-html``: one self-contained page, checked in a real headless browser.

Debian's Chromium and chromedriver (installed by the session fixture with apt-get when
missing; the test fails, never skips, when they cannot be had) load the page written from a
simulated week plus hostile repo ids and config keys. The page must load with no console
error (the Content-Security-Policy would report any blocked script or request), fetch
nothing, run no injected markup, and sort its table when a header is clicked. A screenshot
is written; with SLOTDIFF_DOCS_SCREENSHOT=1 it also replaces docs/scan-report.png.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cli import main
from slotdiff.scan.html import render_html
from slotdiff.scan.report import to_dict
from test_scan import isolated
from test_scan_week import NOW, options, week
from webdriver import Chromium, ensure_chromium

from hubserver import HubServer, Repo

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_TYPE = "<script>window.__pwned=1</script>"
HOSTILE_KEY = "<img src=x onerror=window.__pwned=2>"
HOSTILE_ID = 'evil/"><svg onload=window.__pwned=3>'


def hostile() -> list[Repo]:
    cfg = {"model_type": HOSTILE_TYPE, "vocab_size": 32000, HOSTILE_KEY: 1, "</style><b>x": 2}
    return [
        Repo("evil/model", files={"config.json": cfg}, created_at=NOW),
        Repo(HOSTILE_ID, files={"config.json": {"model_type": "llama"}}, created_at=NOW),
    ]


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    try:
        return ensure_chromium()
    except RuntimeError as err:
        pytest.fail(str(err))


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("html")
    with pytest.MonkeyPatch.context() as mp, isolated(mp, tmp), HubServer([*week(), *hostile()]) as hub:
        from slotdiff.scan.engine import run_scan

        result = run_scan(options(hub, tmp, pipeline_tag="lm"))
        data = json.loads(json.dumps(to_dict(result)))
    path = tmp / "report.html"
    path.write_text(render_html(data), encoding="utf-8")
    yield {"data": data, "path": path, "html": path.read_text(encoding="utf-8"), "tmp": tmp}


def test_page_is_self_contained_and_escaped(page) -> None:
    html = page["html"]
    # Nothing to fetch: no external script, stylesheet, font, image or frame.
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html)
    assert len(re.findall(r"<script\b", html)) == 1 and "<script src" not in html
    assert "@import" not in html and "url(" not in html
    assert "default-src &#x27;none&#x27;" in html  # the policy, attribute-escaped
    # Hostile text only ever appears escaped.
    for raw in (HOSTILE_TYPE, HOSTILE_KEY, "</style><b>x", '"><svg onload'):
        assert raw not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html


def _shown_rows(models: list[dict[str, Any]]) -> list[str]:
    """The entries table's rows: per verdict, the models groups.fold leaves on top."""
    from slotdiff.scan.groups import fold

    sections: dict[str, list[dict[str, Any]]] = {}
    for m in models:
        sections.setdefault(m["verdict"], []).append(m)
    return [lead["repo_id"] for sec in sections.values() for lead, _ in fold(sec)]


def test_page_in_a_headless_browser(page, chromium, tmp_path: Path) -> None:
    data = page["data"]
    with Chromium(*chromium) as browser:
        browser.open(page["path"])
        errors = [e for e in browser.console() if e.get("level") == "SEVERE"]
        assert errors == []
        assert browser.run("return performance.getEntriesByType('resource').length") == 0
        assert browser.run("return window.__pwned === undefined") is True
        assert browser.run("return document.querySelectorAll('img, svg, b').length") == 0
        text = browser.run("return document.body.textContent")
        assert HOSTILE_TYPE in text and HOSTILE_KEY in text  # shown as text, not run
        # The new model_types are on top, before the table.
        assert browser.run("return document.querySelector('h2').textContent").startswith("New model_type")

        rows = (
            "return [...document.querySelectorAll('#entries tbody tr')]"
            ".map(r => r.cells[0].getAttribute('data-sort'))"
        )
        shown = _shown_rows(data["models"])
        assert sorted(browser.run(rows)) == sorted(shown)  # derivatives folded under their base
        params = {
            m["repo_id"]: (m.get("figures") or {}).get("params")
            for m in data["models"]
            if m["repo_id"] in shown
        }
        priced = sorted((p, r) for r, p in params.items() if p is not None)
        unpriced = [r for r, p in params.items() if p is None]

        browser.click("#entries thead th:nth-child(5)")  # params, ascending
        order = browser.run(rows)
        assert [params[r] for r in order[: len(priced)]] == [p for p, _ in priced]
        assert set(order[len(priced) :]) == set(unpriced)  # unpriced last
        assert browser.run(
            "return document.querySelector('#entries th:nth-child(5)').getAttribute('aria-sort')"
        ) == ("ascending")
        browser.click("#entries thead th:nth-child(5)")  # again: descending
        order = browser.run(rows)
        assert [params[r] for r in order[: len(priced)]] == [p for p, _ in reversed(priced)]

        browser.click("#entries thead th:nth-child(1)")  # model, by name
        order = browser.run(rows)
        assert order == sorted(order, key=str.lower)
        assert [e for e in browser.console() if e.get("level") == "SEVERE"] == []

        browser.run("window.scrollTo(0, 0)")
        shot = browser.screenshot(tmp_path / "scan-report.png")
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    if os.environ.get("SLOTDIFF_DOCS_SCREENSHOT") == "1":
        shutil.copyfile(shot, ROOT / "docs" / "scan-report.png")


def test_cli_writes_the_html_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with isolated(monkeypatch, tmp_path), HubServer(week()) as hub:
        target = tmp_path / "week.html"
        code = main(
            [
                "scan",
                "--endpoint",
                hub.url,
                "--cache-dir",
                str(tmp_path / "hf"),
                "--pipeline-tag",
                "lm",
                "--write-html",
                str(target),
                "--quiet",
                "--json",
            ]
        )
        assert code == 0
        html = target.read_text(encoding="utf-8")
        assert html.startswith("<!doctype html>") and 'id="entries"' in html
        assert "New model_type" in html and "layers 32 → 48" in html


def test_bad_pipeline_tag_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", "--pipeline-tag", "lm,<x>", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--pipeline-tag" in err and "<x>" in err and len(err.strip().splitlines()) == 1
