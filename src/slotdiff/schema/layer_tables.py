"""Per-layer override tables in tower expressions: transformers' ``per_layer_config``
(HeterogeneousConfigMixin: layer index → the config attributes that differ on that layer)
read by a tower file's sizes (Dots3 Note's vision pyramid of 4, 8, ... 64 experts a block)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _layer_index(key: Any) -> Any:
    """A per-layer table's key as an int (to_dict writes ``"25"``; ``"025"`` is the same layer)."""
    if isinstance(key, str) and key.isdigit() and len(key) < 7:
        return int(key)
    return key


def layer_override(table: Any, index: Any, key: Any, default: Any) -> Any:
    """transformers' per-layer override (``per_layer_config``: layer index → the config
    attributes that differ there): ``table[index][key]``, else ``default``. ``table`` may be
    empty (no overrides); its keys are ints or decimal strings, as to_dict writes them."""
    if not isinstance(table, Mapping):
        raise ValueError(f"layer_override needs a per-layer table, got {table!r}")
    for k, overrides in table.items():
        if _layer_index(k) == index and isinstance(overrides, Mapping) and key in overrides:
            return overrides[key]
    return default


def overrides_only(table: Any, allowed: Any) -> bool:
    """Whether every per-layer override in ``table`` sets only keys in ``allowed`` (a tower's
    ``requires``: an override of any other attribute may change the structure)."""
    if not isinstance(table, Mapping) or not isinstance(allowed, (list, tuple)):
        raise ValueError(f"overrides_only needs a per-layer table and a list, got {table!r}, {allowed!r}")
    return all(isinstance(o, Mapping) and set(o) <= set(allowed) for o in table.values())
