"""Regenerate schemas/defaults.json: transformers' config defaults per model_type.

A published config may omit keys (LLaVA's text_config gives only a handful); transformers
then uses its config class's defaults. This script records those defaults for the keys
slotdiff reads, so slotdiff can use them without importing transformers. Run it (with
transformers installed) after upgrading transformers or adding aliases to the key map.

Besides each class's field defaults it records, per composite class, what the class does when
the file has no ``text_config`` (``_text_absent``: "defaults" — the text sub-config takes its
own class's defaults and flat text keys are ignored — or "flat" — they build it), and the
text sub-config's model_type (``_text_model_type``):

    python tools/gen_defaults.py > schemas/defaults.json
"""

from __future__ import annotations

import copy
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
        for step in spec.get("layers", []):
            keys.update(layer_keys(step))
    return keys


#: Layer-rule arguments that name a config key (a string; an int is a literal count).
KEY_ARGS = frozenset({"key", "unless_key", "period_key", "period", "start", "span", "times", "end"})


def layer_keys(step: Any) -> set[str]:
    """Top-level config keys a layer rule reads directly (``raw_value``: the file's value, else
    the class default): Dory's loop ``times`` (n_recurrent_loops) is a class default a minimal
    file leaves out, like any key a rule reads. The layer attributes a rule sets are no keys."""
    if isinstance(step, list):
        return set().union(*(layer_keys(s) for s in step))
    if not isinstance(step, dict):
        return set()
    out: set[str] = set()
    for name, value in step.items():
        if name in KEY_ARGS and isinstance(value, str):
            out.add(value.split(".")[0])
        elif name not in ("set", "else", "kinds", "map"):
            out |= layer_keys(value)
    return out


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


def vision_field_keys() -> set[str]:
    """Vision-config keys the key map's generic ``vision_fields`` read."""
    keymap = json.loads((ROOT / "schemas" / "keymap.json").read_text())
    return {a.split(".")[0] for spec in keymap.get("vision_fields", {}).values() for a in spec["aliases"]}


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


def text_absent(cls: type) -> str | None:
    """What a composite config class does with flat keys when ``text_config`` is absent.

    "flat": it builds the text sub-config from them (Qwen2-VL); "defaults": it ignores them
    and the text sub-config takes its class's defaults (LLaVA, Step-3.7); None: not a
    composite with a ``text_config``, or the probe cannot tell.
    """
    if "text_config" not in (getattr(cls, "sub_configs", None) or {}):
        return None
    try:
        text = cls(num_hidden_layers=7, vocab_size=1237).text_config
    except Exception:
        return None
    if text is None:
        return None
    got = (getattr(text, "num_hidden_layers", None), getattr(text, "vocab_size", None))
    return "flat" if got == (7, 1237) else "defaults"


def sub_overrides(config: Any, name: str, wanted: set[str]) -> tuple[str | None, dict[str, Any]]:
    """(model_type, overrides) of the sub-config ``name`` a composite class builds by default:
    the values (among ``wanted`` keys) where it differs from that model_type's own class
    defaults (LLaVA's CLIP tower is 336 px, 24 layers, not CLIPVisionConfig's 224 px, 12)."""
    from transformers import CONFIG_MAPPING

    sub = getattr(config, name, None)
    model_type = getattr(sub, "model_type", None)
    if sub is None or not model_type or model_type not in CONFIG_MAPPING:
        return None, {}
    try:
        base = CONFIG_MAPPING[model_type]().to_dict()
    except Exception:
        return None, {}
    mine = sub.to_dict()
    overrides = {k: v for k, v in mine.items() if k in wanted and base.get(k, _NONE) != v}
    # A value equal to the class's *derived* default is an override all the same when the other
    # overrides change that derivation (Mistral 3 sets head_dim 128 on a 5120-wide text config:
    # MistralConfig derives 4096 / 32 = 128, but 5120 / 32 = 160): rebuild the sub-config from
    # the overrides and add what still differs, until transformers gives the same sub-config.
    for _ in range(len(wanted)):
        try:
            again = CONFIG_MAPPING[model_type](**copy.deepcopy(overrides)).to_dict()
        except Exception:
            break
        missed = {
            k: v for k, v in mine.items() if k in wanted and k not in overrides and again.get(k, _NONE) != v
        }
        if not missed:
            break
        overrides.update(missed)
    return model_type, {k: clean(v) for k, v in overrides.items()}


_NONE = object()


def tie_from_text(cls: type) -> bool:
    """Whether a composite class without a top-level tie_word_embeddings takes its text
    config's (LLaVA), rather than its own default (InternVL ties regardless)."""
    try:
        tied = cls(text_config={"tie_word_embeddings": True}).tie_word_embeddings
        untied = cls(text_config={"tie_word_embeddings": False}).tie_word_embeddings
    except Exception:
        return False
    return tied is True and untied is False


def main() -> int:
    import dataclasses

    import transformers
    from transformers import CONFIG_MAPPING, PreTrainedConfig

    keys = read_keys()
    extra = vision_keys()
    all_vision = set().union(*extra.values()) | vision_field_keys()
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
        absent = text_absent(cls)
        if absent is not None:
            entry["_text_absent"] = absent
            if tie_from_text(cls):
                entry["_tie_from_text"] = True
            _, overrides = sub_overrides(config, "text_config", keys)
            if overrides:
                entry["_text_overrides"] = overrides
        if "vision_config" in (getattr(cls, "sub_configs", None) or {}):
            vision_type, overrides = sub_overrides(config, "vision_config", all_vision)
            if vision_type:
                entry["_vision_model_type"] = vision_type
                entry["_vision_overrides"] = overrides
        if entry:
            out[model_type] = entry
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
