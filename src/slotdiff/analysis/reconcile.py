"""The config's parameter count reconciled with what the checkpoint stores, tensor by tensor.

Each stored tensor name (numeric path components written ``N``) is placed in a slot by the
family's naming data, ``schemas/checkpoint_names.json`` (generated from transformers' own
``state_dict`` names); what the naming data does not hold is attributed by
``schemas/checkpoint_formats.json`` (buffers, MTP modules) or reported as unplaced, never
guessed. Every tensor placed and the stored total equal to the cost pass's is a match; when
the totals differ, the slots and the layer numbers say where.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from ..core.resources import load_schema_file
from ..cost.params import ParamCount
from ..read.checkpoint import Lookup, StoredIndex, Unavailable
from ..schema.arch import Architecture
from ..schema.keymap import known_model_types
from .quantized import COMPANIONS, Unpacked, unpack

MATCH, DIFFERS, UNAVAILABLE = "match", "differs", "unavailable"
NOTHING_BESIDE = "no safetensors file or index JSON beside the config"
NAMES_SHOWN = 6  # names listed per difference before "and N more"
_INDEX = re.compile(r"(?<=\.)\d+(?=\.|\Z)|^\d+(?=\.)")
_EXPERT = re.compile(r"(?:^|\.)experts\.(\d+)\.")


@dataclass(frozen=True)
class SlotDifference:
    """Where one slot of the checkpoint disagrees with the config's count."""

    slot: str
    expected_params: int | None  # None: not known (names only)
    stored_params: int | None
    expected_shapes: tuple[str, ...] = ()  # tensor shapes only the config's count has
    stored_shapes: tuple[str, ...] = ()  # tensor shapes only the checkpoint has
    missing_layers: tuple[int, ...] = ()  # layers the config has and the checkpoint lacks here
    extra_layers: tuple[int, ...] = ()  # layers the checkpoint has and the config does not
    names: tuple[str, ...] = ()  # stored names the naming data does not place (slot "unplaced")

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Checkpoint:
    """The reconciliation's result: status, what is stored, and the differences."""

    status: str  # MATCH | DIFFERS | UNAVAILABLE
    why: str | None = None  # for UNAVAILABLE
    source: str | None = None
    where: str | None = None
    shards: int = 0
    shards_read: int = 0
    params_by_dtype: tuple[tuple[str, int], ...] = ()
    bytes_by_dtype: tuple[tuple[str, int], ...] = ()
    stored_params: int | None = None  # model weights (unpacked), attributed tensors apart
    expected_params: int | None = None
    attributed: tuple[tuple[str, int, int], ...] = ()  # (what, tensors, elements)
    differences: tuple[SlotDifference, ...] = ()
    layers: int | None = None  # decoder layers the checkpoint holds
    expected_layers: int | None = None  # the config's
    experts: int | None = None  # routed experts per MoE layer the checkpoint holds
    cached: bool = False
    # Bytes of the model's weights as stored (quantization companions included, attributed
    # tensors apart) and slotdiff's weight bytes for the config's format (None: not given).
    stored_weight_bytes: int | None = None
    expected_weight_bytes: int | None = None

    @property
    def unreadable(self) -> bool:
        """True when a checkpoint was there to compare but could not be read or placed (a
        reader is told why; a lone config with nothing beside it is not news)."""
        return self.status == UNAVAILABLE and self.why != NOTHING_BESIDE

    def sentence(self) -> str:
        """One sentence: which slot differs and by how much (or why nothing was compared)."""
        if self.status == UNAVAILABLE:
            return f"checkpoint not compared: {self.why}"
        if self.status == MATCH and self.stored_params is None:
            return "the checkpoint's tensor names (an index JSON: no shapes) match the slots and layers"
        if self.status == MATCH:
            return f"the checkpoint's {self.stored_params:,} stored parameters match, every tensor placed"
        d = self.differences[0]
        more = f" (and {len(self.differences) - 1} more differences)" if len(self.differences) > 1 else ""
        if d.slot == "layers":
            what = f"holds {self.layers} layers where the config describes {self.expected_layers}"
            if self.stored_params is not None and self.expected_params is not None:
                what += f" ({self.stored_params - self.expected_params:+,} parameters)"
        elif d.slot == "unplaced":
            what = f"stores tensors this family's naming data does not hold, e.g. {d.names[0]}"
        elif d.expected_params is not None and d.stored_params is not None:
            diff = d.stored_params - d.expected_params
            what = (
                f"stores {abs(diff):,} parameters {'more' if diff > 0 else 'fewer'} in {d.slot} "
                "than the config describes"
            )
        else:
            what = f"{'has no' if d.expected_params else 'has'} {d.slot} tensors where the config describes "
            what += "some" if d.expected_params else "none"
        return f"the checkpoint {what}{more}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status}
        if self.status == UNAVAILABLE:
            out["why"] = self.why
            return out
        out.update(
            source=self.source,
            where=self.where,
            cached=self.cached,
            shards=self.shards,
            shards_read=self.shards_read,
            stored_params=self.stored_params,
            expected_params=self.expected_params,
            params_by_dtype=dict(self.params_by_dtype),
            bytes_by_dtype=dict(self.bytes_by_dtype),
            attributed=[{"what": w, "tensors": n, "elements": e} for w, n, e in self.attributed],
            weight_bytes={"stored": self.stored_weight_bytes, "expected": self.expected_weight_bytes},
            layers=self.layers,
            expected_layers=self.expected_layers,
            experts=self.experts,
            differences=[d.to_dict() for d in self.differences],
            sentence=self.sentence(),
        )
        return out


@cache
def _names() -> dict[str, Any]:
    return load_schema_file("checkpoint_names.json")["model_types"]


@cache
def _formats() -> dict[str, Any]:
    return load_schema_file("checkpoint_formats.json")


@cache
def _attributions() -> tuple[tuple[re.Pattern[str], str, str], ...]:
    return tuple((re.compile(a["pattern"]), a["as"], a["what"]) for a in _formats()["attributions"])


def normalise(name: str) -> str:
    """Every numeric path component as ``N`` (layers, experts), as the naming data writes them."""
    return _INDEX.sub("N", name)


def naming(model_type: str) -> dict[str, Any] | None:
    """The family's naming data (``prefix``, ``names``), or None when there is none. A
    model_type transformers lacks (remote code) that the key map ``extends`` from one it has
    (Kimi K2 from DeepSeek-V3) is named as that parent."""
    seen = set()
    while model_type and model_type not in seen:
        if model_type in _names():
            return _names()[model_type]
        seen.add(model_type)
        spec = load_schema_file(f"model_types/{model_type}.json") if model_type in known_model_types() else {}
        model_type = spec.get("extends")
    return None


def _layer(name: str) -> int | None:
    m = _INDEX.search(name)
    return int(m.group()) if m else None


class _Tally:
    """Stored tensors sorted into slots, attributions and unplaced names."""

    def __init__(self) -> None:
        self.params: dict[str, int] = defaultdict(int)
        self.shapes: dict[str, Counter[tuple[int, ...]]] = defaultdict(Counter)
        self.layers: dict[str, set[int]] = defaultdict(set)
        self.attributed: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.unplaced: list[str] = []
        self.experts: set[int] = set()
        self.fused_experts = 0
        self.weight_bytes = 0  # placed tensors and quantization companions


def _place(arch: Architecture, table: dict[str, Any], name: str) -> str | None:
    """The slot of the stored tensor ``name`` (or ``attr:<what>``), None when nothing places it."""
    n_layers, mtp = arch.n_layers, arch.get("mtp_layers") or 0
    layer = _layer(name)
    if mtp and layer is not None and n_layers <= layer < n_layers + mtp and ".layers." in f".{name}":
        return "attr:multi-token prediction modules"
    names, prefix = table["names"], table.get("prefix") or ""
    norm = normalise(name)
    slot = names.get(norm) or (names.get(f"{prefix}.{norm}") if prefix else None)
    if slot is None and prefix and norm.startswith(prefix + "."):
        slot = names.get(norm[len(prefix) + 1 :])
    if slot == "buffer":
        return "attr:persistent buffers"
    if slot is not None:
        return slot
    for rx, kind, what in _attributions():
        if rx.search(name):
            return f"attr:{what}" if kind != "mtp" else "attr:multi-token prediction modules"
    return None


def _tally(arch: Architecture, table: dict[str, Any], tensors: tuple[Unpacked, ...]) -> _Tally:
    tally = _Tally()
    layer_slots = set(_formats()["layer_slots"])
    for u in tensors:
        slot = f"attr:{u.attributed}" if u.attributed else _place(arch, table, u.name)
        if slot is None:
            tally.unplaced.append(u.name)
            continue
        if slot.startswith("attr:"):
            tally.attributed[slot[5:]][0] += 1
            tally.attributed[slot[5:]][1] += u.params or 0
            if u.attributed == COMPANIONS:
                tally.weight_bytes += u.tensor.nbytes or 0
            continue
        tally.weight_bytes += u.tensor.nbytes or 0
        tally.params[slot] += u.params or 0
        if u.shape is not None:
            tally.shapes[slot][u.shape] += 1
        layer = _layer(u.name)
        if slot in layer_slots and layer is not None:
            tally.layers[slot].add(layer)
        if slot == "experts":
            m = _EXPERT.search(u.name)
            if m:
                tally.experts.add(int(m.group(1)))
            elif u.shape is not None and len(u.shape) == 3:
                tally.fused_experts = max(tally.fused_experts, u.shape[0])
    return tally


def _shape_text(shape: tuple[int, ...]) -> str:
    return "×".join(str(d) for d in shape) if shape else "scalar"


def _expected_shapes(params: ParamCount, slot: str) -> Counter[tuple[int, ...]]:
    out: Counter[tuple[int, ...]] = Counter()
    for t in params.tensors:
        if t.slot == slot:
            out[(t.rows, t.cols) if t.cols > 1 else (t.rows,)] += t.count
    return out


def _shape_diff(
    params: ParamCount, slot: str, stored: Counter[tuple[int, ...]]
) -> tuple[tuple[str, ...], ...]:
    """Shapes (by element count, so a transposed or fused layout is the same) only one side has."""
    want: Counter[int] = Counter()
    for shape, n in _expected_shapes(params, slot).items():
        want[_numel(shape)] += n
    have: Counter[int] = Counter()
    for shape, n in stored.items():
        have[_numel(shape)] += n
    only_want = want - have
    only_have = have - want
    exp = tuple(
        f"{_shape_text(s)} ×{n}" for s, n in _expected_shapes(params, slot).items() if _numel(s) in only_want
    )
    got = tuple(f"{_shape_text(s)} ×{n}" for s, n in stored.items() if _numel(s) in only_have)
    return exp[:NAMES_SHOWN], got[:NAMES_SHOWN]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def reconcile(
    arch: Architecture, params: ParamCount | None, lookup: Lookup | None, weight_bytes: int | None = None
) -> Checkpoint:
    """Compare ``params`` (the cost pass's count of ``arch``) with the checkpoint ``lookup``;
    ``weight_bytes``: the cost pass's weight bytes in the config's format, reported beside the
    stored bytes (a checkpoint saved in another dtype differs there, not in its parameters)."""
    if lookup is None:
        return Checkpoint(UNAVAILABLE, NOTHING_BESIDE)
    if isinstance(lookup, Unavailable):
        return Checkpoint(UNAVAILABLE, lookup.why)
    model_type = arch.config_model_type or arch.model_type
    table = naming(model_type)
    if table is None:
        return Checkpoint(UNAVAILABLE, f"no naming data for model_type {model_type!r} (not in transformers)")
    if params is None:
        return Checkpoint(UNAVAILABLE, "the config's parameters could not be counted")
    unpacked = unpack(lookup.tensors, arch)
    tally = _tally(arch, table, unpacked)
    return _verdict(arch, params, lookup, tally, unpacked, weight_bytes)


def _fold(by_slot: dict[str, Any], together: dict[str, str]) -> dict[str, Any]:
    """``by_slot`` with each slot of ``together`` added into the slot it is compared with."""
    out: dict[str, Any] = {}
    for slot, value in by_slot.items():
        key = together.get(slot, slot)
        out[key] = out[key] + value if key in out else value
    return out


def _slot_diffs(
    params: ParamCount, expected: dict[str, int], tally: _Tally, shapes: bool, excluded: set[str]
) -> list[SlotDifference]:
    """Slots whose stored parameters differ from the count's, when the totals differ.

    Every stored tensor is placed by the naming data, but where one slot ends and the next
    begins is the oracle's part table's reading of transformers' module names, which may
    split a family otherwise than slotdiff's slots (Gemma 4's per-layer input projections are
    ``other``; a tower's merger is vision or connector): equal totals with every tensor placed
    are a match, and the slots only say where unequal totals differ. Names alone (an index
    JSON) show which slots are present: the head (tying) and the experts are compared."""
    together = {k: v for k, v in _formats()["compared_together"].items() if k != "about"}
    expected = {k: v for k, v in _fold(expected, together).items() if k not in excluded}
    stored = {k: v for k, v in _fold(tally.params, together).items() if k not in excluded}
    shapes_by = _fold(tally.shapes, together)
    present = {together.get(k, k) for k in (set(tally.params) | set(tally.shapes) | set(tally.layers))}
    if not shapes:
        watched = _formats()["presence_slots"]
        return [
            SlotDifference(slot, expected.get(slot, 0), None)
            for slot in watched
            if bool(expected.get(slot)) != (slot in present)
        ]
    if sum(stored.values()) == sum(expected.values()):
        return []
    diffs = []
    for slot in [*expected, *sorted(set(stored) - set(expected))]:
        want, have = expected.get(slot, 0), stored.get(slot, 0)
        if have != want:
            exp, got = _shape_diff(params, slot, shapes_by.get(slot, Counter()))
            diffs.append(SlotDifference(slot, want, have, exp, got))
    return diffs


def _verdict(
    arch: Architecture,
    params: ParamCount,
    lookup: StoredIndex,
    tally: _Tally,
    unpacked: tuple[Unpacked, ...],
    weight_bytes: int | None,
) -> Checkpoint:
    shapes = lookup.shapes_known
    expected = dict(params.by_part)
    tied = bool(arch.get("tie_embeddings"))
    if tied and not expected.get("head") and tally.params.get("head") is not None and "head" in tally.shapes:
        # A tied head saved twice: the same tensor as the embedding, not a parameter of its own.
        n = sum(tally.shapes.pop("head").values())
        tally.attributed["a second copy of the tied embedding (lm_head)"] = [n, tally.params.pop("head")]
    elif tied and not shapes and "head" in tally.layers:
        tally.layers.pop("head")
    excluded = {t for t in ("vision", "audio") if any(f"{t} tower" in e for e in params.excluded)}
    diffs: list[SlotDifference] = []
    n_layers = arch.n_layers
    want_layers = set(range(n_layers))
    all_layers = set().union(*tally.layers.values()) if tally.layers else set()
    by_slot = _slot_diffs(params, expected, tally, shapes, excluded)
    # Layer numbers say which layers differ when the totals do (or when only names are known):
    # with equal totals, a numbering of their own (sub-layers, weight-tied repeats) is no difference.
    if all_layers and all_layers != want_layers and (by_slot or not shapes):
        missing, extra = sorted(want_layers - all_layers), sorted(all_layers - want_layers)
        layers = SlotDifference("layers", None, None, missing_layers=tuple(missing[:64]))
        diffs.append(replace(layers, extra_layers=tuple(extra[:64])))
    diffs.extend(by_slot)
    if tally.unplaced:
        diffs.append(SlotDifference("unplaced", 0, None, names=tuple(tally.unplaced[:NAMES_SHOWN])))
    mtp = tally.attributed.get("multi-token prediction modules")
    if shapes and mtp and params.mtp is not None and params.mtp and mtp[1] != params.mtp:
        diffs.append(SlotDifference("mtp", params.mtp, mtp[1]))
    by_dtype: Counter[str] = Counter()
    bytes_by: Counter[str] = Counter()
    for u in unpacked:
        by_dtype[u.tensor.dtype or "?"] += u.tensor.numel or 0
        bytes_by[u.tensor.dtype or "?"] += u.tensor.nbytes or 0
    return Checkpoint(
        DIFFERS if diffs else MATCH,
        source=lookup.source,
        where=lookup.where,
        shards=lookup.shards,
        shards_read=lookup.shards_read,
        params_by_dtype=tuple(sorted(by_dtype.items())) if shapes else (),
        bytes_by_dtype=tuple(sorted(bytes_by.items()))
        if shapes
        else ((("total_size", lookup.total_size),) if lookup.total_size else ()),
        stored_params=sum(tally.params.values()) if shapes else None,
        expected_params=params.total,
        attributed=tuple((w, n, e) for w, (n, e) in sorted(tally.attributed.items())),
        differences=tuple(diffs),
        layers=len(all_layers) or None,
        expected_layers=n_layers,
        experts=len(tally.experts) or tally.fused_experts or None,
        cached=lookup.cached,
        stored_weight_bytes=tally.weight_bytes if shapes else None,
        expected_weight_bytes=weight_bytes,
    )
