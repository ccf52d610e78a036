"""One model's work in a scan's worker thread: fetch its config (and card, and ModelOpt's
hf_quant_config.json where the listing's stored dtypes say the checkpoint is quantized and
config.json does not), read and classify it (identical config bytes once, and configs that
differ only in values no stage reads once, in bounded memos), judge it against what is known."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import replace
from typing import Any

from ..core.errors import SlotdiffError
from ..read.hf_quant import FILENAME as QUANT_FILE
from ..read.hub import ConfigFile, fetch_config, fetch_file
from ..read.hub_errors import HubFailure
from ..read.jsonpos import MAX_BYTES, JSONInputError
from ..read.retry import Retrier
from ..read.source import states_quantization
from .lineage import wants_card, with_lineage
from .listing import Listed
from .options import ScanOptions
from .pipelines import quantization_file_dtypes
from .verdict import (
    TRANSIENT,
    Analysis,
    Assessment,
    Knowledge,
    NotALanguageModel,
    Record,
    analyze_parsed,
    assess,
    failure_reason,
    failure_record,
    judge,
    judge_unreadable,
    parse_config,
    skipped,
)

_SHA = re.compile(r"[0-9a-f]{40}")
_AT = re.compile(r":\d+:\d+\Z")
_NOT_NULL_QUANT = re.compile(rb'"quantization_config"\s*:\s*[^n\s]')
# Analyses kept for identical config bytes (re-uploads, mirrors): about 7 KB each, so 1,024
# of them cap the memo near 7 MB however many distinct configs a week lists (FIFO).
MEMO_SIZE = 1024
# Top-level keys whose values no stage reads (the key map's ``ignored``) and in which the
# copies of one model on the Hub differ (a fine-tune's own path, the transformers release that
# saved it): configs equal but for their values share one analysis (design_key).
INERT_KEYS = ("_name_or_path", "transformers_version")


def design_key(config: dict[str, Any]) -> str | None:
    """SHA-256 of a parsed config with the INERT_KEYS' values blanked (key order kept: the
    analysis lists keys in the config's order); None when it cannot be written back."""
    blanked = {k: None if k in INERT_KEYS else v for k, v in config.items()}
    try:
        text = json.dumps(blanked)
    except (ValueError, RecursionError):  # within the reader's caps, but never share a doubt
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def listed_quantized(listed: Listed) -> bool:
    """True when the listing says the checkpoint stores quantized dtypes (``schemas/scan.json``)."""
    if listed.safetensors is None:
        return False
    wanted = quantization_file_dtypes()
    return any(dtype in wanted for dtype, _ in listed.safetensors)


def wants_quant_file(listed: Listed, data: bytes) -> bool:
    """True when config.json's top level states no quantization_config but the listing says
    the checkpoint stores quantized dtypes (``schemas/scan.json``): its scheme may be in
    hf_quant_config.json (a text config's quantization_config does not stop vLLM reading it:
    ``read.source.states_quantization``)."""
    if not listed_quantized(listed):
        return False
    if b'"quantization_config"' not in data or not _NOT_NULL_QUANT.search(data):
        return True  # named nowhere, or only as null: none stated (the cheap common answers)
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):  # the analysis refuses it, naming why
        return False
    return isinstance(parsed, dict) and not states_quantization(parsed)


def _side_key(side: tuple[bytes | None, str | None]) -> str:
    """A memo key's part for what hf_quant_config.json gave (its bytes, or why there were none)."""
    body, failed = side
    return hashlib.sha256(body if body is not None else (failed or "").encode()).hexdigest()


# The state's quant_file for a quantized listing whose config.json states its own scheme:
# hf_quant_config.json is not wanted while config.json's bytes stay the same.
STATED = "stated"


def quant_mark(side: tuple[bytes | None, str | None] | None) -> str | None:
    """What the state records of hf_quant_config.json, so that a change to it alone is seen:
    the SHA-256 of its bytes, ``absent`` for the ordinary 404, None when it was not asked for
    or could not be read (then a later scan that fetches config.json asks again)."""
    if side is None:
        return None
    body, failed = side
    if body is not None:
        return hashlib.sha256(body).hexdigest()
    return None if failed else "absent"


def _remember(memo: dict[str, Analysis], key: str, analysis: Analysis) -> None:
    if len(memo) >= MEMO_SIZE:  # bounded: a week of unique configs is large (FIFO)
        memo.pop(next(iter(memo)))
    memo[key] = analysis


class Examiner:
    """The worker's job for one model: fetch, read, classify, judge."""

    def __init__(
        self, opts: ScanOptions, know: Knowledge, retrier: Retrier, previous: dict[str, Any]
    ) -> None:
        self.opts = opts
        self.know = know
        self.retrier = retrier
        self.previous = previous
        self._memo: dict[str, Analysis] = {}  # identical config bytes are classified once
        self._designs: dict[str, Analysis] = {}  # so are configs equal but for INERT_KEYS
        self._bytes: dict[str, bytes] = {}  # config bytes a card read may need (relation)
        # Each analysis assessed once (every copy of a design shares one analysis): by its
        # id, holding the analysis so that the id is not reused while remembered.
        self._assessed: dict[int, tuple[Analysis, Assessment]] = {}
        self._lock = threading.Lock()

    def __call__(self, listed: Listed) -> Record:
        rec = self.examine(listed)
        if not self.opts.cards or not wants_card(rec):
            return rec
        return with_lineage(rec, self._bytes.pop(listed.repo_id, None), self.opts, self.retrier)

    def examine(self, listed: Listed) -> Record:
        if self.retrier.cancel.is_set():
            return skipped(listed, "network", "the scan was stopped before this model")
        prev = self.previous.get(listed.repo_id)
        try:
            revision = listed.sha if listed.sha and _SHA.fullmatch(listed.sha) else None
            cfg = self._fetch(listed, revision, prev.get("etag") if prev else None)
        except HubFailure as fail:
            return failure_record(listed, fail)
        facts: dict[str, Any] = {"commit": cfg.commit, "etag": cfg.etag}
        side: tuple[bytes | None, str | None] | None = None
        side_reason: str | None = None  # why hf_quant_config.json could not be read (a skip code)
        if cfg.origin == "unchanged":
            # config.json is the one the last scan read; the unchanged check must cover the
            # hf_quant_config.json the scan reads beside it as well (a repo that switched
            # its scheme there alone).
            was = prev.get("quant_file") if prev else None
            if (was is None and not listed_quantized(listed)) or was == STATED:
                # no file wanted: none stored quantized, or config.json states its own scheme
                # (the same bytes still do)
                detail = "config.json unchanged (same etag)"
                return Record(listed, "unchanged", detail=detail, quant_file=was, **facts)
            if was is not None and listed_quantized(listed):
                # read last time, so config.json states no scheme: it is wanted again
                side, side_reason = self.quant_file(listed, cfg.commit)
                if quant_mark(side) == was:
                    detail = f"config.json unchanged (same etag), {QUANT_FILE} too"
                    return Record(listed, "unchanged", detail=detail, quant_file=was, **facts)
            try:  # the bytes are needed after all: one GET at the same commit
                cfg = self._fetch(listed, cfg.commit, None)
            except HubFailure as fail:
                return failure_record(listed, fail)
        try:
            data = cfg.read()
        except HubFailure as fail:
            return failure_record(listed, fail)
        except OSError as err:
            return skipped(listed, "error", f"cannot read the downloaded file: {err}", **facts)
        if data is None:
            return skipped(listed, "error", "no config.json bytes came back", **facts)
        digest = hashlib.sha256(data).hexdigest()
        facts["config_sha256"] = digest
        wants = wants_quant_file(listed, data)
        if wants and side is None:
            side, side_reason = self.quant_file(listed, cfg.commit)
        elif not wants:
            side, side_reason = None, None
        if side_reason in TRANSIENT and prev and prev.get("quant_file") not in (None, STATED):
            # the file was read last time: keep that scan's figures rather than price this
            # one without it; a transient skip is asked again by the next scan
            why = side[1] if side and side[1] else side_reason
            return skipped(listed, side_reason, f"kept the last scan's figures: {why}", **facts)
        mark = quant_mark(side) if wants else (STATED if listed_quantized(listed) else None)
        facts["quant_file"] = mark
        facts["quant_reason"] = side_reason  # a transient one is asked again at the same commit
        same_side = (prev or {}).get("quant_file") == mark and (mark is not None or not wants)
        if prev and prev.get("config_sha256") == digest and same_side:
            also = f", {QUANT_FILE} too" if wants else ""
            return Record(listed, "unchanged", detail=f"config.json unchanged (same sha256){also}", **facts)
        if self.opts.cards:
            with self._lock:
                self._bytes[listed.repo_id] = data
        return self.classify(listed, data, digest, facts, prev, side)

    def _fetch(self, listed: Listed, revision: str | None, known_etag: str | None) -> ConfigFile:
        """config.json at ``revision`` (a HEAD first when ``known_etag`` is given)."""
        return fetch_config(
            listed.repo_id,
            revision=revision,
            timeout=self.opts.timeout,
            endpoint=self.opts.endpoint,
            token=self.opts.token,
            cache_dir=self.opts.cache_dir,
            retrier=self.retrier,
            known_etag=known_etag,
            via_hf_cache=self.opts.via_hf_cache,
        )

    def quant_file(
        self, listed: Listed, commit: str | None
    ) -> tuple[tuple[bytes | None, str | None], str | None]:
        """((hf_quant_config.json's bytes or None, why it could not be read or None), the
        failure's skip code or None), at the commit config.json came from; a repo without one
        (404) is the ordinary answer. The code goes into the state: a transient one (verdict
        TRANSIENT) has the next scan ask again even at the same commit."""
        try:
            body = fetch_file(
                listed.repo_id,
                QUANT_FILE,
                revision=commit or (listed.sha if listed.sha and _SHA.fullmatch(listed.sha) else None),
                timeout=self.opts.timeout,
                endpoint=self.opts.endpoint,
                token=self.opts.token,
                retrier=self.retrier,
                cap=MAX_BYTES,
            )
        except HubFailure as fail:
            if fail.kind == "no_config":  # the file's 404: the repo has none
                return (None, None), None
            why = f"{QUANT_FILE} could not be read ({fail}): weights priced from config.json alone"
            return (None, why), failure_reason(fail)
        return (body, None), None

    def classify(
        self,
        listed: Listed,
        data: bytes,
        digest: str,
        facts: dict[str, Any],
        prev: dict[str, Any] | None,
        side: tuple[bytes | None, str | None] | None = None,
    ) -> Record:
        # The same config.json beside another hf_quant_config.json (NVIDIA's copies of a base
        # model's config) is another model: the file is part of the memo's key.
        key = digest if side is None else f"{digest}+{_side_key(side)}"
        with self._lock:
            analysis = self._memo.get(key)
        try:
            if analysis is None:
                analysis = self._analyze(data, listed.repo_id, side)
                with self._lock:
                    _remember(self._memo, key, analysis)
        except JSONInputError as err:
            reason = "too_large" if "bytes, over the" in err.message else "invalid_json"
            return skipped(listed, reason, f"{err.message} (line {err.line}, column {err.col})", **facts)
        except NotALanguageModel as err:
            new = judge_unreadable(listed, data, str(err), self.know, **facts)
            return new or skipped(listed, "not_lm", str(err), **facts)
        except SlotdiffError as err:
            # A refusal of hf_quant_config.json names that file; the config's, only its key.
            source = _AT.sub("", err.source)  # a JSON error's source ends in :line:column
            side_file = QUANT_FILE if source.endswith("/" + QUANT_FILE) else None
            where = "".join(f"{p}: " for p in (side_file, err.key) if p)
            new = judge_unreadable(listed, data, where + err.reason, self.know, **facts)
            return new or skipped(listed, "unreadable", where + err.reason, **facts)
        except Exception as err:  # a config slotdiff cannot handle must not stop the scan
            return skipped(listed, "error", f"{type(err).__name__}: {err}", **facts)
        with self._lock:
            hit = self._assessed.get(id(analysis))
        if hit is not None and hit[0] is analysis:
            assessed = hit[1]
        else:
            assessed = assess(analysis, self.know)
            with self._lock:
                if len(self._assessed) >= 2 * MEMO_SIZE:  # the two memos' analyses at most
                    self._assessed.pop(next(iter(self._assessed)))
                self._assessed[id(analysis)] = (analysis, assessed)
        rec = judge(listed, analysis, self.know, assessed, **facts)
        if prev and prev.get("fingerprint") and prev.get("fingerprint") != rec.fingerprint:
            rec = replace(rec, previous={"fingerprint": prev["fingerprint"], "verdict": prev.get("verdict")})
        return rec

    def _analyze(
        self, data: bytes, name: str, side: tuple[bytes | None, str | None] | None = None
    ) -> Analysis:
        """The analysis of config bytes not seen before: an earlier one where the config
        differs from that one's only in INERT_KEYS' values, else a new one."""
        parsed = parse_config(data)  # the same caps and refusals whether or not a copy is known
        key = design_key(parsed.value)
        if key and side is not None:
            key = f"{key}+{_side_key(side)}"
        with self._lock:
            known = self._designs.get(key) if key else None
        if known is not None:
            return known
        analysis = analyze_parsed(parsed, name) if side is None else analyze_parsed(parsed, name, side)
        if key and name not in repr(analysis):  # one that quotes its repo (an error's source) is its own
            with self._lock:
                _remember(self._designs, key, analysis)
        return analysis
