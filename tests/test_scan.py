"""``slotdiff scan`` against the fake Hub (tests/hubserver.py) on 127.0.0.1.

The server serves real corpus configs plus altered ones and injects the Hub's failure
modes (404, 401/403, 429 with Retry-After, 5xx, slow answers, truncated bodies, invalid
JSON, huge files). The tests check the verdicts, that a second scan reports nothing new,
that a scan killed with SIGKILL resumes and counts every model exactly once, and that no
failure mode stops a scan. Waits are short (sub-second timeouts, tiny backoffs), so the
whole file runs in seconds; nothing here asserts a speed (benchmarks/ measures that).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import jsonschema
import pytest
from huggingface_hub import constants, set_client_factory
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import disable_progress_bars

from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.core.errors import SlotdiffError
from slotdiff.core.jsonout import dumps, iterdumps
from slotdiff.read.hub_errors import HubFailure
from slotdiff.read.retry import Retrier, RetryPolicy
from slotdiff.scan.engine import ScanOptions, run_scan
from slotdiff.scan.pool import DeadlinePool
from slotdiff.scan.records import RecordView
from slotdiff.scan.report import render_markdown, render_terminal, to_dict
from slotdiff.scan.state import ScanState
from slotdiff.scan.verdict import VERDICTS
from slotdiff.slots.classify import family_record, slugify

from conftest import raw
from hubserver import Fault, HubServer, Repo

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime.now(UTC)
FAMILIES = {
    "meta-llama/Meta-Llama-3-8B": "Llama-3",
    "Qwen/Qwen3-30B-A3B": "Qwen3-MoE",
    "openai-community/gpt2": "GPT-2",
    "deepseek-ai/DeepSeek-V3": "DeepSeek-V3",
}
FAST = RetryPolicy(
    attempts=3, backoff=0.05, max_backoff=0.2, retry_after_cap=2, model_budget=3, total_budget=20
)


# --------------------------------------------------------------------------- fixtures


def _loopback_only(request: httpx2.Request) -> None:
    if request.url.host not in ("127.0.0.1", "localhost"):
        raise AssertionError(f"blocked request to {request.url}")


def _guarded_client() -> httpx2.Client:
    hooks = {"request": [_loopback_only, hf_http.hf_request_event_hook]}
    return httpx2.Client(event_hooks=hooks, follow_redirects=True, timeout=None)


@contextlib.contextmanager
def isolated(mp: pytest.MonkeyPatch, tmp: Path) -> Iterator[None]:
    """huggingface_hub online, without ambient token, and unable to leave 127.0.0.1."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        mp.delenv(var, raising=False)
    mp.setattr(constants, "HF_TOKEN_PATH", str(tmp / "no-token"))
    mp.setattr(constants, "HF_HUB_OFFLINE", False)
    previous = hf_http._GLOBAL_CLIENT_FACTORY
    set_client_factory(_guarded_client)
    try:
        with disable_progress_bars():
            yield
    finally:
        _join_scan_threads()
        set_client_factory(previous)  # also drops the guarded session


def _join_scan_threads(timeout: float = 30.0) -> None:
    """Wait for fetch and listing threads a scan abandoned (their server is gone by now, so
    they end within huggingface_hub's retry budget). Left running, one still reading a
    socket of the dropped session raced later tests' connections for the reused descriptor
    ("Bad file descriptor" in tests/test_hubserver.py when it ran after this file)."""
    deadline = time.monotonic() + timeout
    for t in threading.enumerate():
        if t.name.startswith(("slotdiff-fetch-", "slotdiff-listing")):
            t.join(max(0.0, deadline - time.monotonic()))


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    with isolated(monkeypatch, tmp_path):
        yield


def make_families(folder: Path) -> Path:
    """Family files built from corpus configs, as ``slotdiff fingerprint`` writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    for repo_id, name in FAMILIES.items():
        model = load(str(raw(repo_id)))
        record = family_record(name, [model.arch.model_type], model.fills, [repo_id])
        (folder / f"{slugify(name)}.json").write_text(json.dumps(record), encoding="utf-8")
    return folder


def config(repo_id: str, **changes: Any) -> dict[str, Any]:
    data = json.loads(raw(repo_id).read_text(encoding="utf-8"))
    data.update(changes)
    return data


def repo(repo_id: str, content: Any, *faults: Fault, hours: float = 1, **kw: Any) -> Repo:
    files = {"config.json": content} if content is not None else {"README.md": "# no config\n"}
    return Repo(repo_id, files=files, faults=faults, created_at=NOW - timedelta(hours=hours), **kw)


def options(hub: HubServer, tmp: Path, **kw: Any) -> ScanOptions:
    base: dict[str, Any] = {
        "since": "7d",
        "workers": 6,
        "timeout": 0.4,
        "deadline": 4.0,
        "retry": FAST,
        "state": tmp / "state.json",
        "fingerprints": tmp / "families",
        "endpoint": hub.url,
        "cache_dir": str(tmp / "hf-cache"),
        "token": None,
    }
    base.update(kw)
    return ScanOptions(**base)


LLAMA3 = "meta-llama/Meta-Llama-3-8B"


def scenario() -> list[Repo]:
    """Every verdict and every failure mode, one repo each (dates spread for ordering)."""
    llama = config(LLAMA3)
    return [
        # verdicts
        repo("same/llama3-copy", llama, hours=1, downloads=1200, likes=7),
        repo("wide/llama3-10b", config(LLAMA3, hidden_size=5120, num_attention_heads=40), hours=2),
        repo("bias/llama3-bias", config(LLAMA3, attention_bias=True), hours=3),
        repo("mistralai/Mistral-7B-v0.1", config("mistralai/Mistral-7B-v0.1"), hours=4),
        repo("keys/llama3-keys", config(LLAMA3, attn_temperature_floor=8192), hours=5),
        repo("zeta/zeta-7b", config(LLAMA3, model_type="zeta_lm", zeta_gate_rank=64), hours=6),
        repo("deepseek-ai/DeepSeek-V3.2", config("deepseek-ai/DeepSeek-V3.2"), hours=7),
        # skipped, permanently
        repo("skip/no-config", None, hours=8),
        repo("skip/gated-401", llama, Fault.gated(401), hours=9),
        repo("skip/gated-403", llama, Fault.gated(403), hours=10),
        repo("skip/forbidden", llama, Fault.forbidden(), hours=11),
        repo("skip/gone", llama, Fault.repo_not_found(404), hours=12),
        repo("skip/vision", {"model_type": "vit"}, hours=13, pipeline_tag="image-classification"),
        repo("skip/vit", {"model_type": "vit", "hidden_size": 768, "num_hidden_layers": 12}, hours=14),
        repo("skip/bad-json", llama, Fault.invalid_json(files=("config.json",)), hours=15),
        repo("skip/array", [1, 2, 3], hours=16),
        repo("skip/huge", llama, Fault.huge(5 * 1024 * 1024), hours=17),
        repo("skip/listed-gated", llama, hours=18, gated="manual"),
        # transient failures that a retry absorbs
        repo("retry/429-once", llama, Fault.rate_limited(times=1, retry_after=1), hours=19),
        repo("retry/500-once", llama, Fault.server_error(500, times=1), hours=20),
        repo("retry/truncated-once", llama, Fault.truncate(10, times=1), hours=21),
        # transient failures that do not go away
        repo("fail/429-hour", llama, Fault.rate_limited(times=None, retry_after=3600), hours=22),
        repo("fail/503", llama, Fault.server_error(503, times=None), hours=23),
        repo("fail/slow", llama, Fault.delay(2.0), hours=24),
        repo("fail/trickle", llama, Fault.trickle(chunk_size=64, interval=0.1), hours=26),
        repo("fail/truncated", llama, Fault.truncate(10), hours=27),
        repo("fail/dropped", llama, Fault.drop(times=None), hours=28),
        # outside the window: never listed
        repo("old/llama3", llama, hours=24 * 30),
    ]


EXPECTED = {
    "same/llama3-copy": ("known", None),
    "wide/llama3-10b": ("new_sizes", None),
    "bias/llama3-bias": ("new_fingerprint", None),
    "mistralai/Mistral-7B-v0.1": ("new_fingerprint", None),
    "keys/llama3-keys": ("new_keys", None),
    "zeta/zeta-7b": ("new_model_type", None),
    "deepseek-ai/DeepSeek-V3.2": ("new_fingerprint", None),
    "skip/no-config": ("skipped", "no_config"),
    "skip/gated-401": ("skipped", "gated"),
    "skip/gated-403": ("skipped", "gated"),
    "skip/forbidden": ("skipped", "gated"),
    "skip/gone": ("skipped", "not_found"),
    "skip/vision": ("skipped", "not_lm"),
    "skip/vit": ("skipped", "not_lm"),
    "skip/bad-json": ("skipped", "invalid_json"),
    "skip/array": ("skipped", "invalid_json"),
    "skip/huge": ("skipped", "too_large"),
    "skip/listed-gated": ("skipped", "gated"),
    "retry/429-once": ("known", None),
    "retry/500-once": ("known", None),
    "retry/truncated-once": ("known", None),
    "fail/429-hour": ("skipped", "rate_limited"),
    "fail/503": ("skipped", "server_error"),
    "fail/slow": ("skipped", "timeout"),
    "fail/trickle": ("skipped", "timeout"),
    "fail/truncated": ("skipped", "network"),
    "fail/dropped": ("skipped", "network"),
}


@pytest.fixture(scope="module")
def first_scan(tmp_path_factory: pytest.TempPathFactory):
    """One scan over the whole scenario, then a second one over the same Hub."""
    tmp = tmp_path_factory.mktemp("scan")
    make_families(tmp / "families")
    with pytest.MonkeyPatch.context() as mp, isolated(mp, tmp), HubServer(scenario(), page_size=7) as hub:
        t0 = time.monotonic()
        first = run_scan(options(hub, tmp))
        took = time.monotonic() - t0
        log_first = list(hub.log)
        hub.clear_log()
        second = run_scan(options(hub, tmp))
        yield {
            "tmp": tmp,
            "first": first,
            "second": second,
            "took": took,
            "log_first": log_first,
            "log_second": list(hub.log),
            "url": hub.url,
        }


# --------------------------------------------------------------------------- verdicts


def test_every_model_gets_its_verdict(first_scan) -> None:
    got = {r.repo_id: (r.verdict, r.reason) for r in first_scan["first"].records}
    assert got == EXPECTED


def test_the_records_are_read_back_from_the_journal_after_the_merge(first_scan) -> None:
    """The scan's records live in its journal (unlinked by the merge, still open): the
    streamed JSON report the CLI writes is the report built in memory, one model a line."""
    result = first_scan["first"]
    assert not (first_scan["tmp"] / "state.json.journal").exists()
    assert isinstance(result.records, RecordView) and len(result.records) == len(EXPECTED)
    streamed = "".join(iterdumps(to_dict(result, stream=True)))
    in_memory = to_dict(result)
    assert json.loads(streamed) == json.loads(dumps(in_memory))
    lines = streamed.splitlines()
    start = lines.index('  "models": [')
    for n, model in enumerate(in_memory["models"]):
        assert json.loads(lines[start + 1 + n].strip().rstrip(",")) == json.loads(dumps(model))
    assert sorted(m["repo_id"] for m in json.loads(streamed)["models"]) == sorted(
        r for r, (verdict, _) in EXPECTED.items() if verdict != "unchanged"
    )


def test_every_model_counted_once_and_nothing_stops_the_scan(first_scan) -> None:
    first = first_scan["first"]
    ids = [r.repo_id for r in first.records]
    assert len(ids) == len(set(ids)) == len(EXPECTED)
    assert first.listing_error is None and not first.interrupted
    counts = first.counts()
    assert counts["models"] == sum(counts[v] for v in VERDICTS) == len(EXPECTED)
    assert counts["skipped_by_reason"]["timeout"] == 2
    # Hour-long Retry-After and slow answers are cut short: the scan is over in seconds.
    assert first_scan["took"] < 30


def test_verdict_details(first_scan) -> None:
    recs = {r.repo_id: r for r in first_scan["first"].records}
    known = recs["same/llama3-copy"]
    assert known.family == "Llama-3" and known.label.startswith("Dense · GQA 32/8")

    wide = recs["wide/llama3-10b"]
    assert wide.family == "Llama-3"
    changes = {(c["facet"], c["size"]): (c["was"], c["now"]) for c in wide.size_changes}
    assert changes[("embedding.table", "d_model")] == (4096, 5120)
    assert changes[("attention.kv", "n_heads")] == (32, 40)

    biased = recs["bias/llama3-bias"]
    assert biased.fingerprint_new and not biased.model_type_new
    assert biased.nearest["family"] == "Llama-3" and biased.nearest["distance"] == 1
    assert biased.nearest["differs"] == [
        {
            "facet": "attention.bias",
            "article": "01",
            "title": "From GPT-2 to Llama: five changes and the parameter count",
            "was": "no bias",  # the family's value, then this model's: every difference has both
            "now": "bias on q/k/v and output",
        }
    ]
    mistral = recs["mistralai/Mistral-7B-v0.1"]
    assert mistral.nearest["family"] == "Llama-3"
    assert [d["facet"] for d in mistral.nearest["differs"]] == ["attention.range"]
    rng = mistral.nearest["differs"][0]
    assert (rng["was"], rng["now"]) == ("full causal", "sliding window 4,096 on every layer")
    dsa = recs["deepseek-ai/DeepSeek-V3.2"]
    assert dsa.nearest["family"] == "DeepSeek-V3"
    assert [d["facet"] for d in dsa.nearest["differs"]] == ["attention.range"]

    keys = recs["keys/llama3-keys"]
    assert keys.family == "Llama-3" and keys.new_keys == ("attn_temperature_floor",)

    zeta = recs["zeta/zeta-7b"]
    assert zeta.model_type_new and zeta.model_type == "zeta_lm"
    assert "zeta_gate_rank" in zeta.new_keys

    assert "Retry-After" in recs["fail/429-hour"].detail and "not waiting" in recs["fail/429-hour"].detail


def test_requests_are_bounded(first_scan) -> None:
    log = first_scan["log_first"]

    def count(repo_id: str, method: str | None = None) -> int:
        # config.json requests (each classified model also costs one model-card GET, below)
        return sum(
            1
            for e in log
            if e.repo_id == repo_id and e.filename == "config.json" and (method is None or e.method == method)
        )

    # Decided from the listing alone: no request at all.
    assert count("skip/vision") == 0 and count("skip/listed-gated") == 0
    assert count("old/llama3") == 0
    # The huge body is refused on its Content-Length, once: not retried.
    assert count("skip/huge") == 1
    # A permanent answer is not retried; a transient one is, a bounded number of times.
    assert count("skip/gone") == 1 and count("skip/gated-401") == 1
    assert count("fail/503") == FAST.attempts
    assert count("fail/429-hour") == 1  # Retry-After over the cap: not waited for
    assert [e.status for e in log if e.repo_id == "retry/429-once" and e.filename == "config.json"] == [
        429,
        200,
    ]
    # The model card: one GET per classified model (and per repo without config.json), none for
    # skipped ones, pinned to the commit the config came from.
    cards = [e for e in log if e.filename == "README.md"]
    classified = {r.repo_id for r in first_scan["first"].records if r.verdict not in ("skipped", "unchanged")}
    no_config = {r.repo_id for r in first_scan["first"].records if r.reason == "no_config"}
    assert sorted(e.repo_id for e in cards) == sorted(classified | no_config)
    commits = {r.repo_id: r.commit or r.listed.sha for r in first_scan["first"].records}
    off = [(e.repo_id, e.revision) for e in cards if e.method != "GET" or e.revision != commits[e.repo_id]]
    assert off == []
    # A repo never seen before costs one GET, pinned to the commit the listing saw.
    (get,) = [e for e in log if e.repo_id == "same/llama3-copy" and e.filename == "config.json"]
    commit = first_scan["first"].records[0].commit
    assert get.method == "GET" and get.revision == commit and len(commit) == 40


def test_second_scan_reports_nothing_new(first_scan) -> None:
    second = first_scan["second"]
    assert second.new == []
    by = {r.repo_id: r for r in second.records}
    assert len(by) == len(EXPECTED)
    for repo_id, (_, reason) in EXPECTED.items():
        if (reason or "") in ("rate_limited", "server_error", "timeout", "network"):
            assert by[repo_id].verdict == "skipped"  # transient: tried again, fails again
        elif reason in ("gated", "not_found"):  # depends on who asks: asked again, refused again
            assert (by[repo_id].verdict, by[repo_id].reason) == ("skipped", reason), repo_id
        else:
            assert by[repo_id].verdict == "unchanged", repo_id
    # Unchanged repos cost no request: the listing's commit sha matched the state.
    log = first_scan["log_second"]
    assert not [e for e in log if e.repo_id == "same/llama3-copy"]
    assert not [
        e for e in log if e.method == "GET" and e.repo_id and e.repo_id.startswith(("same/", "wide/"))
    ]
    data = to_dict(second)
    assert data["new"] is False
    assert "0 new" in render_markdown(data)


def test_state_file_after_two_scans(first_scan) -> None:
    state = ScanState.load(first_scan["tmp"] / "state.json")
    assert state.current is None and len(state.data["scans"]) == 2
    assert not (first_scan["tmp"] / "state.json.journal").exists()
    models = state.models
    assert models["same/llama3-copy"]["verdict"] == "known"
    assert "fail/503" not in models  # transient failures are not remembered as seen
    assert models["skip/no-config"]["reason"] == "no_config"
    assert "zeta_lm" in state.data["model_types"]
    assert state.data["keys"]["attn_temperature_floor"] == "keys/llama3-keys"
    biased_fp = next(r.fingerprint for r in first_scan["first"].records if r.repo_id == "bias/llama3-bias")
    assert state.fingerprints[biased_fp]["fills"]["attention.bias"]["kind"] == "qkv+out"


def test_report_groups_new_first(first_scan) -> None:
    data = to_dict(first_scan["first"])
    verdicts = [m["verdict"] for m in data["models"]]
    order = ["new_model_type", "new_fingerprint", "new_keys", "new_sizes", "known", "skipped"]
    assert verdicts == sorted(verdicts, key=order.index)
    assert data["new"] is True
    # Each new design once; zeta's model_type is new but its design is Llama-3's.
    assert {e["fingerprint"] for e in data["new_fingerprints"]} == {
        m["fingerprint"] for m in data["models"] if m["verdict"] == "new_fingerprint"
    }
    zeta = next(m for m in data["models"] if m["repo_id"] == "zeta/zeta-7b")
    assert zeta["family"] == "Llama-3" and not zeta["fingerprint_new"]
    md = render_markdown(data)
    heads = [line for line in md.splitlines() if line.startswith("### ")]
    assert heads == [
        "### New model_type (1)",
        "### New fingerprint (3)",
        "### New config keys (1)",
        "### Known family, new sizes (1)",
        "### Known family (4)",
        f"### Skipped ({sum(1 for v, _ in EXPECTED.values() if v == 'skipped')})",
    ]
    assert "`attention.bias` no bias → bias on q/k/v and output (article 01)" in md
    assert "| 1.2k | Llama-3 |" in md
    assert f"[same/llama3-copy]({first_scan['url']}/same/llama3-copy)" in md
    json.dumps(data, allow_nan=False)  # strict JSON
    schema = json.loads((ROOT / "schemas" / "scan-report.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(data)))
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(to_dict(first_scan["second"]))))


def test_terminal_summary_fits_100_columns(first_scan) -> None:
    text = render_terminal(to_dict(first_scan["first"]), width=100)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "New fingerprint (3)" in text and "fail/503" in text and "server_error" in text


# --------------------------------------------------------------------------- changes between scans


def test_changed_repo_is_checked_with_a_head_first(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    with HubServer([repo("org/m", config(LLAMA3))]) as hub:
        first = run_scan(options(hub, tmp_path))
        assert [r.verdict for r in first.records] == ["known"]

        # A new commit that leaves config.json alone: one HEAD, same etag, no download.
        hub.add(Repo("org/m", files={"config.json": config(LLAMA3), "README.md": "hi"}, created_at=NOW))
        hub.clear_log()
        second = run_scan(options(hub, tmp_path))
        assert [(r.verdict, r.detail) for r in second.records] == [
            ("unchanged", "config.json unchanged (same etag)")
        ]
        assert [e.method for e in hub.log if e.repo_id == "org/m"] == ["HEAD"]

        # A changed config behind a rate-limited HEAD: waited for, fetched, judged again.
        hub.add(
            repo(
                "org/m",
                config(LLAMA3, attention_bias=True),
                Fault.rate_limited(times=1, retry_after=1, methods=("HEAD",)),
                hours=0.5,
            )
        )
        hub.clear_log()
        third = run_scan(options(hub, tmp_path))
        (rec,) = third.records
        assert rec.verdict == "new_fingerprint"
        assert rec.previous["fingerprint"] == first.records[0].fingerprint
        assert [
            (e.method, e.status) for e in hub.log if e.repo_id == "org/m" and e.filename == "config.json"
        ] == [
            ("HEAD", 429),
            ("HEAD", 200),
            ("GET", 200),
        ]
        assert [r.verdict for r in run_scan(options(hub, tmp_path)).records] == ["unchanged"]


def test_seen_repo_with_a_huge_config_is_refused_on_its_head(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    with HubServer([repo("org/m", config(LLAMA3))]) as hub:
        run_scan(options(hub, tmp_path))
        huge = Fault.huge(5 * 1024 * 1024)  # a new commit whose config.json is 5 MiB
        hub.add(Repo("org/m", files={"config.json": config(LLAMA3), "x": "1"}, faults=[huge], created_at=NOW))
        hub.clear_log()
        (rec,) = run_scan(options(hub, tmp_path)).records
        assert (rec.verdict, rec.reason) == ("skipped", "too_large")
        assert [e.method for e in hub.log if e.repo_id == "org/m"] == ["HEAD"]  # and no card


def test_new_design_seen_by_an_earlier_scan_is_known_to_the_next(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    biased = config(LLAMA3, attention_bias=True)
    with HubServer([repo("a/first", biased, hours=30)]) as hub:
        assert [r.verdict for r in run_scan(options(hub, tmp_path)).records] == ["new_fingerprint"]
        hub.add(repo("b/second", biased, hours=1))
        recs = {r.repo_id: r for r in run_scan(options(hub, tmp_path)).records}
        assert recs["b/second"].verdict == "known"
        assert recs["b/second"].family.endswith("(first seen in a/first)")


def test_listing_window_and_filters(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    llama = config(LLAMA3)
    repos = [
        repo("a/new", llama, hours=2),
        Repo(
            "a/updated",
            files={"config.json": llama},
            created_at=NOW - timedelta(days=90),
            last_modified=NOW - timedelta(hours=3),
        ),
        repo("b/new", llama, hours=1, library_name="mlx"),
        repo("a/old", llama, hours=24 * 40),
    ]
    with HubServer(repos, page_size=2) as hub:

        def ids(**kw: Any) -> list[str]:
            return [r.repo_id for r in run_scan(options(hub, tmp_path, state=None, **kw)).records]

        assert ids() == ["b/new", "a/new", "a/updated"]  # newest first
        assert ids(by="created") == ["b/new", "a/new"]
        assert ids(author="a") == ["a/new", "a/updated"]
        assert ids(library="mlx") == ["b/new"]
        assert ids(limit=2) == ["b/new", "a/new"]
        assert ids(since=(NOW - timedelta(hours=2, minutes=30)).isoformat()) == ["b/new", "a/new"]


def test_hf_token_opens_gated_repos(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_families(tmp_path / "families")
    gated = Repo(
        "org/gated",
        files={"config.json": config(LLAMA3)},
        created_at=NOW - timedelta(hours=1),
        gated="manual",
        access_tokens=["hf_allowed"],
    )
    with HubServer([gated]) as hub:
        no = run_scan(options(hub, tmp_path, state=None))
        assert [(r.verdict, r.reason) for r in no.records] == [("skipped", "gated")]
        monkeypatch.setenv("HF_TOKEN", "hf_wrong")
        wrong = run_scan(options(hub, tmp_path, state=None))
        assert [(r.verdict, r.reason) for r in wrong.records] == [("skipped", "gated")]
        monkeypatch.setenv("HF_TOKEN", "hf_allowed")
        yes = run_scan(options(hub, tmp_path, state=None))
        assert [r.verdict for r in yes.records] == ["known"]
        assert hub.requests(method="GET")[-1].headers["authorization"] == "Bearer hf_allowed"


def test_lfs_config_is_fetched_from_the_cdn_without_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_families(tmp_path / "families")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    lfs = Repo(
        "org/lfs",
        files={"config.json": config(LLAMA3)},
        lfs=["config.json"],
        created_at=NOW - timedelta(hours=1),
    )
    with HubServer([lfs]) as hub:
        assert [r.verdict for r in run_scan(options(hub, tmp_path, state=None)).records] == ["known"]
        (cdn,) = hub.requests(kind="cdn")
        assert cdn.method == "GET" and "authorization" not in cdn.headers
        assert hub.requests(kind="resolve")[0].headers["authorization"] == "Bearer hf_secret"


def test_since_forms(tmp_path: Path) -> None:
    from slotdiff.scan.listing import parse_since

    now = datetime(2025, 6, 30, 12, tzinfo=UTC)
    assert parse_since("7d", now) == datetime(2025, 6, 23, 12, tzinfo=UTC)
    assert parse_since("2w", now) == parse_since("14d", now)
    assert parse_since("12h", now) == datetime(2025, 6, 30, 0, tzinfo=UTC)
    assert parse_since("2025-06-01", now) == datetime(2025, 6, 1, tzinfo=UTC)
    assert parse_since("2025-06-01T10:00:00+02:00", now) == datetime(2025, 6, 1, 8, tzinfo=UTC)
    make_families(tmp_path / "families")
    with HubServer([repo("a/old", config(LLAMA3), hours=48)]) as hub:
        first = run_scan(options(hub, tmp_path, since="last"))  # no scan yet: the last 7 days
        assert [r.repo_id for r in first.records] == ["a/old"]
        later = datetime.now(UTC) + timedelta(minutes=1)
        hub.add(Repo("a/new", files={"config.json": config(LLAMA3)}, created_at=later))
        second = run_scan(options(hub, tmp_path, since="last"))  # since the first scan started
        assert [r.repo_id for r in second.records] == ["a/new"]


def test_via_hf_cache_uses_hf_hub_download(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    with HubServer([repo("org/m", config(LLAMA3))]) as hub:
        result = run_scan(options(hub, tmp_path, state=None, via_hf_cache=True))
        assert [r.verdict for r in result.records] == ["known"]
        assert list((tmp_path / "hf-cache").glob("models--org--m/snapshots/*/config.json"))
        hub.clear_log()
        # A copy in the HF cache at the commit the listing gives is used without a request.
        again = run_scan(options(hub, tmp_path, state=None))
        assert [r.verdict for r in again.records] == ["known"]
        assert [e.method for e in hub.log if e.repo_id == "org/m" and e.filename == "config.json"] == []


def test_unsafe_repo_ids_are_refused(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    with HubServer([repo("..", config(LLAMA3)), repo("a/b", config(LLAMA3))]) as hub:
        recs = {r.repo_id: r for r in run_scan(options(hub, tmp_path)).records}
        assert (recs[".."].verdict, recs[".."].reason) == ("skipped", "not_found")
        assert not [e for e in hub.log if e.repo_id == ".."]


# --------------------------------------------------------------------------- listing failures


def test_listing_that_fails_outright_is_one_line_error(tmp_path: Path) -> None:
    faults = [Fault.invalid_json(on="list")]
    with (
        HubServer([repo("a/b", config(LLAMA3))], faults=faults) as hub,
        pytest.raises(SlotdiffError, match="JSON"),
    ):
        run_scan(options(hub, tmp_path))


class _NoSleep:
    """Stands in for the ``time`` module inside huggingface_hub's HTTP helpers: no sleeps."""

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        pass


def test_stalled_listing_is_given_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The abandoned listing thread retries inside huggingface_hub's http_backoff once the
    # server is gone (1+2+4+8+8 s of sleeps); without them it ends at once, and teardown joins it.
    monkeypatch.setattr(hf_http, "time", _NoSleep())
    with HubServer([repo("a/b", config(LLAMA3))], faults=[Fault.delay(5, on="list")]) as hub:
        t0 = time.monotonic()
        with pytest.raises(SlotdiffError, match="stalled"):
            run_scan(options(hub, tmp_path, list_timeout=0.5))
        assert time.monotonic() - t0 < 3


def test_partial_listing_is_reported_and_the_scan_stays_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slotdiff.scan import engine

    make_families(tmp_path / "families")
    real = engine.list_models

    def broken(query, **kw):
        it = real(query, **kw)
        yield next(it)
        raise httpx2.ReadTimeout("page two never came")

    with HubServer([repo("a/one", config(LLAMA3), hours=1), repo("a/two", config(LLAMA3), hours=2)]) as hub:
        monkeypatch.setattr(engine, "list_models", broken)
        result = run_scan(options(hub, tmp_path))
        assert [r.repo_id for r in result.records] == ["a/one"]
        assert "did not answer in time" in result.listing_error
        assert "listing" in to_dict(result)["listing_error"]
        assert ScanState.load(tmp_path / "state.json").current is not None
        monkeypatch.setattr(engine, "list_models", real)
        again = run_scan(options(hub, tmp_path))
        assert again.resumed
        assert {r.repo_id: r.verdict for r in again.records} == {"a/one": "known", "a/two": "known"}
        gets = [
            e for e in hub.log if e.repo_id == "a/one" and e.method == "GET" and e.filename == "config.json"
        ]
        assert len(gets) == 1


def test_offline_mode_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(SlotdiffError, match="HF_HUB_OFFLINE"):
        run_scan(ScanOptions(state=tmp_path / "s.json"))


def test_corrupt_state_is_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("{not json")
    with pytest.raises(SlotdiffError, match="cannot read the scan state"):
        ScanState.load(tmp_path / "s.json")
    (tmp_path / "t.json").write_text('{"format": "something else"}')
    with pytest.raises(SlotdiffError, match="not a slotdiff scan state"):
        ScanState.load(tmp_path / "t.json")


# --------------------------------------------------------------------------- CLI


def test_cli_fail_on_new_json_markdown_and_proposals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import jsonschema

    fams = make_families(tmp_path / "families")
    repos = [
        repo("a/tied", config(LLAMA3, attention_bias=True), hours=1),
        repo("a/tied-2", config(LLAMA3, attention_bias=True, hidden_size=2048), hours=2),
        repo("b/evil", config(LLAMA3, model_type="../../x`|y", hidden_act="gelu"), hours=3),
        repo("c/same", config(LLAMA3), hours=4),
    ]
    proposals = tmp_path / "proposed"
    with HubServer(repos) as hub:
        common = ["scan", "--endpoint", hub.url, "--fingerprints", str(fams), "--quiet"]
        common += ["--cache-dir", str(tmp_path / "c"), "--timeout", "1", "--deadline", "5"]
        argv = [*common, "--state", str(tmp_path / "s.json"), "--json", "--fail-on-new"]
        argv += ["--update-fingerprints", str(proposals), "--write-markdown", str(tmp_path / "r.md")]
        assert main(argv) == 1
        data = json.loads(capsys.readouterr().out)
        assert data["counts"]["new_fingerprint"] == 2 and data["counts"]["new_model_type"] == 1
        md = (tmp_path / "r.md").read_text()
        assert md.startswith("## slotdiff scan: 3 new")
        assert "../../x`" not in md  # a config's model_type cannot break out of the Markdown
        written = sorted(p.name for p in proposals.iterdir())
        assert len(written) == 2 and all(p.parent == proposals for p in proposals.iterdir())
        assert not any("/" in n or n.startswith(".") for n in written)
        schema = json.loads((ROOT / "schemas" / "fingerprint.schema.json").read_text())
        for path in proposals.iterdir():
            doc = json.loads(path.read_text())
            jsonschema.validate(doc, schema)
        tied = next(json.loads(p.read_text()) for p in proposals.iterdir() if "llama" in p.name)
        assert tied["exemplars"] == ["a/tied-2", "a/tied"] and len(tied["sizes"]) == 2

        # Nothing new the second time: exit 0.
        assert main([*common, "--state", str(tmp_path / "s.json"), "--json", "--fail-on-new"]) == 0
        assert json.loads(capsys.readouterr().out)["new"] is False

        # With the proposals adopted as families, a fresh scan calls every design known.
        for path in proposals.iterdir():
            (fams / path.name).write_bytes(path.read_bytes())
        assert main([*common, "--state", str(tmp_path / "fresh.json"), "--json", "--fail-on-new"]) == 0
        verdicts = {m["repo_id"]: m["verdict"] for m in json.loads(capsys.readouterr().out)["models"]}
        assert verdicts == dict.fromkeys(["a/tied", "a/tied-2", "b/evil", "c/same"], "known")


def test_cli_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["scan", "--since", "yesterday"]) == 2
    assert "--since 'yesterday'" in capsys.readouterr().err
    assert main(["scan", "--workers", "0"]) == 2
    assert main(["scan", "--fingerprints", str(tmp_path / "nope")]) == 2
    assert "not a folder" in capsys.readouterr().err


# --------------------------------------------------------------------------- subprocess: env, kill, exit


def _env(hub: HubServer, tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(
        PYTHONPATH=str(ROOT / "src"),
        HF_ENDPOINT=hub.url,
        HF_HUB_CACHE=str(tmp / "hf-cache"),
        HF_HOME=str(tmp / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HTTPS_PROXY="http://127.0.0.1:9",  # anything not on loopback would hit a dead proxy
        HTTP_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
        COLUMNS="100",
    )
    env.update(extra)
    return env


def _scan_cmd(tmp: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "slotdiff",
        "scan",
        "--state",
        str(tmp / "state.json"),
        "--fingerprints",
        str(tmp / "families"),
        "--timeout",
        "2",
        "--deadline",
        "8",
        *args,
    ]


def _done(state: Path) -> int:
    """Models the running scan has recorded (state file plus journal), read from outside."""
    if not state.exists():
        return 0
    try:
        return len(ScanState.load(state).done_ids())
    except SlotdiffError:
        return 0


def _wait_done(proc: subprocess.Popen[Any], state: Path, at_least: int) -> int:
    deadline = time.monotonic() + 60
    while (n := _done(state)) < at_least:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return n


def test_scan_killed_midway_resumes_and_counts_each_model_once(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    corpus = [LLAMA3, "Qwen/Qwen3-30B-A3B", "mistralai/Mistral-7B-v0.1", "openai-community/gpt2"]
    slow = Fault.delay(0.15, methods=("GET",))
    repos = [
        repo(f"kill/m{i:02d}", config(corpus[i % 4], _name_or_path=f"m{i}"), slow, hours=1 + i)
        for i in range(40)
    ]
    ids = {r.id for r in repos}
    with HubServer(repos, page_size=10) as hub:
        proc = subprocess.Popen(
            _scan_cmd(tmp_path, "--workers", "2", "--json"),
            env=_env(hub, tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        seen = _wait_done(proc, tmp_path / "state.json", 10)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL

        killed = ScanState.load(tmp_path / "state.json")
        assert killed.current is not None, "the unfinished scan is in the state"
        done_before = killed.done_ids()
        assert seen <= len(done_before) < 40  # nothing recorded before the kill is lost
        for repo_ in repos:
            repo_.faults = ()
        gets_before = {r: hub.count(method="GET", repo_id=r, filename="config.json") for r in ids}

        out = subprocess.run(
            _scan_cmd(tmp_path, "--workers", "4", "--json", "--progress-log"),
            env=_env(hub, tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert "] kill/m" in out.stderr  # --progress-log, not a terminal: one plain line per model
        report = json.loads(out.stdout)
        listed = [m["repo_id"] for m in report["models"]]
        assert sorted(listed) == sorted(ids) and len(listed) == len(set(listed)) == 40
        assert report["scan"]["resumed"] is True
        assert report["counts"]["models"] == 40
        # Models finished before the kill were not fetched again.
        for r in done_before:
            assert hub.count(method="GET", repo_id=r, filename="config.json") == gets_before[r] == 1, r
        final = ScanState.load(tmp_path / "state.json")
        assert final.current is None and set(final.models) == ids
        assert not (tmp_path / "state.json.journal").exists()


def test_hf_endpoint_and_hf_token_from_the_environment(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    gated = Repo(
        "org/gated",
        files={"config.json": config(LLAMA3)},
        created_at=NOW - timedelta(hours=1),
        gated="manual",
        access_tokens=["hf_allowed"],
    )
    with HubServer([gated]) as hub:
        out = subprocess.run(
            _scan_cmd(tmp_path, "--json", "--quiet"),
            env=_env(hub, tmp_path, HF_TOKEN="hf_allowed"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert [m["verdict"] for m in json.loads(out.stdout)["models"]] == ["known"]
        assert hub.requests(kind="list")[0].headers["authorization"] == "Bearer hf_allowed"


def test_a_thread_asleep_in_huggingface_hub_does_not_hold_the_process(tmp_path: Path) -> None:
    """With --hf-cache, hf_hub_download sleeps Retry-After + 1 s (uncapped) on a 429 GET."""
    make_families(tmp_path / "families")
    hour = Fault.rate_limited(times=None, retry_after=3600, methods=("GET",))
    with HubServer([repo("org/m", config(LLAMA3), hour), repo("org/ok", config(LLAMA3))]) as hub:
        t0 = time.monotonic()
        out = subprocess.run(
            [*_scan_cmd(tmp_path, "--hf-cache", "--json", "--quiet"), "--deadline", "2"],
            env=_env(hub, tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert time.monotonic() - t0 < 30
        models = {m["repo_id"]: (m["verdict"], m["reason"]) for m in json.loads(out.stdout)["models"]}
        assert models == {"org/m": ("skipped", "timeout"), "org/ok": ("known", None)}
        assert json.loads(out.stdout)["retries"]["abandoned"] == 1


def test_sigterm_saves_the_state_and_exits_130(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    slow = Fault.delay(0.3, methods=("GET",))
    repos = [repo(f"t/m{i}", config(LLAMA3, _name_or_path=str(i)), slow, hours=1 + i) for i in range(20)]
    with HubServer(repos) as hub:
        proc = subprocess.Popen(
            _scan_cmd(tmp_path, "--workers", "2", "--quiet"),
            env=_env(hub, tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        seen = _wait_done(proc, tmp_path / "state.json", 2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 130
        assert "interrupted" in (proc.stderr.read() if proc.stderr else "")
        state = ScanState.load(tmp_path / "state.json")
        assert state.current is not None and seen <= len(state.done_ids()) < 20
        # The finished models are the journal's lines (the state file holds the scan's header).
        journal = (tmp_path / "state.json.journal").read_text().splitlines()
        assert {json.loads(line)["record"]["repo_id"] for line in journal} == state.done_ids()
        assert json.loads((tmp_path / "state.json").read_text())["current"]["done"] == {}


# --------------------------------------------------------------------------- units: pool, retries


def test_progress_displays(capsys: pytest.CaptureFixture[str]) -> None:
    from slotdiff.commands.scan import _PlainProgress, _RichProgress
    from slotdiff.scan.listing import Listed
    from slotdiff.scan.verdict import Record

    rec = Record(Listed("org/m"), "known", family="Llama-3")
    for display in (_PlainProgress(), _RichProgress()):
        display("listed", 1)
        display("done", rec, 1, 1)
        display.close()
    assert "[1/1] org/m: known Llama-3" in capsys.readouterr().err


def test_deadline_pool_gives_up_and_replaces_the_worker() -> None:
    release = threading.Event()

    def work(x: int) -> int:
        if x == 0:
            release.wait(10)  # stuck
        return x * 2

    pool = DeadlinePool(work, workers=1, deadline=0.3)
    for i in range(4):
        pool.submit(i, i)
    outcomes = []
    t0 = time.monotonic()
    while pool.pending:
        outcomes += pool.poll(0.05)
        assert time.monotonic() - t0 < 5
    by = {o.key: o for o in outcomes}
    assert by[0].status == "timeout"
    assert [by[i].value for i in (1, 2, 3)] == [2, 4, 6]
    assert len(outcomes) == 4 and pool.abandoned == 1
    release.set()  # the stuck thread ends; its late result is dropped
    time.sleep(0.1)
    assert pool.poll(0) == [] and pool.pending == 0
    pool.close()


def test_deadline_pool_reports_exceptions() -> None:
    def boom(x: int) -> int:
        raise ValueError(x)

    pool = DeadlinePool(boom, workers=2, deadline=None)
    pool.submit("k", 1)
    outcomes = []
    while pool.pending:
        outcomes += pool.poll(0.05)
    assert outcomes[0].status == "error" and isinstance(outcomes[0].error, ValueError)
    pool.close()


def _fail(**kw: Any) -> HubFailure:
    return HubFailure("http", "boom", retryable=True, **kw)


def test_retrier_caps_retry_after_and_budgets() -> None:
    r = Retrier(RetryPolicy(attempts=5, backoff=0.01, retry_after_cap=1, model_budget=0.05, total_budget=1))
    calls = []

    def always(**kw: Any):
        def fn() -> None:
            calls.append(1)
            raise _fail(**kw)

        return fn

    with pytest.raises(HubFailure, match=r"rate limited: retry after 3600 s .* not waiting over 1 s"):
        r.call(always(retry_after=3600), lambda e: _fail(), r.budget())
    assert len(calls) == 1
    calls.clear()
    t0 = time.monotonic()
    with pytest.raises(HubFailure, match="retry budget spent"):
        r.call(always(), lambda e: _fail(), r.budget())
    assert 1 < len(calls) < 5 and time.monotonic() - t0 < 1
    assert r.waited <= 1


def test_retrier_cancel_ends_a_wait_at_once() -> None:
    r = Retrier(RetryPolicy(attempts=3, retry_after_cap=60, model_budget=60, total_budget=60))

    def limited() -> None:
        raise _fail(retry_after=30)

    threading.Timer(0.2, r.cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(HubFailure, match="stopped"):
        r.call(limited, lambda e: _fail(), r.budget())
    assert time.monotonic() - t0 < 2


def test_raw_transport_errors_become_failures() -> None:
    r = Retrier(RetryPolicy(attempts=2, backoff=0.01))
    from slotdiff.read.hub_errors import describe_failure

    def broken() -> None:
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")

    with pytest.raises(HubFailure) as err:
        r.call(broken, lambda e: describe_failure(e, "a/b", None), r.budget())
    assert err.value.kind == "network" and "complete message body" in err.value.reason
