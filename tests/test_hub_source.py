"""`slotdiff MODEL` against a fake Hub on 127.0.0.1: downloads, revisions, the HF cache,
HF_TOKEN, and every failure mode ending in a catalog fallback or one clear line (exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import raw
from hubserver import Fault, HubServer, Repo, run_slotdiff

GPT2 = json.loads(raw("openai-community/gpt2").read_text())
LLAMA3 = json.loads(raw("meta-llama/Meta-Llama-3-8B").read_text())


slotdiff = run_slotdiff


def repos() -> list[Repo]:
    return [
        Repo(
            "acme/tiny",
            files={"config.json": GPT2},
            revisions={"v1": {"config.json": {**GPT2, "n_layer": 6}}},
        ),
        Repo("acme/gated", files={"config.json": GPT2}, gated="manual", access_tokens=["hf_ok"]),
        # Gated on the Hub and bundled in the catalog: the published copy is served.
        Repo("meta-llama/Meta-Llama-3-8B", files={"config.json": LLAMA3}, gated="manual"),
        Repo("acme/broken", files={"config.json": b'{"model_type": "gpt2", "n_embd": '}),
        Repo("acme/huge", files={"config.json": b"{}"}, faults=[Fault.huge(5 * 1024 * 1024)]),
        Repo("acme/down", files={"config.json": GPT2}, faults=[Fault.server_error(500, times=None)]),
        Repo("Qwen/Qwen3-8B", files={"config.json": GPT2}, faults=[Fault.server_error(503, times=None)]),
        Repo("acme/slow", files={"config.json": GPT2}, faults=[Fault.delay(5, times=None)]),
    ]


@pytest.fixture(scope="module")
def hub():  # type: ignore[no-untyped-def]
    with HubServer(repos()) as server:
        yield server


def ok(out: subprocess.CompletedProcess[str]) -> dict:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def fails(out: subprocess.CompletedProcess[str], needle: str) -> None:
    assert out.returncode == 2, out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert needle in lines[0]


def test_download_revision_and_cache(hub: HubServer, tmp_path: Path) -> None:
    data = ok(slotdiff(hub, tmp_path, "acme/tiny"))
    assert data["source"]["origin"] == "hub" and data["model_type"] == "gpt2"
    v1 = ok(slotdiff(hub, tmp_path, "acme/tiny", "--revision", "v1"))
    assert len(v1["layers"]) == 1 and v1["layers"][0]["count"] == 6
    cached = ok(slotdiff(hub, tmp_path, "acme/tiny", HF_HUB_OFFLINE="1"))
    assert cached["source"]["origin"] == "hf-cache"


def test_gated_needs_token(hub: HubServer, tmp_path: Path) -> None:
    fails(slotdiff(hub, tmp_path, "acme/gated"), "gated")
    data = ok(slotdiff(hub, tmp_path, "acme/gated", HF_TOKEN="hf_ok"))
    assert data["source"]["origin"] == "hub"


def test_gated_repo_in_catalog_is_served_from_catalog(hub: HubServer, tmp_path: Path) -> None:
    data = ok(slotdiff(hub, tmp_path, "meta-llama/Meta-Llama-3-8B"))
    assert data["source"]["origin"] == "catalog"
    assert "gated" in data["source"]["note"]


def test_not_found(hub: HubServer, tmp_path: Path) -> None:
    fails(slotdiff(hub, tmp_path, "acme/nothing"), "not found")


def test_invalid_json_names_repo_and_position(hub: HubServer, tmp_path: Path) -> None:
    fails(slotdiff(hub, tmp_path, "acme/broken"), "acme/broken:1:")


def test_huge_config_refused_before_download(hub: HubServer, tmp_path: Path) -> None:
    fails(slotdiff(hub, tmp_path, "acme/huge"), "over the")
    assert hub.count(method="GET", repo_id="acme/huge") == 0


def test_server_errors(hub: HubServer, tmp_path: Path) -> None:
    fails(slotdiff(hub, tmp_path, "acme/down"), "HTTP 500")
    data = ok(slotdiff(hub, tmp_path, "Qwen/Qwen3-8B"))  # in the catalog
    assert data["source"]["origin"] == "catalog" and "503" in data["source"]["note"]


def test_timeout_is_quick_and_clear(hub: HubServer, tmp_path: Path) -> None:
    fails(slotdiff(hub, tmp_path, "acme/slow"), "in time")
