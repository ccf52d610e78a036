"""Regenerate schemas/config_keys.json: every model_type and config key transformers knows.

``slotdiff lint`` reports a key that no config class and no slotdiff key map knows (SD201),
suggests a spelling for near misses (SD105), and checks that model_type names a class
transformers has (SD116, SD205). SD105 suggests only keys the config's own class accepts
(its fields in defaults.json and its ``attribute_aliases``); the schema layer reads a
``layer_types`` entry under the legacy names every config class renames
(``legacy_layer_types``). The key list is the union, over every model_type in transformers'
CONFIG_MAPPING, of the default config's keys, its dataclass fields, its attribute_map aliases,
its sub-configs' keys, and the keys its methods take from ``kwargs`` (``__post_init__``'s
``kwargs.get("index_topk_pattern")``, ``kwargs.pop("rope_local_base_freq")``: keys no field
declares that the class still reads). Run it with transformers
installed after upgrading transformers:

    PYTHONPATH=src python tools/gen_config_keys.py
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import sys
import textwrap
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


def _text(node: ast.AST) -> str | None:
    """A string literal's value, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _named_key(node: ast.AST) -> str | None:
    """The key a ``kwargs`` read names: ``kwargs.get/pop/setdefault("k")``, ``kwargs["k"]``,
    ``"k" in kwargs``, ``getattr(self, "k")`` / ``hasattr(self, "k")``; else None."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("get", "pop", "setdefault")
            and _is_name(func.value, "kwargs")
        ):
            return _text(node.args[0])
        if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and len(node.args) >= 2:
            return _text(node.args[1]) if _is_name(node.args[0], "self") else None
    if isinstance(node, ast.Subscript) and _is_name(node.value, "kwargs"):
        return _text(node.slice)
    if isinstance(node, ast.Compare) and any(_is_name(c, "kwargs") for c in node.comparators):
        return _text(node.left)
    return None


def kwargs_keys(cls: type, base: type) -> set[str]:
    """Keys the methods of ``cls`` and its config-class ancestors (not ``base`` itself, whose
    keys every class shares) read out of ``kwargs`` or ``self`` by name."""
    keys: set[str] = set()
    for klass in cls.__mro__:
        if not issubclass(klass, base) or klass is base:
            continue
        for fn in vars(klass).values():
            if not inspect.isfunction(fn):
                continue
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
            except (OSError, TypeError, SyntaxError):
                continue
            keys.update(k for node in ast.walk(tree) if (k := _named_key(node)))
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
        keys.update(kwargs_keys(CONFIG_MAPPING[model_type], configuration_utils.PreTrainedConfig))
        aliases = sorted(set(getattr(type(config), "attribute_map", {}) or {}) & read)
        if aliases:
            by_type[model_type] = aliases
    out = {
        "about": "Every model_type in transformers' CONFIG_MAPPING, and every key some transformers "
        "config class knows (defaults, dataclass fields, attribute_map aliases, sub-configs, keys its "
        "methods read from kwargs), for "
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
