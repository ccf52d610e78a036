"""NVIDIA ModelOpt's separate ``hf_quant_config.json`` read as the ``quantization_config`` it
stands for, and the bounds every quantization config is held to (shared with
``schema.quant_config``).

ModelOpt 0.29 and before wrote its scheme to ``hf_quant_config.json`` beside config.json
(``{"producer": {"name": "modelopt", ...}, "quantization": {"quant_algo": "NVFP4", ...}}``)
instead of a ``quantization_config`` key. vLLM reads that file whenever config.json has no
``quantization_config`` (``transformers_utils/config.py``) and, for producer ``modelopt``,
sets its ``quant_method`` (``config/model.py``); the fields it then reads are the
``quantization`` section's ``quant_algo``, ``group_size`` (16 when absent),
``kv_cache_quant_algo`` and ``exclude_modules`` (``modelopt.py``). The same fields, under
``quant_method: "modelopt"``, are what ModelOpt 0.31 and later write into config.json, which
slotdiff already prices; so the file becomes that, every value checked here first so that a
bad one is refused naming this file and its key. The file's ``quantization`` section (its
algorithm and KV algorithm) is kept too, under the key ``hf_quant_config.json``, marking the
file's form: SGLang reads a nested section by other rules than a flat config.json one
(``deploy/sglang_kv``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import SlotdiffError
from ..core.printable import json_kind, one_line

FILENAME = "hf_quant_config.json"

# quantization_config numbers slotdiff does arithmetic with; past these they are not a real scheme.
MAX_BITS = 64
MAX_GROUP = 2**40

# A ``re:`` exclusion pattern is matched against every module name: one that can backtrack
# catastrophically ((a+)+, (.*x)*) or that repeats without bound many times would let a
# config stall the linter, so such patterns are refused, like any other invalid value.
_QUANTIFIED_GROUP = re.compile(r"\)(?:[*+]|\{\d*,\d*\})")
_UNBOUNDED = re.compile(r"(?<!\\)(?:[*+]|\{\d*,\})")
MAX_PATTERN = 256
MAX_UNBOUNDED = 4


def pattern_problem(pattern: str) -> str | None:
    """Why an exclusion pattern cannot be used (a ``re:`` one too long, prone to catastrophic
    backtracking or no regular expression), or None when it can."""
    if not pattern.startswith("re:"):
        return None
    regex = pattern[3:]
    if len(regex) > MAX_PATTERN:
        return f"is {len(regex)} characters, over the {MAX_PATTERN} cap"
    if _QUANTIFIED_GROUP.search(regex) or len(_UNBOUNDED.findall(regex)) > MAX_UNBOUNDED:
        return "repeats a group or repeats without bound too often (catastrophic backtracking)"
    try:
        re.compile(regex)
    except re.error as err:
        return f"is not a regular expression ({err})"
    return None


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters: a value quoted in a refusal."""
    text = one_line(repr(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _plain(text: str, limit: int) -> str:
    """A string from the file on one line, cut to ``limit`` characters, for a note."""
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class SidecarQuant:
    """What ``hf_quant_config.json`` says: the ``quantization_config`` it stands for (None when
    it quantizes no weights or is not ModelOpt's) and a note saying so, for the provenance."""

    config: dict[str, Any] | None
    note: str
    # ModelOpt's ``quantization`` section as SGLang reads it, (quant_algo, kv_cache_quant_algo),
    # kept even where it quantizes no weights (quant_algo null): SGLang 0.5.2-0.5.4 fail to start
    # on that (deploy/sglang_kv); None when the file is not ModelOpt's.
    section: tuple[str | None, str | None] | None = None


class _Reader:
    """Values of one hf_quant_config.json, each refused (file and key named) when no export writes it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, key: str, why: str) -> SlotdiffError:
        return SlotdiffError(self.name, why, key=key)

    def object(self, node: Mapping[str, Any], key: str, at: str = "") -> Mapping[str, Any] | None:
        value = node.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise self.fail(at + key, f"expected an object, got {json_kind(value)}")
        return value

    def text(self, node: Mapping[str, Any], key: str, at: str = "") -> str | None:
        value = node.get(key)
        if value is not None and not isinstance(value, str):
            raise self.fail(at + key, f"expected a string or null, got {json_kind(value)} {shown(value)}")
        return value

    def group(self, node: Mapping[str, Any], key: str, at: str) -> int | None:
        value = node.get(key)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_GROUP:
            raise self.fail(at + key, f"expected an integer 1..{MAX_GROUP:,}, got {shown(value)}")
        return value

    def patterns(self, node: Mapping[str, Any], key: str, at: str) -> list[str] | None:
        value = node.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self.fail(at + key, f"expected an array of module names, got {json_kind(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(
                    f"{at}{key}[{i}]", f"expected a module name (a string), got {json_kind(item)}"
                )
            why = pattern_problem(item)
            if why:
                raise self.fail(f"{at}{key}[{i}]", f"exclusion pattern {shown(item)} {why}")
        return list(value)


def read_sidecar(doc: Any, name: str) -> SidecarQuant:
    """``hf_quant_config.json`` (parsed) as the ``quantization_config`` vLLM makes of it; a value
    of the wrong type or past a bound is a SlotdiffError naming ``name`` and the key."""
    r = _Reader(name)
    if not isinstance(doc, Mapping):
        raise r.fail("", f"top level is {json_kind(doc)}, not a JSON object")
    producer = r.object(doc, "producer")
    maker = r.text(producer, "name", "producer.") if producer is not None else None
    if maker != "modelopt":  # vLLM's _normalize_quantization_config: exactly this name
        said = f"producer {shown(maker)}" if maker is not None else "no producer"
        return SidecarQuant(None, f"{FILENAME} names {said}, not ModelOpt: not read")
    version = producer.get("version") if producer is not None else None
    by = "ModelOpt" + (f" {_plain(version, 24)}" if isinstance(version, str) else "")
    quant = r.object(doc, "quantization")
    if quant is None:
        raise r.fail("quantization", "missing: a ModelOpt file keeps its scheme under it")
    at = "quantization."
    algo = r.text(quant, "quant_algo", at)
    kv = r.text(quant, "kv_cache_quant_algo", at)
    group = r.group(quant, "group_size", at)
    exclude = r.patterns(quant, "exclude_modules", at)
    if algo is None or not algo.strip():
        kv_said = f", KV cache {_plain(kv, 24)}" if kv else ""
        said = f"{FILENAME} ({by}{kv_said}) quantizes no weights"
        return SidecarQuant(None, f"{said}: weights at the config's dtype", (algo, kv))
    config: dict[str, Any] = {"quant_method": "modelopt", "quant_algo": algo}
    if group is not None:
        config["group_size"] = group
    if kv is not None:
        config["kv_cache_quant_algo"] = kv
    if exclude is not None:
        config["exclude_modules"] = exclude
    # The file's own section as well, under the file's name (a key no config.json holds): SGLang
    # reads the KV algorithm from it (``quantization.kv_cache_quant_algo``) by other rules than
    # from config.json's flat form.
    config[FILENAME] = {"quant_algo": algo, "kv_cache_quant_algo": kv}
    return SidecarQuant(
        config, f"quantization_config read from {FILENAME} ({by}, {_plain(algo, 40)})", (algo, kv)
    )
