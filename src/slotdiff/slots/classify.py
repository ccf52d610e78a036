"""Say what a model is: its fingerprint, class label, and nearest known family.

A fingerprint is the tuple of categorical fills (kind + attrs, never sizes) over the slot
facets; two checkpoints of one design share it, a design change alters it. Known
families live in ``fingerprints/<slug>.json`` (written by ``slotdiff fingerprint``).
Precision is left out: an fp8 re-upload of a bf16 model is the same architecture.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from ..constructs import construct, of_fill
from ..core.bundle import bundled, listing
from ..core.errors import SlotdiffError
from ..core.files import read_capped
from ..core.resources import data_dir, load_schema_file
from ..schema.arch import Architecture
from .fill import Fill, Fills, articles, slot_table
from .fill import num as fmt
from .fills import fill_slots

# A family file is a few KiB (its fills, articles and a handful of sizes).
FAMILY_CAP = 1024 * 1024


@cache
def _fingerprint_rule() -> dict[str, str]:
    """Facet → what of its fill enters the fingerprint (from schemas/slots.json)."""
    return {i.id: i.fingerprint for i in slot_table()}


def in_fingerprint(facet: str) -> bool:
    """Whether a facet's fill enters the fingerprint at all (precision does not)."""
    return _fingerprint_rule().get(facet, "none") != "none"


def _canon(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canon(v) for k, v in sorted(value.items())}
    return value


# Fingerprint ids by the repr of their facets: a scan meets the same few designs in
# thousands of configs, and the canonical JSON behind an id is the costly part.
_IDS: dict[str, str] = {}


@dataclass(frozen=True)
class Fingerprint:
    """The categorical fills of one architecture, canonical and hashable."""

    facets: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]  # (facet, kind, attrs)

    @cached_property  # asked for by every verdict, family lookup and report
    def id(self) -> str:
        """Short stable id: sha256 of the canonical JSON, first 12 hex digits."""
        key = repr(self.facets)  # not the tuple: 1 == True == 1.0, their JSON differs
        found = _IDS.get(key)
        if found is None:
            found = "fp-" + hashlib.sha256(self.canonical().encode()).hexdigest()[:12]
            if len(_IDS) < 4096:
                _IDS[key] = found
        return found

    def canonical(self) -> str:
        return json.dumps(
            [[f, k, _canon(dict(a))] for f, k, a in self.facets],
            separators=(",", ":"),
            sort_keys=True,
        )

    @cached_property  # a family's is compared with every config a scan classifies
    def _by_facet(self) -> dict[str, tuple[str, tuple[tuple[str, Any], ...]]]:
        """facet → (kind, attrs)."""
        return {f: (k, at) for f, k, at in self.facets}

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {f: {"kind": k, "attrs": _canon(dict(a))} for f, k, a in self.facets}

    def __getitem__(self, facet: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
        for f, k, a in self.facets:
            if f == facet:
                return k, a
        raise KeyError(facet)


def _freeze(attrs: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    def freeze(v: Any) -> Any:
        return tuple(freeze(x) for x in v) if isinstance(v, list) else v

    return tuple(sorted((k, freeze(v)) for k, v in attrs.items()))


def fingerprint(fills: Fills) -> Fingerprint:
    """The fingerprint of a set of fills (each facet as schemas/slots.json says)."""
    rule = _fingerprint_rule()
    return Fingerprint(
        tuple(
            (f.id, f.kind if rule[f.id] == "kind+attrs" else "*", f.attrs)
            for f in fills
            if rule[f.id] != "none"
        )
    )


def fingerprint_from_dict(fills: Mapping[str, Mapping[str, Any]]) -> Fingerprint:
    """Rebuild a Fingerprint from a family file's ``fills`` object."""
    order = [i.id for i in slot_table() if i.fingerprint != "none"]
    return Fingerprint(
        tuple((f, fills[f]["kind"], _freeze(fills[f].get("attrs", {}))) for f in order if f in fills)
    )


@dataclass(frozen=True)
class Family:
    """A known architecture family, from ``fingerprints/<slug>.json``."""

    slug: str
    name: str
    model_types: tuple[str, ...]
    fingerprint: Fingerprint
    exemplars: tuple[str, ...]
    label: str


def read_family(path: Path, check: bool = True) -> dict[str, Any]:
    """A family file's JSON (capped, regular files only); with ``check``, validated against
    fingerprint.schema.json, so a user's folder (``scan --fingerprints``) holding a FIFO, a
    huge or a malformed file is one line naming it, never a hang or a KeyError."""
    try:
        data = json.loads(read_capped(path, str(path), FAMILY_CAP))
    except (ValueError, RecursionError) as err:
        raise SlotdiffError(str(path), f"not a family file: not JSON ({err})") from err
    if check:
        import jsonschema  # lazy: heavy, and only a user's own folder needs it

        schema = load_schema_file("fingerprint.schema.json")
        error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
        if error is not None:
            where = "/".join(str(x) for x in error.absolute_path) or "top level"
            raise SlotdiffError(str(path), f"not a family file: {where}: {error.message[:200]}")
    return data


def families(folder: str | Path | None = None) -> tuple[Family, ...]:
    """Every known family in ``folder`` (default: the fingerprints/ data set), sorted by slug."""
    if folder is None and (names := listing("fingerprints")) is not None:
        # The bundle's families, unless files were added or removed since it was built (a
        # scan's proposals written into the data set): then the folder itself, as below.
        here = sorted(n for n in os.listdir(data_dir("fingerprints")) if n.endswith(".json"))
        if here == names:
            return _bundled_families(tuple(names))
    where = Path(folder) if folder is not None else data_dir("fingerprints")
    # Re-read when a file is added or changed (a scan may have just written proposals).
    files = []
    for p in sorted(where.glob("*.json")):
        try:
            info = p.stat()
        except OSError as err:
            raise SlotdiffError(str(p), f"cannot read: {err.strerror or err}") from err
        files.append((p.name, info.st_mtime_ns, info.st_size))
    return _families_in(str(where), tuple(files), folder is not None)


def _family(stem: str, data: Mapping[str, Any]) -> Family:
    return Family(
        stem,
        data["name"],
        tuple(data["model_types"]),
        fingerprint_from_dict(data["fills"]),
        tuple(data.get("exemplars", [])),
        data.get("label", ""),
    )


@cache
def _families_in(folder: str, files: tuple[tuple[str, int, int], ...], check: bool) -> tuple[Family, ...]:
    return tuple(_family(Path(name).stem, read_family(Path(folder) / name, check)) for name, _, _ in files)


@cache
def _bundled_families(names: tuple[str, ...]) -> tuple[Family, ...]:
    """The data set's families from the knowledge bundle (validated when it was built)."""
    return tuple(_family(Path(name).stem, bundled(f"fingerprints/{name}")) for name in names)


def distance(a: Fingerprint, b: Fingerprint) -> tuple[int, tuple[str, ...]]:
    """Number of facets whose design differs, and which."""
    da, db = a._by_facet, b._by_facet
    differ = tuple(f for f in dict.fromkeys([*da, *db]) if da.get(f) != db.get(f))
    return len(differ), differ


@dataclass(frozen=True)
class Classification:
    """Class label, fingerprint, nearest family and what differs from it."""

    label: str
    fingerprint: Fingerprint
    family: Family | None  # nearest
    distance: int | None
    differs: tuple[str, ...]
    is_new: bool
    # the model_type is not one slotdiff knows (renamed, remote code): a known design under a
    # new name is "nearest <family>, new model_type"
    new_model_type: bool = False
    read_as: str | None = None  # the known model_type whose facts it was read with

    def to_dict(self) -> dict[str, Any]:
        fam = self.family
        return {
            "label": self.label,
            "fingerprint": self.fingerprint.id,
            "family": fam.name if fam and not self.is_new else None,
            "nearest": None
            if fam is None
            else {
                "family": fam.name,
                "slug": fam.slug,
                "distance": self.distance,
                "differs": [{"facet": f, "article": _article(f)} for f in self.differs],
            },
            "new_architecture": self.is_new,
            "new_model_type": self.new_model_type,
            "read_as": self.read_as,
        }


def _article(facet: str) -> str:
    return next(i.article for i in slot_table() if i.id == facet)


def nearest(
    fp: Fingerprint, model_type: str | None = None, known: Sequence[Family] | None = None
) -> tuple[Family | None, int, tuple[str, ...]]:
    """The closest of ``known`` (default: every family), ties broken by model_type, then slug."""
    best: tuple[int, int, str] | None = None
    found: tuple[Family | None, int, tuple[str, ...]] = (None, 0, ())
    for fam in families() if known is None else known:
        d, diff = distance(fp, fam.fingerprint)
        key = (d, 0 if model_type in fam.model_types else 1, fam.slug)
        if best is None or key < best:
            best, found = key, (fam, d, diff)
    return found


def num(x: Any) -> str:
    return fmt(x)


def label(fills: Fills) -> str:
    """One-line class label, e.g. ``MoE 128×top-8 · GQA 32/4 · QK-norm · RoPE θ=1e6 · SwiGLU``."""
    parts: list[str] = []
    ex, mixer, kv = fills["ffn.experts"], fills["attention.mixer"], fills["attention.kv"]
    if ex.kind == "moe":
        moe = f"MoE {ex.size('experts')}×top-{ex.size('top_k')}"
        if ex.attr("shared"):
            moe += f"+{ex.size('shared_experts') or 1}s"
        parts.append(moe)
    elif ex.kind == "dense":
        parts.append("Dense")
    if mixer.kind != "softmax":
        names = "/".join(m.replace("_", "-") for m in mixer.attr("mixers", ()))
        if mixer.kind in ("linear-hybrid", "ssm-hybrid"):
            parts.append(f"Hybrid {names} {mixer.size('recurrent_layers')}:{mixer.size('attention_layers')}")
        else:
            mech = construct(names)  # one mechanism throughout: its name ("Mamba-2")
            parts.append(mech.label if mech else names)
    if mech := of_fill(kv.kind):
        parts.append(mech.short(kv))
    elif kv.kind in ("gqa", "mqa"):
        parts.append(f"{kv.kind.upper()} {kv.size('n_heads')}/{kv.size('n_kv_heads')}")
    elif kv.kind == "mha":
        parts.append(f"MHA {kv.size('n_heads')}")
    rng = fills["attention.range"]
    if rng.kind == "sliding":
        parts.append(f"SWA {rng.size('window')}")
    elif rng.kind == "interleave":
        parts.append(
            f"local {rng.size('window')}/global {rng.size('local_layers')}:{rng.size('global_layers')}"
        )
    elif rng.kind == "chunked":
        parts.append(f"chunked {rng.size('chunk')}")
    elif rng.kind == "sparse":
        parts.append(f"DSA top-{rng.size('index_topk')}")
    if rng.attr("sinks"):
        parts.append("sinks")
    if fills["attention.qk_norm"].kind == "qk-norm":
        parts.append("QK-norm")
    pos = fills["position.encoding"]
    if pos.kind in ("rope", "mrope"):
        text = ("M-RoPE" if pos.kind == "mrope" else "RoPE") + f" θ={num(pos.size('theta'))}"
        if pos.attr("nope_layers"):
            text += "+NoPE"
        parts.append(text)
    elif not (pos.kind == "none" and kv.kind == "none"):  # pure SSMs have no position scheme
        parts.append(
            {
                "learned": "learned pos",
                "alibi": "ALiBi",
                "none": "NoPE",
                "sinusoidal": "sinusoidal pos",
                "relative": "relative pos bias",
            }.get(pos.kind, pos.kind)
        )
    act = fills["ffn.activation"]
    if act.kind != "none":
        parts.append(act.detail.split(",")[0])
    norm = fills["norm.kind"]
    placement = norm.attr("placement")
    parts.append(
        ("RMSNorm" if norm.kind == "rmsnorm" else "LayerNorm")
        + ("" if placement == "pre" else f" {placement}")
    )
    if fills["objective.target"].kind == "mtp":
        parts.append(f"MTP×{fills['objective.target'].size('mtp_modules')}")
    mod = fills["modality.input"]
    if mod.kind != "text":
        source = mod.kind.split("-")[0]  # vision, or the input a multimodal file names (protein)
        parts.append(source + " " + ("x-attn" if "cross" in mod.kind else "tokens"))
    return " · ".join(parts)


def classify(arch: Architecture, fills: Fills | None = None) -> Classification:
    """Classify an architecture against the known families."""
    fills = fills or fill_slots(arch)
    fp = fingerprint(fills)
    fam, d, diff = nearest(fp, arch.model_type)
    return Classification(
        label(fills),
        fp,
        fam,
        d if fam else None,
        diff,
        fam is None or d > 0,
        new_model_type=not arch.known_model_type,
        read_as=arch.donor,
    )


def slugify(name: str) -> str:
    """A safe file stem for a family name ("Llama 3.1" → "llama-3-1")."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:64] or "family"


def family_record(name: str, model_types: list[str], fills: Fills, exemplars: list[str]) -> dict[str, Any]:
    """The JSON object a fingerprint file holds for a new family."""
    fp = fingerprint(fills)
    distinctive = {f.id: _article(f.id) for f in fills if _fingerprint_rule()[f.id] != "none"}
    return {
        "$schema": "../schemas/fingerprint.schema.json",
        "name": name,
        "id": fp.id,
        "label": label(fills),
        "model_types": list(model_types),
        "exemplars": exemplars,
        "fills": fp.as_dict(),
        "articles": distinctive,
    }


__all__ = [
    "Classification",
    "Family",
    "Fill",
    "Fingerprint",
    "articles",
    "classify",
    "families",
    "fingerprint",
    "label",
    "nearest",
]
