"""transformers' figures for a real published ``config.json``, by the registry harness's own code.

A published row (``tests/fixtures/conformance/published/*.json``) holds a config as its owner
published it: keys whose class default applies left out, fields the config class derives left
out, per-layer fields as lists.  Its reference is computed exactly as for a registry row
(:func:`registry.measure_params` on the meta device; :func:`registry.measure_kv` on a tiny copy),
and the tiny copy slotdiff is given for the KV figures keeps the published shape: the published
dict with only the keys the shrink changed set to their tiny values (:func:`published_kv_config`),
checked to give transformers the very config the tiny copy ran.

Nothing here reads slotdiff.  Written against transformers 5.24.0 and torch 2.13.0.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from oracle import hf_oracle, registry

__all__ = ["IGNORED_KEYS", "published_kv_config", "reference"]

#: Keys that carry no structure the KV figures depend on, or that the oracle's shrink drops
#: (``hf_oracle._shrunk_dict``): they are neither compared nor copied into the tiny config.
IGNORED_KEYS: frozenset[str] = frozenset(
    {"architectures", "auto_map", "quantization_config", "dtype", "torch_dtype", "use_cache"}
) | frozenset(registry._BOOKKEEPING)

#: Top-level keys left out of the tiny config slotdiff is given, as the oracle leaves them out
#: of the tiny copy it runs (a weight format, remote code).
_DROPPED = ("quantization_config", "auto_map")

#: How many rounds :func:`published_kv_config` may add keys before it gives up.
_ROUNDS = 24


def _plain(d: Mapping[str, Any]) -> dict[str, Any]:
    """A config dict as compared: JSON form, :data:`IGNORED_KEYS` left out."""
    return {k: v for k, v in registry.jsonable(dict(d)).items() if k not in IGNORED_KEYS}


def _text_of(top: Mapping[str, Any]) -> dict[str, Any]:
    """The decoder text config transformers makes of ``top``, in compared form."""
    config = hf_oracle._config_object(registry.decode_floats(dict(top)))
    return _plain(config.get_text_config(decoder=True).to_dict())


def published_kv_config(
    config: Mapping[str, Any], config_obj: Any, tiny: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str]:
    """``config`` with its text part shrunk to ``tiny`` (the config the oracle's tiny copy ran),
    in the published shape: only keys whose value must change are written.

    Starts from the published text dict (top-level ``quantization_config`` and ``auto_map`` left
    out, as the oracle does), rewrites the keys it gives (under the name it gives them, aliases
    of ``attribute_map`` included) whose tiny value differs, and adds an absent key only when
    transformers does not reach the tiny value without it (a default the shrink changed, like
    ``vocab_size``); derived fields it leaves out stay out.  Returns ``(dict, why)``: ``why`` is
    ``""`` when transformers builds exactly ``tiny`` from the dict, else the reason it does not
    (then the dict is None).
    """
    path = registry.text_path(config_obj)
    if path is None:
        return None, "the text config sits where the harness cannot reach it"
    top = {k: copy.deepcopy(v) for k, v in config.items() if k not in _DROPPED}
    if path:
        top[path] = dict(top.get(path) or {})
    text = top if path == "" else top[path]
    full = config_obj.get_text_config(decoder=True)
    amap = dict(getattr(type(full), "attribute_map", {}) or {})
    given = {amap.get(k, k): k for k in text}  # canonical attribute -> the key the file uses
    target = _plain(tiny)
    count = amap.get("num_hidden_layers", "num_hidden_layers")  # the attribute to_dict writes
    if count in target:  # the layer count and the per-layer lists change together
        _cut_per_layer(text, int(full.num_hidden_layers), target[count])
        text[given.get(count, count)] = target[count]
    for _ in range(_ROUNDS):
        try:
            got = _text_of(top)
        except hf_oracle.OracleUnsupported as exc:
            return None, f"the shrunk published dict is rejected: {exc.reason}"
        # an attribute only the file gives and the tiny copy lacks is a kwarg the class keeps
        # but does not derive from (Qwen3.5's full_attention_interval beside its layer_types)
        keys = set(target) | {k for k in got if k not in given}
        differ = sorted(k for k in keys if got.get(k, _NONE) != target.get(k, _NONE))
        if not differ:
            return top, ""
        fixable = [k for k in differ if k in target]
        if not fixable:
            return None, f"transformers derives keys the tiny copy lacks: {', '.join(differ)}"
        # keys the file gives first; then absent single values (a default the shrink changed);
        # absent lists and objects last, as they are mostly derived from the keys before them
        given_now = [k for k in fixable if k in given]
        scalars = [k for k in fixable if not isinstance(target[k], (list, dict))]
        for key in given_now or scalars[:1] or fixable[:1]:
            text[given.get(key, key)] = copy.deepcopy(target[key])
    return None, f"no fixed point after {_ROUNDS} rounds: {', '.join(differ)}"


_NONE = object()


def _cut_per_layer(text: dict[str, Any], layers: int, tiny_layers: Any) -> None:
    """Cut every per-layer list of the file (``layers`` entries, at the top of the text config or
    one object down: MiniMax-M3's ``moe_layer_freq`` and ``sparse_attention_config``'s
    ``sparse_attention_freq``) to the tiny copy's first ``tiny_layers`` entries, the prefix of
    the layer pattern the oracle's shrink keeps; the class then derives what it derived before."""
    if not isinstance(tiny_layers, int) or tiny_layers >= layers:
        return
    for holder in [text, *(v for v in text.values() if isinstance(v, dict))]:
        for key, value in holder.items():
            if isinstance(value, list) and len(value) == layers and key not in _TOKEN_ID_KEYS:
                holder[key] = value[:tiny_layers]


#: Lists that are token ids, not per-layer entries, whatever their length.
_TOKEN_ID_KEYS = ("eos_token_id", "bos_token_id", "pad_token_id")


def reference(config: Mapping[str, Any]) -> dict[str, Any]:
    """transformers' figures for one published config, stamped with the versions.

    ``status`` is ``built`` (with ``params``; ``kv``, ``kv_config`` and ``kv_form``, or
    ``kv_unsupported``) or ``unbuildable`` with transformers' reason.  ``kv_form`` is
    ``published`` when the tiny config keeps the published shape, else ``serialized`` (the
    registry's fully serialised tiny config) with ``kv_form_reason``.
    """
    out: dict[str, Any] = {"versions": registry.versions()}
    try:
        out["params"] = registry.measure_params(config)
    except hf_oracle.OracleUnsupported as exc:
        return {**out, "status": "unbuildable", "reason": exc.reason}
    out["status"] = "built"
    config_obj = hf_oracle._config_object(registry.decode_floats(dict(config)))
    try:
        kv = registry.measure_kv(config, config_obj)
    except hf_oracle.OracleUnsupported as exc:
        out["kv_unsupported"] = exc.reason
        return out
    except Exception as exc:  # forward failures of every kind
        out["kv_unsupported"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return out
    kv_config, why = published_kv_config(config, config_obj, kv["tiny_text_config"])
    if kv_config is None:
        out["kv_form"], out["kv_form_reason"] = "serialized", why
        kv_config = registry.kv_row_config(config, config_obj, kv)
    else:
        out["kv_form"] = "published"
    del kv["tiny_text_config"]
    out["kv"] = kv
    out["kv_config"] = registry.encode_floats(registry.jsonable(kv_config))
    return out
