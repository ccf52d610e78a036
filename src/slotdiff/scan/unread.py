"""A new model_type whose config the schema layer cannot read yet: still news, never "skipped".

The report shows the keys slotdiff could not read and the nearest known model_type by key
overlap (Jaccard over config key names, against transformers' config classes in
``schemas/defaults.json``), so a reader can tell "a Llama with renamed keys" from "something
new". Only configs that look like a language model count (an LM pipeline tag, an
``architectures`` entry that is a causal/seq2seq LM head, or a vocabulary size); anything
else stays ``not_lm``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from ..schema.keymap import known_keys, transformers_defaults
from .pipelines import lm_pipeline_tags

_LM_HEAD = re.compile(r"(ForCausalLM|LMHeadModel|ForConditionalGeneration|ForSeq2SeqLM)\Z")
_SUB_CONFIGS = ("text_config", "llm_config", "language_config", "decoder")
MAX_KEYS = 40  # unread keys shown per model


def config_keys(config: Mapping[str, Any]) -> set[str]:
    """Top-level key names plus those of a text sub-config (where an LM's sizes live)."""
    keys = {str(k) for k in config}
    for sub in _SUB_CONFIGS:
        if isinstance(config.get(sub), Mapping):
            keys.update(str(k) for k in config[sub])
    return keys


def looks_like_lm(config: Mapping[str, Any], pipeline_tag: str | None) -> bool:
    """A config is an LM's when its tag, its architectures or its vocabulary say so."""
    if pipeline_tag in lm_pipeline_tags():
        return True
    archs = config.get("architectures")
    if isinstance(archs, list) and any(isinstance(a, str) and _LM_HEAD.search(a) for a in archs):
        return True
    return "vocab_size" in config_keys(config)


@cache
def _type_keys() -> tuple[tuple[str, frozenset[str]], ...]:
    out = []
    for model_type, defaults in sorted(transformers_defaults().items()):
        if model_type.startswith("_") or not isinstance(defaults, Mapping) or len(defaults) < 3:
            continue
        out.append((model_type, frozenset(defaults)))
    return tuple(out)


def nearest_by_keys(keys: set[str]) -> dict[str, Any] | None:
    """The known model_type whose config class shares the most keys (Jaccard), or None."""
    best: tuple[float, int, str, frozenset[str]] | None = None
    for model_type, theirs in _type_keys():
        shared = len(keys & theirs)
        if not shared:
            continue
        score = shared / len(keys | theirs)
        key = (score, shared, model_type, theirs)
        if (
            best is None
            or (score, shared) > (best[0], best[1])
            or ((score, shared) == (best[0], best[1]) and model_type < best[2])
        ):
            best = key
    if best is None:
        return None
    score, shared, model_type, theirs = best
    return {
        "model_type": model_type,
        "overlap": round(score, 3),
        "shared": shared,
        "only_here": sorted(keys - theirs)[:MAX_KEYS],
    }


def unread_keys(config: Mapping[str, Any]) -> list[str]:
    """Config keys the key map neither reads nor knowingly ignores."""
    known = known_keys()
    return sorted(k for k in config_keys(config) if k not in known)[:MAX_KEYS]


def parse_object(data: bytes) -> dict[str, Any] | None:
    """The config as a dict, or None when it is not a JSON object (already capped by the caller)."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
