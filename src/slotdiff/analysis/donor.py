"""A model_type slotdiff does not know, read as the known model_type whose design it has.

A renamed or remote-code model_type (a Qwen3-MoE config under a new name) brings no facts of
its own, so the facets a config cannot state (QK-norm, norm placement, biases) would fall back
to defaults and classify it as another family. Each known family's model_type is tried in the
order of how many of the config's structural key names it knows (against the config class's
keys in schemas/defaults.json and the keys the family's data file names); among
those that fit about equally well, the one whose facts make the config land exactly on a known
family's fingerprint while changing the fewest facets of the plain reading is used: the
slots are filled with the same facets as a known model_type's, every borrowed fact marked as
assumed (the donor's config-class defaults are never borrowed: a key the config leaves out
stays unknown).
No family reproduces itself: no donor, and the config is read by common key names as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache

from ..core.errors import SlotdiffError
from ..read.source import RawConfig
from ..schema.arch import Architecture
from ..schema.build import build
from ..schema.keymap import model_type_spec, structure_free_keys, transformers_defaults
from ..slots.classify import families, fingerprint
from ..slots.fills import fill_slots
from .coverage import transformers_types

TRIED = 8  # model_types tried, best key match first
MIN_SCORE = 0.6  # the config's structural keys a model_type must know, at least this share
TIE = 0.05  # key matches this close to the best are equally plausible
# transformers 5 folds rope_theta and rope_scaling into rope_parameters: one key for matching
_ROPE = frozenset({"rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor"})


def _keys(names: Iterable[str]) -> frozenset[str]:
    free = structure_free_keys("")
    out = {n for n in names if n not in free}
    return frozenset((out - _ROPE) | {"rope"} if out & _ROPE else out)


@cache
def _candidates() -> tuple[tuple[str, frozenset[str]], ...]:
    """(model_type, its key names) for every known family's model_type with a data file."""
    out: dict[str, frozenset[str]] = {}
    for fam in families():
        for mt in fam.model_types:
            spec = model_type_spec(mt)
            if spec is None or mt in out:
                continue
            named = {a.split(".")[0] for aliases in spec.get("aliases", {}).values() for a in aliases}
            named |= set(spec.get("reads", ())) | set(spec.get("defaults", {}))
            out[mt] = _keys({*transformers_defaults().get(mt, {}), *named})
    return tuple(sorted(out.items()))


def ranked(text: Mapping[str, object]) -> list[tuple[float, float, str]]:
    """(share of the config's structural key names the model_type knows, Jaccard, model_type),
    the most plausible first: those within TIE of the best share, at most TRIED of them."""
    mine = _keys(str(k) for k in text)
    if not mine:
        return []
    scores = sorted(
        (
            (len(mine & theirs) / len(mine), len(mine & theirs) / len(mine | theirs), mt)
            for mt, theirs in _candidates()
        ),
        key=lambda s: (-s[0], -s[1], s[2]),
    )
    if not scores or scores[0][0] < MIN_SCORE:
        return []
    return [s for s in scores if scores[0][0] - s[0] <= TIE][:TRIED]


def choose_donor(raw: RawConfig, arch: Architecture) -> Architecture | None:
    """``raw`` read as the known model_type whose facts make it its family's design, or None.

    Among the model_types whose keys fit the config about equally well, the one that makes it a
    known family's exact design and changes the fewest facets of the plain reading wins (a plain
    Llama config fits OLMo 2's keys as well as Llama's: Llama's reading changes nothing). Only
    for a model_type transformers does not know either (renamed, remote code): one it builds
    is read by common key names, which the conformance harness checks.
    """
    if arch.known_model_type or arch.model_type in transformers_types():
        return None
    known = {fam.fingerprint for fam in families()}
    plain = fill_slots(arch)
    best: tuple[int, int, Architecture] | None = None
    for order, (_, _, mt) in enumerate(ranked(raw.text)):
        try:
            candidate = build(raw, mt)
        except SlotdiffError:
            continue  # the config is not readable as this model_type
        fills = fill_slots(candidate)
        if not candidate.donor or fingerprint(fills) not in known:
            continue  # its facts make no known design of this config
        changed = sum(1 for f in plain if f.design != fills[f.id].design)
        if best is None or (changed, order) < best[:2]:
            best = (changed, order, candidate)
    return best[2] if best else None
