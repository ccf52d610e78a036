"""The team's lint policy: ``[tool.slotdiff]`` in pyproject.toml, or ``.slotdiff.toml``.

Found by walking up from the current directory to the first ``.slotdiff.toml`` or the first
pyproject.toml that has a ``[tool.slotdiff]`` table; validated by
``schemas/policy.schema.json``. Anything wrong with it (an unknown key, a code that names
no rule, a facet that does not exist) is a usage error: exit status 2, one line.
"""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from ..core.errors import SlotdiffError
from ..core.files import read_capped
from ..core.resources import load_schema_file
from ..cost.workload import Workload
from ..slots.fill import slot_table
from .registry import is_selected, table, valid_selector

POLICY_FILE = ".slotdiff.toml"
# A policy is a few lines of TOML; a pyproject.toml a few KiB. Past this it is not one.
POLICY_CAP = 4 * 1024 * 1024

_BYTE_UNITS = {
    "": 1,
    "B": 1,
    "kB": 1000,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
}
_COUNT_UNITS = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
_QUANTITY = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*\Z", re.ASCII)


def _quantity(value: int | float | str, units: Mapping[str, float]) -> int:
    """``"160 KiB"`` → 163840, ``"9B"`` → 9000000000; plain numbers pass through."""
    if isinstance(value, (int, float)):
        return int(value)
    m = _QUANTITY.fullmatch(value)
    if not m or m.group(2) not in units:
        raise ValueError(value)
    return int(float(m.group(1)) * units[m.group(2)])


@dataclass(frozen=True)
class Budgets:
    max_kv_bytes_per_token: int | None = None
    max_decode_ms: float | None = None
    max_total_params: int | None = None
    max_active_params: int | None = None

    def any(self) -> bool:
        return any(v is not None for v in vars(self).values())


@dataclass(frozen=True)
class Policy:
    """What to check and what counts as an error, for every file of one run."""

    source: str | None = None  # the file it came from (None: built-in defaults)
    root: Path = field(default_factory=Path.cwd)  # per-file-ignores and baseline are relative to it
    select: tuple[str, ...] = ("SD",)
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    baseline: str | None = None
    forbid_changes: tuple[str, ...] = ()
    allowed_fills: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    workload: Mapping[str, Any] = field(default_factory=dict)
    budgets: Budgets = field(default_factory=Budgets)

    def ignored_for(self, path: str) -> tuple[str, ...]:
        """This policy's ignores plus the per-file ignores whose glob matches ``path``."""
        if not self.per_file_ignores:
            return self.ignore
        rel = _relative(path, self.root)
        extra: list[str] = []
        for pattern, codes in self.per_file_ignores:
            target = rel if "/" in pattern else rel.rsplit("/", 1)[-1]
            if fnmatch.fnmatchcase(target, pattern):
                extra.extend(codes)
        return (*self.ignore, *extra)

    def enabled_codes(self, path: str) -> frozenset[str]:
        """The codes that run on ``path``."""
        return _enabled(self.select, self.ignored_for(path))

    def make_workload(self) -> Any:
        w = self.workload
        return Workload(
            gpu=w.get("gpu", "h100-sxm"),
            batch=w.get("batch", 1),
            context=w.get("context", 8192),
            kv_dtype=w.get("kv-dtype", "bfloat16"),
        )


@cache
def _enabled(select: tuple[str, ...], ignore: tuple[str, ...]) -> frozenset[str]:
    return frozenset(r.code for r in table() if is_selected(r.code, select, ignore))


def _relative(path: str, root: Path) -> str:
    p = Path(path)
    try:
        rel = p.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        rel = p
    return rel.as_posix()


# --------------------------------------------------------------------------- loading


def find(start: Path | None = None) -> tuple[Path, str] | None:
    """(file, table) of the policy that applies from ``start`` upward, or None."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        own = folder / POLICY_FILE
        if own.is_file():
            return own, ""
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            try:
                text = read_capped(pyproject, str(pyproject), POLICY_CAP).decode("utf-8")
            except (SlotdiffError, UnicodeDecodeError):
                continue
            if _names_slotdiff(text):
                return pyproject, "tool.slotdiff"
    return None


def _names_slotdiff(text: str) -> bool:
    """The pyproject has a [tool.slotdiff] table in any TOML spelling ([[tool.slotdiff]], an
    inline table, a dotted key), or is broken TOML that mentions it: either way it is the
    policy, and load() reads it or says what is wrong, never falling back to defaults."""
    if "slotdiff" not in text:
        return False
    try:
        tool = tomllib.loads(text).get("tool", {})
    except tomllib.TOMLDecodeError:
        return bool(re.search(r"^\s*\[+\s*tool\s*\.\s*\"?slotdiff", text, re.MULTILINE))
    return not isinstance(tool, dict) or "slotdiff" in tool


def load(path: Path | None = None, table: str | None = None, *, search: bool = True) -> Policy:
    """Load the policy at ``path`` (or the one found upward); defaults when there is none."""
    if path is None:
        found = find() if search else None
        if found is None:
            return Policy()
        path, table = found
    if table is None:
        table = "tool.slotdiff" if path.name == "pyproject.toml" else ""

    try:
        doc = tomllib.loads(read_capped(path, str(path), POLICY_CAP).decode("utf-8"))
    except SlotdiffError as err:
        raise SlotdiffError(str(path), f"cannot read policy: {err.reason}") from err
    except UnicodeDecodeError as err:
        raise SlotdiffError(str(path), f"cannot read policy: not UTF-8 ({err.reason})") from err
    except tomllib.TOMLDecodeError as err:
        raise SlotdiffError(str(path), f"not valid TOML: {err}") from err
    data: Any = doc
    walked: list[str] = []
    for part in table.split(".") if table else ():
        walked.append(part)
        data = data.get(part, {})
        if not isinstance(data, dict):  # tool = 1, or [[tool.slotdiff]] (an array of tables)
            kinds = {
                "list": "an array of tables",
                "int": "an integer",
                "str": "a string",
                "bool": "a boolean",
            }
            kind = kinds.get(type(data).__name__, f"a {type(data).__name__}")
            raise SlotdiffError(str(path), f"{'.'.join(walked)} is {kind}, not a table")
    return from_mapping(data, str(path), path.parent, f"[{table}]" if table else "")


def from_mapping(data: Mapping[str, Any], source: str, root: Path, where: str = "") -> Policy:
    """Validate a policy table and turn it into a Policy; SlotdiffError (exit 2) when it is wrong."""
    from jsonschema import Draft202012Validator

    label = f"{source} {where}".strip()
    if not isinstance(data, Mapping):
        raise SlotdiffError(label, f"the policy is a {type(data).__name__}, not a table")
    for at, value in _numbers(data):
        if not math.isfinite(value):  # TOML has nan and inf; no budget or size is either
            raise SlotdiffError(label, f"{at}: {value!r} is not a finite number")
    for key in ("select",):
        if key in data and data[key] == []:
            raise SlotdiffError(
                label, f"{key}: an empty list would turn every rule off; name at least one code"
            )
    errors = sorted(
        Draft202012Validator(load_schema_file("policy.schema.json")).iter_errors(data),
        key=lambda e: list(map(str, e.absolute_path)),
    )
    if errors:
        err = errors[0]
        at = ".".join(str(p) for p in err.absolute_path)
        if err.validator == "additionalProperties":
            extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
            raise SlotdiffError(label, f"unknown policy key {'.'.join([at, extra[0]]).strip('.')!r}")
        raise SlotdiffError(label, f"{at or 'policy'}: {err.message}")

    def codes(values: Sequence[str], key: str) -> tuple[str, ...]:
        for code in values:
            if not valid_selector(code):
                raise SlotdiffError(label, f"{key}: {code!r} names no rule (slotdiff lint --list-rules)")
        return tuple(values)

    budgets_in = data.get("budgets", {})
    try:
        budgets = Budgets(
            max_kv_bytes_per_token=_maybe(budgets_in.get("max-kv-bytes-per-token"), _BYTE_UNITS),
            max_decode_ms=budgets_in.get("max-decode-ms"),
            max_total_params=_maybe(budgets_in.get("max-total-params"), _COUNT_UNITS),
            max_active_params=_maybe(budgets_in.get("max-active-params"), _COUNT_UNITS),
        )
    except ValueError as err:
        raise SlotdiffError(label, f"budgets: cannot read {err.args[0]!r} as a quantity") from err
    facets_used = [*data.get("forbid-changes", []), *data.get("allowed-fills", {})]
    if facets_used:
        known = {f.id for f in slot_table()} | {"dims"}
        for facet in facets_used:
            if facet not in known:
                raise SlotdiffError(
                    label, f"{facet!r} is not a slot facet (one of: {', '.join(sorted(known))})"
                )
    policy = Policy(
        source=source,
        root=root,
        select=codes(data.get("select", ["SD"]), "select"),
        ignore=codes(data.get("ignore", []), "ignore"),
        per_file_ignores=tuple(
            (pattern, codes(values, f"per-file-ignores {pattern!r}"))
            for pattern, values in data.get("per-file-ignores", {}).items()
        ),
        baseline=data.get("baseline"),
        forbid_changes=tuple(data.get("forbid-changes", [])),
        allowed_fills={k: tuple(v) for k, v in data.get("allowed-fills", {}).items()},
        workload=dict(data.get("workload", {})),
        budgets=budgets,
    )
    if policy.workload or budgets.max_decode_ms is not None:
        try:
            policy.make_workload()  # an unknown GPU preset or dtype is a usage error now
        except SlotdiffError as err:
            raise SlotdiffError(label, f"workload: {err.reason}") from err
    return policy


def _numbers(node: Any, at: str = "") -> Iterator[tuple[str, float]]:
    """Every float in a policy table with its dotted key (TOML's nan and inf are floats)."""
    if isinstance(node, float):
        yield at or "policy", node
    elif isinstance(node, Mapping):
        for k, v in node.items():
            yield from _numbers(v, f"{at}.{k}" if at else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _numbers(v, f"{at}[{i}]")


def _maybe(value: Any, units: Mapping[str, float]) -> int | None:
    return None if value is None else _quantity(value, units)


def with_overrides(
    policy: Policy, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None
) -> Policy:
    """Command-line --select / --ignore replace the policy's lists."""

    if select is not None and not select:
        raise SlotdiffError("slotdiff lint", "--select: empty; name at least one code or prefix (SD, SD2)")
    for code in [*(select or []), *(ignore or [])]:
        if not valid_selector(code):
            raise SlotdiffError("slotdiff lint", f"{code!r} names no rule (slotdiff lint --list-rules)")
    return replace(
        policy,
        select=tuple(select) if select is not None else policy.select,
        ignore=tuple(ignore) if ignore is not None else policy.ignore,
    )
