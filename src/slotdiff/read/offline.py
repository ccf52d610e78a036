"""Whether an offline run can skip huggingface_hub: no HF cache could answer for the repo.

Importing huggingface_hub (and httpx, yaml, filelock, asyncio with it) costs more than the
whole analysis. Offline, it is needed only to read the HF cache; when no cache folder holds
the repo, the bundled catalog answers as it would have after huggingface_hub missed, without
importing it. The check is conservative: every folder huggingface_hub could use as its cache
is looked at, names compared case-insensitively, and any doubt means "ask huggingface_hub".
"""

from __future__ import annotations

import os
import sys

# huggingface_hub's own truth test for HF_HUB_OFFLINE (constants._is_true).
_TRUE = frozenset({"1", "ON", "YES", "TRUE"})


def offline() -> bool:
    """True when HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set the way huggingface_hub reads it."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in _TRUE


def _cache_folders() -> set[str]:
    """Every folder huggingface_hub could read its cache from, as it computes them."""
    home = os.path.expanduser(
        os.environ.get("HF_HOME")
        or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    )
    folders = {
        os.path.expanduser(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or ""),
        os.path.join(home, "hub"),
    }
    constants = sys.modules.get("huggingface_hub.constants")  # already imported: its own value
    if constants is not None:
        folders.add(str(getattr(constants, "HF_HUB_CACHE", "")))
    return {f for f in folders if f}


def hf_cache_may_hold(repo_id: str) -> bool:
    """True unless no HF cache folder has an entry for ``repo_id`` (any case)."""
    want = ("models--" + repo_id.replace("/", "--")).lower()
    for folder in _cache_folders():
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        except OSError:
            return True  # unreadable: let huggingface_hub decide
        if any(name.lower() == want for name in names):
            return True
    return False
