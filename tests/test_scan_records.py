"""The scan's records on disk (scan/records.py): the journal is the store the report reads.

A big scan keeps one byte offset per model in memory, not the model: these tests hold the
store to what a resumed or reported scan needs from it (a cut line, another scan's lines,
a transient failure, a repeated model, an older state file's records), and the streamed
JSON report to the same text as the report built in memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotdiff.core.jsonout import Stream, dumps, iterdumps
from slotdiff.scan.listing import Listed
from slotdiff.scan.records import RecordStore, RecordView
from slotdiff.scan.state import ScanState
from slotdiff.scan.statefile import validator
from slotdiff.scan.verdict import Record, skipped


def rec(repo: str, verdict: str = "known", **kw: object) -> Record:
    return Record(Listed(repo, created="2026-11-30T00:00:00Z"), verdict, **kw)  # type: ignore[arg-type]


def line(scan: str, record: Record) -> str:
    return json.dumps({"scan": scan, "record": record.to_dict()}) + "\n"


def test_replay_keeps_the_last_good_line_of_this_scan_only(tmp_path: Path) -> None:
    journal = tmp_path / "s.json.journal"
    journal.write_text(
        line("old", rec("a/other"))  # another scan's line
        + line("s1", rec("a/one"))
        + line("s1", skipped(Listed("a/two"), "timeout", "slow"))  # transient: examined again
        + line("s1", rec("a/three", family="Llama"))
        + line("s1", rec("a/three", family="Qwen"))  # the same model twice: the last wins
        + json.dumps({"scan": "s1", "record": {"repo_id": "a/bad"}})  # fails the schema
        + "\n"
        + line("s1", rec("a/cut"))[:25]  # cut short by a kill
    )
    store = RecordStore.replay(journal, "s1", validator("record").is_valid, writable=False)
    assert sorted(store.ids()) == ["a/one", "a/three"]
    assert store.record(store.offset("a/three")).family == "Qwen"
    assert "a/two" not in store and "a/other" not in store and "a/cut" not in store


def test_a_retried_transient_failure_replaces_its_earlier_line(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    store = RecordStore.fresh(journal, "s1")
    store.add(rec("a/m", family="Llama").to_dict())
    store.add(skipped(Listed("a/t"), "rate_limited", "429").to_dict())
    store.add(rec("a/t", family="Qwen").to_dict())
    store.seal()
    again = RecordStore.replay(journal, "s1", validator("record").is_valid, writable=False)
    assert {r: again.record(again.offset(r)).family for r in again.ids()} == {"a/m": "Llama", "a/t": "Qwen"}


def test_a_view_of_a_finished_scan_survives_the_next_scan_on_the_same_path(tmp_path: Path) -> None:
    journal = tmp_path / "j"
    first = RecordStore.fresh(journal, "s1")
    first.add(rec("a/first").to_dict())
    view = RecordView(first, [first.offset("a/first")])
    second = RecordStore.fresh(journal, "s2")  # unlinks and recreates, never truncates
    second.add(rec("a/second-with-a-longer-name").to_dict())
    assert [r.repo_id for r in view] == ["a/first"]
    assert [r.repo_id for r in RecordView(second, [0])] == ["a/second-with-a-longer-name"]


def test_records_an_older_state_file_held_join_the_journal_on_resume(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    query = {"since": "7d"}
    state = ScanState.load(path, lock=True)
    state.begin("s1", query, "2026-11-24T00:00:00Z", "2026-12-01T00:00:00Z")
    state.close()
    data = json.loads(path.read_text())  # what a slotdiff before the journal store wrote
    data["current"]["done"] = {
        "a/old": rec("a/old", family="Llama").to_dict(),
        "a/slow": skipped(Listed("a/slow"), "timeout", "slow").to_dict(),
    }
    path.write_text(json.dumps(data))
    again = ScanState.load(path, lock=True)
    resumed, note = again.begin("s2", query, "", "2026-12-01T01:00:00Z")
    assert resumed and note is not None and "1 models already done" in note
    assert sorted(again.store.ids()) == ["a/old"]
    assert json.loads(path.read_text())["current"]["done"] == {}
    again.record(rec("a/new"))
    again.finish("2026-12-01T02:00:00Z", {"models": 2})
    final = ScanState.load(path)
    assert sorted(final.models) == ["a/new", "a/old"] and final.current is None


def test_a_stream_is_written_item_by_item_and_never_as_text() -> None:
    made: list[int] = []

    def items() -> object:
        for i in range(3):
            made.append(i)
            yield {"i": i, "s": "\u202e"}

    data = {"a": 1, "models": Stream(items, 3), "none": Stream(lambda: iter(()), 0), "z": [1]}
    listed = {"a": 1, "models": [{"i": i, "s": "\u202e"} for i in range(3)], "none": [], "z": [1]}
    pieces = iterdumps(data, size=8)
    first = next(pieces)
    assert made == []  # nothing read before the writer reaches the array
    text = first + "".join(pieces)
    assert made == [0, 1, 2]
    assert json.loads(text) == listed
    assert text.splitlines()[3:6] == [
        '    {"i": 0, "s": "\\u202e"},',  # one item a line, escaped as dumps() escapes it
        '    {"i": 1, "s": "\\u202e"},',
        '    {"i": 2, "s": "\\u202e"}',
    ]
    assert text.splitlines()[:2] == ["{", '  "a": 1,'] and text.endswith('  "z": [\n    1\n  ]\n}')
    assert "".join(iterdumps(listed)) == dumps(listed)  # no Stream: exactly dumps()
    with pytest.raises(TypeError, match="iterdumps"):
        dumps(data)  # refused, never printed as the text of an object
