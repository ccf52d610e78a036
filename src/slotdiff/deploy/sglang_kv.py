"""What SGLang's ``--kv-cache-dtype auto`` becomes for a ModelOpt checkpoint (0.5.3-0.5.23), a
plain ``quant_method: fp8`` one stating ``kv_cache_quant_algo`` (0.5.18-0.5.23), or a
compressed-tensors one with a static symmetric per-tensor FP8 ``kv_cache_scheme`` (0.5.19-0.5.23).

``configure_kv_cache_dtype`` (``model_runner.py``, from 0.5.16 ``mem_cache/kv_cache_dtype.py``)
takes fp8_e4m3 when the loaded model's ``quant_config.kv_cache_quant_algo`` is the string FP8
(any case) and the model's dtype otherwise; 0.5.2 always takes the model's dtype. So the answer
depends on three things SGLang decides by release, each a row of
``schemas/engine_families.json`` ``sglang_modelopt_kv``:

* which config class it builds: hf_quant_config.json by its quant_algo (FP4 in it:
  ModelOptFp4Config, FP8: ModelOptFp8Config); config.json's ``quant_method: modelopt`` is
  ModelOptFp8Config until 0.5.10 routes it by quant_algo too;
* how that class derives the attribute from the file's nested ``quantization`` section or
  config.json's flat ``kv_cache_scheme`` / ``kv_cache_quant_algo`` (ModelOptFp8Config names it
  ``kv_cache_quant_method`` in 0.5.3, which auto does not read);
* whether the model's SGLang class keeps ``quant_config`` at all (the model_types read).

A plain ``quant_method: fp8`` config (Fp8Config) keeps config.json's flat ``kv_cache_quant_algo``
from 0.5.18 (``fp8_method``), read the same way; CompressedTensorsConfig derives it from
config.json's ``kv_cache_scheme`` from 0.5.19 (``compressed_tensors``: "FP8" where
``is_supported_scheme`` holds, else None); ``mxfp8`` is Fp8Config too. On ROCm petit.py's
PetitNvFp4Config may claim a ModelOpt checkpoint (``rocm_petit``) and 0.5.23's
MiniMaxM3Nvfp4Config always takes FP8 (``fixed_kv_methods``): refused under auto. An NVFP4 KV
scheme keeps the model's dtype (only FP8 is taken). A checkpoint stating an FP8 KV that SGLang
routes in a way not modelled here (a mixed-precision export, an algorithm its ModelOptFp8Config
refuses, a class not read) is refused, naming why.

Whatever the KV flag, ``check_modelopt_start`` refuses the ModelOpt checkpoints a release fails
to start on (``start`` in the table): hf_quant_config.json with quant_algo null through 0.5.4, and
from 0.5.18 an FP8 variant (quant_algo holding FP8 but not exactly "FP8").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.errors import SlotdiffError
from ..core.resources import load_schema_file
from ..read.hf_quant import FILENAME
from ..schema.arch import Architecture
from .engine_terms import Version, release

FP8_FLAG = "fp8_e4m3"  # what SGLang writes back into server_args.kv_cache_dtype


def _table() -> Mapping[str, Any]:
    return load_schema_file("engine_families.json")["sglang_modelopt_kv"]


def _names(kind: str) -> list[str]:
    """A string kv_cache_scheme's names of ``kind`` (fp8 / fp4), as the table lists them."""
    return _table()["scheme_names"][kind]


def _row(rows: list[Mapping[str, Any]], version: Version) -> Mapping[str, Any]:
    """The newest row of a class's rules whose release is not after ``version``."""
    return [r for r in rows if version >= release(r["from"])][-1]


def _is_fp8(value: Any) -> bool:
    return isinstance(value, str) and value.upper() == "FP8"


def _flat(q: Mapping[str, Any], row: Mapping[str, Any]) -> Any:
    """The class's ``kv_cache_quant_algo`` from config.json's flat form, by the row's steps."""
    for step in row["flat"]:
        if step == "algo" and q.get("kv_cache_quant_algo"):
            return q["kv_cache_quant_algo"]
        if step == "scheme":
            scheme = q.get("kv_cache_scheme")
            if isinstance(scheme, Mapping):
                eight = scheme.get("type") == "float" and scheme.get("num_bits") == 8
                return "FP8" if eight else row["fallback"]
            if row["strings"] and isinstance(scheme, str):
                name = scheme.strip().upper()
                if name in _names("fp8"):
                    return "FP8"
                return "NVFP4" if name in _names("fp4") else row["fallback"]
    return row["fallback"]


def _states_fp8(q: Mapping[str, Any], side: Mapping[str, Any] | None) -> bool:
    """Whether the checkpoint states an FP8 KV cache in any form some release reads."""
    if side is not None:
        return _is_fp8(side.get("kv_cache_quant_algo"))
    scheme = q.get("kv_cache_scheme")
    if isinstance(scheme, Mapping):
        return scheme.get("type") == "float" and scheme.get("num_bits") == 8
    return _is_fp8(q.get("kv_cache_quant_algo")) or (
        isinstance(scheme, str) and scheme.strip().upper() in _names("fp8")
    )


def _config_class(method: str, algo: str, nested: bool, version: Version) -> str | None:
    """The ModelOpt config class SGLang builds (None: one whose KV rule is not modelled)."""
    start = _table()["start"]
    if algo in start["other_methods"] and version >= release(start["fp8_exact_from"]):
        return None  # 0.5.18+: MXFP8 goes to the native mxfp8 method
    if method == "modelopt_fp4":
        return "ModelOptFp4Config"
    if method == "modelopt_fp8":
        return "ModelOptFp8Config"
    if method == "modelopt_mixed" or algo == "MIXED_PRECISION":
        return None
    if not nested and version < release(_table()["config_json_modelopt_by_algo_from"]):
        return "ModelOptFp8Config"
    return "ModelOptFp4Config" if "FP4" in algo else "ModelOptFp8Config" if "FP8" in algo else None


def _refuse(arch: Architecture, version: Version, why: str, kind: str = "ModelOpt") -> SlotdiffError:
    return SlotdiffError(
        arch.name,
        f"not supported: SGLang {version.text} --kv-cache-dtype auto on this {kind} checkpoint's FP8 "
        f"KV cache: {why}: pass --kv-cache-dtype",
        key=arch.key("quantization_config"),
    )


def _kept(arch: Architecture, version: Version, kind: str) -> None:
    """Refuse where the model's SGLang class was not read to keep ``quant_config``."""
    model_type = arch.config_model_type or arch.model_type
    if model_type not in _table()["model_types"]:
        raise _refuse(
            arch,
            version,
            f"SGLang reads it from the model object's quant_config, which its class for {model_type} "
            "was not read to keep",
            kind,
        )


def _fp8_method_kv(
    arch: Architecture, q: Mapping[str, Any], version: Version
) -> tuple[str | None, str | None]:
    """A plain ``quant_method: fp8`` (or ``mxfp8``) config: Fp8Config keeps config.json's flat
    ``kv_cache_quant_algo`` from 0.5.18 (``fp8_method`` in the table), which auto takes when FP8."""
    rule = _table()["fp8_method"]
    if not _is_fp8(q.get("kv_cache_quant_algo")):
        return None, None
    if version < release(rule["from"]):
        return None, (
            f"SGLang {version.text} keeps the model's dtype for --kv-cache-dtype auto (Fp8Config takes "
            f"config.json's kv_cache_quant_algo from {rule['from']})"
        )
    method = str(q.get("quant_method", "")).lower()
    _kept(arch, version, method)
    said = f"--kv-cache-dtype auto: SGLang {version.text} takes the {method} checkpoint's FP8 KV"
    return FP8_FLAG, f"{said} (config.json's kv_cache_quant_algo, Fp8Config): fp8_e4m3"


def _ct_takes(scheme: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    """``CompressedTensorsKVCacheMethod.is_supported_scheme`` by the table's terms, in Python's
    ``==`` and truth as SGLang evaluates them (a static, symmetric, per-tensor 8-bit float)."""
    return (
        all(scheme.get(k) == v for k, v in rule["equal"].items())
        and all(scheme.get(k, d) for k, d in rule["truthy"].items())
        and not any(scheme.get(k, d) for k, d in rule["falsy"].items())
    )


def _ct_kv(arch: Architecture, q: Mapping[str, Any], version: Version) -> tuple[str | None, str | None]:
    """A ``quant_method: compressed-tensors`` config: from 0.5.19 CompressedTensorsConfig's
    ``kv_cache_quant_algo`` property is "FP8" for a kv_cache_scheme SGLang loads scales for
    (``compressed_tensors`` in the table), which auto takes; any other keeps the model's dtype."""
    rule = _table()["compressed_tensors"]
    scheme = q.get("kv_cache_scheme")
    if not isinstance(scheme, Mapping):
        return None, None  # null: no attribute value; another type is refused by check_modelopt_start
    stated = scheme.get("type") == "float" and scheme.get("num_bits") == 8
    takes = _ct_takes(scheme, rule)
    if version < release(rule["from"]):
        return None, (
            f"SGLang {version.text} keeps the model's dtype for --kv-cache-dtype auto "
            "(CompressedTensorsConfig takes a static symmetric per-tensor FP8 kv_cache_scheme from "
            f"{rule['from']})"
            if takes
            else None
        )
    if not takes:
        return None, (
            f"SGLang {version.text} keeps the model's dtype for --kv-cache-dtype auto: it takes only a "
            "static symmetric per-tensor FP8 kv_cache_scheme (CompressedTensorsKVCacheMethod), not this one"
            if stated
            else None
        )
    _kept(arch, version, "compressed-tensors")
    said = f"--kv-cache-dtype auto: SGLang {version.text} takes the compressed-tensors checkpoint's FP8 KV"
    return FP8_FLAG, f"{said} (config.json's kv_cache_scheme, CompressedTensorsConfig): fp8_e4m3"


def _check_ct_start(arch: Architecture, version: Version) -> None:
    """From 0.5.19 CompressedTensorsConfig reads a kv_cache_scheme that is not null with ``.get``
    for every attention layer, so one that is not a mapping fails to load."""
    q = arch.get("quantization_config")
    rule = _table()["compressed_tensors"]
    if not isinstance(q, Mapping) or str(q.get("quant_method", "")).lower() not in rule["methods"]:
        return
    scheme = q.get("kv_cache_scheme")
    if scheme is not None and not isinstance(scheme, Mapping) and version >= release(rule["from"]):
        raise SlotdiffError(
            arch.name,
            f"not supported: SGLang {version.text} fails to load a compressed-tensors kv_cache_scheme "
            f"that is not a mapping (is_supported_scheme reads it with .get; here {type(scheme).__name__})",
            key=arch.key("quantization_config") + ".kv_cache_scheme",
        )


def check_modelopt_start(arch: Architecture, version: Version, rocm: bool = False) -> None:
    """Refuse a ModelOpt checkpoint that SGLang ``version`` does not start on, or loads as no
    ModelOpt scheme (schemas/engine_families.json ``sglang_modelopt_kv.start``; ``rocm``: an
    AMD GPU, where PetitNvFp4Config claims config.json's quant_method 'modelopt' before 0.5.10
    and fails on it), and a compressed-tensors one whose kv_cache_scheme it cannot read."""
    _check_ct_start(arch, version)
    q = arch.get("quantization_config")
    petit, routed = _table()["rocm_petit"], _table()["config_json_modelopt_by_algo_from"]
    if (
        rocm
        and isinstance(q, Mapping)
        and not isinstance(q.get(FILENAME), Mapping)  # config.json's own, not the sidecar's
        and str(q.get("quant_method", "")) == "modelopt"
        and release(petit["claims_from"]) <= version < release(routed)
    ):
        raise SlotdiffError(
            arch.name,
            f"not supported: SGLang {version.text} on an AMD GPU fails to start on this checkpoint: "
            "petit.py's PetitNvFp4Config claims config.json's quant_method 'modelopt' and reads "
            "hf_quant_config.json's quantization section, which a config.json has not: pass an "
            f"--engine-version from {routed}",
            key=arch.key("quantization_config") + ".quant_method",
        )
    start = _table()["start"]
    if arch.quant_file is not None and not (arch.quant_file[0] or "").strip():
        if version < release(start["null_algo_loads_from"]):
            raise SlotdiffError(
                arch.name,
                f"not supported: SGLang {version.text} fails to start on {FILENAME} with quant_algo null "
                "(get_quant_config raises 'Invalid quant_config' in 0.5.2-0.5.4, earlier releases not read; "
                f"loaded unquantized from {start['null_algo_loads_from']}): pass --engine-version "
                f"{start['null_algo_loads_from']} or later",
                key=f"{FILENAME}:quantization.quant_algo",
            )
        return
    q = arch.get("quantization_config")
    if version < release(start["fp8_exact_from"]) or not isinstance(q, Mapping):
        return
    method = str(q.get("quant_method", "")).lower()
    side = q.get(FILENAME) if isinstance(q.get(FILENAME), Mapping) else None
    algo = (side or q).get("quant_algo")
    if method not in _table()["fp8_class_methods"] or not isinstance(algo, str):
        return
    if "FP8" not in algo or "FP4" in algo or algo == "FP8" or algo in start["other_methods"]:
        return
    if side is not None:
        why = (
            f"takes {FILENAME} as ModelOpt FP8 only for quant_algo exactly 'FP8' (from "
            f"{start['fp8_exact_from']}): with {algo[:32]!r} it ignores the file and loads the FP8 "
            "checkpoint unquantized, not modelled"
        )
        key = f"{FILENAME}:quantization.quant_algo"
    else:
        why = (
            f"fails to start: ModelOptFp8Config takes quant_algo exactly 'FP8' (from "
            f"{start['fp8_exact_from']}), not {algo[:32]!r}"
        )
        key = arch.key("quantization_config") + ".quant_algo"
    raise SlotdiffError(
        arch.name,
        f"not supported: SGLang {version.text} {why}: pass an --engine-version before "
        f"{start['fp8_exact_from']}",
        key=key,
    )


def _fixed_kv(arch: Architecture, method: str, version: Version) -> None:
    """Refuse a quant_method whose SGLang class always takes an FP8 KV into a pool of its own
    (``fixed_kv_methods``: MiniMaxM3Nvfp4Config from 0.5.23)."""
    rule = _table()["fixed_kv_methods"].get(method)
    if rule is not None and version >= release(rule["from"]):
        raise _refuse(
            arch,
            version,
            f"its class for {method} always takes an FP8 KV (kv_cache_quant_algo defaults to, and must "
            "be, FP8), in a KV layout of its own for MiniMax M3 that is not modelled",
            method,
        )


def sglang_auto_kv(arch: Architecture, version: Version, rocm: bool = False) -> tuple[str | None, str | None]:
    """(SGLang's KV flag for ``auto``, a note): ("fp8_e4m3", note) where it takes the
    checkpoint's FP8 KV, else (None, a note where the checkpoint states a KV scheme it does not
    take, or None) for the model's dtype. Refuses what it routes in a way not modelled
    (``rocm``: an AMD GPU, where PetitNvFp4Config may claim a ModelOpt checkpoint)."""
    q = arch.get("quantization_config")
    if not isinstance(q, Mapping):
        return None, None
    _fixed_kv(arch, str(q.get("quant_method", "")).lower(), version)
    if str(q.get("quant_method", "")).lower() in _table()["fp8_method"]["methods"]:
        return _fp8_method_kv(arch, q, version)
    if str(q.get("quant_method", "")).lower() in _table()["compressed_tensors"]["methods"]:
        return _ct_kv(arch, q, version)
    if str(q.get("quant_method", "")).lower() not in _table()["methods"]:
        return None, None
    side = q.get(FILENAME) if isinstance(q.get(FILENAME), Mapping) else None
    stated = _states_fp8(q, side)
    table = _table()
    if version < release(table["auto_from"]):
        return None, (
            f"SGLang {version.text} keeps the model's dtype for --kv-cache-dtype auto (the checkpoint's "
            f"FP8 KV is taken from {table['auto_from']})"
            if stated
            else None
        )
    petit = rocm and side is not None and version < release(table["rocm_petit"]["sidecar_routed_from"])
    if petit and stated and version >= release(table["rocm_petit"]["from"]):
        raise _refuse(
            arch,
            version,
            "on ROCm petit.py's PetitNvFp4Config claims a ModelOpt config whose quant_method is "
            "'modelopt' (override_quantization_method), which checkpoints reach it is not modelled",
        )
    algo = (side or q).get("quant_algo")
    algo = algo if isinstance(algo, str) else ""
    cls = _config_class(str(q.get("quant_method", "")).lower(), algo, side is not None, version)
    if cls is None or (cls == "ModelOptFp8Config" and "FP8" not in algo):
        if not stated:
            return None, None
        what = f"quant_algo {algo[:24]!r}" if algo else "no quant_algo"
        if cls is None:
            raise _refuse(arch, version, f"its KV rule for a ModelOpt export with {what} is not modelled")
        raise _refuse(arch, version, f"SGLang loads it through ModelOptFp8Config, which refuses {what}")
    row = _row(table["classes"][cls], version)
    if not row["nested"]:
        value = None
    elif side is not None:
        value = side.get("kv_cache_quant_algo") or row["fallback"]
    else:
        value = _flat(q, row)
    if not _is_fp8(value):
        if stated:
            keeps = f"SGLang {version.text} keeps the model's dtype for --kv-cache-dtype auto"
            return None, f"{keeps}: {cls} {row['why']}"
        if isinstance(value, str) and value.upper() in _names("fp4"):
            return None, (
                f"SGLang {version.text} keeps the model's dtype for the checkpoint's NVFP4 KV scheme "
                "(--kv-cache-dtype auto takes FP8 only)"
            )
        return None, None
    _kept(arch, version, "ModelOpt")
    where = f"{FILENAME} quantization.kv_cache_quant_algo" if side is not None else "config.json's KV scheme"
    said = f"--kv-cache-dtype auto: SGLang {version.text} takes the ModelOpt checkpoint's FP8 KV"
    return FP8_FLAG, f"{said} ({where}): fp8_e4m3"
