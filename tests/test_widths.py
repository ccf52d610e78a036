"""Terminal text at any width keeps every number and word whole (issue 30, item 10).

At ``--width 80`` a table once cut "verified" to "verifie" and a figure to "0.18 m", and the
deployment commands ignored ``--width``. Property: for widths 40-200, every word of the
output laid out at a width nothing needs to wrap at is in the narrow output whole, a figure
with its unit ("549 MiB", "-4.70 MiB", "0.64 ms") stays on one line, and nothing is
truncated to "…". Prose keeps to the width wherever its words allow.
"""

from __future__ import annotations

import contextlib
import io
import re
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotdiff.cli import main
from slotdiff.scan.report import render_terminal, to_dict
from test_scan import first_scan  # noqa: F401

from conftest import budget

CASES = (
    ("deepseek-ai/DeepSeek-V3",),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "--against", "google/gemma-2-9b"),
    ("diff", "meta-llama/Meta-Llama-3-8B", "deepseek-ai/DeepSeek-V3"),
    ("choose", "--candidates", "Qwen/Qwen3-8B,meta-llama/Llama-3.1-70B", "--no-catalog"),
    ("sweep", "meta-llama/Llama-3.1-70B", "--over", "batch", "--gpu", "rtx-4090"),
    ("specdec", "deepseek-ai/DeepSeek-V3", "--gpus", "8"),
    ("formats", "openai/gpt-oss-20b", "--gpu", "a100"),
    ("fit", "meta-llama/Llama-3.1-70B", "--gpus", "8", "--context", "128K"),
    ("moe", "deepseek-ai/DeepSeek-V3", "--batch", "32"),
)
# a figure and its unit, as the renderers write them
FIGURE = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)? (?:[KMGT]i?B|[KMGT]B|ms|µs|[MGTP]FLOP)(?![\w/])")


@cache
def text(argv: tuple[str, ...], width: int) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--width", str(width)])
    assert code in (0, 1), argv
    return out.getvalue()


@budget(60)
@given(case=st.sampled_from(CASES), width=st.integers(40, 200))
def test_no_number_or_word_is_cut_at_any_width(case: tuple[str, ...], width: int) -> None:
    wide, narrow = text(case, 10_000), text(case, width)
    assert "…" not in narrow
    assert sorted(narrow.split()) == sorted(wide.split())  # the same words, none cut or lost
    lines = narrow.splitlines()
    for figure in set(FIGURE.findall(wide)):
        assert any(figure in line for line in lines), (width, figure)


@budget(30)
@given(
    case=st.sampled_from([c for c in CASES if c[0] in ("sweep", "specdec", "formats", "fit", "moe")]),
    width=st.integers(40, 200),
)
def test_page_prose_keeps_to_the_width(case: tuple[str, ...], width: int) -> None:
    """sweep, specdec, formats, fit, moe honour --width: every prose line fits it; table rows
    are never wrapped at all (a row is the same at every width)."""
    wide_rows = {line for line in text(case, 10_000).splitlines() if "  " in line.strip()}
    for line in text(case, width).splitlines():
        assert len(line) <= width or line in wide_rows, (width, line)
    if width <= 80:  # every page has a prose line longer than 80: the width changed the layout
        assert text(case, width) != text(case, 10_000)


@pytest.mark.parametrize("width", [40, 57, 80, 100, 133, 200])
def test_scan_terminal_report_cuts_no_word(first_scan, width: int) -> None:  # noqa: F811
    """The scan's text report: a repo id whole on its line, the description wrapped at spaces
    (it once folded "verified" into "verifie" + "d")."""
    data = to_dict(first_scan["first"])
    wide, narrow = render_terminal(data, width=10_000), render_terminal(data, width=width)
    assert sorted(narrow.split()) == sorted(wide.split())
    ids = [m["repo_id"] for m in data["models"]]
    assert all(any(line.startswith(i) for line in narrow.splitlines()) for i in ids)
