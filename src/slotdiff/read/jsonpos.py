"""Parse JSON text into Python values and remember where every key sits (line, column).

Python's ``json`` module gives values but not positions; diagnostics must point at
``file:line:col``. A single regex tokenizer pass records the position of each object
member's key and each array element and notes duplicate keys (which ``json`` would silently
merge). Nesting depth and member count are held to their caps *before* the full parse; the
positions pass, four times the cost of the parse itself, runs when a diagnostic first asks.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

Path = tuple[str | int, ...]

# Caps for hostile input; a real config.json is a few KB with depth < 6.
MAX_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_MEMBERS = 100_000
# Longest integer literal: 10^30 (31 digits) still parses, to be refused by the key map's
# bounds with its key named; past this it is refused here, before Python's int() limit
# (4,300 digits) raises something no caller expects.
MAX_INT_DIGITS = 100

# One token with the whitespace before it (whitespace is never a token of its own: half the
# matches of an indented file saved). The whitespace is taken possessively and the token is
# optional, so a character no token starts with is an empty match, skipped, and a run of
# whitespace is read once whatever follows it (linear on any input).
_TOKEN = re.compile(
    r"""
    [ \t\r\n]*+
    (?:
        (?P<str>"(?:[^"\\\x00-\x1f]|\\.)*")
      | (?P<punct>[{}\[\]:,])
      | (?P<atom>[^ \t\r\n{}\[\]:,"]+)
    )?
    """,
    re.VERBOSE,
)


class JSONInputError(ValueError):
    """The text is not acceptable JSON; carries a 1-based line and column."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col


@dataclass(frozen=True)
class Parsed:
    """A parsed JSON document: its value, and from its ``text`` (when kept) the key positions
    and the duplicate keys seen, found on first use: only diagnostics read them."""

    value: Any
    text: str | None = field(default=None, repr=False, compare=False)

    @cached_property
    def _found(self) -> tuple[dict[Path, tuple[int, int]], tuple[tuple[Path, tuple[int, int]], ...]]:
        if self.text is None:
            return {}, ()
        positions, duplicates = _scan(self.text)  # within the caps: ``parse`` checked them
        return positions, tuple(duplicates)

    @property
    def positions(self) -> Mapping[Path, tuple[int, int]]:
        return self._found[0]

    @property
    def duplicates(self) -> tuple[tuple[Path, tuple[int, int]], ...]:
        return self._found[1]

    def where(self, path: Path) -> tuple[int, int]:
        """Position of ``path``, or of its nearest ancestor that has one (else 1:1)."""
        while path:
            pos = self.positions.get(path)
            if pos is not None:
                return pos
            path = path[:-1]
        return (1, 1)


@dataclass(frozen=True)
class Rendered(Parsed):
    """An in-memory value read back from its compact JSON (``text``, from ``json.dumps``'s C
    encoder), with the key positions of its indented rendering, written only when a diagnostic
    first asks: the indenting encoder is pure Python and cost more than the rest of reading a
    dict. Keys that collide only once written (``1`` and ``"1"`` in one dict) are found in the
    compact text, and placed where the key they merged into sits in the rendering."""

    @cached_property
    def _found(self) -> tuple[dict[Path, tuple[int, int]], tuple[tuple[Path, tuple[int, int]], ...]]:
        positions, _ = _scan(json.dumps(self.value, indent=2, allow_nan=True))
        _, collided = _scan(self.text) if self.text is not None else ({}, [])
        return positions, tuple((path, positions.get(path, (1, 1))) for path, _ in collided)


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def at(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


def _scan(text: str) -> tuple[dict[Path, tuple[int, int]], list[tuple[Path, tuple[int, int]]]]:
    """Walk the tokens once, recording positions; raise on depth or member-count caps."""
    lines = _Lines(text)
    positions: dict[Path, tuple[int, int]] = {}
    duplicates: list[tuple[Path, tuple[int, int]]] = []
    # Each frame: [path, is_object, next_index, pending_key, keys_seen]
    stack: list[list[Any]] = []
    members = 0
    expect_key = False
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind is None:
            continue  # whitespace alone, or a character no token starts with
        tok = m.group(kind)
        start = m.start(kind)
        if kind == "punct":
            if tok in "{[":
                if len(stack) >= MAX_DEPTH:
                    line, col = lines.at(start)
                    raise JSONInputError(f"nesting deeper than {MAX_DEPTH} levels", line, col)
                path = _value_path(stack, positions, lines, start)
                stack.append([path, tok == "{", 0, None, set()])
                expect_key = tok == "{"
            elif tok in "}]":
                if stack:
                    stack.pop()
                expect_key = False
            elif tok == ",":
                expect_key = bool(stack) and stack[-1][1]
            elif tok == ":":
                expect_key = False
            continue
        if expect_key and kind == "str":
            frame = stack[-1]
            if "\\" not in tok:
                key = tok[1:-1]  # what json.loads gives a string without escapes
            else:
                try:
                    key = json.loads(tok)
                except ValueError:
                    key = tok[1:-1]
            pos = lines.at(start)
            kpath = (*frame[0], key)
            if key in frame[4]:
                duplicates.append((kpath, pos))
            else:
                frame[4].add(key)
                positions[kpath] = pos
            frame[3] = key
            members += 1
            if members > MAX_MEMBERS:
                raise JSONInputError(f"more than {MAX_MEMBERS} keys", *pos)
            expect_key = False
            continue
        if stack and stack[-1][1]:
            continue  # an object member's value: its position is its key's
        _value_path(stack, positions, lines, start)
    return positions, duplicates


def _value_path(
    stack: list[list[Any]], positions: dict[Path, tuple[int, int]], lines: _Lines, offset: int
) -> Path:
    """Path of the value starting at ``offset``; array elements get their own position."""
    if not stack:
        positions.setdefault((), lines.at(offset))
        return ()
    frame = stack[-1]
    if frame[1]:
        return (*frame[0], frame[3])
    idx = frame[2]
    frame[2] += 1
    path = (*frame[0], idx)
    positions[path] = lines.at(offset)
    return path


def _reject_constant(name: str) -> float:
    # NaN / Infinity are not JSON, but transformers writes them; accept and let the
    # schema layer reject them where a finite number is required.
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


def parse_int(text: str) -> int:
    """``json.loads``'s integer hook: the digit cap, then ``int``."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _LongInteger(len(text.lstrip("-")))
    return int(text)


class _LongInteger(ValueError):
    def __init__(self, digits: int) -> None:
        super().__init__(f"a {digits:,}-digit integer is over the {MAX_INT_DIGITS}-digit cap")


def _long_integer(text: str, err: _LongInteger) -> JSONInputError:
    m = re.search(r"-?\d{" + str(MAX_INT_DIGITS + 1) + ",}", text)
    line, col = _Lines(text).at(m.start()) if m else (1, 1)
    return JSONInputError(str(err), line, col)


def decode(text: str | bytes) -> str:
    """``text`` as a string, with the size cap applied first (bytes are UTF-8, BOM allowed)."""
    if isinstance(text, bytes):
        if len(text) > MAX_BYTES:
            raise JSONInputError(f"file is {len(text):,} bytes, over the {MAX_BYTES:,}-byte cap", 1, 1)
        try:
            return text.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise JSONInputError(f"not UTF-8 text ({err.reason} at byte {err.start})", 1, 1) from err
    if len(text) > MAX_BYTES:
        raise JSONInputError(f"text is {len(text):,} characters, over the {MAX_BYTES:,} cap", 1, 1)
    return text


# The tokenizer's string, alone: removed from the text, what is left holds exactly the
# punctuation tokens the tokenizer sees (atoms hold none, and every quote a string does not
# consume is skipped by both the same way).
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\.)*"')
_NOT_PUNCT = re.compile(r"[^{}\[\],]+")


def check_limits(text: str) -> None:
    """Raise :class:`JSONInputError` when ``text`` nests deeper or holds more keys than the caps.

    Meant to run before ``json.loads``: bracket and colon counts (C speed) bound depth and
    key count from above, so a normal config passes without a tokenizer pass. Past those
    bounds the brackets outside strings give the tokenizer's exact depth, and openers plus
    commas bound its key count: only text over a cap by those gets the tokenizer pass, which
    stops at the first violation with its position.
    """
    if text.count("{") + text.count("[") <= MAX_DEPTH and text.count(":") <= MAX_MEMBERS:
        return
    punct = _NOT_PUNCT.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for ch in punct:
        if ch in "{[":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch != "," and depth:
            depth -= 1  # a closer pops only an open frame, as the tokenizer's does
    if deepest > MAX_DEPTH or punct.count("{") + punct.count(",") > MAX_MEMBERS:
        _scan(text)


def parse(text: str | bytes, *, with_positions: bool = True) -> Parsed:
    """Parse ``text``; raise :class:`JSONInputError` with a position on any problem.

    Size, depth and key-count caps are checked before the full parse. ``with_positions``
    keeps the text, for key positions and duplicates on first use (False: none, ever).
    """
    text = decode(text)
    check_limits(text)
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_int=parse_int)
    except json.JSONDecodeError as err:
        raise JSONInputError(f"invalid JSON: {err.msg}", err.lineno, err.colno) from err
    except _LongInteger as err:
        raise _long_integer(text, err) from err
    except RecursionError as err:
        raise JSONInputError("nesting too deep", 1, 1) from err
    return Parsed(value, text if with_positions else None)


def strict(value: Any) -> Any:
    """``value`` made safe for strict JSON (``json.dumps(..., allow_nan=False)``).

    A config may carry NaN or Infinity (transformers writes them, e.g. a time-step limit of
    Infinity); echoed back in a report they become the strings ``"NaN"``, ``"Infinity"`` and
    ``"-Infinity"``, which is how the config wrote them, instead of invalid JSON or a null.
    Keys become strings and tuples lists.
    """
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def dotted(path: Path) -> str:
    """``("text_config", "layer_types", 3)`` → ``text_config.layer_types[3]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
