"""One config as the linter sees it: bytes → JSON → RawConfig → Architecture → fills → cost.

Each stage is computed on first use and kept, so a rule pays only for what it reads. Key
positions are the expensive part of reading (a tokenizer pass in :mod:`slotdiff.jsonpos`)
and only files with something to report need them, so the first parse takes values only,
with a cheap duplicate-key check, and positions are computed when a diagnostic asks.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from functools import cached_property
from pathlib import Path
from typing import Any

from ..core.errors import SlotdiffError
from ..core.files import read_capped
from ..core.printable import json_kind
from ..cost.price import cost_of
from ..read.hf_quant import FILENAME as QUANT_FILE
from ..read.jsonpos import MAX_BYTES, JSONInputError, Parsed, check_limits, decode, parse, parse_int
from ..read.source import RawConfig, read_bytes, states_quantization, with_sidecar
from ..schema.arch import UNKNOWN, Architecture, Value
from ..schema.build import build
from ..schema.keymap import keymap
from ..schema.resolver import Resolver
from ..slots.fills import fill_slots

KeyPath = tuple[str | int, ...]


def key_path(dotted: str) -> KeyPath:
    """``text_config.hidden_size`` → ``("text_config", "hidden_size")`` (config keys hold no dots);
    ``layer_types[3]`` → ``("layer_types", 3)``."""
    out: list[str | int] = []
    for part in dotted.split(".") if dotted else ():
        m = _INDEXED.fullmatch(part)
        if m is None:
            out.append(part)
            continue
        out.append(m[1])
        out.extend(int(i) for i in re.findall(r"\d+", m[2]))
    return tuple(out)


_INDEXED = re.compile(r"([^\[]+)((?:\[\d+\])+)")


class _Duplicates:
    """object_pairs_hook that builds dicts and notes whether any key repeated."""

    def __init__(self) -> None:
        self.seen = False

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(pairs)
        if len(out) != len(pairs):
            self.seen = True
        return out


Built = tuple[Architecture | None, Any, SlotdiffError | None]  # (arch, fills, why not)


class Builds:
    """What one lint run has read of each file's bytes (by SHA-256): a folder of training
    checkpoints holds the same config.json many times, and each copy is read once.

    Parsing, key positions and the schema layer read only the bytes (never the file's name
    or place), so a copy's stages are the first one's; the build alone names the file
    (``Architecture.name``, an error's source) and is handed on under the copy's name. At
    most ``SIZE`` files are kept (first in, first out)."""

    SIZE = 256

    def __init__(self) -> None:
        self._by_digest: dict[bytes, dict[str, Any]] = {}

    def entry(self, doc: Document) -> dict[str, Any]:
        """The stages read so far of ``doc``'s bytes (``name``: the first file with them)."""
        digest = hashlib.sha256(doc.text).digest()
        if doc.sidecar is not None:  # a config.json beside a quantization file: built apart
            where, body = doc.sidecar  # (errors name the file, so its path is in the key)
            seen = body if isinstance(body, bytes) else repr(body).encode()
            digest += hashlib.sha256(where.encode() + b"\0" + seen).digest()
        entry = self._by_digest.get(digest)
        if entry is None:
            if len(self._by_digest) >= self.SIZE:
                self._by_digest.pop(next(iter(self._by_digest)))
            entry = self._by_digest[digest] = {"name": doc.name}
        return entry


def _renamed(built: Built, first: str, name: str) -> Built:
    """The build of a file named ``first`` as the build of its copy ``name``."""
    arch, fills, err = built
    if arch is not None and arch.name == first != name:
        arch = replace(arch, name=name)
    if err is not None and err.source == first != name:
        err = _with_source(err, name)
    return arch, fills, err


def _with_source(err: SlotdiffError, source: str) -> SlotdiffError:
    """A copy of ``err`` (its class and attributes) naming ``source``."""
    new = err.__class__.__new__(err.__class__)
    new.__dict__.update(vars(err))
    new.source = source
    new.args = (new.line(),)
    return new


class Document:
    """A config file (or its version at a git revision) read lazily, stage by stage."""

    def __init__(
        self,
        name: str,
        text: bytes,
        location: str | None = None,
        builds: Builds | None = None,
        sidecar: tuple[str, bytes | SlotdiffError] | None = None,
    ) -> None:
        self.name = name  # as the user wrote it; every diagnostic names it
        self.text = text
        # (path, bytes or why unreadable) of ModelOpt's hf_quant_config.json beside a
        # config.json: its scheme prices the weights when the config states none (as
        # ``slotdiff CONFIG`` reads it); a file that cannot be read is then an SD103
        self.sidecar = sidecar
        self.location = location or name
        self._costs: dict[Any, Any] = {}
        self._builds = builds  # shared by the files of one run: identical bytes read once

    @cached_property
    def _copies(self) -> dict[str, Any] | None:
        return None if self._builds is None else self._builds.entry(self)

    def _stage(self, stage: str, compute: Any) -> Any:
        """``compute()``, or what it gave for an identical file earlier in the run."""
        entry = self._copies
        if entry is None:
            return compute()
        if stage not in entry:
            entry[stage] = compute()
        return entry[stage]

    # ------------------------------------------------------------------ JSON

    @cached_property
    def _loaded(self) -> tuple[Any, bool, JSONInputError | None]:
        return self._stage("loaded", self._load)

    def _load(self) -> tuple[Any, bool, JSONInputError | None]:
        hook = _Duplicates()
        try:
            # The caps (size, depth, key count) hold before json builds anything.
            text = decode(self.text)
            check_limits(text)
        except JSONInputError as err:
            return None, False, err
        try:
            value = json.loads(text, object_pairs_hook=hook, parse_int=parse_int)
        except (ValueError, RecursionError):
            # Let jsonpos say what is wrong and where (it owns the messages and the caps).
            try:
                parse(self.text)
            except JSONInputError as err:
                return None, False, err
            return None, False, JSONInputError("invalid JSON", 1, 1)
        if not isinstance(value, dict):
            return None, False, JSONInputError(f"top level is {json_kind(value)}, not a JSON object", 1, 1)
        return value, hook.seen, None

    @property
    def error(self) -> JSONInputError | None:
        """Why the bytes are not a JSON object (None when they are)."""
        return self._loaded[2]

    @property
    def data(self) -> dict[str, Any] | None:
        return self._loaded[0]

    @property
    def has_duplicates(self) -> bool:
        return self._loaded[1]

    @cached_property
    def parsed(self) -> Parsed:
        """Values with key positions and duplicate keys (jsonpos); computed when first needed."""
        return self._stage("parsed", self._parse)

    def _parse(self) -> Parsed:
        try:
            return parse(self.text)
        except JSONInputError:  # within json's limits but over jsonpos's caps: no positions
            return Parsed(self.data)

    def where(self, path: KeyPath) -> tuple[int, int]:
        return self.parsed.where(path)

    # ------------------------------------------------------------ schema layer

    @cached_property
    def raw(self) -> RawConfig:
        data = self.data
        assert data is not None
        return RawConfig(
            name=self.name, data=data, parsed=Parsed(data), origin="file", location=self.location
        )

    @cached_property
    def _built(self) -> Built:
        built = self._stage("built", self._build)
        return built if self._copies is None else _renamed(built, self._copies["name"], self.name)

    def _build(self) -> Built:
        # Fills are part of the build: reading them refuses what the schema layer lets
        # through (an unknown dtype, a broken quantization_config), and a rule that needs
        # the architecture may rely on its fills.
        try:
            raw = self.raw
            if self.sidecar is not None and not states_quantization(raw.data):
                where, body = self.sidecar
                if isinstance(body, SlotdiffError):
                    raise body
                raw = with_sidecar(raw, body, where)
            arch = build(raw)
            return arch, fill_slots(arch), None
        except SlotdiffError as err:
            return None, None, err

    @property
    def arch(self) -> Architecture | None:
        return self._built[0]

    @property
    def build_error(self) -> SlotdiffError | None:
        return self._built[2]

    @cached_property
    def fields(self) -> Mapping[str, Value]:
        """Resolved canonical fields; when the build failed, each field on its own.

        A field whose value the schema layer rejects is UNKNOWN here (SD102/SD103 report it),
        so value rules still check everything else in the file.
        """
        if self.arch is not None:
            return self.arch.fields

        res = Resolver(self.raw)
        for name in keymap()["fields"]:
            try:
                res.resolve(name)
            except SlotdiffError:
                res.values[name] = UNKNOWN
        return res.values

    def value(self, name: str) -> Any:
        val = self.fields.get(name, UNKNOWN)
        return val.value

    def given(self, name: str) -> bool:
        """The field is written in the file (under its name or an alias), not defaulted."""
        val = self.fields.get(name, UNKNOWN)
        return val.how in ("explicit", "alias") and val.value is not None

    def key_of(self, name: str) -> KeyPath:
        """Key path of a field as written, or () when it is not written."""
        val = self.fields.get(name, UNKNOWN)
        if val.how in ("explicit", "alias") and val.keys:
            return key_path(val.keys[0])
        return ()

    @property
    def text_path(self) -> tuple[str, ...]:
        return self.raw.text_path

    @property
    def text_config(self) -> Mapping[str, Any]:
        return self.raw.text

    # ------------------------------------------------------------- fills, cost

    @property
    def fills(self) -> Any:
        assert self.arch is not None
        return self._built[1]

    def cost(self, workload: Any) -> Any:
        """The cost pass under ``workload`` (cached per workload); raises SlotdiffError."""
        if workload not in self._costs:
            assert self.arch is not None
            self._costs[workload] = cost_of(self.arch, workload)
        return self._costs[workload]


def read(path: Path, name: str, builds: Builds | None = None) -> Document:
    """Read a file for linting (a config.json with ModelOpt's hf_quant_config.json beside it);
    SlotdiffError when the config cannot be read at all."""
    side = path.parent / QUANT_FILE
    sidecar = None
    if path.name == "config.json" and (side.exists() or side.is_symlink()):
        try:
            sidecar = (str(side), read_capped(side, str(side), MAX_BYTES))
        except SlotdiffError as err:  # reported only where config.json states no scheme
            sidecar = (str(side), err)
    return Document(name, read_bytes(path, name), str(path), builds, sidecar)
