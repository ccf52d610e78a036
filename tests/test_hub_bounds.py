"""``slotdiff MODEL`` against a hostile Hub (tests/hubserver.py on 127.0.0.1): the analysis
gets the scan's bounds, and a broken endpoint's side answers cannot poison a later run.

- a 429 whose Retry-After is an hour is not slept on: exit 2 at once, "rate limited: retry
  after 3600 s";
- a stalled answer or a trickled body ends at the analysis's total deadline
  (SLOTDIFF_HUB_DEADLINE, default 60 s), exit 2 saying so;
- huggingface_hub's day-long cache of ``/api/agent-harnesses`` under HF_HOME, poisoned with
  unexpected JSON, breaks neither the analysis nor the scan, and no side request is made;
- the tests' HF_HOME is never the user's (tests/conftest.py), in process and in children.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import raw
from hubserver import Fault, HubServer, Repo

ROOT = Path(__file__).resolve().parent.parent
GPT2 = json.loads(raw("openai-community/gpt2").read_text())
REAL_HF_HOME = Path.home() / ".cache" / "huggingface"


def slotdiff(
    hub: HubServer, home: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    base.update(
        PYTHONPATH=str(ROOT / "src"),
        HF_ENDPOINT=hub.url,
        HF_HOME=str(home),
        HF_HUB_ETAG_TIMEOUT="30",
        HF_HUB_DOWNLOAD_TIMEOUT="30",
        HF_HUB_DISABLE_TELEMETRY="1",
        NO_PROXY="*",
    )
    base.update(env)
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "slotdiff", *args], capture_output=True, text=True, env=base, timeout=120
    )
    return out, time.monotonic() - started


def one_line_exit_2(out: subprocess.CompletedProcess[str], needle: str) -> None:
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr and needle in lines[0], out.stderr


def repo(repo_id: str, *faults: Fault) -> Repo:
    return Repo(repo_id, files={"config.json": GPT2}, faults=faults)


@pytest.mark.parametrize("method", ["HEAD", "GET"])
def test_an_hour_long_retry_after_is_not_slept_on(tmp_path: Path, method: str) -> None:
    fault = Fault.rate_limited(times=None, retry_after=3600, methods=(method,))
    with HubServer([repo("acme/limited", fault)]) as hub:
        out, took = slotdiff(hub, tmp_path / "hf", "acme/limited", "--json", SLOTDIFF_HUB_DEADLINE="8")
    assert took < 20
    if method == "HEAD":  # the probe sees the 429 and says what the server asked for
        one_line_exit_2(out, "rate limited: retry after 3600 s")
    else:  # huggingface_hub's own download would sleep: the deadline ends it
        one_line_exit_2(out, "no complete answer from the Hub within 8 s")


@pytest.mark.parametrize(
    "fault",
    [
        Fault.delay(25, times=None, methods=("HEAD",)),
        Fault.delay(25, times=None, methods=("GET",)),
        Fault.trickle(chunk_size=1, interval=0.5, times=None, methods=("GET",)),
    ],
    ids=["stalled-probe", "stalled-download", "trickled-body"],
)
def test_a_stall_or_trickle_ends_at_the_deadline(tmp_path: Path, fault: Fault) -> None:
    with HubServer([repo("acme/slow", fault)]) as hub:
        out, took = slotdiff(hub, tmp_path / "hf", "acme/slow", "--json", SLOTDIFF_HUB_DEADLINE="3")
    assert took < 15, took
    one_line_exit_2(out, "within 3 s")


@pytest.mark.parametrize("value", ["nan", "-1", "0", "inf", "soon"])
def test_a_bad_deadline_is_exit_2(tmp_path: Path, value: str) -> None:
    with HubServer([repo("acme/tiny")]) as hub:
        out, _ = slotdiff(hub, tmp_path / "hf", "acme/tiny", "--json", SLOTDIFF_HUB_DEADLINE=value)
    one_line_exit_2(out, "SLOTDIFF_HUB_DEADLINE")


POISON = [[1, 2], {"standardEnvVars": 5, "harnesses": []}, {"harnesses": {"x": "y"}}, "text", None]


@pytest.mark.parametrize("poison", POISON, ids=lambda p: type(p).__name__ + str(len(json.dumps(p))))
def test_a_poisoned_side_request_cache_breaks_nothing(tmp_path: Path, poison: object) -> None:
    home = tmp_path / "hf"
    home.mkdir()
    (home / ".agent_harnesses.json").write_text(json.dumps(poison))  # fresh: huggingface_hub trusts it
    with HubServer([repo("acme/tiny")]) as hub:
        out, _ = slotdiff(hub, home, "acme/tiny", "--json", AI_AGENT="x", AGENT="y")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["model_type"] == "gpt2"
        scan, _ = slotdiff(
            hub,
            home,
            "scan",
            "--since",
            "2000-01-01",
            "--json",
            "--quiet",
            "--timeout",
            "2",
            "--deadline",
            "5",
            AI_AGENT="x",
        )
        assert scan.returncode == 0, scan.stderr
        assert "listing failed" not in scan.stdout
        assert [m["repo_id"] for m in json.loads(scan.stdout)["models"]] == ["acme/tiny"]
        assert not [e for e in hub.log if "agent-harnesses" in e.path]  # no side request at all


def test_the_tests_hf_home_is_never_the_users() -> None:
    home = Path(os.environ["HF_HOME"]).resolve()
    assert home != REAL_HF_HOME.resolve() and REAL_HF_HOME.resolve() not in home.parents
    import huggingface_hub.constants as constants

    assert Path(constants.HF_HOME).resolve() == home
    assert Path(constants.HF_HUB_CACHE).resolve().is_relative_to(home)
    # A child whose environment was stripped of HF_* (as the scan and hub tests do) falls
    # back to XDG_CACHE_HOME, also under the test's temporary folder.
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    child = subprocess.run(
        [sys.executable, "-c", "import huggingface_hub.constants as c; print(c.HF_HOME)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout.strip()
    assert Path(child).resolve().is_relative_to(home), child
