"""A transient failure to read hf_quant_config.json (timeout, 5xx, rate limit) is tried again by
the next scan, as a transient failure to read config.json is: the model is priced from
config.json alone meanwhile (and says so), but the state remembers why the sidecar was not read,
so a later scan at the same commit does not skip it as "same commit as the last scan".

Against the fake Hub on 127.0.0.1 (tests/hubserver.py): the same repo (same files, so the same
commit sha) scanned with a fault on the sidecar, then without. The model and its by-hand weight
bytes are tests/test_hf_quant_config.py's: BF16_BYTES = 4,300,864 B from config.json alone,
NVFP4_BYTES = 2,322,760 B with NVIDIA's NVFP4 split from the sidecar.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from test_hf_quant_config import BF16_BYTES, NVFP4_BYTES
from test_scan import make_families
from test_scan_sidecar import FIRST, ID, SIDE, asked, hub_repo, scan, state_entry

from hubserver import Fault, HubServer

ON_SIDECAR = {"files": (SIDE,), "times": None}
TRANSIENT_FAULTS = {
    "server_error": lambda: Fault.server_error(503, **ON_SIDECAR),
    "rate_limited": lambda: Fault.rate_limited(retry_after=3600, **ON_SIDECAR),
    "network": lambda: Fault.drop(**ON_SIDECAR),
}


@pytest.mark.parametrize("reason", sorted(TRANSIENT_FAULTS))
def test_a_transient_sidecar_failure_is_retried_at_the_same_commit(tmp_path: Path, reason: str) -> None:
    make_families(tmp_path / "families")
    broken = hub_repo(FIRST)
    broken.faults = [TRANSIENT_FAULTS[reason]()]
    with HubServer([broken]) as hub:
        commit = broken.sha()
        rec = scan(hub, tmp_path)
        # Priced from config.json alone, saying why, and remembered as to be read again.
        assert rec.figures is not None and rec.figures["weight_bytes"] == BF16_BYTES
        assert f"{SIDE} could not be read" in (rec.figures["source_note"] or "")
        assert (rec.quant_file, rec.quant_reason) == (None, reason)
        entry = state_entry(tmp_path)
        assert (entry["commit"], entry["quant_file"], entry["quant_reason"]) == (commit, None, reason)

        # Still failing: asked again (not "same commit as the last scan"), still config.json's.
        rec = scan(hub, tmp_path)
        assert rec.detail != "same commit as the last scan"
        assert rec.figures is not None and rec.figures["weight_bytes"] == BF16_BYTES
        assert (GET := ("GET", SIDE)) in [(m, f) for m, f, _ in asked(hub)]

        # The Hub answers again, same commit (same files): the sidecar is read, NVFP4 priced.
        hub.add(hub_repo(FIRST))
        assert hub.repos[ID].sha() == commit
        rec = scan(hub, tmp_path)
        assert rec.verdict != "unchanged", rec.detail
        assert rec.figures is not None and rec.figures["weight_bytes"] == NVFP4_BYTES
        assert rec.figures["source_note"] is None or "could not be read" not in rec.figures["source_note"]
        assert (rec.quant_file, rec.quant_reason) == (hashlib.sha256(FIRST).hexdigest(), None)
        assert GET in [(m, f) for m, f, _ in asked(hub)]
        entry = state_entry(tmp_path)
        assert (entry["quant_file"], entry["quant_reason"]) == (hashlib.sha256(FIRST).hexdigest(), None)

        # Read now: the next scan at this commit costs no request at all.
        rec = scan(hub, tmp_path)
        assert (rec.verdict, rec.detail) == ("unchanged", "same commit as the last scan")
        assert asked(hub) == []


def test_a_sidecar_read_once_then_failing_keeps_the_last_figures(tmp_path: Path) -> None:
    """A new commit (config.json the same bytes) whose sidecar, read by the last scan, now fails
    for a passing reason: a transient skip that keeps the last scan's state (its NVFP4 figures),
    not config.json-alone figures written over them; the next scan reads it and moves on."""
    make_families(tmp_path / "families")
    with HubServer([hub_repo(FIRST)]) as hub:
        assert scan(hub, tmp_path).figures["weight_bytes"] == NVFP4_BYTES  # type: ignore[index]
        first_commit = hub.repos[ID].sha()
        broken = hub_repo(FIRST, readme="# tiny, new card\n")
        broken.faults = [Fault.server_error(500, **ON_SIDECAR)]
        hub.add(broken)
        rec = scan(hub, tmp_path)
        assert (rec.verdict, rec.reason) == ("skipped", "server_error"), rec.detail
        assert "kept the last scan's figures" in (rec.detail or "")
        entry = state_entry(tmp_path)
        assert (entry["commit"], entry["quant_file"]) == (first_commit, hashlib.sha256(FIRST).hexdigest())
        hub.add(hub_repo(FIRST, readme="# tiny, new card\n"))
        rec = scan(hub, tmp_path)
        assert rec.verdict == "unchanged", rec.detail  # the same config.json and sidecar bytes
        assert state_entry(tmp_path)["quant_reason"] is None
        data = json.loads((tmp_path / "state.json").read_text(encoding="utf-8"))
        assert data["models"][ID]["commit"] == broken.sha()
