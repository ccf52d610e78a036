"""`slotdiff MODEL` reads a Hub checkpoint's tensor index from the fake Hub: the index JSON and
each shard's safetensors header by range requests (concurrently), cached per commit, offline
from the cache only, and every failure an ``unavailable`` with why (the analysis still exits 0)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from slotdiff.read.hub_weights import thread_map

from checkpoints import stored_layout, write_checkpoint
from conftest import raw
from hubserver import Fault, HubServer, Repo, run_slotdiff

pytest.importorskip("transformers")

CONFIG = json.loads(raw("meta-llama/Llama-3.2-1B").read_text())
PARAMS = 1_235_814_400  # Llama-3.2-1B's published count (tied embedding)


def _files(tmp: Path, shards: int) -> dict[str, bytes]:
    tensors = {n: ("BF16", s) for n, s in stored_layout(CONFIG).items()}
    return write_checkpoint(tmp / f"s{shards}", tensors, shards=shards)


def slotdiff(hub: HubServer, cache: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_slotdiff(hub, cache, *args, **{"SLOTDIFF_HUB_DEADLINE": "8", **env})


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("ck")
    one, four = _files(tmp, 1), _files(tmp, 4)
    broken = {"config.json": CONFIG, "model.safetensors": b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all"}
    repos = [
        Repo("acme/one", files={"config.json": CONFIG, **one}),
        Repo("acme/four", files={"config.json": CONFIG, **four}),
        Repo("acme/layers", files={"config.json": {**CONFIG, "num_hidden_layers": 14}, **four}),
        Repo("acme/none", files={"config.json": CONFIG}),
        Repo("acme/broken", files=broken),
        Repo(
            "acme/down",
            files={"config.json": CONFIG, **four},
            faults=[Fault.server_error(500, times=None, files=("model-00002-of-00004.safetensors",))],
        ),
    ]
    with HubServer(repos) as server:
        yield server


def _ck(out: subprocess.CompletedProcess[str]) -> dict:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["checkpoint"]


@pytest.mark.parametrize("repo", ["acme/one", "acme/four"])
def test_headers_by_range_requests_match(hub: HubServer, tmp_path: Path, repo: str) -> None:
    hub.clear_log()
    ck = _ck(slotdiff(hub, tmp_path, repo))
    assert ck["status"] == "match", ck
    assert (ck["source"], ck["stored_params"], ck["cached"]) == ("Hub safetensors headers", PARAMS, False)
    shards = 1 if repo == "acme/one" else 4
    assert (ck["shards"], ck["shards_read"]) == (shards, shards)
    gets = hub.requests(method="GET", repo_id=repo, where=lambda e: e.filename.endswith(".safetensors"))
    assert len(gets) == shards and all(e.headers.get("range", "").startswith("bytes=0-") for e in gets)
    # cached per commit: the second run, and an offline one, make no request for the weights
    hub.clear_log()
    again = _ck(slotdiff(hub, tmp_path, repo))
    assert again["cached"] is True and again["stored_params"] == PARAMS
    assert not hub.requests(repo_id=repo, where=lambda e: "safetensors" in (e.filename or ""))
    offline = _ck(slotdiff(hub, tmp_path, repo, HF_HUB_OFFLINE="1"))
    assert offline["status"] == "match" and offline["cached"] is True


def test_layer_edit_differs(hub: HubServer, tmp_path: Path) -> None:
    ck = _ck(slotdiff(hub, tmp_path, "acme/layers"))
    assert ck["status"] == "differs" and ck["layers"] == 16
    assert {d["slot"] for d in ck["differences"]} >= {"attention", "ffn", "norms"}


@pytest.mark.parametrize(
    ("repo", "why"),
    [
        ("acme/none", "the repo has neither model.safetensors.index.json nor model.safetensors"),
        ("acme/broken", "a shard's safetensors header cannot be read"),
        ("acme/down", "the Hub: "),
    ],
)
def test_failures_are_unavailable(hub: HubServer, tmp_path: Path, repo: str, why: str) -> None:
    out = slotdiff(hub, tmp_path, repo)
    ck = _ck(out)
    assert ck["status"] == "unavailable" and ck["why"].startswith(why), ck
    assert json.loads(out.stdout)["coverage"]["status"] == "verified"


def test_offline_without_cache_and_no_weights(hub: HubServer, tmp_path: Path) -> None:
    first = slotdiff(hub, tmp_path, "acme/one", "--no-weights")
    assert "checkpoint" not in json.loads(first.stdout)
    ck = _ck(slotdiff(hub, tmp_path, "acme/one", HF_HUB_OFFLINE="1"))
    assert ck["status"] == "unavailable" and "HF_HUB_OFFLINE" in ck["why"]


def test_shard_headers_map_in_order_and_stop_at_a_failure() -> None:
    """The shard headers' thread map: results in the shards' order, whatever finishes first;
    after a failure no new shard is asked for, and the first failing shard's error is raised."""
    names = [f"s{i:03d}" for i in range(100)]
    assert thread_map(str.upper, names, 8) == [n.upper() for n in names]
    assert thread_map(str.upper, [], 8) == []
    asked: list[str] = []

    def header(name: str) -> str:
        asked.append(name)
        if name in ("s002", "s005"):
            raise ValueError(name)
        return name

    with pytest.raises(ValueError, match="s002"):
        thread_map(header, names, 1)
    assert asked == ["s000", "s001", "s002"]
