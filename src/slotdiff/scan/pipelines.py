"""Pipeline tags as data (``schemas/scan.json``): the ``--pipeline-tag`` presets and the tags
that are never a language model's (and, from the same file, the stored dtypes after which a
scan asks for ModelOpt's hf_quant_config.json).

``--pipeline-tag lm`` lists every tag the Hub gives a language model (``text-generation``,
``image-text-to-text``, ``any-to-any``, ``audio-text-to-text``, ...), so a weekly scan does not
miss the multimodal LMs; a comma-separated list names tags one by one.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ..core.errors import UsageError
from ..core.resources import load_schema_file

_TAG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")


@cache
def _data() -> dict[str, Any]:
    return load_schema_file("scan.json")


def presets() -> dict[str, tuple[str, ...]]:
    """Preset name → its pipeline tags."""
    return {name: tuple(p["tags"]) for name, p in _data()["pipeline_presets"].items()}


@cache
def lm_pipeline_tags() -> frozenset[str]:
    return frozenset(presets()["lm"])


@cache
def not_lm_pipeline_tags() -> frozenset[str]:
    return frozenset(_data()["not_lm_pipeline_tags"])


@cache
def quantization_file_dtypes() -> frozenset[str]:
    """Safetensors dtypes of a quantized checkpoint: stored, with no quantization_config in
    config.json, they send the scan for hf_quant_config.json (``schemas/scan.json``)."""
    return frozenset(_data()["quantization_file_dtypes"]["dtypes"])


@cache
def size_names() -> dict[str, str]:
    """``facet.size`` → the short name a report gives it (``layers``, ``FFN width``)."""
    return dict(_data()["size_names"])


def expand_pipeline_tags(spec: str | None) -> tuple[str, ...]:
    """``lm`` → its tags; ``a,b`` → (a, b); None → () (no filter). Bad names are a usage error."""
    if spec is None:
        return ()
    out: list[str] = []
    for part in spec.split(","):
        name = part.strip()
        if not name:
            continue
        if name in presets():
            out.extend(presets()[name])
        elif _TAG.fullmatch(name):
            out.append(name)
        else:
            raise UsageError(f"--pipeline-tag {spec!r}: {name!r} is not a pipeline tag or a preset")
    if not out:
        raise UsageError(f"--pipeline-tag {spec!r}: names no pipeline tag")
    return tuple(dict.fromkeys(out))
