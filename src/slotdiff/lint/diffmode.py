"""Diff mode (SD310-SD315): what a change did to each slot, and what it costs.

The base of a file is its version at ``--diff-base REV`` (read with ``git cat-file``, one
process for all files; a file new at REV has none) or else the policy's ``baseline``. Every
facet whose fill differs from the base's is one diagnostic, and so is a change of the
model's dimensions. The price of a facet's change is the cost of the base with only that
facet's keys taken from the new file, minus the base's cost; when one facet changed, or its
keys cannot be separated, it is the whole change's delta and the message says so.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import SlotdiffError
from ..core.resources import catalog_dir
from ..cost.deltas import deltas as cost_deltas
from ..read.source import catalog, read_bytes
from ..render import fmt
from ..slots.differ import diff_fills, key_changes
from .budgets import COST_FAILURES
from .document import Document, KeyPath, key_path, read
from .registry import Hit, rule

# ----------------------------------------------------------------------------- git

_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


def _git(args: Sequence[str], cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False, timeout=120
        )
    except FileNotFoundError as err:
        raise SlotdiffError("slotdiff lint", "--diff-base needs git, and git is not on PATH") from err


def _root(rev: str, cwd: Path) -> Path:
    top = _git(["rev-parse", "--show-toplevel"], cwd)
    if top.returncode != 0:
        raise SlotdiffError("slotdiff lint", f"--diff-base {rev}: not inside a git repository")
    return Path(os.fsdecode(top.stdout.strip())).resolve()


def resolve_revision(rev: str, root: Path) -> str | None:
    """The commit id ``rev`` names (None: HEAD of a repository with no commit yet).

    This is the first git call that sees the user's text, and the only one: it goes after
    ``--end-of-options``, so ``--output=FILE`` is a revision name git does not know, never
    an option; every later call gets the 40-hex commit id instead.
    """
    if not rev or rev.startswith("-") or any(c in rev for c in "\0\n\r"):
        raise SlotdiffError("slotdiff lint", f"--diff-base {rev!r}: not a revision name")
    verify = _git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], root)
    if verify.returncode != 0:
        unborn = rev == "HEAD" and _git(["rev-parse", "--verify", "--quiet", "HEAD"], root).returncode != 0
        if unborn:  # the first commit of a repository: every file is new
            return None
        raise SlotdiffError("slotdiff lint", f"--diff-base {rev}: unknown revision")
    commit = verify.stdout.decode("ascii", "replace").strip()
    if not _COMMIT.fullmatch(commit):
        raise SlotdiffError(
            "slotdiff lint", f"--diff-base {rev}: git answered {commit[:80]!r}, not a commit id"
        )
    return commit


def git_versions(rev: str, paths: Sequence[str], cwd: Path | None = None) -> dict[str, bytes | None]:
    """Each path's content at ``rev`` (None where the file does not exist there)."""
    cwd = (cwd or Path.cwd()).resolve()
    root = _root(rev, cwd)
    commit = resolve_revision(rev, root)
    out: dict[str, bytes | None] = dict.fromkeys(paths)
    if commit is None:
        return out
    specs: list[tuple[str, str]] = []
    for p in paths:
        try:
            rel = (cwd / p).resolve().relative_to(root).as_posix()
        except ValueError:
            continue  # outside the repository: no base
        if "\n" in rel or "\r" in rel:
            out[p] = _blob(commit, rel, root)  # cat-file --batch reads one name per line
        else:
            specs.append((p, rel))
    if not specs:
        return out
    names = "".join(f"{commit}:{rel}\n" for _, rel in specs)
    batch = _git(["cat-file", "--batch"], root, os.fsencode(names))
    if batch.returncode != 0:
        raise SlotdiffError(
            "slotdiff lint", f"git cat-file failed: {batch.stderr.decode(errors='replace').strip()}"
        )
    buf, i = batch.stdout, 0
    for p, _ in specs:
        end = buf.index(b"\n", i)
        header = buf[i:end]
        i = end + 1
        if header.endswith((b" missing", b" ambiguous")):  # the name (spaces and all), then why
            continue
        parts = header.split()  # <sha> <type> <size>
        if len(parts) != 3 or not parts[2].isdigit():
            raise SlotdiffError("slotdiff lint", f"git cat-file answered {header[:80]!r}")
        size = int(parts[2])
        if parts[1] == b"blob":
            out[p] = buf[i : i + size]
        i += size + 1  # a tree or other object at that path: skip its body
    return out


def _blob(commit: str, rel: str, root: Path) -> bytes | None:
    """One file's bytes at ``commit`` (None when it is not a file there)."""
    spec = f"{commit}:{rel}"
    kind = _git(["cat-file", "-t", "--end-of-options", spec], root)
    if kind.returncode != 0 or kind.stdout.strip() != b"blob":
        return None
    res = _git(["cat-file", "blob", "--end-of-options", spec], root)
    return res.stdout if res.returncode == 0 else None


def changed_files(rev: str, cwd: Path | None = None) -> list[str]:
    """Files that differ from ``rev`` in the working tree (added or modified), cwd-relative."""
    cwd = (cwd or Path.cwd()).resolve()
    root = _root(rev, cwd)
    commit = resolve_revision(rev, root)
    if commit is None:
        raise SlotdiffError("slotdiff lint", f"--diff-base {rev}: the repository has no commit yet")
    res = _git(["diff", "--name-only", "--diff-filter=AMR", "-z", "--end-of-options", commit, "--"], root)
    if res.returncode != 0:
        raise SlotdiffError(
            "slotdiff lint", f"--diff-base {rev}: {res.stderr.decode(errors='replace').strip()}"
        )
    names = [n for n in os.fsdecode(res.stdout).split("\0") if n]
    return [os.path.relpath(root / n, cwd) for n in names]


def baseline_document(spec: str, root: Path, source: str = "policy") -> Document:
    """The policy's baseline: a path relative to the policy file, or a bundled catalog id."""

    path = (root / spec).expanduser()
    if path.is_file():
        return read(path, spec)
    entry = catalog().get(spec.lower())
    if entry is None:
        raise SlotdiffError(source, f"baseline {spec!r} is neither a file nor a bundled catalog repo id")

    file = catalog_dir() / entry.file
    return Document(entry.repo_id, read_bytes(file, spec), str(file))


# ----------------------------------------------------------------------- slot changes


@dataclass(frozen=True)
class SlotChange:
    """One facet (or the model's dimensions) that differs from the base."""

    facet: str  # slot facet id, or "dims"
    status: str  # changed | resized | dims
    old: str
    new: str
    keys: tuple[Any, ...]  # differ.KeyChange, attributed to this facet
    deltas: Mapping[str, Any] | None
    whole: bool  # deltas are the whole change's, not this facet's alone
    where: KeyPath


def _top_key(path: str, text_path: tuple[str, ...]) -> str:
    """``text_config.rope_scaling.factor`` → ``rope_scaling``; ``layer_types[3]`` → ``layer_types``."""
    parts = path.split(".")
    if tuple(parts[: len(text_path)]) == text_path:
        parts = parts[len(text_path) :]
    return parts[0].split("[")[0] if parts else ""


def _hybrid(base: Document, new: Document, top_keys: set[str], text_path: tuple[str, ...]) -> Document:
    """The base with ``top_keys`` (within the text config) taken from the new file."""
    data = copy.deepcopy(base.data)
    scope, source = data, new.data
    for part in text_path:
        scope, source = scope.setdefault(part, {}), source.get(part, {})
    for key in top_keys:
        if key in source:
            scope[key] = copy.deepcopy(source[key])
        else:
            scope.pop(key, None)
    return Document(new.name, json.dumps(data).encode())


def _deltas(new_doc: Document, base_doc: Document, workload: Any) -> Mapping[str, Any] | None:
    try:
        return cost_deltas(new_doc.cost(workload), base_doc.cost(workload))
    except (*COST_FAILURES, AssertionError):
        return None


def slot_changes(cx: Any) -> list[SlotChange]:
    """Every facet of this file that differs from its base, with its price (cached per file)."""
    if "changes" in cx.cache:
        return cx.cache["changes"]
    out: list[SlotChange] = []
    cx.cache["changes"] = out
    new, base = cx.doc, cx.base
    if base is None or base.data is None or base.arch is None or new.arch is None:
        return out

    text_path = new.text_path
    # the residual stream's width and depth are the model's dimensions: SD312 reports them
    # (as "dims"), so its resize is not a slot resize too
    facets = [
        d
        for d in diff_fills(base.fills, new.fills)
        if d.status != "same" and not (d.facet == "norm.residual" and d.status == "resized")
    ]
    keys = key_changes(base.data, new.data, text_path)
    by_facet: dict[str, list[Any]] = {}
    for k in keys:
        if k.facet:
            by_facet.setdefault(k.facet, []).append(k)
    groups: list[tuple[str, str, str, str]] = [(d.facet, d.status, d.a.detail, d.b.detail) for d in facets]
    if by_facet.get("dims"):
        groups.append(("dims", "dims", _dims(base), _dims(new)))
    total = _deltas(new, base, cx.workload)
    for facet, status, old, new_detail in groups:
        own = by_facet.get(facet, [])
        deltas, whole = total, len(groups) > 1
        if len(groups) > 1 and own:
            hybrid = _hybrid(base, new, {_top_key(k.path, text_path) for k in own}, text_path)
            if hybrid.arch is not None:
                deltas, whole = _deltas(hybrid, base, cx.workload), False
        out.append(SlotChange(facet, status, old, new_detail, tuple(own), deltas, whole, _where(new, own)))
    return out


def _dims(doc: Document) -> str:
    d, n = doc.value("d_model"), doc.value("n_layers")
    return f"d_model {d}, {n} layers"


def _where(doc: Document, keys: Sequence[Any]) -> KeyPath:
    """The first changed key that is in the new file (a removed key points at its object)."""
    positions = doc.parsed.positions if keys else {}
    best: tuple[tuple[int, int], KeyPath] | None = None
    for k in keys:
        path = key_path(k.path.split("[")[0])
        while path and path not in positions:
            path = path[:-1]
        pos = positions.get(path, (1, 1))
        if best is None or pos < best[0]:
            best = (pos, path)
    return best[1] if best else ()


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if value is not None else "absent"
    return text if len(text) <= 24 else text[:21] + "..."


def _key_summary(keys: Sequence[Any]) -> str:
    shown = [f"{k.path} {_short(k.old)} → {_short(k.new)}" for k in keys[:3]]
    more = f", +{len(keys) - 3} more" if len(keys) > 3 else ""
    return f" [{', '.join(shown)}{more}]" if shown else ""


# The deltas a slot-change message shows: (key in cost.deltas, label, formatter).
_SHOWN = (
    ("params", "params", fmt.count),
    ("active_params", "active", fmt.count),
    ("kv_bytes_per_token", "KV/token", fmt.bin_bytes),
    ("state_bytes_per_sequence", "state/sequence", fmt.bin_bytes),
    ("flops_per_token", "FLOPs/token", fmt.flops),
    ("decode_step_ms", "decode", fmt.ms),
)


def delta_text(deltas: Mapping[str, Any] | None, workload: Any) -> str:
    """``Δ params +100.7M, Δ KV/token +96 KiB, ...`` (nonzero deltas; active only if it differs)."""
    if deltas is None:
        return "cost not priced (one side cannot be costed)"
    parts = []
    for key, label, show in _SHOWN:
        value = deltas[key]
        if not value or (key == "active_params" and value == deltas["params"]):
            continue
        parts.append(f"Δ {label} {fmt.signed(show(value), value)}")
    if deltas["decode_step_ms"]:
        parts[-1] += f" ({workload.gpu}, batch {workload.batch}, context {workload.context:,})"
    return ", ".join(parts) if parts else "no cost change"


def _hits(cx: Any, statuses: set[str], forbidden: bool) -> Iterator[Hit]:
    for ch in slot_changes(cx):
        if ch.status not in statuses or (ch.facet in cx.policy.forbid_changes) != forbidden:
            continue
        verb = {"changed": "changed", "resized": "resized", "dims": "changed"}[ch.status]
        head = f"{ch.facet} {verb} vs {cx.base_label}: {ch.old} → {ch.new}{_key_summary(ch.keys)}; "
        price = ("whole change: " if ch.whole else "") + delta_text(ch.deltas, cx.workload)
        if forbidden:
            head = f"forbidden by policy (forbid-changes): {head}"
        extra = {
            "facet": ch.facet,
            "status": ch.status,
            "base": cx.base_label,
            "deltas": dict(ch.deltas) if ch.deltas is not None else None,
            "deltas_of": "whole change" if ch.whole else "this facet",
        }
        yield Hit(ch.where, head + price, extra)


_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def base_problem(base: Any) -> str | None:
    """Why the base cannot be compared with (None when it can): not JSON (a git-LFS pointer,
    a symlink's target path, a broken file) or JSON slotdiff cannot build a model from."""
    if base is None:
        return None
    if base.text.startswith(_LFS_POINTER):
        return "a git-LFS pointer, not the config (git lfs pull, or compare against a revision that has it)"
    if base.error is not None:
        return f"not a JSON config ({base.error.message} at line {base.error.line}, column {base.error.col})"
    if base.arch is None and base.build_error is not None:
        return f"not a config slotdiff can read ({base.build_error.line()})"
    return None


@rule("SD313", needs="base")
def base_unreadable(cx: Any) -> Iterator[Hit]:
    """The base is no config to compare with: slot changes are not reported."""
    why = base_problem(cx.base)
    if why is not None:
        yield Hit((), f"the base at {cx.base_label} is {why}; slot changes against it are not reported")


@rule("SD310", needs="base")
def slot_changed(cx: Any) -> Iterator[Hit]:
    """A facet's design differs from the base's."""
    yield from _hits(cx, {"changed"}, forbidden=False)


@rule("SD311", needs="base")
def slot_resized(cx: Any) -> Iterator[Hit]:
    """A facet keeps its design at other sizes."""
    yield from _hits(cx, {"resized"}, forbidden=False)


@rule("SD312", needs="base")
def dims_changed(cx: Any) -> Iterator[Hit]:
    """Width or depth differs from the base's."""
    yield from _hits(cx, {"dims"}, forbidden=False)


@rule("SD315", needs="base")
def forbidden_change(cx: Any) -> Iterator[Hit]:
    """A change to a facet the policy freezes; or a base no change can be checked against while
    the policy freezes facets (a base swapped for an LFS pointer or a symlink must not let a
    frozen slot change pass)."""
    why = base_problem(cx.base)
    if why is not None and cx.policy.forbid_changes:
        frozen = ", ".join(sorted(cx.policy.forbid_changes))
        yield Hit((), f"forbid-changes ({frozen}) cannot be checked: the base at {cx.base_label} is {why}")
        return
    yield from _hits(cx, {"changed", "resized", "dims"}, forbidden=True)
