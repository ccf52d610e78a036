"""A model_type slotdiff does not know, read as the known model_type whose design it has.

A renamed or remote-code model_type (a Qwen3-MoE config under a new name) brings no facts of
its own, so the facets a config cannot state (QK-norm, norm placement, biases) would fall back
to defaults and classify it as another family. Each known family's model_type is tried in the
order of how many structural key names the config shares with it (Jaccard, against the config
class's keys in schemas/defaults.json and the keys the family's data file names); the first
whose facts make the config land exactly on that family's fingerprint is used: the slots are
filled with the same facets as a known model_type's, every borrowed fact marked as assumed.
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

TRIED = 8  # model_types tried, best key match first
MIN_SCORE = 0.5  # fewer shared key names than this: not the same family whatever the design
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


def ranked(text: Mapping[str, object]) -> list[tuple[float, str]]:
    """Known model_types by the share of structural key names they have in common with ``text``."""
    mine = _keys(str(k) for k in text)
    scores = [(len(mine & theirs) / len(mine | theirs), mt) for mt, theirs in _candidates() if mine | theirs]
    return sorted((s for s in scores if s[0] >= MIN_SCORE), key=lambda s: (-s[0], s[1]))[:TRIED]


def choose_donor(raw: RawConfig, arch: Architecture) -> Architecture | None:
    """``raw`` read as the known model_type whose facts make it its family's design, or None."""
    if arch.known_model_type:
        return None
    home = {mt: fam for fam in families() for mt in fam.model_types}
    for _, mt in ranked(raw.text):
        try:
            candidate = build(raw, mt)
        except SlotdiffError:
            continue  # the config is not readable as this model_type
        if candidate.donor and fingerprint(fill_slots(candidate)) == home[mt].fingerprint:
            return candidate
    return None
