"""What a slot holds: a Fill (kind, design attrs, sizes, evidence) per facet, the slot table
from schemas/slots.json, and the evidence collector every facet rule uses."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from ..constructs import softmax
from ..core.resources import load_schema_file
from ..schema.arch import UNKNOWN, Architecture


@dataclass(frozen=True)
class Fill:
    """What one model puts in one slot facet."""

    slot: str
    facet: str
    kind: str
    attrs: tuple[tuple[str, Any], ...] = ()
    sizes: tuple[tuple[str, Any], ...] = ()
    detail: str = ""
    evidence: tuple[tuple[str, Any], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.slot}.{self.facet}"

    @property
    def design(self) -> tuple[str, tuple[tuple[str, Any], ...]]:
        """The categorical part that fingerprints and diffs compare."""
        return (self.kind, self.attrs)

    def attr(self, name: str, default: Any = None) -> Any:
        return dict(self.attrs).get(name, default)

    def size(self, name: str, default: Any = None) -> Any:
        return dict(self.sizes).get(name, default)


@dataclass(frozen=True)
class FacetInfo:
    slot: str
    facet: str
    gpt2: str
    today: str
    article: str
    fingerprint: str = "kind+attrs"  # what enters the fingerprint: kind+attrs | attrs | none

    @property
    def id(self) -> str:
        return f"{self.slot}.{self.facet}"


@cache
def slot_table() -> tuple[FacetInfo, ...]:
    """Every facet in report order, from schemas/slots.json."""
    data = load_schema_file("slots.json")
    return tuple(
        FacetInfo(
            s["slot"], f["facet"], f["gpt2"], f["today"], f["article"], f.get("fingerprint", "kind+attrs")
        )
        for s in data["slots"]
        for f in s["facets"]
    )


@cache
def articles() -> Mapping[str, Mapping[str, str]]:
    return load_schema_file("slots.json")["articles"]


class Collector:
    """Collects evidence (config key → value) for one fill."""

    def __init__(self, arch: Architecture) -> None:
        self.arch = arch
        self.fields = arch.fields  # arch.v without the call: a fill uses a dozen fields
        self.items: dict[str, Any] = {}
        self.notes: list[str] = []

    def use(self, name: str) -> Any:
        val = self.fields.get(name, UNKNOWN)
        if val.keys and val.how in ("explicit", "alias"):
            for key in val.keys:
                self.items[key] = val.value
        elif val.how == "default":
            self.items[val.keys[0] if val.keys else name] = val.value
            self.notes.append(f"{name}: {val.note}")
        elif val.how == "model_type":
            self.notes.append(f"{name}={val.value!r}: {val.note}")
        elif val.how == "derived":
            self.notes.append(f"{name}={val.value!r}: derived as {val.note}")
        elif val.how == "assumed" and self.arch.donor:  # a fact borrowed from a known model_type
            self.notes.append(f"{name}={val.value!r}: {val.note}")
        return val.value

    def fill(
        self,
        facet: str,
        kind: str,
        detail: str,
        attrs: dict[str, Any] | None = None,
        sizes: dict[str, Any] | None = None,
    ) -> Fill:
        slot, _, name = facet.partition(".")
        return made(
            slot=slot,
            facet=name,
            kind=kind,
            attrs=tuple(sorted(attrs.items())) if attrs else (),
            sizes=tuple(sorted(sizes.items())) if sizes else (),
            detail=detail,
            evidence=tuple(self.items.items()),
            notes=tuple(dict.fromkeys(self.notes)) if self.notes else (),
        )


def made(**state: Any) -> Fill:
    """A Fill of every field in ``state``, without ``__init__``'s frozen setattr per field (a
    config makes twenty, each read a few times): what ``Fill(**state)`` gives, for less."""
    new = object.__new__(Fill)
    new.__dict__.update(state)
    return new


def with_evidence(fill: Fill, evidence: tuple[tuple[str, Any], ...]) -> Fill:
    """``dataclasses.replace(fill, evidence=evidence)``, as :func:`made` makes a Fill."""
    return made(**{**fill.__dict__, "evidence": evidence})


def num(x: float | int | None) -> str:
    """Compact numbers for labels: 500000 → 5e5, 150000 → 1.5e5, 4096 → 4096."""
    if x is None:
        return "?"
    if isinstance(x, float) and not x.is_integer():
        return f"{x:g}"
    n = int(x)
    mantissa, exp = f"{n:e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    if n >= 10_000 and len(mantissa.replace(".", "")) <= 3:
        return f"{mantissa}e{int(exp)}"
    return str(n)


# The last layer tuple asked about and its attention layers: the facet rules of one fill
# ask about the same layers nine times. One tuple, replaced whole (safe across threads);
# it holds the layers it answers for, so identity cannot be a recycled id.
_last_attention: tuple[tuple[Any, ...], list[Any]] = ((), [])


def attention_layers(arch: Architecture) -> list[Any]:
    """Layers that run softmax attention (their own, or a weight-shared block's); the list is
    shared by the callers asking about the same layers, which only read it."""
    global _last_attention
    layers = arch.layers
    last = _last_attention
    if last[0] is layers:
        return last[1]
    soft = {mixer: softmax(mixer) for mixer in {s.mixer for s in layers}}
    out = [s for s in layers if soft[s.mixer] or s.shared_block is not None]
    _last_attention = (layers, out)
    return out


@dataclass(frozen=True)
class Fills:
    """All fills of one architecture, in slot-table order."""

    items: tuple[Fill, ...] = field(default_factory=tuple)
    # config keys slotdiff read that no facet claims (slots/evidence.py): never shown, so the
    # coverage line says so instead of "every config key was read"
    unplaced: tuple[str, ...] = ()
    # config keys no facet claims that the model_type's ``unsupported`` refusal cites: recognised
    # (the refusal names what they build), so neither shown in a facet nor unplaced
    refused: tuple[str, ...] = ()

    @cached_property
    def _by_id(self) -> dict[str, Fill]:
        return {f.id: f for f in self.items}

    def __getitem__(self, facet_id: str) -> Fill:
        return self._by_id[facet_id]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.items)
