"""transformers' own registry of decoder language models, as rows for the conformance harness.

Everything here is transformers-side (no slotdiff): which ``model_type`` values of the causal-LM
and image-text-to-text auto mappings are decoder language models (and why the others are not),
the default config of each, *variants* that switch on what its config class can express, and
the reference figures transformers gives for a config:

* :func:`registry_types` / :func:`exclusion` -- the types, and the excluded ones with a reason
  derived from the class (``config.is_encoder_decoder``, the mappings a type is listed in, ...).
* :func:`default_config` -- ``CONFIG_MAPPING[mt]()`` serialised with ``to_dict()``, the whole
  multimodal config included, as a ``config.json`` would hold it.
* :func:`variants` -- configs derived from the attribute *names* present on the text config
  (KV heads, MoE shared experts / dense-first layers / top-k, layer-type patterns, sliding
  window, tied head, bias and norm flags, MTP, MLA query rank, head_dim); no per-family tuning.
* :func:`measure_params` -- total parameters of the meta-device build, and active parameters
  from the module tree (:func:`expert_groups`: routed-expert tensors count ``top_k / n_experts``).
* :func:`measure_kv` -- KV bytes per token and per-sequence state bytes from a real cache after a
  forward pass of a tiny copy (``hf_oracle.kv_cache_bytes``).

Written against transformers 5.24.0 and torch 2.13.0 (see ``README.md`` next to this file).
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import transformers
from transformers import CONFIG_MAPPING, PreTrainedConfig, PreTrainedModel
from transformers.models.auto import modeling_auto

from oracle import hf_oracle

__all__ = [
    "KV_SEQ_LEN",
    "MAPPINGS",
    "Variant",
    "decode_floats",
    "default_config",
    "encode_floats",
    "exclusion",
    "expert_groups",
    "jsonable",
    "measure_kv",
    "measure_params",
    "model_class_names",
    "registry_types",
    "repair",
    "text_path",
    "variants",
]

#: The two auto mappings whose model types the harness covers, in the order classes are tried
#: (image-text-to-text first, so a multimodal default builds its whole model, towers included).
MAPPINGS: tuple[str, ...] = (
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
)

#: Tokens fed to the tiny copy for the KV measurement: fewer than any sliding window or chunk
#: of the registry's defaults, so every attention layer holds every token and
#: ``kv_bytes / KV_SEQ_LEN`` is the per-token figure of all layers.
KV_SEQ_LEN = 4


# --------------------------------------------------------------------------------------------
# JSON form of configs
# --------------------------------------------------------------------------------------------

#: ``PreTrainedConfig`` bookkeeping keys that shape nothing the harness measures; dropped from
#: every (sub-)config when they hold the base class's default, so stored rows stay small.  The
#: dict that remains is the one both transformers and slotdiff are given.
_BOOKKEEPING: tuple[str, ...] = (
    "_name_or_path",
    "transformers_version",
    "output_hidden_states",
    "output_attentions",
    "return_dict",
    "id2label",
    "label2id",
    "problem_type",
    "chunk_size_feed_forward",
)
_BASE_DEFAULTS: dict[str, Any] = json.loads(json.dumps(PreTrainedConfig().to_dict()))


def jsonable(obj: Any) -> Any:
    """``obj`` as a ``config.json`` would hold it: string keys, lists, non-finite floats kept."""
    return json.loads(json.dumps(obj))


def _strip(d: Any) -> Any:
    """Drop :data:`_BOOKKEEPING` keys that hold the base default, in every nested config dict."""
    if isinstance(d, dict):
        out = {}
        for k, v in d.items():
            if k in _BOOKKEEPING and k in _BASE_DEFAULTS and v == _BASE_DEFAULTS[k]:
                continue
            out[k] = _strip(v)
        return out
    if isinstance(d, list):
        return [_strip(v) for v in d]
    return d


def encode_floats(obj: Any) -> Any:
    """Replace inf/NaN by transformers' ``{"__float__": "Infinity"}`` tags (strict JSON on disk)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return {"__float__": "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")}
    if isinstance(obj, dict):
        return {k: encode_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [encode_floats(v) for v in obj]
    return obj


def decode_floats(obj: Any) -> Any:
    """Inverse of :func:`encode_floats` (the oracle's ``load_config`` decoding, on a dict)."""
    if isinstance(obj, dict):
        if set(obj) == {"__float__"}:
            return hf_oracle._decode_float_tags(obj)
        return {k: decode_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_floats(v) for v in obj]
    return obj


def _serialise(config: PreTrainedConfig, architectures: list[str] | None) -> dict[str, Any]:
    """``config.to_dict()`` in JSON form, bookkeeping stripped, ``architectures`` set."""
    d = _strip(jsonable(config.to_dict()))
    if architectures:
        d["architectures"] = list(architectures)
    return d


# --------------------------------------------------------------------------------------------
# The registry and its exclusions
# --------------------------------------------------------------------------------------------


def registry_types() -> list[str]:
    """Every ``model_type`` of the causal-LM and image-text-to-text auto mappings, sorted."""
    types: set[str] = set()
    for name in MAPPINGS:
        types.update(getattr(modeling_auto, name))
    return sorted(types)


def model_class_names(model_type: str) -> list[str]:
    """The classes the two mappings name for ``model_type``, image-text-to-text first."""
    names: list[str] = []
    for mapping in MAPPINGS:
        name = getattr(modeling_auto, mapping).get(model_type)
        if name and name not in names:
            names.append(name)
    return names


#: Mappings that mark a type as something other than a decoder LM, with the words for it.
_OTHER_TASKS: tuple[tuple[str, str], ...] = (
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "sequence-to-sequence"),
    ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "speech sequence-to-sequence"),
    ("MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES", "audio generation (text to waveform)"),
    ("MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES", "audio generation (text to spectrogram)"),
    ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "encoder (masked LM)"),
)

#: Module-name pieces of cross-attention to encoder states (BART-style ``encoder_attn``, BERT
#: ``crossattention``): in a model without an encoder of its own, the layers attend to hidden
#: states that come from outside it.
_CROSS_ATTENTION = ("encoder_attn", "crossattention")


def exclusion(model_type: str, model: PreTrainedModel | None = None) -> tuple[str, str] | None:
    """Why ``model_type`` is not a decoder language model, as ``(class, reason)``; None if it is.

    Decided from the class, in this order: ``config.is_encoder_decoder`` of the default config;
    a listing in a seq2seq / speech / audio-generation / masked-LM mapping; a default config that
    declares ``is_decoder=False`` and builds only bidirectional self-attention; layers that
    cross-attend to an encoder the model does not contain; ``can_generate()`` False.  The last
    three need ``model``, the default built on meta (skipped when it is None).
    """
    try:
        config = CONFIG_MAPPING[model_type]()
    except Exception:  # the config class rejects its own defaults: not excluded, unbuildable
        config = None
    classes = model_class_names(model_type)
    if config is not None and getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder", f"config.is_encoder_decoder=True ({', '.join(classes)})"
    for mapping, words in _OTHER_TASKS:
        cls = getattr(modeling_auto, mapping).get(model_type)
        if cls:
            short = mapping.removesuffix("_NAMES")
            extra = ""
            if words.startswith("encoder") and config is not None:
                is_decoder = getattr(config, "is_decoder", None)
                extra = f"; its causal-LM class is the decoder mode (is_decoder={is_decoder})"
            return words, f"listed in {short} as {cls}{extra}"
    if model is None:
        return None
    subs = set((getattr(type(config), "sub_configs", None) or {}).keys()) if config is not None else set()
    causal = [m.is_causal for m in model.modules() if isinstance(getattr(m, "is_causal", None), bool)]
    declared = config is not None and "is_decoder" in getattr(type(config), "__annotations__", {})
    if declared and not config.is_decoder and causal and not any(causal) and not subs:
        return (
            "encoder (bidirectional)",
            f"config.is_decoder=False by default and every self-attention of {type(model).__name__} "
            "is built with is_causal=False",
        )
    names = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules()}
    cross = sorted(n for n in names if any(piece in n for piece in _CROSS_ATTENTION))
    if cross and not subs:
        return (
            "decoder of an encoder-decoder",
            f"{type(model).__name__} cross-attends ({cross[0]}) to the states of an encoder it does not "
            "contain",
        )
    if not type(model).can_generate():
        return "not a text generator", f"{type(model).__name__}.can_generate() is False"
    return None


# --------------------------------------------------------------------------------------------
# Default configs and their repair
# --------------------------------------------------------------------------------------------


def text_path(config: PreTrainedConfig) -> str | None:
    """Key of the text decoder's sub-config in ``config`` ('' when the config is the text config).

    None when the text config sits deeper or nowhere the harness can reach (no variants then).
    """
    text = config.get_text_config(decoder=True)
    if text is config:
        return ""
    for key in getattr(type(config), "sub_configs", None) or {}:
        if getattr(config, key, None) is text:
            return key
    return None


def _text_dict(d: dict[str, Any], path: str) -> dict[str, Any]:
    """The text sub-config dict of a config dict (``d`` itself for path '')."""
    return d if path == "" else d[path]


def default_config(model_type: str) -> tuple[dict[str, Any], PreTrainedConfig]:
    """``CONFIG_MAPPING[mt]()`` serialised (``architectures`` empty: the class is chosen later)."""
    config = CONFIG_MAPPING[model_type]()
    return _serialise(config, None), config


def _heads(t: Mapping[str, Any]) -> int | None:
    """Query heads of a text config dict, under the first name it uses."""
    for key in _HEAD_KEYS:
        if isinstance(t.get(key), int) and t[key] > 0:
            return int(t[key])
    return None


def _hidden(t: Mapping[str, Any]) -> int | None:
    """Hidden size of a text config dict, under the first name it uses."""
    for key in ("hidden_size", "d_model", "n_embd", "embed_dim", "dim"):
        if isinstance(t.get(key), int) and t[key] > 0:
            return int(t[key])
    return None


def repair(d: dict[str, Any], config: PreTrainedConfig) -> tuple[dict[str, Any], list[str]] | None:
    """Fill None sizes of the text config with transformers' documented fallbacks; None if none.

    ``head_dim`` <- hidden / heads and ``num_key_value_heads`` <- heads: what most config classes
    do when the value is not given, and what some 5.24 defaults forget (HunYuan, Ministral,
    Nemotron), so their default fails to build.
    """
    path = text_path(config)
    if path is None:
        return None
    out = copy.deepcopy(d)
    t = _text_dict(out, path)
    heads, hidden = _heads(t), _hidden(t)
    notes = []
    if "head_dim" in t and t["head_dim"] is None and heads and hidden and hidden % heads == 0:
        t["head_dim"] = hidden // heads
        notes.append(f"head_dim=None -> {hidden // heads} (hidden_size / num_attention_heads)")
    if "num_key_value_heads" in t and t["num_key_value_heads"] is None and heads:
        t["num_key_value_heads"] = heads
        notes.append(f"num_key_value_heads=None -> {heads} (num_attention_heads)")
    return (out, notes) if notes else None


# --------------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------------


@dataclass
class Variant:
    """A config derived from a default by setting some text-config keys (``overrides``).

    ``name`` says what was set (``num_key_value_heads=1``); ``kv`` marks variants whose KV cache
    is measured too (they change attention geometry or the layer mix); ``top`` holds keys set
    on the top-level config as well (a multimodal ``tie_word_embeddings``).
    """

    name: str
    overrides: dict[str, Any]
    kv: bool = False
    top: dict[str, Any] = field(default_factory=dict)


_HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "n_heads", "attention_heads")
_KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads")
_EXPERT_COUNT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = (
    "num_experts_per_tok",
    "num_experts_per_token",
    "moe_top_k",
    "moe_topk",
    "moe_k",
    "top_k_experts",
)
_SHARED_COUNT_KEYS = ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts")
_SHARED_SIZE_KEYS = (
    "shared_expert_intermediate_size",
    "shared_intermediate_size",
    "moe_shared_expert_intermediate_size",
    "shared_experts_intermediate_size",
    "share_expert_dim",
)
#: Integer keys that make the first layers dense: set to 2 (1 when already 2).
_DENSE_FIRST_KEYS = ("first_k_dense_replace", "num_dense_layers", "moe_layer_start_index")
#: Integer keys that space the MoE layers: set to 2 (1 when already 2).
_SPARSE_STEP_KEYS = (
    "decoder_sparse_step",
    "moe_layer_freq",
    "interleave_moe_layer_step",
    "moe_layer_interval",
    "expert_layer_period",
)
#: Per-layer lists of layer kinds; every distinct kind gets an "all layers of this kind" variant.
_LAYER_KIND_KEYS = ("layer_types", "layers_block_type", "mlp_layer_types", "block_types")
_MTP_RE = re.compile(r"nextn|(?:^|_)mtp(?:_|$)")
_MTP_SKIP = ("loss", "scaling", "first", "types", "norm", "ids", "type")

#: Words (``_``-separated) of boolean keys that switch a structural piece on or off ...
_FLAG_WORDS = frozenset(
    {
        "bias",
        "norm",
        "norms",
        "layernorm",
        "qk",
        "gate",
        "gating",
        "gated",
        "moe",
        "multi",
        "eq",
        "wide",
        "learned",
        "affine",
        "architecture",
        "alibi",
        "parallel",
        "sandwich",
        "emb",
        "embedding",
        "embeddings",
        "embds",
    }
)
#: ... unless one of these words says it is a runtime, training or initialisation switch.
_RUNTIME_WORDS = frozenset(
    {
        "cache",
        "output",
        "outputs",
        "return",
        "dropout",
        "kernels",
        "kernel",
        "fp32",
        "float32",
        "loss",
        "mems",
        "freeze",
        "classifier",
        "summary",
        "scan",
        "mambapy",
        "path",
        "spec",
        "exact",
        "prompt",
        "task",
        "lang",
        "weighted",
        "softmax",
        "upcast",
        "init",
        "topk",
        "prob",
        "combine",
        "renormalize",
        "overlap",
        "router",
        "rescale",
        "scale",
        "scaling",
        "first",
        "tuning",
        "sinusoidal",
    }
)
_NOT_FLAGS = frozenset(
    {"is_encoder_decoder", "is_decoder", "add_cross_attention", "tie_word_embeddings", "use_sliding_window"}
)


def _fmt(value: Any) -> str:
    """Short value text for a variant name."""
    if isinstance(value, list):
        if value and all(v == value[0] for v in value):
            return f"[{value[0]}]*{len(value)}"
        return json.dumps(value)
    return json.dumps(value)


def _one(key: str, value: Any, kv: bool = False) -> Variant:
    """A variant that sets one key."""
    return Variant(f"{key}={_fmt(value)}", {key: value}, kv=kv)


def _flag_variants(t: Mapping[str, Any]) -> Iterator[Variant]:
    """Flip every structural boolean flag (bias, norm, qk-norm, gate, MoE block, ...)."""
    for key, value in t.items():
        if not isinstance(value, bool) or key in _NOT_FLAGS:
            continue
        words = set(key.lower().strip("_").split("_"))
        if words & _FLAG_WORDS and not words & _RUNTIME_WORDS:
            kv = bool(words & {"multi", "eq", "architecture"})
            yield _one(key, not value, kv=kv)


def _kv_head_variants(t: Mapping[str, Any]) -> Iterator[Variant]:
    """MHA, GQA and MQA through the KV-heads key, each where it differs from the default."""
    heads = _heads(t)
    key = next((k for k in _KV_HEAD_KEYS if k in t), None)
    if not heads or key is None:
        return
    current = t[key] if isinstance(t[key], int) else heads
    divisors = [d for d in range(2, heads // 4 + 1) if heads % d == 0]
    for value in dict.fromkeys([heads, divisors[-1] if divisors else None, 1]):
        if value is not None and value != current:
            yield _one(key, value, kv=True)


def _moe_variants(t: Mapping[str, Any]) -> Iterator[Variant]:
    """Top-k, shared experts on/off/two, dense-first layers and MoE spacing, by the keys present."""
    if not any(isinstance(t.get(k), int) and t[k] > 1 for k in _EXPERT_COUNT_KEYS):
        return
    for key in _TOP_K_KEYS:
        if isinstance(t.get(key), int):
            yield _one(key, 1 if t[key] > 1 else 2)
    for key in _SHARED_COUNT_KEYS:
        if key in t and (t[key] is None or isinstance(t[key], int)):
            current = t[key] or 0
            for value in dict.fromkeys([0 if current else 1, 2 if current == 1 else None]):
                if value is not None:
                    yield _one(key, value)
    width = next(
        (t[k] for k in ("moe_intermediate_size", "intermediate_size") if isinstance(t.get(k), int)), None
    )
    for key in _SHARED_SIZE_KEYS:
        if key in t and (t[key] is None or isinstance(t[key], int)):
            value = 0 if t[key] else width
            if value is not None:
                yield _one(key, value)
    for key in _DENSE_FIRST_KEYS + _SPARSE_STEP_KEYS:
        if isinstance(t.get(key), int) and not isinstance(t[key], bool):
            yield _one(key, 1 if t[key] == 2 else 2)
    if isinstance(t.get("mlp_only_layers"), list):
        yield _one("mlp_only_layers", [0] if t["mlp_only_layers"] == [0, 1] else [0, 1])


def _layer_kind_variants(t: Mapping[str, Any]) -> Iterator[Variant]:
    """All layers of one kind, for each kind a per-layer list holds; local/global where uniform."""
    for key in _LAYER_KIND_KEYS:
        values = t.get(key)
        if not (isinstance(values, list) and values and all(isinstance(v, str) for v in values)):
            continue
        kinds = list(dict.fromkeys(values))
        if len(kinds) > 1:
            for kind in kinds:
                yield Variant(f"{key}=[{kind}]*{len(values)}", {key: [kind] * len(values)}, kv=True)
        elif key == "layer_types" and kinds == ["full_attention"] and "sliding_window" in t:
            pattern = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(len(values))]
            overrides: dict[str, Any] = {key: pattern}
            if not t.get("sliding_window"):
                overrides["sliding_window"] = 4096
            yield Variant(f"{key}=[sliding_attention,full_attention]*{len(values) // 2}", overrides, kv=True)


def _sliding_variants(t: Mapping[str, Any]) -> Iterator[Variant]:
    """A 4096-token window where the default has none, no window where it has one."""
    if "sliding_window" not in t:
        return
    if not t["sliding_window"]:
        overrides: dict[str, Any] = {"sliding_window": 4096}
        if "use_sliding_window" in t:
            overrides["use_sliding_window"] = True
        yield Variant("sliding_window=4096", overrides, kv=True)
    else:
        overrides = {"sliding_window": None}
        if t.get("use_sliding_window") is True:
            overrides["use_sliding_window"] = False
        yield Variant("sliding_window=null", overrides, kv=True)


def _misc_variants(t: Mapping[str, Any]) -> Iterator[Variant]:
    """MTP modules on/off, MLA query low rank on/off, a doubled head_dim."""
    for key, value in t.items():
        if not _MTP_RE.search(key) or any(w in key.split("_") for w in _MTP_SKIP):
            continue
        if isinstance(value, bool):
            yield _one(key, not value)
        elif value is None or isinstance(value, int):
            yield _one(key, 0 if value else 1)
    if "q_lora_rank" in t and (t["q_lora_rank"] is None or isinstance(t["q_lora_rank"], int)):
        rank = t.get("kv_lora_rank") if isinstance(t.get("kv_lora_rank"), int) else 512
        yield _one("q_lora_rank", None if t["q_lora_rank"] else 3 * rank)
    heads, hidden = _heads(t), _hidden(t)
    if "head_dim" in t and heads and hidden and (t["head_dim"] is None or isinstance(t["head_dim"], int)):
        current = t["head_dim"] or hidden // heads
        if current:
            yield _one("head_dim", 2 * current, kv=True)


def variants(d: Mapping[str, Any], config: PreTrainedConfig) -> list[Variant]:
    """Candidate variants of a default config dict, from the attribute names its text config has.

    Candidates only: :func:`apply_variant` builds each one and keeps those transformers accepts.
    """
    path = text_path(config)
    if path is None:
        return []
    t = _text_dict(dict(d), path)
    out: list[Variant] = []
    out += _kv_head_variants(t)
    out += _moe_variants(t)
    out += _layer_kind_variants(t)
    out += _sliding_variants(t)
    if isinstance(t.get("tie_word_embeddings"), bool):
        flip = not t["tie_word_embeddings"]
        top = {"tie_word_embeddings": flip} if path and "tie_word_embeddings" in d else {}
        out.append(Variant(f"tie_word_embeddings={_fmt(flip)}", {"tie_word_embeddings": flip}, top=top))
    out += _flag_variants(t)
    out += _misc_variants(t)
    seen: set[str] = set()
    unique = []
    for v in out:
        if v.name not in seen:
            seen.add(v.name)
            unique.append(v)
    return unique


def apply_variant(
    d: Mapping[str, Any], config: PreTrainedConfig, variant: Variant
) -> tuple[dict[str, Any] | None, str]:
    """The variant's config dict, as the config class serialises it; (None, why) if rejected.

    Per-layer lists the class derives itself (Gemma-2 ``layer_types``, DeepSeek-V3.2
    ``mlp_layer_types``) are dropped before rebuilding unless the variant sets them, so they are
    re-derived from the changed keys.  A variant is rejected when the class refuses it or does
    not keep a value it was given.
    """
    path = text_path(config)
    if path is None:
        return None, "text config not reachable"
    out = copy.deepcopy(dict(d))
    archs = out.pop("architectures", None)
    t = _text_dict(out, path)
    text = config.get_text_config(decoder=True)
    n = t.get("num_hidden_layers")
    for key, value in list(t.items()):
        if key in variant.overrides or not isinstance(value, (list, dict)):
            continue
        per_layer = isinstance(value, list) and isinstance(n, int) and len(value) == n
        if (per_layer or key == "per_layer_config") and hf_oracle._is_derived(text, t, key):
            del t[key]
    t.update(copy.deepcopy(variant.overrides))
    out.update(copy.deepcopy(variant.top))
    try:
        rebuilt = type(config).from_dict(decode_floats(out))
    except Exception as exc:  # config validation of every family
        return None, f"{type(config).__name__} rejects it: {type(exc).__name__}: {str(exc)[:200]}"
    serial = _serialise(rebuilt, archs)
    got = _text_dict(serial, path)
    for key, value in variant.overrides.items():
        if jsonable(got.get(key)) != jsonable(value):
            return None, f"{key}: set {value!r}, the class keeps {got.get(key)!r}"
    return serial, ""


# --------------------------------------------------------------------------------------------
# Parameters: total and active
# --------------------------------------------------------------------------------------------

#: Attribute names a router or MoE block keeps its top-k under.
_TOP_K_ATTRS = ("top_k", "num_experts_per_tok", "num_experts_per_token", "moe_top_k", "moe_topk", "moe_k")


@dataclass
class ExpertGroup:
    """The routed-expert tensors of one MoE module: ``params`` elements over ``experts`` experts."""

    module: str
    experts: int | None
    top_k: int | None
    top_k_from: str
    params: int
    leading_dims: list[int]
    unread: int = 0  # elements of rows past the smallest leading dimension (see expert_groups)


def _top_k(model: torch.nn.Module, name: str, text: PreTrainedConfig) -> tuple[int | None, str]:
    """Top-k of the expert module ``name``: itself, its parent, the parent's children, then configs."""
    chain = [name]
    while "." in chain[-1]:
        chain.append(chain[-1].rsplit(".", 1)[0])
    chain = chain[:3]
    for i, mod_name in enumerate(chain):
        mod = model.get_submodule(mod_name)
        for attr in _TOP_K_ATTRS:
            value = getattr(mod, attr, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, f"{mod_name.rsplit('.', 1)[-1]}.{attr}"
        if i == 1:  # siblings: the router / gate next to the experts
            for child_name, child in mod.named_children():
                for attr in _TOP_K_ATTRS:
                    value = getattr(child, attr, None)
                    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                        return value, f"{child_name}.{attr}"
    for source, cfg in (
        ("module config", getattr(model.get_submodule(chain[-1]), "config", None)),
        ("text config", text),
    ):
        for key in _TOP_K_KEYS:
            value = getattr(cfg, key, None) if cfg is not None else None
            if isinstance(value, int) and value > 0:
                return value, f"{source}.{key}"
    return None, "not found"


def expert_groups(model: PreTrainedModel) -> list[ExpertGroup]:
    """Routed-expert tensors of a built model, grouped by the module that holds them.

    An expert module is (a) a module with an integer ``num_experts`` holding a parameter of 3 or
    more dimensions whose leading dimension is ``num_experts`` -- every parameter of it with that
    leading dimension is an expert tensor (fused ``gate_up_proj`` [E, 2f, d], its bias [E, 2f]);
    routers ([E, d], 2-D only) and shared experts (no expert dimension) are not; (b) a
    ``ModuleList`` named ``*experts`` (one child per expert); (c) a module named ``*experts``
    without ``num_experts`` whose 3-D parameters share one leading dimension; (d) the
    ``nn.Embedding`` children of ``num_experts`` rows of a module with an integer
    ``num_experts``: experts that are one row each, gathered by the routed indices (Doge's
    CDMoE ``down_embed`` / ``up_embed``: a token reads top_k rows of each).  Each group's
    top-k comes from :func:`_top_k`.  Grouped per module name with layer indices normalised,
    expert count and top-k.

    When the tensors of (c) disagree on their leading dimension (LongCat-Flash: ``gate_up_proj``
    [512 + 256 zero experts, ...], ``down_proj`` [512, ...]), an expert index past the smallest
    one has no row in the smaller tensor: no routed expert can read the larger tensors' rows
    there, and no checkpoint holds them. Their element count is the group's ``unread``.
    """
    text = model.config.get_text_config(decoder=True)
    taken: set[int] = set()
    groups: dict[tuple[str, int | None, int | None], ExpertGroup] = {}
    for name, mod in model.named_modules():
        last = name.rsplit(".", 1)[-1].lower()
        tensors: list[torch.nn.Parameter] = []
        unread = 0
        if isinstance(mod, torch.nn.ModuleList) and last.endswith("experts") and "shared" not in last:
            tensors = [p for p in mod.parameters() if id(p) not in taken]
            count: int | None = len(mod)
            dims = [len(mod)]
        else:
            own = [p for _, p in mod.named_parameters(recurse=False) if id(p) not in taken]
            ne = getattr(mod, "num_experts", None)
            if isinstance(ne, int) and any(p.ndim >= 3 and p.shape[0] == ne for p in own):
                tensors = [p for p in own if p.ndim >= 2 and p.shape[0] == ne]
                count, dims = ne, [ne]
            elif last.endswith("experts") and "shared" not in last and any(p.ndim >= 3 for p in own):
                tensors = [p for p in own if p.ndim >= 3]
                dims = sorted({int(p.shape[0]) for p in tensors})
                count = dims[0] if len(dims) == 1 else None
                unread = sum((p.shape[0] - dims[0]) * (p.numel() // p.shape[0]) for p in tensors)
            elif isinstance(ne, int) and not isinstance(ne, bool) and ne > 0:
                rows = [
                    child.weight
                    for child in mod.children()
                    if isinstance(child, torch.nn.Embedding)
                    and child.num_embeddings == ne
                    and id(child.weight) not in taken
                ]
                if not rows:
                    continue
                tensors, count, dims = rows, ne, [ne]
            else:
                continue
        if not tensors:
            continue
        taken.update(id(p) for p in tensors)
        module = hf_oracle.normalise_name(name)
        top_k, source = _top_k(model, name, text)
        # Layers whose expert modules differ in expert count or top-k (Dots3 Note's vision
        # pyramid: 4, 8, ... 64 experts per block) are separate groups: each is active at its
        # own top_k / experts.
        key = (module, count, top_k)
        group = groups.get(key)
        if group is None:
            groups[key] = ExpertGroup(module, count, top_k, source, 0, dims)
            group = groups[key]
        group.params += sum(p.numel() for p in tensors)
        group.unread += unread
    return list(groups.values())


def _active(total: int, groups: list[ExpertGroup]) -> tuple[int | None, str]:
    """Active parameters: every expert group at ``top_k / experts``, everything else in full."""
    active = total
    for g in groups:
        if g.experts is None:
            return None, f"{g.module}: expert tensors disagree on the expert count {g.leading_dims}"
        if g.top_k is None:
            return None, f"{g.module}: no top-k found on the module tree or the config"
        if (g.params * g.top_k) % g.experts:
            return None, f"{g.module}: {g.params} x {g.top_k} / {g.experts} is not an integer"
        active -= g.params - g.params * g.top_k // g.experts
    return active, ""


def measure_params(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Total and active parameters of transformers' meta build of ``cfg``, with parts and groups.

    Raises ``hf_oracle.OracleUnsupported`` when transformers cannot build it.
    """
    model, _config = hf_oracle.build_meta(decode_floats(dict(cfg)))
    total = sum(p.numel() for p in model.parameters())
    parts: Counter[str] = Counter()
    for name, p in model.named_parameters():
        parts[hf_oracle.classify(name)] += p.numel()
    groups = expert_groups(model)
    active, why = _active(total, groups)
    out: dict[str, Any] = {
        "model_class": type(model).__name__,
        "total": total,
        "active": active,
        "parts": {k: v for k, v in parts.items() if v},
        "experts": [{k: v for k, v in g.__dict__.items() if k != "unread"} for g in groups],
    }
    unread = sum(g.unread for g in groups)
    if unread:
        out["unread_expert_params"] = unread
    if why:
        out["active_note"] = why
    return out


# --------------------------------------------------------------------------------------------
# KV cache and recurrent state, from a real cache
# --------------------------------------------------------------------------------------------

_ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}


def _embed_text(d: Mapping[str, Any], config: PreTrainedConfig, tiny: dict[str, Any]) -> dict[str, Any]:
    """The row's config with its text config replaced by the tiny one (the whole model, tiny text)."""
    path = text_path(config)
    tiny = _strip(jsonable(tiny))
    archs = d.get("architectures")
    if path in (None, ""):
        out = dict(tiny)
        if archs:
            out["architectures"] = archs
        return out
    out = copy.deepcopy(dict(d))
    out[path] = tiny
    return out


def measure_kv(cfg: Mapping[str, Any], config: PreTrainedConfig) -> dict[str, Any]:
    """KV bytes per token and per-sequence state of a real cache after a forward of a tiny copy.

    Runs ``hf_oracle.kv_cache_bytes`` in bfloat16 with :data:`KV_SEQ_LEN` tokens.  KV tensors
    (keys, values, indexer keys) are counted in elements and reported as bf16 bytes per token
    (2 per element), the figure slotdiff gives at its default ``--kv-dtype bf16``; state tensors
    are reported as cached (transformers keeps recurrent states in float32 in a bf16 run, conv
    states in bf16), which is how slotdiff prices them.  ``config`` is the (tiny) config slotdiff
    is given for the comparison: the row's config with the tiny text config in place.
    Raises ``hf_oracle.OracleUnsupported`` when the forward fails or the tokens were capped.
    """
    got = hf_oracle.kv_cache_bytes(decode_floats(dict(cfg)), KV_SEQ_LEN, dtype="bfloat16")
    kv_elements = 0
    state_elements = 0
    dtypes: set[str] = set()
    other = 0
    for layer in got["layers"]:
        if layer["cached_tokens"] not in (None, KV_SEQ_LEN):
            raise hf_oracle.OracleUnsupported(
                f"layer {layer['index']} kept {layer['cached_tokens']} of {KV_SEQ_LEN} tokens"
            )
        for t in layer["tensors"]:
            if t["kind"] == "bookkeeping" or not t["bytes"]:
                continue
            elements = t["bytes"] // _ELEMENT_BYTES[t["dtype"]]
            if t["kind"] in hf_oracle.KV_KINDS:
                kv_elements += elements
                dtypes.add(f"{t['kind']}={t['dtype']}")
            elif t["kind"] in hf_oracle.STATE_KINDS:
                state_elements += elements
                dtypes.add(f"{t['kind']}={t['dtype']}")
            else:
                other += t["bytes"]
    if kv_elements % KV_SEQ_LEN:
        raise hf_oracle.OracleUnsupported(f"{kv_elements} KV elements do not split over {KV_SEQ_LEN} tokens")
    out: dict[str, Any] = {
        "model_class": got["model_class"],
        "cache_class": got["cache_class"],
        "num_layers": got["num_layers"],
        "layer_pattern": got["layer_pattern"],
        "geometry_preserved": got["geometry_preserved"],
        "kv_elements_per_token": kv_elements // KV_SEQ_LEN,
        "bytes_per_token": 2 * kv_elements // KV_SEQ_LEN,
        "state_elements": state_elements,
        "state_bytes": got["state_bytes"],
        "dtypes": sorted(dtypes),
        "tiny_text_config": got["tiny_config"],
    }
    if other:
        out["other_bytes"] = other
    return out


def kv_row_config(cfg: Mapping[str, Any], config: PreTrainedConfig, kv: Mapping[str, Any]) -> dict[str, Any]:
    """The config slotdiff is given for a KV row: ``cfg`` with the tiny text config in place."""
    return _embed_text(cfg, config, dict(kv["tiny_text_config"]))


def versions() -> dict[str, str]:
    """The transformers and torch versions references are computed with (their cache key)."""
    return {"transformers": transformers.__version__, "torch": torch.__version__}


# --------------------------------------------------------------------------------------------
# One model_type, end to end
# --------------------------------------------------------------------------------------------


def _build_default(model_type: str) -> tuple[dict[str, Any], PreTrainedConfig, dict[str, Any], list[str]]:
    """Default config with the first class of :func:`model_class_names` that builds it.

    Returns (config dict with ``architectures``, config object, params, repair notes); tries the
    default as it is, then :func:`repair`-ed.  Raises ``OracleUnsupported`` with the first error.
    """
    d, config = default_config(model_type)
    attempts: list[tuple[dict[str, Any], list[str]]] = [(d, [])]
    fixed = repair(d, config)
    if fixed is not None:
        attempts.append(fixed)
    first: hf_oracle.OracleUnsupported | None = None
    for cfg, notes in attempts:
        for cls in model_class_names(model_type):
            row = {**cfg, "architectures": [cls]}
            try:
                return row, config, measure_params(row), notes
            except hf_oracle.OracleUnsupported as exc:
                first = first or exc
    assert first is not None
    raise first


def reference_for_type(model_type: str, kv: bool = True, only: set[str] | None = None) -> dict[str, Any]:
    """Everything the harness stores for one ``model_type``: exclusion, or default + variants.

    Row names are ``default`` and the variant names (which say what they set); each row holds
    ``config`` (its dict), ``params`` (:func:`measure_params`) and, when ``kv`` and the row is
    the default or a KV variant, ``kv`` (:func:`measure_kv`) and ``kv_config`` (the tiny config
    it ran), or ``kv_unsupported``; ``rejected`` lists the candidate variants transformers
    refused, with the reason.  ``only`` restricts the rows.
    """
    out: dict[str, Any] = {"model_type": model_type, "classes": model_class_names(model_type)}
    early = exclusion(model_type)
    if early is not None:
        out.update(status="excluded", kind=early[0], reason=early[1])
        return out
    try:
        default, config, params, notes = _build_default(model_type)
    except hf_oracle.OracleUnsupported as exc:
        out.update(status="unbuildable", reason=exc.reason)
        return out
    except Exception as exc:  # the config class rejects its own defaults
        out.update(status="unbuildable", reason=f"{type(exc).__name__}: {str(exc)[:300]}")
        return out
    model, _ = hf_oracle.build_meta(decode_floats(default))
    late = exclusion(model_type, model)
    del model
    if late is not None:
        out.update(status="excluded", kind=late[0], reason=late[1])
        return out
    out.update(status="built", model_class=params["model_class"], text_path=text_path(config))
    if notes:
        out["repair"] = notes
    rows: dict[str, Any] = {}
    rejected: dict[str, str] = {}
    candidates: list[tuple[str, dict[str, Any], Variant | None]] = [("default", default, None)]
    seen = {json.dumps(default, sort_keys=True)}
    for variant in variants(default, config):
        cfg, why = apply_variant(default, config, variant)
        if cfg is None:
            rejected[variant.name] = why
            continue
        key = json.dumps(cfg, sort_keys=True)
        if key in seen:
            rejected[variant.name] = "same config as an earlier row"
            continue
        seen.add(key)
        candidates.append((variant.name, cfg, variant))
    for name, cfg, variant in candidates:
        if only is not None and name not in only:
            continue
        row: dict[str, Any] = {"config": cfg}
        if variant is not None:
            try:
                row["params"] = measure_params(cfg)
            except hf_oracle.OracleUnsupported as exc:
                rejected[name] = exc.reason
                continue
        else:
            row["params"] = params
        if kv and (variant is None or variant.kv):
            try:
                measured = measure_kv(cfg, config)
                row["kv_config"] = kv_row_config(cfg, config, measured)
                del measured["tiny_text_config"]
                row["kv"] = measured
            except hf_oracle.OracleUnsupported as exc:
                row["kv_unsupported"] = exc.reason
            except Exception as exc:  # forward failures of every kind
                row["kv_unsupported"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            if variant is not None and "kv_unsupported" in row and "kv" in rows.get("default", {}):
                # the default runs, this variant does not: transformers builds an inconsistent model
                rejected[name] = f"builds on meta, but the tiny copy does not run: {row['kv_unsupported']}"
                continue
        rows[name] = row
    out["rows"] = rows
    if rejected:
        out["rejected"] = rejected
    return out
