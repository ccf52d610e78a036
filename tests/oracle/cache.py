"""Oracle measurements kept by input digest, so the suite runs torch only for what changed.

A measurement (a KV cache held, FLOPs counted, tensors saved for backward) is a function of
its inputs, the oracle's own code and the transformers and torch versions. :func:`cached`
keys it by the SHA-256 of all of them and keeps the answer under tests/fixtures/oracle/ (one
JSON file each, committed): a fresh clone reads the recorded answer; a changed config, a
changed argument, an edited oracle module or another transformers/torch version is a new key,
measured again and written (commit the new file). ``SLOTDIFF_ORACLE_FRESH=1`` measures
everything again without reading the recorded answers.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STORE = HERE.parent / "fixtures" / "oracle"
CODE = ("hf_oracle.py", "saved.py")  # the oracle modules an answer depends on (by default)


@cache
def _environment(modules: tuple[str, ...] = CODE) -> dict[str, str]:
    """What else an answer depends on: library versions and the oracle's source."""
    code = hashlib.sha256()
    for name in modules:
        code.update((HERE / name).read_bytes())
    return {
        "transformers": metadata.version("transformers"),
        "torch": metadata.version("torch"),
        "oracle": code.hexdigest(),
    }


def key(kind: str, inputs: Mapping[str, Any], modules: tuple[str, ...] = CODE) -> str:
    """The file stem of one measurement: its kind and the digest of everything it depends on."""
    env = _environment(modules)
    text = json.dumps({"kind": kind, "inputs": inputs, **env}, sort_keys=True, allow_nan=True)
    return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:24]}"


def cached(
    kind: str,
    inputs: Mapping[str, Any],
    measure: Callable[[], Any],
    encode: Callable[[Any], Any] = lambda x: x,
    decode: Callable[[Any], Any] = lambda x: x,
    modules: tuple[str, ...] = CODE,
) -> Any:
    """``measure()``, or its answer recorded for exactly these ``inputs`` (JSON-able) and this
    environment (``modules``: the oracle modules it runs). ``encode``/``decode`` turn the
    answer into JSON and back."""
    path = STORE / f"{key(kind, inputs, modules)}.json"
    if path.is_file() and os.environ.get("SLOTDIFF_ORACLE_FRESH", "") in ("", "0"):
        return decode(json.loads(path.read_text(encoding="utf-8")))
    answer = measure()
    STORE.mkdir(parents=True, exist_ok=True)
    text = json.dumps(encode(answer), sort_keys=True, indent=1, allow_nan=True, default=str) + "\n"
    fd, tmp = tempfile.mkstemp(dir=STORE, suffix=".tmp")  # two workers may measure the same key
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return decode(json.loads(text))  # the same form a recorded answer has
