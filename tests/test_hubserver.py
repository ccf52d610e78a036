"""The fake Hub (tests/hubserver.py) against the real huggingface_hub client.

These tests pin down how huggingface_hub 2.4 behaves for each server behaviour: which
exception it raises, how many requests it makes and how long it would sleep between them.
Sleeps inside huggingface_hub are recorded instead of slept (fixture ``sleeps``), so the
retry schedule is asserted without waiting for it. No test reaches the network: every
request made by huggingface_hub goes through a guard that rejects any non-loopback host.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from itertools import takewhile
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import (
    HfApi,
    constants,
    get_hf_file_metadata,
    hf_hub_download,
    hf_hub_url,
    set_client_factory,
)
from huggingface_hub import file_download as hf_file_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import _http as hf_http
from huggingface_hub.utils import disable_progress_bars

from hubserver import MAX_DELAY, Fault, Generated, HubServer, Repo

REPO = "org/model"
CONFIG = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2}
CONFIG_V1 = {"model_type": "gpt2", "n_embd": 32}


# --------------------------------------------------------------------------- fixtures


class NonLoopbackRequest(AssertionError):
    """A test made huggingface_hub build a request for a host other than the fake Hub."""


def _loopback_only(request: httpx2.Request) -> None:
    if request.url.host not in ("127.0.0.1", "localhost"):
        raise NonLoopbackRequest(f"blocked request to {request.url}")


def guarded_client(**client_kwargs) -> httpx2.Client:
    """huggingface_hub's default client plus a hook refusing non-loopback hosts (runs pre-send)."""
    kwargs = {"follow_redirects": True, "timeout": None, **client_kwargs}
    return httpx2.Client(event_hooks={"request": [_loopback_only, hf_http.hf_request_event_hook]}, **kwargs)


@pytest.fixture(autouse=True)
def _isolated_client(monkeypatch, tmp_path):
    """No ambient token, no offline flag, no progress bars, loopback-only HTTP."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", constants.DEFAULT_ETAG_TIMEOUT)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", constants.DEFAULT_DOWNLOAD_TIMEOUT)
    previous_factory = hf_http._GLOBAL_CLIENT_FACTORY
    set_client_factory(guarded_client)
    try:
        with disable_progress_bars():
            yield
    finally:
        set_client_factory(previous_factory)


class _SleepRecorder:
    """Stands in for the ``time`` module inside huggingface_hub: records sleeps, skips them."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.calls.append(float(seconds))

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture
def sleeps(monkeypatch) -> list[float]:
    """Every time.sleep() of huggingface_hub's retry loops, in order (nothing is slept)."""
    recorder = _SleepRecorder()
    monkeypatch.setattr(hf_http, "time", recorder)
    monkeypatch.setattr(hf_file_download, "time", recorder)
    return recorder.calls


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "hub-cache"


def make_repo(*faults: Fault, **kw) -> Repo:
    kw.setdefault("files", {"config.json": CONFIG, "README.md": "# model\n"})
    kw.setdefault("revisions", {"v1": {"config.json": CONFIG_V1}})
    return Repo(REPO, faults=faults, **kw)


def download(hub: HubServer, cache: Path, filename: str = "config.json", **kw) -> str:
    kw.setdefault("token", False)
    return hf_hub_download(REPO, filename, endpoint=hub.url, cache_dir=cache, **kw)


def read_json(path: str):
    return json.loads(Path(path).read_text())


# --------------------------------------------------------------------------- plain serving


def test_download_main_named_revision_and_commit_sha(cache):
    repo = make_repo()
    with HubServer([repo]) as hub:
        main = download(hub, cache)
        v1 = download(hub, cache, revision="v1")
        by_sha = download(hub, cache, revision=repo.sha("v1"), force_download=True)

        assert read_json(main) == CONFIG
        assert read_json(v1) == read_json(by_sha) == CONFIG_V1
        assert Path(main).parent.name == repo.sha("main")
        assert Path(v1).parent.name == repo.sha("v1")
        refs = cache / "models--org--model" / "refs"
        assert (refs / "main").read_text() == repo.sha("main")
        assert (refs / "v1").read_text() == repo.sha("v1")
        # Exactly HEAD + GET per download, nothing else (no xet token/reconstruction calls).
        assert [(e.method, e.kind, e.revision, e.status) for e in hub.log] == [
            ("HEAD", "resolve", "main", 200),
            ("GET", "resolve", "main", 200),
            ("HEAD", "resolve", "v1", 200),
            ("GET", "resolve", "v1", 200),
            ("HEAD", "resolve", repo.sha("v1"), 200),
            ("GET", "resolve", repo.sha("v1"), 200),
        ]


def test_metadata_head_has_no_xet_headers_so_download_is_plain_http(cache):
    with HubServer([make_repo()]) as hub:
        url = hf_hub_url(REPO, "config.json", endpoint=hub.url)
        meta = get_hf_file_metadata(url, token=False)
        body = json.dumps(CONFIG, indent=2).encode()
        assert meta.xet_file_data is None
        assert meta.size == len(body)
        assert meta.commit_hash == hub.repos[REPO].sha()
        assert meta.etag is not None and len(meta.etag) == 40  # git blob sha1, quotes stripped
        assert meta.location == url


def test_second_download_is_served_from_cache(cache):
    repo = make_repo()
    with HubServer([repo]) as hub:
        first = download(hub, cache)
        hub.clear_log()
        second = download(hub, cache)
        assert second == first
        # A branch name still costs one HEAD (to learn the commit), but no GET.
        assert [(e.method, e.status) for e in hub.log] == [("HEAD", 200)]

        hub.clear_log()
        pinned = download(hub, cache, revision=repo.sha())
        assert pinned == first
        assert hub.log == []  # a cached full commit sha makes no request at all


def test_offline_mode_reads_the_cache(cache, monkeypatch):
    with HubServer([make_repo()]) as hub:
        path = download(hub, cache)
        hub.clear_log()

        # HF_HUB_OFFLINE is read at import time: setting the env var now changes nothing.
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        assert download(hub, cache) == path
        assert hub.count(method="HEAD") == 1

        # Patching the constant works in-process (is_offline_mode() reads it at call time).
        hub.clear_log()
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        assert download(hub, cache) == path
        assert hub.log == []
        with pytest.raises(LocalEntryNotFoundError):
            download(hub, cache, filename="README.md")  # never downloaded => not cached
        with pytest.raises(LocalEntryNotFoundError):
            download(hub, cache, revision="v1")
        assert hub.log == []
        # local_files_only=True behaves the same without the global flag.
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        assert download(hub, cache, local_files_only=True) == path
        assert hub.log == []


def test_lfs_file_is_redirected_to_another_origin(cache):
    blob = bytes(range(256)) * 64
    repo = make_repo(files={"config.json": CONFIG, "model.bin": blob}, lfs=["model.bin"])
    with HubServer([repo]) as hub:
        meta = get_hf_file_metadata(hf_hub_url(REPO, "model.bin", endpoint=hub.url), token=False)
        assert meta.size == len(blob)  # from X-Linked-Size
        assert meta.location.startswith(f"http://localhost:{hub.port}/__cdn__/")
        path = download(hub, cache, filename="model.bin")
        assert Path(path).read_bytes() == blob
        assert Path(path).resolve().name == meta.etag  # blob named by X-Linked-Etag (sha256)
        assert [(e.method, e.kind, e.status) for e in hub.requests(filename="model.bin")] == [
            ("HEAD", "resolve", 302),
            ("HEAD", "resolve", 302),
            ("GET", "cdn", 200),  # the GET goes straight to the redirect target
        ]


def test_subprocess_with_hf_endpoint_env(cache, tmp_path):
    """HF_ENDPOINT/HF_HUB_CACHE/HF_HUB_OFFLINE set before import: no endpoint= needed."""
    script = textwrap.dedent(
        """
        import json, os
        from huggingface_hub import constants, hf_hub_download, list_models
        assert constants.ENDPOINT == os.environ["HF_ENDPOINT"]
        out = {"path": hf_hub_download("org/model", "config.json")}
        try:
            out["ids"] = [m.id for m in list_models()]
        except Exception as e:
            out["ids"] = type(e).__name__
        print(json.dumps(out))
        """
    )
    with HubServer([make_repo()]) as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
        env.update(
            HF_ENDPOINT=hub.url,
            HF_HUB_CACHE=str(cache),
            HF_HOME=str(tmp_path / "hf-home"),
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            # belt and braces: any non-loopback request would hit a dead proxy
            HTTPS_PROXY="http://127.0.0.1:9",
            HTTP_PROXY="http://127.0.0.1:9",
            NO_PROXY="127.0.0.1,localhost",
        )

        def run(**extra):
            proc = subprocess.run(
                [sys.executable, "-c", script],
                env={**env, **extra},
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert proc.returncode == 0, proc.stderr
            return json.loads(proc.stdout.strip().splitlines()[-1])

        online = run()
        assert read_json(online["path"]) == CONFIG
        assert online["ids"] == [REPO]
        hub.clear_log()
        offline = run(HF_HUB_OFFLINE="1")
        assert offline["path"] == online["path"]
        assert offline["ids"] == "OfflineModeIsEnabled"
        assert hub.log == []


def test_in_process_endpoint_patching_pitfalls(cache, monkeypatch):
    """What works in-process once huggingface_hub is imported (guard blocks huggingface.co)."""
    import huggingface_hub

    with HubServer([make_repo()]) as hub:
        # Safe: explicit endpoint= (hf_hub_download) and HfApi(endpoint=...).
        assert read_json(download(hub, cache)) == CONFIG
        assert [m.id for m in HfApi(endpoint=hub.url, token=False).list_models()] == [REPO]

        # Trap: patching constants.ENDPOINT alone -> file URLs still use the import-time
        # HUGGINGFACE_CO_URL_TEMPLATE, and endpoint= no longer rewrites them either.
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        with pytest.raises(NonLoopbackRequest, match=r"https://huggingface\.co/org/model/resolve"):
            hf_hub_download(REPO, "config.json", cache_dir=cache, token=False, force_download=True)
        with pytest.raises(NonLoopbackRequest, match=r"https://huggingface\.co/org/model/resolve"):
            download(hub, cache, force_download=True)

        # Patching ENDPOINT *and* the template makes endpoint-less calls work ...
        template = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
        path = hf_hub_download(REPO, "config.json", cache_dir=cache, token=False)
        assert read_json(path) == CONFIG
        assert HfApi().endpoint == hub.url  # new HfApi instances read constants.ENDPOINT
        # ... but the module-level helpers are bound to an HfApi built at import time.
        with pytest.raises(NonLoopbackRequest, match=r"https://huggingface\.co/api/models"):
            list(huggingface_hub.list_models(limit=1))


# --------------------------------------------------------------------------- listing


def _listing_repos() -> list[Repo]:
    base = datetime(2025, 1, 1, tzinfo=UTC)
    specs = [  # id, created (days after base), modified, downloads, tags
        ("meta-llama/Llama-3.2-1B", 0, 40, 900, ["llama", "text-generation"]),
        ("Qwen/Qwen3-0.6B", 10, 11, 500, ["qwen3", "text-generation"]),
        ("google/gemma-2-2b", 20, 60, 700, ["gemma2", "text-generation"]),
        ("openai-community/gpt2", -900, 30, 5000, ["gpt2", "text-generation"]),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", 30, 31, 100, ["qwen3_vl", "image-text-to-text"]),
    ]
    return [
        Repo(
            rid,
            files={"config.json": {"model_type": tags[0]}},
            created_at=base + timedelta(days=c),
            last_modified=base + timedelta(days=m),
            downloads=d,
            likes=d // 10,
            tags=tags,
            pipeline_tag=tags[1],
            gated="manual" if rid.startswith(("meta-llama", "google")) else False,
        )
        for rid, c, m, d, tags in specs
    ]


def test_list_models_newest_first_paginated_with_limit():
    with HubServer(_listing_repos(), page_size=2) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        models = list(api.list_models(sort="created_at"))
        assert [m.id for m in models] == [
            "Qwen/Qwen3-VL-30B-A3B-Instruct",
            "google/gemma-2-2b",
            "Qwen/Qwen3-0.6B",
            "meta-llama/Llama-3.2-1B",
            "openai-community/gpt2",
        ]
        assert all(m.created_at.tzinfo is not None for m in models)
        pages = hub.requests(kind="list")
        assert len(pages) == 3  # Link: <...cursor=...>; rel="next" followed twice
        assert pages[0].query == {"sort": ["createdAt"]}
        assert pages[1].query["cursor"] == ["2"]

        hub.clear_log()
        assert len(list(api.list_models(sort="created_at", limit=3))) == 3
        assert hub.count(kind="list") == 2  # islice stops before the third page
        assert hub.requests(kind="list")[0].query["limit"] == ["3"]


def test_list_models_created_since_date_stops_paging_early():
    since = datetime(2025, 1, 15, tzinfo=UTC)
    with HubServer(_listing_repos(), page_size=2) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        recent = list(takewhile(lambda m: m.created_at >= since, api.list_models(sort="created_at")))
        assert [m.id for m in recent] == ["Qwen/Qwen3-VL-30B-A3B-Instruct", "google/gemma-2-2b"]
        assert hub.count(kind="list") == 2  # the generator is lazy: page 3 never requested


def test_list_models_last_modified_needs_full_or_expand():
    with HubServer(_listing_repos()) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        bare = list(api.list_models(sort="last_modified"))
        assert [m.id for m in bare][:2] == ["google/gemma-2-2b", "meta-llama/Llama-3.2-1B"]
        assert all(m.last_modified is None and m.sha is None for m in bare)  # not in default
        assert all(m.gated is None for m in bare)

        full = list(api.list_models(sort="last_modified", full=True))
        assert full[0].last_modified == datetime(2025, 3, 2, tzinfo=UTC)
        assert full[0].sha == hub.repos["google/gemma-2-2b"].sha()
        assert full[0].gated == "manual"

        expanded = list(api.list_models(expand=["createdAt", "lastModified", "sha"]))
        assert all(m.last_modified and m.sha and m.created_at for m in expanded)
        assert all(m.downloads is None for m in expanded)  # expand returns only what is asked
        assert hub.requests(kind="list")[-1].query["expand"] == ["createdAt", "lastModified", "sha"]


def test_list_models_filters():
    with HubServer(_listing_repos()) as hub:
        api = HfApi(endpoint=hub.url, token=False)

        def ids(**kw):
            return sorted(m.id for m in api.list_models(**kw))

        assert ids(author="Qwen") == ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-VL-30B-A3B-Instruct"]
        assert ids(search="gemma") == ["google/gemma-2-2b"]
        assert ids(filter="qwen3") == ["Qwen/Qwen3-0.6B"]
        assert ids(pipeline_tag="image-text-to-text") == ["Qwen/Qwen3-VL-30B-A3B-Instruct"]
        assert ids(gated=True) == ["google/gemma-2-2b", "meta-llama/Llama-3.2-1B"]
        top = next(iter(api.list_models(sort="downloads", limit=1)))
        assert (top.id, top.downloads) == ("openai-community/gpt2", 5000)


def test_model_info_main_and_revision():
    repo = make_repo()
    with HubServer([repo]) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        info = api.model_info(REPO)
        assert info.sha == repo.sha()
        assert sorted(s.rfilename for s in info.siblings) == ["README.md", "config.json"]
        assert info.config == CONFIG
        assert api.model_info(REPO, revision="v1").sha == repo.sha("v1")
        with pytest.raises(RevisionNotFoundError):
            api.model_info(REPO, revision="nope")
        with pytest.raises(RepositoryNotFoundError):
            api.model_info("org/missing")


# --------------------------------------------------------------------------- 4xx


@pytest.mark.parametrize("status", [401, 404])
def test_repo_not_found(cache, status):
    with HubServer([make_repo(Fault.repo_not_found(status))]) as hub:
        with pytest.raises(RepositoryNotFoundError) as exc:
            download(hub, cache)
        assert exc.value.response.status_code == status
        assert not isinstance(exc.value, GatedRepoError)
        assert hub.statuses() == [status]  # no retry


def test_unknown_repo_and_unknown_revision(cache):
    with HubServer([make_repo()]) as hub:
        with pytest.raises(RepositoryNotFoundError):
            hf_hub_download("org/missing", "config.json", endpoint=hub.url, cache_dir=cache)
        with pytest.raises(RevisionNotFoundError):
            download(hub, cache, revision="no-such-branch")
        assert hub.statuses() == [404, 404]


def test_entry_not_found(cache):
    with HubServer([make_repo(Fault.entry_not_found(files=("config.json",)))]) as hub:
        with pytest.raises(RemoteEntryNotFoundError) as exc:
            download(hub, cache)
        assert isinstance(exc.value, EntryNotFoundError) and isinstance(exc.value, HfHubHTTPError)
        assert exc.value.response.status_code == 404
        # The client records the absence under .no_exist/<commit>/ (X-Repo-Commit header).
        no_exist = cache / "models--org--model" / ".no_exist" / hub.repos[REPO].sha()
        assert (no_exist / "config.json").exists()
        # The fault only targets config.json; other files are served.
        assert Path(download(hub, cache, filename="README.md")).read_text() == "# model\n"
        with pytest.raises(RemoteEntryNotFoundError):
            download(hub, cache, filename="missing.json")  # natural 404, same class
        assert hub.statuses(method="HEAD") == [404, 200, 404]


@pytest.mark.parametrize("status", [401, 403])
def test_gated_fault(cache, status):
    with HubServer([make_repo(Fault.gated(status))]) as hub:
        with pytest.raises(GatedRepoError) as exc:
            download(hub, cache)
        assert isinstance(exc.value, RepositoryNotFoundError)  # subclass: catch Gated first
        assert exc.value.response.status_code == status
        assert "restricted" in (exc.value.server_message or "")
        assert hub.statuses() == [status]


def test_gated_repo_needs_an_allowed_token(cache):
    with HubServer([make_repo(gated="manual", access_tokens=["hf_ok"])]) as hub:
        with pytest.raises(GatedRepoError) as anonymous:
            download(hub, cache)
        with pytest.raises(GatedRepoError) as wrong:
            download(hub, cache, token="hf_wrong")
        assert (anonymous.value.response.status_code, wrong.value.response.status_code) == (
            401,
            403,
        )
        assert read_json(download(hub, cache, token="hf_ok")) == CONFIG
        assert download(hub, cache, filename="README.md")  # README is never gated


def test_private_repo_looks_missing_without_token(cache):
    with HubServer([make_repo(private=True, access_tokens=["hf_ok"])]) as hub:
        with pytest.raises(RepositoryNotFoundError) as exc:
            download(hub, cache)
        assert exc.value.response.status_code == 401
        assert read_json(download(hub, cache, token="hf_ok")) == CONFIG
        assert list(HfApi(endpoint=hub.url, token=False).list_models()) == []


def test_bare_401_is_not_repo_not_found_over_plain_http(cache):
    # hf_raise_for_status maps a code-less 401 to RepositoryNotFoundError only for https://
    # URLs (REPO_API_REGEX); against http://127.0.0.1 it stays a plain HfHubHTTPError.
    with HubServer([make_repo(Fault.unauthorized())]) as hub:
        with pytest.raises(HfHubHTTPError) as exc:
            download(hub, cache)
        assert type(exc.value) is HfHubHTTPError
        assert exc.value.response.status_code == 401


def test_bare_403_becomes_local_entry_not_found(cache):
    with HubServer([make_repo(Fault.forbidden())]) as hub:
        with pytest.raises(LocalEntryNotFoundError) as exc:
            download(hub, cache)
        assert isinstance(exc.value.__cause__, HfHubHTTPError)
        assert exc.value.__cause__.response.status_code == 403
        assert hub.statuses() == [403]


# --------------------------------------------------------------------------- 429 / 5xx


def test_429_on_head_retried_after_retry_after_plus_one(cache, sleeps):
    fault = Fault.rate_limited(times=2, retry_after=7, methods=("HEAD",))
    with HubServer([make_repo(fault)]) as hub:
        assert read_json(download(hub, cache)) == CONFIG
        # HEAD #1 fails fast (no retry, cache fallback), HEAD #2 is the retrying pass.
        assert hub.statuses(method="HEAD") == [429, 429, 200]
        assert sleeps == [8.0]  # Retry-After + 1


def test_429_retry_after_is_not_capped(cache, sleeps):
    with HubServer([make_repo(Fault.rate_limited(times=2, retry_after=3600))]) as hub:
        download(hub, cache)
        assert sleeps == [3601.0]  # max_wait_time (8 s) does not apply to Retry-After


def test_429_always_gives_local_entry_not_found(cache, sleeps):
    with HubServer([make_repo(Fault.rate_limited(times=None, retry_after=2))]) as hub:
        with pytest.raises(LocalEntryNotFoundError) as exc:
            download(hub, cache)
        assert exc.value.__cause__.response.status_code == 429
        assert hub.count(method="HEAD") == 7  # 1 fast attempt + 1 + 5 retries
        assert sleeps == [3.0] * 5


def test_429_on_get_is_retried(cache, sleeps):
    fault = Fault.rate_limited(times=1, retry_after=0, methods=("GET",))
    with HubServer([make_repo(fault)]) as hub:
        assert read_json(download(hub, cache)) == CONFIG
        assert hub.statuses(method="GET") == [429, 200]
        assert sleeps == [1.0]


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_on_head_first_k_then_success(cache, sleeps, status):
    with HubServer([make_repo(Fault.server_error(status, times=3, methods=("HEAD",)))]) as hub:
        assert read_json(download(hub, cache)) == CONFIG
        assert hub.statuses(method="HEAD") == [status, status, status, 200]
        assert sleeps == [1.0, 2.0]  # exponential backoff, base 1 s


def test_5xx_always_on_head(cache, sleeps):
    with HubServer([make_repo(Fault.server_error(503, times=None))]) as hub:
        with pytest.raises(LocalEntryNotFoundError) as exc:
            download(hub, cache)
        assert isinstance(exc.value.__cause__, HfHubHTTPError)
        assert exc.value.__cause__.response.status_code == 503
        assert hub.statuses() == [503] * 7
        assert sleeps == [1.0, 2.0, 4.0, 8.0, 8.0]  # capped at max_wait_time=8


def test_5xx_on_get_is_not_retried(cache, sleeps):
    with HubServer([make_repo(Fault.server_error(500, times=1, methods=("GET",)))]) as hub:
        with pytest.raises(HfHubHTTPError) as exc:
            download(hub, cache)
        assert exc.value.response.status_code == 500
        assert [(e.method, e.status) for e in hub.log] == [("HEAD", 200), ("GET", 500)]
        assert sleeps == []


def test_5xx_with_cached_file_silently_serves_the_cache(cache, sleeps):
    repo = make_repo()
    with HubServer([repo]) as hub:
        path = download(hub, cache)
        hub.clear_log()
        repo.faults = [Fault.server_error(500, times=None)]
        assert download(hub, cache) == path
        assert hub.statuses() == [500]  # one fast HEAD, no retry, no error
        assert sleeps == []


def test_5xx_with_cached_file_and_force_download_raises_value_error(cache, sleeps):
    repo = make_repo()
    with HubServer([repo]) as hub:
        download(hub, cache)
        repo.faults = [Fault.server_error(500, times=None)]
        with pytest.raises(ValueError, match="Force download failed") as exc:
            download(hub, cache, force_download=True)
        assert exc.value.__cause__.response.status_code == 500


def test_hub_unreachable(cache, sleeps):
    with HubServer([make_repo()]) as hub:
        path = download(hub, cache)
    # The server is gone: connection refused.
    with pytest.raises(LocalEntryNotFoundError) as exc:
        download(hub, cache, filename="README.md")
    assert isinstance(exc.value.__cause__, httpx2.ConnectError)
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 8.0]
    sleeps.clear()
    assert download(hub, cache) == path  # cached: falls back without retrying
    assert sleeps == []


def test_list_models_retries_5xx_then_raises(sleeps):
    with HubServer(_listing_repos(), faults=[Fault.server_error(502, times=None)]) as hub:
        with pytest.raises(HfHubHTTPError) as exc:
            list(HfApi(endpoint=hub.url, token=False).list_models())
        assert exc.value.response.status_code == 502
        assert hub.count(kind="list") == 6
        assert sleeps == [1.0, 2.0, 4.0, 8.0, 8.0]


def test_list_models_429_then_success(sleeps):
    fault = Fault.rate_limited(times=2, retry_after=5, on="list")
    with HubServer(_listing_repos(), faults=[fault]) as hub:
        assert len(list(HfApi(endpoint=hub.url, token=False).list_models())) == 5
        assert hub.statuses(kind="list") == [429, 429, 200]
        assert sleeps == [6.0, 6.0]


def test_list_models_retries_a_dropped_connection(sleeps):
    with HubServer(_listing_repos(), faults=[Fault.drop(times=1, on="list")]) as hub:
        assert len(list(HfApi(endpoint=hub.url, token=False).list_models())) == 5
        assert [e.error for e in hub.requests(kind="list")] == ["dropped", None]
        assert sleeps == [1.0]


def test_model_info_does_not_retry(sleeps):
    faults = [Fault.server_error(500, times=1, on="info"), Fault.rate_limited(times=1, on="info")]
    with HubServer([make_repo(*faults)]) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        with pytest.raises(HfHubHTTPError) as first:
            api.model_info(REPO)
        with pytest.raises(HfHubHTTPError) as second:
            api.model_info(REPO)
        assert (first.value.response.status_code, second.value.response.status_code) == (500, 429)
        assert api.model_info(REPO).sha == hub.repos[REPO].sha()
        assert sleeps == []


# --------------------------------------------------------------------------- connection faults


def test_dropped_connection_on_head_escapes_raw_even_with_cache(cache, sleeps):
    repo = make_repo()
    with HubServer([repo]) as hub:
        download(hub, cache)
        repo.faults = [Fault.drop(times=None, methods=("HEAD",))]
        # RemoteProtocolError is not among the errors that trigger the cache fallback.
        with pytest.raises(httpx2.RemoteProtocolError):
            download(hub, cache)
        assert sleeps == []


def test_truncated_body_once_is_retried_transparently(cache, sleeps):
    with HubServer([make_repo(Fault.truncate(keep=10, times=1))]) as hub:
        assert read_json(download(hub, cache)) == CONFIG
        gets = hub.requests(method="GET")
        assert [e.error for e in gets] == ["truncated", None]
        assert gets[1].headers.get("range") is None  # <10 MiB chunk never written: restart
        assert sleeps == [1.0]


def test_truncated_body_always_raises_raw_remote_protocol_error(cache, sleeps):
    with HubServer([make_repo(Fault.truncate(keep=10))]) as hub:
        with pytest.raises(httpx2.RemoteProtocolError, match="complete message body"):
            download(hub, cache)
        assert hub.count(method="GET") == 6
        assert sleeps == [1.0] * 5
        blobs = cache / "models--org--model" / "blobs"
        assert not any(p.is_file() for p in blobs.iterdir())  # no partial file left behind


def test_truncated_large_body_resumes_with_range(cache, sleeps):
    size = 25 * 1024 * 1024
    repo = make_repo(Fault.truncate(keep=12 * 1024 * 1024, times=1), files={"big.bin": Generated(size)})
    with HubServer([repo]) as hub:
        path = download(hub, cache, filename="big.bin")
        assert os.path.getsize(path) == size
        gets = hub.requests(method="GET")
        assert [(e.status, e.headers.get("range")) for e in gets] == [
            (200, None),
            (206, f"bytes={10 * 1024 * 1024}-"),  # resumes after the last full 10 MiB chunk
        ]


def test_invalid_json_file_downloads_fine_and_fails_to_parse(cache):
    with HubServer([make_repo(Fault.invalid_json(files=("config.json",)))]) as hub:
        path = download(hub, cache)
        with pytest.raises(json.JSONDecodeError):
            read_json(path)


def test_invalid_json_from_api_raises_json_decode_error():
    repo = make_repo(Fault.invalid_json(on="info"))
    with HubServer([repo], faults=[Fault.invalid_json(on="list")]) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        with pytest.raises(json.JSONDecodeError):
            list(api.list_models())
        with pytest.raises(json.JSONDecodeError):
            api.model_info(REPO)


def test_huge_file_size_is_known_from_head(cache):
    size = 50 * 1024 * 1024
    with HubServer([make_repo(Fault.huge(size, files=("config.json",)))]) as hub:
        dry = download(hub, cache, dry_run=True)
        assert dry.file_size == size and dry.will_download
        assert [(e.method, e.status) for e in hub.log] == [("HEAD", 200)]
        path = download(hub, cache)  # streamed by the server, 10 MiB chunks by the client
        assert os.path.getsize(path) == size
        assert hub.requests(method="GET")[-1].status == 200


# --------------------------------------------------------------------------- timeouts


def test_slow_head_once_is_absorbed_by_the_retry_pass(cache, sleeps):
    with HubServer([make_repo(Fault.delay(3, times=1, methods=("HEAD",)))]) as hub:
        t0 = time.monotonic()
        assert read_json(download(hub, cache, etag_timeout=0.1)) == CONFIG
        assert time.monotonic() - t0 < 2
        assert hub.count(method="HEAD") == 2  # the second pass uses a 60 s timeout
        assert sleeps == []


def test_slow_head_always_gives_local_entry_not_found(cache, sleeps, monkeypatch):
    monkeypatch.setattr(hf_file_download, "_ETAG_RETRY_TIMEOUT", 0.1)  # 60 s by default
    with HubServer([make_repo(Fault.delay(0.3, methods=("HEAD",)))]) as hub:
        with pytest.raises(LocalEntryNotFoundError) as exc:
            download(hub, cache, etag_timeout=0.1)
        assert isinstance(exc.value.__cause__, httpx2.ReadTimeout)
        assert hub.count(method="HEAD") == 7
        assert sleeps == [1.0, 2.0, 4.0, 8.0, 8.0]


def test_hf_hub_etag_timeout_constant_overrides_the_argument(cache, sleeps, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 0.1)  # env var is int, read at import
    with HubServer([make_repo(Fault.delay(3, times=1, methods=("HEAD",)))]) as hub:
        t0 = time.monotonic()
        download(hub, cache, etag_timeout=30)
        assert time.monotonic() - t0 < 2


def test_slow_get_raises_raw_read_timeout(cache, sleeps, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.1)  # read at call time
    with HubServer([make_repo(Fault.delay(0.3, methods=("GET",)))]) as hub:
        with pytest.raises(httpx2.ReadTimeout):
            download(hub, cache)
        assert hub.count(method="GET") == 6
        assert sleeps == [1.0] * 5


def test_trickle_is_bounded_per_read_not_in_total(cache, sleeps, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 0.1)
    with HubServer([make_repo(Fault.trickle(chunk_size=16, interval=0.04, times=1))]) as hub:
        t0 = time.monotonic()
        assert read_json(download(hub, cache)) == CONFIG
        assert time.monotonic() - t0 > 0.1  # longer than the timeout, yet no error
    slower = make_repo(Fault.trickle(chunk_size=16, interval=0.2))
    with HubServer([slower]) as hub, pytest.raises(httpx2.ReadTimeout):
        download(hub, cache, force_download=True)


def test_model_info_timeout_raises_raw_read_timeout():
    api_repo = make_repo(Fault.delay(3, on="info"))
    with HubServer([api_repo]) as hub, pytest.raises(httpx2.ReadTimeout):
        HfApi(endpoint=hub.url, token=False).model_info(REPO, timeout=0.1)


def test_list_models_ignores_client_timeout_but_not_transport_timeout(sleeps):
    fault = Fault.delay(0.25, on="list")
    with HubServer(_listing_repos(), faults=[fault]) as hub:
        api = HfApi(endpoint=hub.url, token=False)
        # paginate() passes timeout=None per request, which overrides the client default.
        set_client_factory(lambda: guarded_client(timeout=0.1))
        assert len(list(api.list_models())) == 5

        class DeadlineTransport(httpx2.HTTPTransport):
            def handle_request(self, request):
                request.extensions["timeout"] = httpx2.Timeout(0.1).as_dict()
                return super().handle_request(request)

        set_client_factory(lambda: guarded_client(transport=DeadlineTransport()))
        with pytest.raises(httpx2.ReadTimeout):
            list(api.list_models())
        assert hub.count(kind="list") == 1 + 6  # timeouts are retried like 5xx
        assert sleeps == [1.0, 2.0, 4.0, 8.0, 8.0]


# --------------------------------------------------------------------------- the server itself


def test_stop_is_prompt_even_with_a_pending_delay():
    with HubServer([make_repo(Fault.delay(MAX_DELAY))]) as hub:
        url = f"{hub.url}/{REPO}/resolve/main/config.json"

        def slow_client():
            with contextlib.suppress(OSError):
                urllib.request.urlopen(url, timeout=MAX_DELAY + 5).read()

        client = threading.Thread(target=slow_client, daemon=True)
        client.start()
        deadline = time.monotonic() + 2
        while not hub.log and time.monotonic() < deadline:
            time.sleep(0.01)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 2
    client.join(2)
    assert not client.is_alive()
    assert hub.log[0].error == "_Stop"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", hub.port), timeout=1).close()


def test_faults_are_bounded_and_validated():
    with pytest.raises(ValueError):
        Fault.delay(MAX_DELAY + 1)
    with pytest.raises(ValueError):
        Fault.trickle(interval=-1)
    with pytest.raises(ValueError, match="HubServer"):
        Repo("a/b", faults=[Fault.server_error(on="list")])


def test_request_log_records_method_path_status_and_time(cache):
    with HubServer([make_repo(Fault.server_error(500, times=1, methods=("GET",)))]) as hub:
        with pytest.raises(HfHubHTTPError):
            download(hub, cache)
        download(hub, cache)
        entries = hub.requests(path="/org/model/resolve/main/config.json")
        assert [(e.method, e.status, e.faults) for e in entries] == [
            ("HEAD", 200, []),
            ("GET", 500, ["500"]),
            ("HEAD", 200, []),
            ("GET", 200, []),
        ]
        assert all(e.duration is not None and e.duration >= 0 for e in entries)
        assert all(e.headers["user-agent"].startswith("unknown/None; hf_hub/") for e in entries)
        fault = hub.repos[REPO].faults[0]
        assert (fault.hits, fault.fired) == (2, 1)
