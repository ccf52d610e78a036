"""Which files ``slotdiff lint DIR`` checks: every ``*.json`` below DIR that is a model config.

A folder of checkpoints holds many JSON files that are not model configs (tokenizer_config.json,
generation_config.json, preprocessor_config.json, index files); the decision is by content,
not by name alone, and each decision carries its reason so the CLI can say how it decided.
A file named on the command line is always checked, whatever it holds.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..core.errors import SlotdiffError
from ..core.files import read_capped
from ..read.jsonpos import MAX_BYTES
from ..schema.keymap import field_spec

# A JSON object is a model config when it names its architecture, or holds a core size of
# one (under any alias keymap.json knows, at the top or under text_config).
NAMING_KEYS = ("model_type", "architectures")
SIZE_FIELDS = ("d_model", "n_layers", "n_heads", "vocab")
# Named like a config, so an unreadable or malformed one is checked (and its error shown)
# rather than skipped: a broken config.json must not pass a hook by being ignored.
CONFIG_NAME = re.compile(r"(^|/)[^/]*config[^/]*\.json\Z")


@dataclass(frozen=True)
class Discovery:
    """The files to check, and the JSON files passed over with why (both in walk order)."""

    checked: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]
    reasons: tuple[tuple[str, str], ...]  # (path, why it is checked)


@cache
def size_keys() -> frozenset[str]:
    """Every config key that names a core size (keymap aliases of SIZE_FIELDS)."""
    keys: set[str] = set()
    for name in SIZE_FIELDS:
        keys.update(field_spec(name).get("aliases", [name]))
    return frozenset(keys)


def model_config_reason(data: Any) -> str | None:
    """Why ``data`` is a model config (the key that says so), or None when it is not one."""
    if not isinstance(data, Mapping):
        return None
    for node in (data, data.get("text_config"), data.get("llm_config")):
        if not isinstance(node, Mapping):
            continue
        for key in NAMING_KEYS:
            if key in node:
                return f"has {key}"
        for key in sorted(size_keys() & node.keys()):
            return f"has {key}"
    return None


def classify(path: str) -> tuple[bool, str]:
    """(check it?, why) for one JSON file met while walking a folder."""
    name_like = bool(CONFIG_NAME.search(path.replace(os.sep, "/")))
    try:
        # read_capped: a FIFO or a symlink to /dev/zero named *.json neither blocks nor fills memory.
        data = json.loads(read_capped(path, path, MAX_BYTES))
    except SlotdiffError as err:
        why = err.reason
        return name_like, f"{why}, named like a config: its error is reported" if name_like else why
    except (ValueError, RecursionError):
        why = "not valid JSON"
        return name_like, f"{why}, named like a config: its error is reported" if name_like else why
    reason = model_config_reason(data)
    if reason:
        return True, reason
    return False, "no model_type, architectures or core size key"


def discover(paths: Iterable[str]) -> Discovery:
    """Files as given; folders walked recursively (hidden files and folders skipped)."""
    checked: list[str] = []
    reasons: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    for p in paths:
        if not os.path.isdir(p):
            checked.append(p)
            reasons.append((p, "named on the command line"))
            continue
        for folder, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for f in sorted(files):
                if f.startswith(".") or not f.endswith(".json"):
                    continue
                path = os.path.join(folder, f)
                keep, why = classify(path)
                if keep:
                    checked.append(path)
                    reasons.append((path, why))
                else:
                    skipped.append((path, why))
    return Discovery(tuple(checked), tuple(skipped), tuple(reasons))


def summary(found: Discovery, limit: int = 3) -> str:
    """``checked 2 configs, skipped 3 JSON files that are not model configs (tokenizer_config.json, ...)``."""
    n = len(found.checked)
    line = f"checked {n} config{'s' if n != 1 else ''}"
    if found.skipped:
        names = sorted({os.path.basename(p) for p, _ in found.skipped})
        shown = ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
        m = len(found.skipped)
        what = "files that are not model configs" if m != 1 else "file that is not a model config"
        line += f", skipped {m} JSON {what} ({shown})"
    return line
