"""The scan loop: list → (skip, or fetch and classify in the pool) → judge → record → report.

The main thread owns the state and the listing's hand-over; worker threads only fetch and
classify (pure work, no shared writes). Every model ends as exactly one :class:`Record`,
written to the journal as it finishes and read back from there (:mod:`.records`).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ..core.errors import SlotdiffError
from ..core.printable import one_line
from ..read.hub_errors import looks_like_repo_id
from ..read.retry import Retrier
from .examine import Examiner
from .listing import (
    NOT_LM_PIPELINES,
    Listed,
    Lister,
    Query,
    describe_listing_error,
    from_iso,
    iso,
    list_models,
    parse_since,
)
from .options import ScanOptions
from .pool import DeadlinePool, Outcome
from .records import RecordView
from .state import ScanState
from .verdict import (
    ACCESS,
    NEW,
    TRANSIENT,
    VERDICTS,
    Knowledge,
    Record,
    skipped,
)

# Seconds a scan that stops early gives its busy workers (told to cancel) to end before it exits.
STOP_WAIT = 2.0


@dataclass
class ScanResult:
    """A finished (or interrupted) scan: its records in listing order, and what happened.

    ``records`` reads each Record from the scan's journal when it is reached (a 50,000-model
    scan's records are not all in memory); :meth:`raw` gives them as dicts, cheaper still.
    """

    scan_id: str
    started: str
    finished: str | None
    query: Query
    records: Sequence[Record]
    resumed: bool = False
    notes: list[str] = field(default_factory=list)
    listing_error: str | None = None
    retries: int = 0
    waited_s: float = 0.0
    abandoned: int = 0
    endpoint: str | None = None
    knowledge: Knowledge | None = None
    interrupted: bool = False
    # run_scan(..., commit=False): call commit() once the report is out (merges the findings
    # into the state as seen), or release() when it could not be written (they stay pending
    # in the state and the next run reports them again).
    commit: Callable[[], None] = field(default=lambda: None, repr=False)
    release: Callable[[], None] = field(default=lambda: None, repr=False)
    _counts: dict[str, Any] | None = field(default=None, repr=False)

    def raw(self) -> Iterator[dict[str, Any]]:
        """The records as the dicts they were written as, in order (no Record built)."""
        if isinstance(self.records, RecordView):
            return self.records.raw()
        return (r.to_dict() for r in self.records)

    def counts(self) -> dict[str, Any]:
        """Models by verdict and skip reason (one pass over the records, then remembered)."""
        if self._counts is None:
            by_verdict = dict.fromkeys(VERDICTS, 0)
            reasons: dict[str, int] = {}
            n = 0
            for rec in self.raw():
                n += 1
                by_verdict[rec["verdict"]] += 1
                if rec.get("reason"):
                    reasons[rec["reason"]] = reasons.get(rec["reason"], 0) + 1
            self._counts = {"models": n, **by_verdict, "skipped_by_reason": dict(sorted(reasons.items()))}
        return dict(self._counts)

    @property
    def new(self) -> list[Record]:
        return [r for r in self.records if r.verdict in NEW]


# What a progress display is told: ("listed", count) or ("done", record, done, total).
Progress = Callable[..., None]


def _has_token(token: str | bool | None) -> bool:
    if isinstance(token, str):
        return bool(token)
    if token is False:
        return False
    from huggingface_hub import get_token

    return get_token() is not None


def _prefilter(listed: Listed, prev: dict[str, Any] | None, has_token: bool) -> Record | None:
    """A verdict reached without any request, or None when the config must be fetched."""
    if not looks_like_repo_id(listed.repo_id):
        return skipped(listed, "not_found", f"{listed.repo_id!r} is not a valid repo id")
    retry = prev and prev.get("verdict") == "skipped" and prev.get("reason") in ACCESS
    # hf_quant_config.json not read for a transient reason: priced from config.json alone,
    # so asked again (as a transient config.json failure is, never recorded as seen)
    retry = retry or (prev and prev.get("quant_reason") in TRANSIENT)
    if prev and listed.sha and prev.get("commit") == listed.sha and not retry:
        return Record(listed, "unchanged", detail="same commit as the last scan", commit=listed.sha)
    if listed.pipeline_tag in NOT_LM_PIPELINES:
        return skipped(listed, "not_lm", f"pipeline_tag {listed.pipeline_tag}")
    if listed.gated and not has_token:
        return skipped(listed, "gated", f"gated ({listed.gated}) and no HF_TOKEN is set")
    return None


def _quiet_on_failure(progress: Progress | None) -> Progress:
    """A progress display that fails (stderr closed, a broken pipe) goes quiet, the scan goes on."""
    if progress is None:
        return lambda *a: None
    broken = False

    def call(*args: Any) -> None:
        nonlocal broken
        if broken:
            return
        try:
            progress(*args)
        except Exception:
            broken = True

    return call


def _since(opts: ScanOptions, state: ScanState, now: datetime) -> datetime:
    if opts.since == "last":
        last = state.last_started()
        return last if last is not None else parse_since("7d", now)
    return parse_since(opts.since, now)


def run_scan(
    opts: ScanOptions,
    progress: Progress | None = None,
    *,
    cancel: threading.Event | None = None,
    now: datetime | None = None,
    commit: bool = True,
) -> ScanResult:
    """Run one scan (resuming an unfinished one in the same state file) and return it.

    With ``commit=False`` the findings are not yet merged into the state: the caller writes
    its report first and then calls ``result.commit()`` (or ``result.release()`` when the
    report failed), so a model is remembered as seen only once it has been reported.
    """
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise SlotdiffError("scan", "needs the Hub, but HF_HUB_OFFLINE is set")
    if opts.by not in ("modified", "created"):
        raise SlotdiffError("scan", f"--by {opts.by!r}: expected modified or created")
    progress = _quiet_on_failure(progress)
    now = now or datetime.now(UTC)
    state = ScanState.load(opts.state, lock=True)
    know = Knowledge.build(opts.fingerprints, state)
    since = _since(opts, state, now)
    query = Query(
        since=since,
        since_spec=opts.since,
        by=opts.by,
        pipeline_tag=opts.pipeline_tag,
        library=opts.library,
        author=opts.author,
        search=opts.search,
        limit=opts.limit,
    )
    scan_id = now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
    resumed, note = state.begin(scan_id, query.key(), iso(since) or "", iso(now) or "")
    cur = state.current
    assert cur is not None
    if resumed:
        query = replace(query, since=from_iso(cur["since"]) or since)
    result = ScanResult(
        scan_id=cur["id"],
        started=cur["started"],
        finished=None,
        query=query,
        records=[],
        resumed=resumed,
        notes=[n for n in (note,) if n],
        endpoint=(opts.endpoint or constants.ENDPOINT).rstrip("/"),  # HF_ENDPOINT's, where it set it
        knowledge=know,
    )
    cancel = cancel or threading.Event()
    retrier = Retrier(opts.retry, cancel)
    previous = dict(state.models)
    examine = Examiner(opts, know, retrier, previous)
    has_token = _has_token(opts.token)
    store = state.store  # finished models: a journal line each, an offset each in memory
    order: list[str] = []  # listing order of this run, then earlier-run records not re-listed
    in_order: set[str] = set()
    listing_notes: list[str] = []  # entries the listing left out (appended from its thread)
    lister = Lister(
        lambda: list_models(query, endpoint=opts.endpoint, token=opts.token, note=listing_notes.append),
        describe_listing_error,
    )
    pool = DeadlinePool(examine, opts.workers, opts.deadline)
    lister.start()
    listing_done = False
    total = 0

    def finish(rec: Record) -> None:
        state.record(rec)
        progress("done", rec, len(store), max(total, len(store)))

    try:
        while True:
            if not listing_done:
                items, listing_done = lister.drain(0.0 if pool.pending else 0.05)
                for listed in items:
                    if listed.repo_id in in_order:
                        continue  # a listing page shifted under us: one model, one record
                    order.append(listed.repo_id)
                    in_order.add(listed.repo_id)
                    total += 1
                    progress("listed", total)
                    if listed.repo_id in store:
                        continue  # done before the scan was killed
                    quick = _prefilter(listed, previous.get(listed.repo_id), has_token)
                    if quick is not None:
                        finish(quick)
                    else:
                        pool.submit(listed.repo_id, listed)
                if listing_done and lister.error:
                    result.listing_error = lister.error
                elif not listing_done and time.monotonic() - lister.progress > opts.list_timeout:
                    result.listing_error = f"the listing stalled (no answer for {opts.list_timeout:g} s)"
                    listing_done = True
            for out in pool.poll(0.05 if pool.pending else 0.0):
                finish(_outcome_record(out, opts.deadline))
            if listing_done and pool.pending == 0:
                break
    except KeyboardInterrupt:
        cancel.set()
        result.interrupted = True
        state.checkpoint(force=True)
        state.close()
        pool.close(wait=STOP_WAIT)
        raise
    except OSError:  # the journal or the state could not be written (a full disk): stop, keep both
        cancel.set()
        state.close()
        pool.close(wait=STOP_WAIT)
        raise
    pool.close()
    result.notes.extend(one_line(n) for n in listing_notes)
    result.retries, result.waited_s, result.abandoned = retrier.retries, retrier.waited, pool.abandoned
    listed_now = [store.offset(r) for r in order if r in store]
    result.records = RecordView(store, listed_now + [at for r, at in store.offsets() if r not in in_order])
    if result.listing_error and not order and not len(store):
        state.close()
        raise SlotdiffError("scan", result.listing_error)
    finished = iso(datetime.now(UTC)) or ""
    result.finished = finished
    if result.listing_error:
        # A partial listing is reported but not merged: the next scan covers the window again.
        result.notes.append("the listing did not finish: state keeps this scan open for a rerun")
        state.checkpoint(force=True)
        state.close()
        return result

    def release() -> None:
        state.checkpoint(force=True)
        state.close()

    counts = result.counts()
    result.commit = lambda: state.finish(finished, counts)
    result.release = release
    if commit:
        result.commit()
    return result


def _outcome_record(out: Outcome, deadline: float) -> Record:
    listed: Listed = out.item
    if out.status == "ok":
        return out.value
    if out.status == "timeout":
        return skipped(listed, "timeout", f"no result within the {deadline:g} s per-model deadline")
    err = out.error
    return skipped(listed, "error", f"{type(err).__name__}: {err}")
