"""Output formats for a lint Run; ``REPORTER_BY_NAME`` feeds the CLI's ``--format`` choices.

- text:   ``path:line:col: CODE message``, one line per diagnostic (what editors parse)
- json:   every diagnostic with its severity, key and extras (facet, cost deltas)
- sarif:  SARIF 2.1.0 for code-scanning UIs (GitHub's upload-sarif)
- github: GitHub Actions workflow commands, shown as annotations on the pull request
- markdown: a heading with the counts and one table row per diagnostic (a pull request comment)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..core.printable import one_line, printable
from ..core.version import __version__
from ..read.jsonpos import strict
from ..render import page
from ..render.json_report import dumps
from .registry import by_code, table

SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def to_text(run: Any) -> str:
    # One diagnostic, one line: a newline in a path or message must not start a line that an
    # editor (or GitHub, "::error") reads as another record.
    return "".join(
        f"{one_line(d.path)}:{d.line}:{d.col}: {d.code} {one_line(d.message)}\n" for d in run.diagnostics
    )


def _diag_dict(d: Any) -> dict[str, Any]:
    out = {
        "path": d.path,
        "line": d.line,
        "col": d.col,
        "code": d.code,
        "name": by_code()[d.code].name,
        "severity": d.severity,
        "message": d.message,
        "key": d.key,
    }
    if d.extra:
        out.update(d.extra)
    return out


def to_json(run: Any) -> str:
    data = {
        "version": 1,
        "files": len(run.files),
        "summary": {s: run.count(s) for s in ("error", "warning", "info")},
        "exit_code": run.exit_code,
        "diagnostics": [_diag_dict(d) for d in run.diagnostics],
    }

    # A diff-mode diagnostic carries raw config values, which may be NaN or Infinity.
    return dumps(strict(data))


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_uri() if p.is_absolute() else p.as_posix()


def to_sarif(run: Any) -> str:
    rules = list(table())
    index = {r.code: i for i, r in enumerate(rules)}
    results = [
        {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": SARIF_LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(d.path)},
                        "region": {"startLine": d.line, "startColumn": d.col},
                    }
                }
            ],
        }
        for d in run.diagnostics
    ]
    data = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "slotdiff",
                        "version": __version__,
                        "rules": [
                            {
                                "id": r.code,
                                "name": r.name,
                                "shortDescription": {"text": r.what},
                                "fullDescription": {"text": r.why},
                                "help": {"text": r.fix},
                                "defaultConfiguration": {"level": SARIF_LEVEL[r.severity]},
                            }
                            for r in rules
                        ],
                    }
                },
                "results": results,
            }
        ],
    }
    return dumps(strict(data))  # the one JSON writer; NaN from a config becomes a string first


def _escape_data(text: str) -> str:
    # GitHub's own escapes for its delimiters, then every other control character as text.
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(run: Any) -> str:
    lines = []
    for d in run.diagnostics:
        title = _escape_property(f"{d.code} {by_code()[d.code].name}")
        lines.append(
            f"::{GITHUB_LEVEL[d.severity]} file={_escape_property(d.path)},line={d.line},col={d.col},"
            f"title={title}::{_escape_data(d.message)}\n"
        )
    return "".join(lines)


def counts_line(run: Any) -> str:
    """``1 error, 2 warnings`` (or ``no problems``): the summary every format shares."""
    counts = [(run.count(s), s) for s in ("error", "warning", "info")]
    return ", ".join(f"{n} {s}{'s' if n != 1 else ''}" for n, s in counts if n) or "no problems"


def to_markdown(run: Any) -> str:
    files = len(run.files)
    head = f"slotdiff lint: {counts_line(run)} in {files} file{'s' if files != 1 else ''}"
    body = [
        (f"{printable(d.path)}:{d.line}:{d.col}", d.code, d.severity, printable(d.message))
        for d in run.diagnostics
    ]
    blocks: list[page.Block] = [head]
    if body:
        blocks += page.rows(("where", "code", "severity", "message"), body, left=4)
    return page.to_markdown(blocks)


REPORTER_BY_NAME: dict[str, Callable[[Any], str]] = {
    "text": to_text,
    "json": to_json,
    "sarif": to_sarif,
    "github": to_github,
    "markdown": to_markdown,
}
