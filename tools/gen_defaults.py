"""Regenerate schemas/defaults.json: transformers' config defaults per model_type.

A published config may omit keys (LLaVA's text_config gives only a handful); transformers
then uses its config class's defaults. This script records those defaults for the keys
slotdiff reads, so slotdiff can use them without importing transformers. Run it (with
transformers installed) after upgrading transformers or adding aliases to the key map:

    python tools/gen_defaults.py > schemas/defaults.json
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

os.environ["SLOTDIFF_NO_BUNDLE"] = "1"  # a generator reads the sources, never a bundle made before them

ROOT = Path(__file__).resolve().parent.parent


def read_keys() -> set[str]:
    """Top-level config keys the key map and model_type files read."""
    keymap = json.loads((ROOT / "schemas" / "keymap.json").read_text())
    keys: set[str] = set()
    for spec in keymap["fields"].values():
        keys.update(a.split(".")[0] for a in spec["aliases"])
    for path in (ROOT / "schemas" / "model_types").glob("*.json"):
        spec = json.loads(path.read_text())
        for aliases in spec.get("aliases", {}).values():
            keys.update(a.split(".")[0] for a in aliases)
        keys.update(spec.get("reads", []))
    return keys


def vision_keys() -> dict[str, set[str]]:
    """Keys the vision data files read, per config class (model_type) whose defaults fill them.

    Tower files (schemas/vision_types) read their vision config, filled by the class named
    in ``defaults_from``; composite files (schemas/multimodal) read the top-level config,
    filled by the composite's own class. Only those classes get these keys.
    """
    out: dict[str, set[str]] = {}
    towers = {p.stem: json.loads(p.read_text()) for p in (ROOT / "schemas" / "vision_types").glob("*.json")}
    for spec in towers.values():
        source = spec.get("defaults_from")
        if not source:
            continue
        keys = out.setdefault(source, set())
        while spec is not None:  # the file and the files it extends
            for field in spec.get("fields", {}).values():
                keys.update(a.split(".")[0] for a in field.get("aliases", []))
            spec = towers.get(spec.get("extends", ""))
    for path in (ROOT / "schemas" / "multimodal").glob("*.json"):
        spec = json.loads(path.read_text())
        for model_type in spec.get("model_types", [path.stem]):
            keys = out.setdefault(model_type, set())
            for field in spec.get("fields", {}).values():
                keys.update(a.split(".")[0] for a in field.get("aliases", []))
    return out


def clean(value: Any) -> Any:
    """JSON-safe copy (inf/nan become strings transformers-style; tuples become lists)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def class_defaults(cls: type, config: Any) -> dict[str, Any]:
    """The defaults a config without the key gets, before values derived from other keys.

    Dataclass field defaults are what transformers starts from (``head_dim=None`` is later
    derived from hidden_size and heads; slotdiff derives it the same way). RoPE parameters
    are filled from the class's ``default_theta``, which depends on no other key, so the
    instance's value is the default.
    """
    import dataclasses

    if not dataclasses.is_dataclass(cls):
        return config.to_dict()
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    rope = getattr(config, "rope_parameters", None)
    if rope is not None:
        out["rope_parameters"] = dict(rope)
    return out


def main() -> int:
    import dataclasses

    import transformers
    from transformers import CONFIG_MAPPING, PreTrainedConfig

    keys = read_keys()
    extra = vision_keys()
    base_fields = {f.name for f in dataclasses.fields(PreTrainedConfig)}
    out: dict[str, Any] = {
        "_about": "transformers config-class defaults for the keys slotdiff reads; generated "
        f"by tools/gen_defaults.py from transformers {transformers.__version__}",
        "_transformers_version": transformers.__version__,
    }
    warnings.simplefilter("ignore")
    for model_type in sorted(CONFIG_MAPPING.keys()):
        cls = CONFIG_MAPPING[model_type]
        try:
            config = cls()
        except Exception as err:
            print(f"skip {model_type}: {type(err).__name__}", file=sys.stderr)
            continue
        wanted = keys | extra.get(model_type, set())
        entry = {k: clean(v) for k, v in class_defaults(cls, config).items() if k in wanted}
        # Nested sub-configs read through dotted aliases (DBRX's attn_config.kv_n_heads):
        # a key missing inside them takes the sub-config class's default.
        for name, sub_cls in (getattr(cls, "sub_configs", None) or {}).items():
            if name in keys and isinstance(sub_cls, type):
                try:
                    sub_defaults = class_defaults(sub_cls, sub_cls())
                except Exception as err:
                    print(f"skip {model_type}.{name}: {type(err).__name__}", file=sys.stderr)
                    continue
                own = {k: v for k, v in sub_defaults.items() if k not in base_fields}
                entry[name] = clean(own)
        sub = getattr(config, "sub_configs", None) or {}
        text = getattr(config, "text_config", None)
        if text is not None and hasattr(text, "model_type"):
            entry["_text_model_type"] = text.model_type
        elif "text_config" in sub and hasattr(sub["text_config"], "model_type"):
            entry["_text_model_type"] = sub["text_config"].model_type
        if entry:
            out[model_type] = entry
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
