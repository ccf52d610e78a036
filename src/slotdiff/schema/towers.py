"""Read the vision (and audio) side of a multimodal config: encoder dims and injection kind.

Vision configs vary as much as text ones; their aliases live in the key map under
``vision_fields``. Only what the modality slot and the image cost lines need is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.resources import load_schema_file
from ..read.source import AUDIO_CONFIG_KEYS, VISION_CONFIG_KEYS, RawConfig
from .arch import Value
from .tower_spec import spec_fields


def vision_config_key(data: Mapping[str, Any]) -> str | None:
    """The top-level key holding the vision encoder config, if any."""
    for key in VISION_CONFIG_KEYS:
        if isinstance(data.get(key), Mapping) and data[key]:
            return key
    return None


def audio_config_key(data: Mapping[str, Any]) -> str | None:
    """The top-level key holding an audio encoder config, if any."""
    for key in AUDIO_CONFIG_KEYS:
        if isinstance(data.get(key), Mapping) and data[key]:
            return key
    return None


def read_vision(raw: RawConfig) -> dict[str, Value] | None:
    """Vision encoder fields with provenance, or None for a text-only config.

    Where a multimodal data file describes the model (``vision_spec``), the fields its
    tower, connector and image rule read are added, and win over the generic aliases.
    """

    key = vision_config_key(raw.data)
    if key is None:
        return spec_fields(raw.data, None) or None
    node = raw.data[key]
    table = load_schema_file("keymap.json").get("vision_fields", {})
    out: dict[str, Value] = {"config_key": Value(key, "explicit", (key,))}
    mt = node.get("model_type")
    out["model_type"] = Value(mt, "explicit", (f"{key}.model_type",)) if mt else Value(None, "unknown")
    for name, spec in table.items():
        for scope_key, scope in ((key, node), ("", raw.data)):
            if scope is raw.data and not spec.get("top_level"):
                continue
            for alias in spec["aliases"]:
                if alias in scope and scope[alias] is not None:
                    cited = f"{scope_key}.{alias}" if scope_key else alias
                    out[name] = Value(scope[alias], "explicit", (cited,))
                    break
            if name in out:
                break
    out.update(spec_fields(raw.data, key))
    return out
