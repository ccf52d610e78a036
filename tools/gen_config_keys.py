"""Regenerate schemas/config_keys.json: every model_type and config key transformers knows.

``slotdiff lint`` reports a key that no config class and no slotdiff key map knows (SD201),
suggests a spelling for near misses (SD105), and checks that model_type names a class
transformers has (SD116, SD205). SD105 suggests only keys the config's own class accepts
(its fields in defaults.json and its ``attribute_aliases``); the schema layer reads a
``layer_types`` entry under the legacy names every config class renames
(``legacy_layer_types``). The key list is the union, over every model_type in transformers'
CONFIG_MAPPING, of the default config's keys, its dataclass fields, its attribute_map aliases
and its sub-configs' keys. Run it with transformers
installed after upgrading transformers:

    PYTHONPATH=src python tools/gen_config_keys.py
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import warnings
from typing import Any

from slotdiff.core.files import atomic_write_text
from slotdiff.core.resources import data_dir
from slotdiff.schema.keymap import known_keys

os.environ["SLOTDIFF_NO_BUNDLE"] = "1"  # a generator reads the sources, never a bundle made before them


def config_keys(config: Any) -> set[str]:
    """Keys of one config instance, its class's fields and aliases, and its sub-configs."""
    cls = type(config)
    keys = set(config.to_dict())
    if dataclasses.is_dataclass(cls):
        keys.update(f.name for f in dataclasses.fields(cls))
    keys.update(getattr(cls, "attribute_map", {}) or {})
    for name in getattr(config, "sub_configs", None) or {}:
        sub = getattr(config, name, None)
        if sub is not None and hasattr(sub, "to_dict"):
            keys.update(config_keys(sub))
    return keys


def main() -> int:
    import transformers
    from transformers import CONFIG_MAPPING, configuration_utils

    warnings.simplefilter("ignore")
    keys: set[str] = set()
    read = known_keys()
    by_type: dict[str, list[str]] = {}
    model_types = sorted(CONFIG_MAPPING.keys())
    for model_type in model_types:
        try:
            config = CONFIG_MAPPING[model_type]()
        except Exception as err:  # a few classes cannot be built without arguments
            print(f"skip {model_type}: {type(err).__name__}", file=sys.stderr)
            continue
        keys.update(config_keys(config))
        aliases = sorted(set(getattr(type(config), "attribute_map", {}) or {}) & read)
        if aliases:
            by_type[model_type] = aliases
    out = {
        "about": "Every model_type in transformers' CONFIG_MAPPING, and every key some transformers "
        "config class knows (defaults, dataclass fields, attribute_map aliases, sub-configs), for "
        "slotdiff lint's unknown-key and model_type rules. Generated "
        f"by tools/gen_config_keys.py from transformers {transformers.__version__}.",
        "transformers_version": transformers.__version__,
        "model_types": model_types,
        "keys": sorted(k for k in keys if not k.startswith("_")),
        # PreTrainedConfig.__post_init__ renames these layer_types entries for every config class
        "legacy_layer_types": dict(sorted(configuration_utils._LEGACY_LAYER_TYPE_REMAP.items())),
        # per model_type: the attribute_map aliases of its class among the keys slotdiff reads;
        # with the class's fields (defaults.json) what SD105 may suggest in a config of that type
        "attribute_aliases": by_type,
    }
    path = data_dir("schemas") / "config_keys.json"
    atomic_write_text(path, json.dumps(out, indent=0) + "\n")
    print(f"wrote {path} ({len(out['keys'])} keys)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
