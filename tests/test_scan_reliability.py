"""Issue 18's scan attacks, each as a class: nothing lost, nothing leaked, nothing silently off.

- a finding is remembered as seen only once its report is written: any report that cannot
  be written (a folder that is a file, a hostile string in the report) is exit 2 and the
  next run reports the same models again;
- the listing's ``Link: rel="next"`` is followed only on the endpoint's origin: a second
  local server, named by the first one's next link, never sees a request or a token;
- two scans on one state file: the second is refused (exit 2), the first loses nothing;
- a state file of the wrong shape, in every section and with every wrong type, or a path
  that is not a regular file (a FIFO), is exit 2 at once: never a crash or a hang.

All servers are on 127.0.0.1 (tests/hubserver.py, and a stdlib one for the other origin).
"""

from __future__ import annotations

import itertools
import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cli import main
from slotdiff.core.errors import SlotdiffError
from slotdiff.scan.engine import run_scan
from slotdiff.scan.state import ScanState
from test_scan import LLAMA3, NOW, config, isolated, make_families, options, repo

from hubserver import HubServer, Repo

SECRET = "hf_secret_token_for_the_endpoint_only"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    with isolated(monkeypatch, tmp_path):
        yield


def _argv(hub: HubServer, tmp: Path, *extra: str) -> list[str]:
    return [
        "scan",
        "--endpoint",
        hub.url,
        "--fingerprints",
        str(tmp / "families"),
        "--state",
        str(tmp / "state.json"),
        "--cache-dir",
        str(tmp / "c"),
        "--timeout",
        "1",
        "--deadline",
        "5",
        "--quiet",
        *extra,
    ]


# ----------------------------------------------------------------------- commit after report

HOSTILE_TYPES = ["zeta_lm", "zeta\ud800lm", "zeta\x1b[31mlm\x7f\x9b", "zeta\u202elm\u2028"]


@pytest.mark.parametrize("model_type", HOSTILE_TYPES)
@pytest.mark.parametrize("breaks", ["markdown-folder-is-a-file", "json-folder-is-a-file"])
def test_an_unwritable_report_is_exit_2_and_the_next_run_reports_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model_type: str, breaks: str
) -> None:
    make_families(tmp_path / "families")
    (tmp_path / "blocker").write_text("a file where the report's folder should be\n")
    bad = str(tmp_path / "blocker" / "report")
    flag = {"markdown": "--write-markdown", "json": "--write-json"}[breaks.split("-")[0]]
    with HubServer([repo("zeta/zeta-7b", config(LLAMA3, model_type=model_type))]) as hub:
        assert main(_argv(hub, tmp_path, "--json", flag, bad)) == 2
        err = capsys.readouterr().err
        assert "blocker" in err and "next scan reports these models again" in err
        assert err.count("\n") == 1

        # The finding was not committed: the next run reports it as new, in every format.
        md = tmp_path / "r.md"
        assert main(_argv(hub, tmp_path, "--json", "--write-markdown", str(md), "--fail-on-new")) == 1
        out = capsys.readouterr().out
        data = json.loads(out)  # valid JSON whatever the config's strings hold
        assert data["counts"]["new_model_type"] == 1
        assert [m["model_type"] for m in data["models"]] == [model_type]
        for text in (out, md.read_text(encoding="utf-8")):
            assert not any(c in text for c in "\x1b\x7f\x9b\u202e\u2028")

        # Reported once: now it is known, and the third run has nothing new.
        assert main(_argv(hub, tmp_path, "--json", "--fail-on-new")) == 0
        assert json.loads(capsys.readouterr().out)["new"] is False


def test_unwritable_proposals_are_exit_2_and_reported_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_families(tmp_path / "families")
    (tmp_path / "blocker").write_text("a file where the proposals folder should be\n")
    with HubServer([repo("bias/llama3-bias", config(LLAMA3, attention_bias=True))]) as hub:
        argv = _argv(hub, tmp_path, "--json", "--update-fingerprints", str(tmp_path / "blocker" / "p"))
        assert main(argv) == 2
        assert "next scan reports these models again" in capsys.readouterr().err
        assert main(_argv(hub, tmp_path, "--json", "--fail-on-new")) == 1
        assert json.loads(capsys.readouterr().out)["counts"]["new_fingerprint"] == 1


def test_interrupted_report_keeps_the_findings_pending(tmp_path: Path) -> None:
    """The API form of the same rule: run_scan(commit=False) then release() keeps the scan open."""
    make_families(tmp_path / "families")
    with HubServer([repo("zeta/zeta-7b", config(LLAMA3, model_type="zeta_lm"))]) as hub:
        opts = options(hub, tmp_path)
        first = run_scan(opts, commit=False)
        assert [r.verdict for r in first.records] == ["new_model_type"]
        first.release()
        assert "zeta_lm" not in ScanState.load(opts.state).data["model_types"]
        second = run_scan(opts)
        assert second.resumed and [r.verdict for r in second.records] == ["new_model_type"]
        assert "zeta_lm" in ScanState.load(opts.state).data["model_types"]


# ----------------------------------------------------------------------- the token's origin


class _Recorder(BaseHTTPRequestHandler):
    """One origin: answers /api/models with one model and, optionally, a next link."""

    seen: list[dict[str, str]]
    next_url: str | None
    body: list[dict[str, Any]]

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append({k.lower(): v for k, v in self.headers.items()} | {"path": self.path})
        data = json.dumps(self.body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.next_url:
            self.send_header("Link", f'<{self.next_url}>; rel="next"')
        self.end_headers()
        self.wfile.write(data)


def _server(next_url: str | None, body: list[dict[str, Any]]) -> tuple[ThreadingHTTPServer, list[Any]]:
    seen: list[Any] = []
    handler = type("H", (_Recorder,), {"seen": seen, "next_url": next_url, "body": body})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def _model(repo_id: str) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    return {"id": repo_id, "modelId": repo_id, "lastModified": now, "createdAt": now, "sha": "0" * 40}


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
@pytest.mark.parametrize("relative", [False, True])
def test_the_token_never_goes_to_another_origin(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    host: str,
    relative: bool,
) -> None:
    other, other_seen = _server(None, [_model("other/leak")])
    port = other.server_address[1]
    # Same host, another port; or another host name for the same machine: both another origin.
    target = f"http://{host}:{port}/api/models?cursor=1"
    if relative:  # a scheme-relative link names another origin just the same
        target = f"//{host}:{port}/api/models?cursor=1"
    home, home_seen = _server(target, [_model("home/first")])
    monkeypatch.setenv("HF_TOKEN", SECRET)
    try:
        endpoint = f"http://127.0.0.1:{home.server_address[1]}"
        code = main(
            ["scan", "--endpoint", endpoint, "--json", "--quiet", "--timeout", "1", "--deadline", "3"]
        )
        out, err = capsys.readouterr()
    finally:
        home.shutdown()
        other.shutdown()
    assert home_seen and home_seen[0]["authorization"] == f"Bearer {SECRET}"  # the endpoint gets it
    assert other_seen == []  # the other origin is never even asked
    assert code == 0, err
    data = json.loads(out)
    assert "another origin" in (data.get("listing_error") or "")
    assert [m["repo_id"] for m in data["models"]] == ["home/first"]


def test_a_next_link_on_the_same_origin_is_followed(tmp_path: Path) -> None:
    """The guard is on the origin, not on paging: the fake Hub's own pages are all read."""
    make_families(tmp_path / "families")
    repos = [repo(f"org/m{i}", config(LLAMA3), hours=1 + i) for i in range(5)]
    with HubServer(repos, page_size=2) as hub:
        result = run_scan(options(hub, tmp_path))
        assert result.listing_error is None and len(result.records) == 5
        assert hub.count(kind="list") == 3


# ----------------------------------------------------------------------- the lock


def test_a_second_scan_on_a_locked_state_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_families(tmp_path / "families")
    state = tmp_path / "state.json"
    with HubServer([repo("a/m", config(LLAMA3))]) as hub:
        holder = ScanState.load(state, lock=True)  # what a running scan holds
        try:
            assert main(_argv(hub, tmp_path, "--json")) == 2
            assert "another scan is using this state file" in capsys.readouterr().err
        finally:
            holder.close()
        assert main(_argv(hub, tmp_path, "--json")) == 0  # released: the next scan runs
        capsys.readouterr()


def test_two_concurrent_scans_lose_nothing(tmp_path: Path) -> None:
    """Two scans started together on one state: exactly one runs, the other exits 2, and the
    state holds every model of the one that ran."""
    import subprocess
    import sys

    from test_scan import _env, _scan_cmd

    make_families(tmp_path / "families")
    repos = [repo(f"org/m{i:02d}", config(LLAMA3, hidden_size=2048 + 64 * i), hours=1 + i) for i in range(12)]
    with HubServer(repos) as hub:
        procs = [
            subprocess.Popen(
                _scan_cmd(tmp_path, "--json", "--quiet", "--workers", "2"),
                env=_env(hub, tmp_path),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(2)
        ]
        results = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert sys.platform != "win32"
    if codes == [0, 0]:  # one finished before the other started: both ran, one after the other
        pass
    else:
        assert codes == [0, 2], results
        assert any(b"another scan is using this state file" in err for _, err in results)
    models = ScanState.load(tmp_path / "state.json").models
    assert sorted(models) == sorted(r.id for r in repos)


@pytest.mark.parametrize("held_through", ["link", "file"])
def test_a_symlinked_state_meets_the_same_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], held_through: str
) -> None:
    """Issue 30.5: a scan through a symlink to the state and one on the file itself are one
    state: the second is refused, and the scan through the link writes the file it names,
    leaving the link a link."""
    make_families(tmp_path / "families")
    real = tmp_path / "real" / "state.json"
    real.parent.mkdir()
    link = tmp_path / "state.json"  # what _argv names
    link.symlink_to(real)
    with HubServer([repo("a/m", config(LLAMA3))]) as hub:
        holder = ScanState.load(link if held_through == "link" else real, lock=True)
        try:
            argv = _argv(hub, tmp_path, "--json")
            if held_through == "link":
                argv[argv.index("--state") + 1] = str(real)
            assert main(argv) == 2
            assert "another scan is using this state file" in capsys.readouterr().err
        finally:
            holder.close()
        assert main(_argv(hub, tmp_path, "--json")) == 0
        capsys.readouterr()
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert list(ScanState.load(real).models) == ["a/m"]


@pytest.mark.parametrize(
    "flags",
    [
        ["--write-json", "{state}"],
        ["--write-markdown", "{state}"],
        ["--write-html", "{link}"],
        ["--write-json", "{state}.journal"],
        ["--write-markdown", "{state}.lock"],
        ["--write-json", "{out}", "--write-markdown", "{out}"],
        ["--write-html", "{out}", "--write-json", "{outlink}"],
    ],
    ids=["json=state", "md=state", "html=state-link", "json=journal", "md=lock", "json=md", "html=json-link"],
)
def test_a_report_path_that_is_the_state_or_another_report_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    """--write-* naming the state (its journal, its lock, through a symlink) or one file twice:
    exit 2 and one line before any request, the state byte for byte as it was."""
    make_families(tmp_path / "families")
    state = tmp_path / "state.json"
    (tmp_path / "link.json").symlink_to(state)
    (tmp_path / "outlink.json").symlink_to(tmp_path / "out.json")
    with HubServer([repo("a/m", config(LLAMA3))]) as hub:
        assert main(_argv(hub, tmp_path, "--json")) == 0
        capsys.readouterr()
        before = state.read_bytes()
        names = {"state": state, "link": tmp_path / "link.json", "out": tmp_path / "out.json"}
        names["outlink"] = tmp_path / "outlink.json"
        extra = [f.format(**{k: str(v) for k, v in names.items()}) for f in flags]
        assert main(_argv(hub, tmp_path, "--json", *extra)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "give it a path of its own" in err, err
    assert state.read_bytes() == before and not (tmp_path / "out.json").exists()


# ----------------------------------------------------------------------- hostile state files

SECTIONS = [
    "format",
    "version",
    "updated",
    "scans",
    "models",
    "fingerprints",
    "model_types",
    "keys",
    "current",
]
WRONG = [None, 0, -1, 1.5, True, "x", [], [1], {}, {"k": 1}, {"k": [1]}, {"k": {"started": 5}}]


def _valid_state() -> dict[str, Any]:
    return {
        "format": "slotdiff-scan-state",
        "version": 1,
        "updated": "2025-01-01T00:00:00Z",
        "scans": [{"id": "s1", "started": "2025-01-01T00:00:00Z", "finished": "2025-01-01T00:01:00Z"}],
        "models": {"a/m": {"commit": "0" * 40, "verdict": "known", "checked": "2025-01-01T00:00:00Z"}},
        "fingerprints": {
            "fp-1": {"first_seen": "a/m", "model_types": ["llama"], "exemplars": ["a/m"], "sizes": []}
        },
        "model_types": {"llama": "a/m"},
        "keys": {"k": "a/m"},
        "current": {
            "id": "s2",
            "started": "2025-01-02T00:00:00Z",
            "since": "2024-12-26T00:00:00Z",
            "query": {},
            "done": {"a/m": {"repo_id": "a/m", "listed": {"repo_id": "a/m"}, "verdict": "known"}},
        },
    }


def _variants() -> Iterator[tuple[str, Any]]:
    for section, value in itertools.product(SECTIONS, WRONG):
        data = _valid_state()
        data[section] = value
        yield f"{section}={value!r}", data
    nested = [
        ("scans", [{"id": "s", "started": "not a date"}]),
        ("scans", [{"id": "s", "started": "2025-13-45T99:99:99Z"}]),
        ("scans", [{"id": "s", "started": "2025-01-01T00:00:00Z\n"}]),
        ("models", {"a/m": {"checked": "yesterday"}}),
        ("models", {"a/m": []}),
        ("fingerprints", {"fp": {"model_types": "llama", "exemplars": [], "sizes": []}}),
        ("current", {"id": "s", "started": "2025-01-01T00:00:00Z", "since": "", "query": {}, "done": []}),
        (
            "current",
            {"id": "s", "started": "2025-01-01T00:00:00Z", "since": "", "query": {}, "done": {"a": {}}},
        ),
        (
            "current",
            {
                "id": "s",
                "started": "2025-01-01T00:00:00Z",
                "since": "",
                "query": {},
                "done": {"a": {"repo_id": "a", "listed": {"repo_id": 3}, "verdict": "known"}},
            },
        ),
        ("current", {"id": "s", "started": "2025-01-01T00:00:00Z", "since": "x", "query": {}, "done": {}}),
    ]
    for section, value in nested:
        data = _valid_state()
        data[section] = value
        yield f"{section}: {json.dumps(value)[:60]}", data


def test_the_valid_state_of_these_tests_is_read() -> None:
    ScanState.load(None)
    from slotdiff.scan.statefile import validator

    assert validator().is_valid(_valid_state())


# Wrong values that are the right shape after all (an empty section, a null date, a model
# entry with a key slotdiff does not read).
ACCEPTED = {
    "models={'k': {'started': 5}}",
    "updated=None",
    "current=None",
    "scans=[]",
    "models={}",
    "fingerprints={}",
    "model_types={}",
    "keys={}",
}


@pytest.mark.parametrize(("name", "data"), list(_variants()), ids=lambda v: v if isinstance(v, str) else "")
def test_a_state_of_the_wrong_shape_is_refused_naming_the_file(tmp_path: Path, name: str, data: Any) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps(data))
    if name in ACCEPTED:
        ScanState.load(state, lock=True).close()
        return
    with pytest.raises(SlotdiffError) as info:
        ScanState.load(state, lock=True)
    assert info.value.source == str(state)
    assert "\n" not in info.value.line()


@pytest.mark.parametrize("section", SECTIONS)
def test_the_cli_on_a_wrong_state_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], section: str
) -> None:
    state = tmp_path / "state.json"
    state.write_text(json.dumps({**_valid_state(), section: [1]}))
    assert main(["scan", "--state", str(state), "--quiet", "--endpoint", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert str(state) in err and err.count("\n") == 1 and "internal error" not in err


@pytest.mark.parametrize("which", ["state", "journal", "lock"])
def test_a_fifo_or_folder_in_place_of_a_state_file_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    state = tmp_path / "state.json"
    target = {
        "state": state,
        "journal": tmp_path / "state.json.journal",
        "lock": tmp_path / "state.json.lock",
    }[which]
    os.mkfifo(target)
    started = time.monotonic()
    code = main(["scan", "--state", str(state), "--quiet", "--endpoint", "http://127.0.0.1:9"])
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert code == 2 and "not a regular file" in err, err
    os.unlink(target)
    target.mkdir()
    assert main(["scan", "--state", str(state), "--quiet", "--endpoint", "http://127.0.0.1:9"]) == 2
    assert "not a regular file" in capsys.readouterr().err


# ----------------------------------------------------------------------- impossible configs


def test_an_impossible_config_is_never_filed_as_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30.7: a config the analysis refuses (32 query heads over 7 KV heads; a float size
    transformers refuses) is a skipped model with the key named, never priced or verified."""
    make_families(tmp_path / "families")
    repos = [
        repo("odd/kv7", config(LLAMA3, num_key_value_heads=7), hours=1),
        repo("odd/float", config(LLAMA3, hidden_size=4096.0), hours=2),
        repo("ok/llama", config(LLAMA3), hours=3),
    ]
    with HubServer(repos) as hub:
        assert main(_argv(hub, tmp_path, "--json")) == 0
    models = {m["repo_id"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert (models["odd/kv7"]["verdict"], models["odd/kv7"]["reason"]) == ("skipped", "unreadable")
    kv7 = models["odd/kv7"]["detail"]
    assert "num_key_value_heads" in kv7 and "7 KV heads" in kv7
    assert (models["odd/float"]["verdict"], models["odd/float"]["reason"]) == ("skipped", "unreadable")
    assert "hidden_size" in models["odd/float"]["detail"]
    for bad in ("odd/kv7", "odd/float"):
        assert not models[bad].get("figures"), models[bad]
    assert models["ok/llama"]["verdict"] != "skipped"


# ----------------------------------------------------------------------- through HF_ENDPOINT


def _scan(hub: HubServer, tmp: Path, *args: str, **env: str) -> Any:
    import subprocess

    from test_scan import _env, _scan_cmd

    return subprocess.run(
        _scan_cmd(tmp, "--quiet", *args),
        env=_env(hub, tmp, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_scan_through_hf_endpoint_links_to_that_endpoint(tmp_path: Path) -> None:
    """Issue 30.8: HF_ENDPOINT (the documented way to point huggingface_hub elsewhere) is the
    endpoint the reports name and link to: JSON scan.endpoint, the Markdown and HTML links;
    none of them sends a reader to the public Hub for a model it was not read from."""
    make_families(tmp_path / "families")
    repos = [repo("mirror/llama-bias", config(LLAMA3, attention_bias=True))]
    with HubServer(repos) as hub:
        md, html = tmp_path / "r.md", tmp_path / "r.html"
        res = _scan(hub, tmp_path, "--json", "--write-markdown", str(md), "--write-html", str(html))
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["scan"]["endpoint"] == hub.url
        for text in (md.read_text(), html.read_text()):
            assert f"{hub.url}/mirror/llama-bias" in text
            assert "huggingface.co/mirror" not in text


def test_a_model_refused_once_is_fetched_again_when_the_token_opens_it(tmp_path: Path) -> None:
    """Issue 30.8: a gated repo answered 403 (a token without access) is skipped, and the next
    scan, at the same commit, with a token that opens it, reads and reports it; a model skipped
    for a reason that does not depend on who asks (not a language model) is not fetched again."""
    make_families(tmp_path / "families")
    gated = Repo(
        "org/gated",
        files={"config.json": config(LLAMA3, attention_bias=True)},
        created_at=NOW - timedelta(hours=1),
        gated="manual",
        access_tokens=["hf_allowed"],
    )
    with HubServer([gated]) as hub:
        first = _scan(hub, tmp_path, "--json", HF_TOKEN="hf_not_granted")
        assert first.returncode == 0, first.stderr
        (model,) = json.loads(first.stdout)["models"]
        assert (model["verdict"], model["reason"]) == ("skipped", "gated")
        second = _scan(hub, tmp_path, "--json", HF_TOKEN="hf_allowed")
        assert second.returncode == 0, second.stderr
        (model,) = json.loads(second.stdout)["models"]
        assert model["verdict"] == "new_fingerprint", model


def test_an_entry_with_a_date_that_is_not_one_is_left_out_with_a_note(tmp_path: Path) -> None:
    """Issue 30.8: a listing entry whose lastModified does not parse is left out, said in the
    report's notes, and the scan goes on with the others (it was exit 2 for the whole scan)."""
    make_families(tmp_path / "families")
    repos = [
        repo("ok/first", config(LLAMA3), hours=1),
        Repo(
            "odd/date",
            files={"config.json": config(LLAMA3)},
            created_at=NOW - timedelta(hours=2),
            last_modified="yesterday-ish",
        ),
        repo("ok/third", config(LLAMA3, attention_bias=True), hours=3),
    ]
    with HubServer(repos) as hub:
        res = _scan(hub, tmp_path, "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert sorted(m["repo_id"] for m in data["models"]) == ["ok/first", "ok/third"]
    assert any("odd/date" in n and "yesterday-ish" in n for n in data["notes"]), data["notes"]
