"""Independent reference ("oracle") for slotdiff's numbers, from transformers' own model classes.

slotdiff derives parameter counts, KV-cache bytes and FLOPs from a ``config.json`` alone.  This
module measures the same quantities on the models that transformers actually builds for that
config, so the two can be compared:

* :func:`param_count` instantiates the full model on the ``meta`` device (no memory, no weights)
  and counts its parameters, split into slot "parts" by the name patterns in
  :data:`PART_PATTERNS`.
* :func:`kv_cache_bytes` and :func:`forward_flops` build a *tiny real* copy of the text model
  (same attention / recurrent-state geometry, few layers, tiny vocabulary and MLPs), run it on
  CPU and measure the cache it returns and the FLOPs ``torch.utils.flop_counter`` sees.  They
  return the tiny config they used, so the caller computes its own figure from exactly that
  config.

Nothing here reads slotdiff, downloads anything or runs remote code.  Versions this was written
against: transformers 5.24.0, torch 2.13.0 (see ``README.md`` next to this file).
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
import transformers
from torch.utils.flop_counter import FlopCounterMode
from transformers import CONFIG_MAPPING, PreTrainedConfig, PreTrainedModel
from transformers.models.auto import modeling_auto

__all__ = [
    "PARTS",
    "PART_PATTERNS",
    "TINY_SIZES",
    "TORCH_VERSION",
    "TRANSFORMERS_VERSION",
    "OracleUnsupported",
    "build_meta",
    "classify",
    "forward_flops",
    "inspect_cache",
    "kv_cache_bytes",
    "layer_pattern",
    "layer_patterns",
    "load_config",
    "normalise_name",
    "param_count",
    "persistent_buffers",
    "tiny_text_config",
]

TORCH_VERSION: str = torch.__version__
TRANSFORMERS_VERSION: str = transformers.__version__


class OracleUnsupported(Exception):
    """Raised when transformers cannot build a model for a config; ``reason`` says why.

    Callers (tests) should treat it as "no reference available", never as a pass or a failure.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------------------------
# Loading and building
# --------------------------------------------------------------------------------------------

#: transformers serialises non-JSON floats as ``{"__float__": "Infinity"}`` (configuration_utils).
_FLOAT_TAGS: dict[str, float] = {
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
    "NaN": float("nan"),
}

#: ``model_type`` values transformers does not know, mapped to the one whose classes implement them.
#: Kimi K2 ships ``architectures: ["DeepseekV3ForCausalLM"]`` and DeepSeek-V3's remote code.
MODEL_TYPE_ALIASES: dict[str, str] = {"kimi_k2": "deepseek_v3"}

#: Top-level keys dropped before building: ``auto_map`` points at remote code (never run) and
#: ``quantization_config`` would only matter to ``from_pretrained``; counts are of the logical,
#: unquantised tensors (one element per weight, whatever its storage format).
_DROPPED_KEYS: tuple[str, ...] = ("auto_map", "quantization_config")


def _decode_float_tags(obj: dict[str, Any]) -> Any:
    """json ``object_hook`` turning transformers' ``{"__float__": "Infinity"}`` back into floats."""
    if set(obj) == {"__float__"} and obj["__float__"] in _FLOAT_TAGS:
        return _FLOAT_TAGS[obj["__float__"]]
    return obj


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a ``config.json`` into a dict, decoding ``{"__float__": "Infinity"}`` tags to floats.

    transformers writes such tags for inf/NaN (e.g. Mamba-2's ``time_step_limit``) and its strict
    config dataclasses reject the raw dict, so they must be decoded before building.
    """
    with open(path, encoding="utf-8") as fh:
        return json.load(fh, object_hook=_decode_float_tags)


def _config_object(cfg: Mapping[str, Any]) -> PreTrainedConfig:
    """Turn a config dict into transformers' config object for its ``model_type``.

    Applies :data:`MODEL_TYPE_ALIASES` and drops :data:`_DROPPED_KEYS`; raises
    :class:`OracleUnsupported` when the model type is unknown or the config class rejects the dict.
    """
    d = copy.deepcopy(dict(cfg))
    for key in _DROPPED_KEYS:
        d.pop(key, None)
    model_type = d.get("model_type")
    if model_type is None:
        raise OracleUnsupported("config has no model_type")
    model_type = MODEL_TYPE_ALIASES.get(model_type, model_type)
    d["model_type"] = model_type
    if model_type not in CONFIG_MAPPING:
        raise OracleUnsupported(
            f"model_type {cfg.get('model_type')!r} is not implemented in transformers "
            f"{TRANSFORMERS_VERSION} (only remote code implements it; the oracle never runs it)"
        )
    config_cls = CONFIG_MAPPING[model_type]
    try:
        return config_cls.from_dict(d)
    except Exception as exc:  # transformers raises many different types here
        raise OracleUnsupported(
            f"{config_cls.__name__} rejects the config: {type(exc).__name__}: {exc}"
        ) from exc


def _class_by_name(name: str | None) -> type[PreTrainedModel] | None:
    """Return ``transformers.<name>`` when it is a model class, else None."""
    if not name:
        return None
    cls = getattr(transformers, name, None)
    if isinstance(cls, type) and issubclass(cls, PreTrainedModel):
        return cls
    return None


def _model_class(cfg: Mapping[str, Any], config: PreTrainedConfig) -> tuple[type, str]:
    """Pick the model class for a config and say why: ``architectures[0]`` or an auto mapping.

    Multimodal configs (with a ``vision_config``) go through the image-text-to-text mapping so the
    whole model (vision tower + projector + LM) is built, not just the text decoder.
    """
    archs = cfg.get("architectures") or []
    cls = _class_by_name(archs[0]) if archs else None
    if cls is not None and (cls.config_class is None or isinstance(config, cls.config_class)):
        return cls, "architectures[0]"
    model_type = config.model_type
    causal = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    image_text = modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    order = (
        [("image-text-to-text", image_text), ("causal-lm", causal)]
        if "vision_config" in cfg
        else [("causal-lm", causal), ("image-text-to-text", image_text)]
    )
    for label, mapping in order:
        cls = _class_by_name(mapping.get(model_type))
        if cls is not None:
            return cls, f"auto mapping ({label})"
    raise OracleUnsupported(
        f"transformers {TRANSFORMERS_VERSION} has no causal-LM or image-text-to-text class for "
        f"model_type {model_type!r} (architectures={archs})"
    )


def _instantiate(cls: type, config: PreTrainedConfig, **kwargs: Any) -> PreTrainedModel:
    """Call ``cls._from_config`` and convert any failure into :class:`OracleUnsupported`."""
    try:
        return cls._from_config(config, **kwargs)
    except Exception as exc:  # the failure modes are transformers bugs of every kind
        raise OracleUnsupported(
            f"{cls.__name__}(config) fails in transformers {TRANSFORMERS_VERSION}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _build_meta(cfg: Mapping[str, Any]) -> tuple[PreTrainedModel, PreTrainedConfig, str]:
    """:func:`build_meta` plus the reason its class was chosen."""
    config = _config_object(cfg)
    cls, why = _model_class(cfg, config)
    with torch.device("meta"):
        model = _instantiate(cls, config)
    return model, config, why


def build_meta(cfg: Mapping[str, Any]) -> tuple[PreTrainedModel, PreTrainedConfig]:
    """Instantiate transformers' model for ``cfg`` on the ``meta`` device; return (model, config).

    Meta tensors have shapes but no storage, so even 1T-parameter models build in well under a
    second; the class is chosen by :func:`_model_class` (never ``trust_remote_code``).
    """
    model, config, _why = _build_meta(cfg)
    return model, config


# --------------------------------------------------------------------------------------------
# Parameter counts
# --------------------------------------------------------------------------------------------

#: Slot parts, in report order.
PARTS: tuple[str, ...] = (
    "embedding",
    "position",
    "attention",
    "ffn",
    "experts",
    "shared_experts",
    "router",
    "norms",
    "head",
    "vision",
    "connector",
    "audio",
    "other",
)

# Building blocks for the patterns below.  ``_SEG`` anchors a module name at a dot boundary.
_SEG = r"(?:^|\.)"
_MIXERS = (
    r"self_attn|self_attention|attention|attn|cross_attn|linear_attn|mamba|mixer|conv"
    r"|shared_transformer\.self_attn"
)

#: Ordered (part, regex) table; a parameter goes to the first part whose regex ``search``-es its
#: full dotted name (layer indices included).  Order matters: multimodal towers first, then MoE
#: pieces (they can live under a "mixer"), then sequence mixers (whose internal norms count as
#: attention), then dense MLPs, then norms.  Anything left is "other" and is reported by name.
PART_PATTERNS: tuple[tuple[str, str], ...] = (
    # Audio encoders with their projection into the text width: Qwen-Omni / Dots3 / Muse Spark
    # `audio_tower`, Apertus 1.5 `audio_tokenizer`, Phi-4-multimodal `audio_embed` (its
    # Conformer and speech projections); slotdiff's slot `audio`.
    ("audio", _SEG + r"(?:audio_tower|audio_tokenizer|audio_embed)\."),
    # Multimodal projector / merger that maps vision features into the LM embedding space:
    # llava/mllama/gemma3/internvl/llama4 `multi_modal_projector`, Qwen-VL `visual.merger` and
    # `visual.deepstack_merger_list`, Gemma-4 `embed_vision`.
    ("connector", _SEG + r"(?:multi_modal_projector|mm_projector|embed_vision)\."),
    ("connector", _SEG + r"visual\.(?:merger|deepstack_merger_list)\."),
    # Vision encoders (everything else under them, incl. Llama-4's `vision_adapter`).
    ("vision", _SEG + r"(?:vision_tower|vision_model|visual|vision_encoder)\."),
    # Untied output head (a tied head shares the embedding tensor and is counted there once).
    ("head", _SEG + r"lm_head\."),
    # Token embeddings incl. per-layer-input embeddings (Gemma-3n style `embed_tokens_per_layer`).
    (
        "embedding",
        _SEG + r"(?:embed_tokens|embed_tokens_per_layer|wte|word_embeddings|embed_in|embeddings)"
        r"\.weight$",
    ),
    # Learned absolute position tables (GPT-2 `wpe`, OPT `embed_positions`).
    ("position", _SEG + r"(?:wpe|embed_positions|position_embeddings)\."),
    # Routed experts: `experts.` (stacked 3-D tensors or ModuleList), DBRX `ffn.experts.mlp`.
    ("experts", _SEG + r"experts\."),
    # Shared experts and their sigmoid gates (Qwen2-MoE/Qwen3-Next `shared_expert_gate`).
    ("shared_experts", _SEG + r"(?:shared_experts?|shared_expert_gate|shared_mlp)\."),
    # Routers: `gate.weight` (Mixtral/Qwen-MoE/DeepSeek incl. `e_score_correction_bias`), `router.*`
    # (gpt-oss weight+bias, Llama-4, Jamba, Gemma-4 proj/scale/per_expert_scale, LongCat
    # classifier), Nemotron-H `mixer.gate`, ERNIE `gate.moe_statics`.
    ("router", _SEG + r"(?:gate|router)\."),
    # Nemotron-H dense MLP layers live under `mixer` too; catch them before the mixer rule.
    ("ffn", _SEG + r"mixer\.(?:up_proj|down_proj|gate_proj)\."),
    # Zamba-2 adapters of the shared block's MLP.
    ("ffn", r"feed_forward\.gate_up_proj_adapter_list\."),
    # Sequence mixers: attention q/k/v/o incl. biases, MLA low-rank projections and their
    # norms, qk norms, sinks, DSA indexer, linear attention (GatedDeltaNet/KDA/Lightning),
    # Mamba/SSM (A_log, D, dt, conv1d), LFM2 short convolutions, Mllama cross-attention.
    ("attention", _SEG + r"(?:" + _MIXERS + r")\."),
    ("attention", _SEG + r"cross_attn_attn_gate$"),
    # Zamba-2 per-hybrid-layer projection of the shared attention block's output.
    ("attention", r"layers\.\d+\.linear\.weight$"),
    # Dense MLPs (also the dense layers of MoE models, LongCat `mlps.N`, Mllama's tanh MLP gate).
    ("ffn", _SEG + r"(?:mlp|mlps|feed_forward|ffn|fc1|fc2)\."),
    ("ffn", _SEG + r"cross_attn_mlp_gate$"),
    # Norms outside mixers: per-layer pre/post norms, final norm, embedding norms.
    ("norms", r"(?:norm|layernorm|ln_\d+|ln_f)[^.]*\.(?:weight|bias)$"),
    ("norms", r"(?:norm|layernorm)[^.]*\.\d+\.(?:weight|bias)$"),
)

_COMPILED_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (part, re.compile(rx)) for part, rx in PART_PATTERNS
)

_INDEX_RE = re.compile(r"(?<=\.)\d+(?=\.|$)")


def normalise_name(name: str) -> str:
    """Replace every numeric path component of a parameter name with ``N`` (layers, experts)."""
    return _INDEX_RE.sub("N", name)


def classify(name: str) -> str:
    """Return the slot part (one of :data:`PARTS`) of a full parameter name; ``other`` if none."""
    for part, rx in _COMPILED_PATTERNS:
        if rx.search(name):
            return part
    return "other"


def _absent_subconfigs(cfg: Mapping[str, Any], config: PreTrainedConfig) -> list[str]:
    """Sub-config keys the model class has but the input dict lacks (transformers defaults them)."""
    subs = getattr(type(config), "sub_configs", None) or {}
    return sorted(k for k in subs if k not in cfg and getattr(config, k, None) is not None)


def persistent_buffers(model: torch.nn.Module) -> dict[str, int]:
    """Element counts of persistent buffers (state-dict tensors that are not parameters), by name.

    transformers 5.24 keeps e.g. DeepSeek-V3 / Nemotron-H ``e_score_correction_bias`` and Gemma-4
    ``layer_scalar`` as buffers, so checkpoint tensors are missing from ``total``; some buffers
    are computed constants instead (MiniMax-01 ``slope_rate`` and decay masks).
    """
    out: Counter[str] = Counter()
    for mod_name, module in model.named_modules():
        for buf_name, buf in module._buffers.items():
            if buf is None or buf_name in module._non_persistent_buffers_set:
                continue
            full = f"{mod_name}.{buf_name}" if mod_name else buf_name
            out[normalise_name(full)] += buf.numel()
    return dict(out)


def param_count(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Count the parameters of transformers' model for ``cfg``, total and per slot part.

    ``total`` is ``sum(p.numel() for p in model.parameters())`` (tied tensors once); ``parts``
    splits it with :data:`PART_PATTERNS` and always sums to ``total``.

    Returned keys: ``model_class``, ``class_source`` (why that class), ``total``, ``parts``
    (every part of :data:`PARTS`, zeros included), ``by_name`` (counts per normalised parameter
    name), ``part_of_name`` (normalised name -> part), ``other_names`` (names that matched no
    pattern), ``tied`` (alias name -> name it shares storage with, e.g. ``lm_head.weight``),
    ``defaulted_subconfigs`` (sub-configs absent from the input that transformers filled with
    its defaults, e.g. a trimmed file without ``vision_config``), ``persistent_buffers``
    (normalised name -> elements of persistent buffers, which are *not* in ``total``).
    """
    model, config, why = _build_meta(cfg)
    total = sum(p.numel() for p in model.parameters())
    parts = dict.fromkeys(PARTS, 0)
    by_name: Counter[str] = Counter()
    part_of_name: dict[str, str] = {}
    canonical: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=True):
        part = classify(name)
        parts[part] += p.numel()
        norm = normalise_name(name)
        by_name[norm] += p.numel()
        part_of_name[norm] = part
        canonical[id(p)] = name
    tied = {
        name: canonical[id(p)]
        for name, p in model.named_parameters(remove_duplicate=False)
        if canonical.get(id(p)) not in (None, name)
    }
    assert sum(parts.values()) == total, "part table must partition the parameters"
    return {
        "model_class": type(model).__name__,
        "class_source": why,
        "total": total,
        "parts": parts,
        "by_name": dict(by_name),
        "part_of_name": part_of_name,
        "other_names": sorted(n for n, p in part_of_name.items() if p == "other"),
        "tied": tied,
        "defaulted_subconfigs": _absent_subconfigs(cfg, config),
        "persistent_buffers": persistent_buffers(model),
    }


# --------------------------------------------------------------------------------------------
# Tiny real copies of the text model (KV cache and FLOPs)
# --------------------------------------------------------------------------------------------

#: Sizes a tiny copy uses for keys that do not shape the attention / recurrent state.  A key is
#: only touched when the config has it and its value is larger (``None`` counts as larger: GPT-2's
#: ``n_inner=None`` means ``4 * n_embd``).  ``hidden_size`` is never changed: in most families it
#: fixes ``head_dim`` or the SSM width, so it is part of the geometry being measured.
TINY_SIZES: dict[str, int] = {
    "vocab_size": 256,
    "intermediate_size": 64,
    "n_inner": 64,
    "ffn_dim": 64,
    "ffn_hidden_size": 64,
    "intermediate_size_mlp": 64,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "expert_ffn_hidden_size": 32,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "num_experts_per_token": 2,
    "moe_top_k": 2,
    "top_k_experts": 2,
    "moe_k": 2,
    "moe_topk": 2,
    "moe_num_shared_experts": 1,
    "n_shared_experts": 1,
    "num_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
    "num_expert_group": 1,
    "first_k_dense_replace": 1,
    "zero_expert_num": 2,
}

#: Keys of :data:`TINY_SIZES` that some families use for the sequence mixer (Mamba's
#: ``intermediate_size`` is ``expand * hidden_size``); dropped on the second shrink attempt.
_MIXER_SENSITIVE: frozenset[str] = frozenset({"intermediate_size"})

#: Per-layer index lists (layer numbers) that must be filtered when layers are dropped.
_LAYER_INDEX_KEYS: tuple[str, ...] = (
    "full_attn_idxs",
    "attn_layer_indices",
    "hybrid_layer_ids",
    "mlp_only_layers",
    "cross_attention_layers",
    "moe_layers",  # Llama 4's MoE layer indices (Maverick's [1, 3, ... 47]: every other layer)
)

_TOKEN_ID_KEYS: tuple[str, ...] = ("pad_token_id", "bos_token_id", "eos_token_id")

#: Per-layer pattern attributes that some config classes expose as properties (not in to_dict).
_PATTERN_PROPERTIES: tuple[str, ...] = ("layer_types", "layers_block_type")


def layer_patterns(config: PreTrainedConfig) -> dict[str, list[Any]]:
    """Every per-layer list of a (text) config: keys whose value has one entry per layer.

    Includes properties such as Jamba's ``layer_types`` (derived from periods and offsets).
    """
    n = int(config.num_hidden_layers)
    found: dict[str, list[Any]] = {}
    items = list(config.to_dict().items())
    items += [(attr, getattr(config, attr, None)) for attr in _PATTERN_PROPERTIES]
    for key, value in items:
        if key in _TOKEN_ID_KEYS or key in found:
            continue
        if isinstance(value, (list, tuple)) and len(value) == n:
            found[key] = list(value)
    return found


def layer_pattern(config: PreTrainedConfig) -> list[str] | None:
    """The layer-type list of a (text) config (``layer_types``, else ``layers_block_type``)."""
    patterns = layer_patterns(config)
    for key in _PATTERN_PROPERTIES:
        if key in patterns:
            return [str(v) for v in patterns[key]]
    return None


def _covering_prefix(config: PreTrainedConfig) -> int:
    """Fewest layers (at least 2) whose prefix shows every value of every per-layer string list."""
    n = int(config.num_hidden_layers)
    needed = 1
    for values in layer_patterns(config).values():
        if not all(isinstance(v, str) for v in values):
            continue
        first_seen: dict[str, int] = {}
        for i, v in enumerate(values):
            first_seen.setdefault(v, i)
        needed = max(needed, max(first_seen.values()) + 1)
    return min(n, max(2, needed))


def _text_parts(cfg: Mapping[str, Any]) -> tuple[PreTrainedConfig, type]:
    """Return (decoder text config, causal-LM class for it) of a possibly multimodal config.

    Text sub-configs without a causal-LM class (Qwen3-VL ``qwen3_vl_moe_text``) fall back to the
    bare text model (no LM head; FLOPs then lack the head).
    """
    config = _config_object(cfg)
    text = config.get_text_config(decoder=True)
    causal_names = set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    if text is config:
        archs = cfg.get("architectures") or []
        cls = _class_by_name(archs[0]) if archs else None
        usable = cls is not None and cls.__name__ in causal_names
        if usable and isinstance(config, cls.config_class):
            return text, cls
    causal = modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    candidates = [causal.get(text.model_type)]
    # e.g. ``mllama_text_model`` is served by the ``mllama`` causal-LM class
    candidates += [v for k, v in causal.items() if text.model_type.startswith(k + "_")]
    candidates += [modeling_auto.MODEL_MAPPING_NAMES.get(text.model_type)]
    for name in candidates:
        text_cls = _class_by_name(name)
        if text_cls is not None and isinstance(text, text_cls.config_class):
            return text, text_cls
    text_cls = _text_module_class(cfg, config, text)
    if text_cls is not None:
        return text, text_cls
    raise OracleUnsupported(
        f"no causal-LM or base class for the text model_type {text.model_type!r} in "
        f"transformers {TRANSFORMERS_VERSION}"
    )


def _text_module_class(
    cfg: Mapping[str, Any], config: PreTrainedConfig, text: PreTrainedConfig
) -> type | None:
    """The class of the outermost module of the full model that carries the text config's type.

    Fallback for text configs no mapping serves with their own config class: a type mapped to
    another family's class (InternLM3 and EXAONE to ``LlamaForCausalLM``, Sarvam to DeepSeek-V3's)
    and multimodal text models reachable only inside their model (Kosmos-2 ``text_model``,
    Qwen2.5-Omni thinker ``language_model``).  The full model is built on ``meta`` to find it.
    """
    try:
        cls, _why = _model_class(cfg, config)
        with torch.device("meta"):
            model = _instantiate(cls, config)
    except OracleUnsupported:
        return None
    for _name, module in model.named_modules():
        if isinstance(module, PreTrainedModel) and type(module.config) is type(text):
            return type(module)
    return None


def _is_derived(text: PreTrainedConfig, d: Mapping[str, Any], key: str) -> bool:
    """Whether the config class recomputes ``d[key]`` by itself when the key is left out."""
    try:
        rebuilt = type(text).from_dict({k: v for k, v in d.items() if k != key})
    except Exception:  # the key is required
        return False
    rebuilt_value = rebuilt.to_dict().get(key, getattr(rebuilt, key, None))
    return rebuilt_value == d[key]


def _shrunk_dict(
    text: PreTrainedConfig, num_layers: int | None, sizes: Mapping[str, int]
) -> tuple[dict[str, Any], list[str]]:
    """Dict for a tiny copy of ``text``: small non-geometry sizes, few layers; plus notes.

    Per-layer lists that the config class derives by itself (Gemma-2 ``layer_types``,
    DeepSeek-V3.2 ``mlp_layer_types`` from ``first_k_dense_replace``) are dropped so they are
    re-derived for the tiny sizes; explicit ones (Nemotron-H pattern, Qwen3-Next ``layer_types``
    written in the file) are cut to their first ``num_layers`` entries.  ``num_layers=None``
    picks the shortest prefix in which every layer kind of the shrunk config appears.
    """
    d = text.to_dict()
    notes: list[str] = []
    for key in ("architectures", "auto_map", "quantization_config", "dtype", "torch_dtype"):
        d.pop(key, None)
    n0 = int(text.num_hidden_layers)
    per_layer = [k for k, v in d.items() if isinstance(v, list) and len(v) == n0 and k not in _TOKEN_ID_KEYS]
    derived = [k for k in per_layer if _is_derived(text, d, k)]
    if isinstance(d.get("per_layer_config"), dict) and _is_derived(text, d, "per_layer_config"):
        derived.append("per_layer_config")
    for key, small in sizes.items():
        if key in d and (d[key] is None or (isinstance(d[key], int) and d[key] > small)):
            notes.append(f"{key} {d[key]} -> {small}")
            d[key] = small
    vocab = d.get("vocab_size")
    for key in _TOKEN_ID_KEYS:
        ids = d.get(key)
        as_list = ids if isinstance(ids, list) else [ids]
        if isinstance(vocab, int) and any(isinstance(i, int) and i >= vocab for i in as_list):
            d[key] = [0] if isinstance(ids, list) else 0  # some classes reject None
    original = {key: d.pop(key) for key in derived}
    if num_layers is None:
        num_layers = _covering_prefix(type(text).from_dict(d))
    try:
        probe = type(text).from_dict({**d, "num_hidden_layers": num_layers}).to_dict()
    except Exception:  # e.g. Zamba-2's default pattern ignores num_hidden_layers
        probe = {}
    for key in derived:
        value = probe.get(key)
        if not (isinstance(value, (list, dict)) and len(value) <= num_layers):
            d[key] = original[key]
    derived = [key for key in derived if key not in d]
    if derived:
        notes.append(f"re-derived per-layer lists: {', '.join(derived)}")
    for key in per_layer:
        if key not in derived:
            d[key] = [d[key][i % n0] for i in range(num_layers)]
    for key in _LAYER_INDEX_KEYS:
        if isinstance(d.get(key), list):
            d[key] = [i for i in d[key] if isinstance(i, int) and i < num_layers]
    if isinstance(d.get("per_layer_config"), dict):  # heterogeneous layers, keyed by index
        d["per_layer_config"] = {k: v for k, v in d["per_layer_config"].items() if int(k) < num_layers}
    d["num_hidden_layers"] = num_layers
    notes.insert(0, f"num_hidden_layers {n0} -> {num_layers}")
    d["use_cache"] = True
    return d, notes


def _mixer_shapes(model: torch.nn.Module, num_layers: int) -> dict[str, tuple[int, ...]]:
    """Shapes of the sequence-mixer ("attention" part) parameters of the first layers, by name."""
    out: dict[str, tuple[int, ...]] = {}
    for name, p in model.named_parameters():
        m = re.search(r"layers\.(\d+)\.", name)
        if m and int(m.group(1)) < num_layers and classify(name) == "attention":
            out[name] = tuple(p.shape)
    return out


def tiny_text_config(
    cfg: Mapping[str, Any],
    num_layers: int | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[PreTrainedConfig, type, dict[str, Any]]:
    """Build the config of a tiny copy of ``cfg``'s text model; return (config, class, info).

    The copy keeps every sequence-mixer weight shape of its layers (checked against the same
    layers of the full model built on ``meta``: ``info["geometry_preserved"]``) and a prefix of
    the layer pattern, and shrinks vocabulary, MLP and expert sizes (:data:`TINY_SIZES`);
    ``hidden_size`` is kept.  ``overrides`` (e.g. ``{"sliding_window": 8}``) are applied last.
    ``info["tiny_config"]`` is the tiny config as a plain dict (``to_dict()``).
    """
    text, cls = _text_parts(cfg)
    attempts = [
        dict(TINY_SIZES),
        {k: v for k, v in TINY_SIZES.items() if k not in _MIXER_SENSITIVE},
    ]
    with torch.device("meta"):
        full_model = _instantiate(cls, text)
    mismatches: list[str] = []
    for sizes in attempts:
        d, notes = _shrunk_dict(text, num_layers, sizes)
        if overrides:
            d.update(overrides)
            notes.append(f"overrides {dict(overrides)}")
        try:
            tiny = type(text).from_dict(d)
        except Exception as exc:  # config validation of every family
            raise OracleUnsupported(f"tiny config rejected: {type(exc).__name__}: {exc}") from exc
        n = int(tiny.num_hidden_layers)
        with torch.device("meta"):
            shapes = _mixer_shapes(_instantiate(cls, tiny), n)
        # compare the layers the tiny model has (LongCat counts two sub-layers per layer)
        present = {re.search(r"layers\.(\d+)\.", k).group(1) for k in shapes}
        reference = {
            k: v
            for k, v in _mixer_shapes(full_model, n).items()
            if re.search(r"layers\.(\d+)\.", k).group(1) in present
        }
        mismatches = sorted(
            f"{k}: {reference.get(k)} -> {shapes.get(k)}"
            for k in set(reference) | set(shapes)
            if reference.get(k) != shapes.get(k)
        )
        if not mismatches:
            break
    info = {
        "model_class": cls.__name__,
        "num_layers": int(tiny.num_hidden_layers),
        "layer_pattern": layer_pattern(tiny),
        "layer_patterns": layer_patterns(tiny),
        "shrink_notes": notes,
        "geometry_preserved": not mismatches,
        "geometry_mismatches": mismatches,
        "tiny_config": tiny.to_dict(),
    }
    return tiny, cls, info


_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _build_tiny(
    cfg: Mapping[str, Any],
    num_layers: int | None,
    overrides: Mapping[str, Any] | None,
    dtype: str,
    experts_eager: bool = False,
) -> tuple[PreTrainedModel, dict[str, Any]]:
    """Instantiate the tiny copy on CPU with random weights (seed 0), eager attention, eval mode."""
    if dtype not in _DTYPES:
        raise ValueError(f"dtype must be one of {sorted(_DTYPES)}")
    tiny, cls, info = tiny_text_config(cfg, num_layers, overrides)
    torch.manual_seed(0)
    kwargs: dict[str, Any] = {"dtype": _DTYPES[dtype], "attn_implementation": "eager"}
    if experts_eager:
        kwargs["experts_implementation"] = "eager"
    with torch.device("cpu"):
        try:
            model = cls._from_config(tiny, **kwargs)
        except (ValueError, NotImplementedError):
            kwargs.pop("experts_implementation", None)
            model = _instantiate(cls, tiny, **kwargs)
    info["experts_implementation"] = getattr(model.config, "_experts_implementation", None)
    info["attn_implementation"] = model.config._attn_implementation
    return model.eval(), info


def _input_ids(model: PreTrainedModel, length: int, batch_size: int = 1) -> torch.Tensor:
    """Deterministic random token ids below the tiny vocabulary size."""
    gen = torch.Generator().manual_seed(1234)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    return torch.randint(0, vocab, (batch_size, length), generator=gen)


def _forward(model: PreTrainedModel, info: Mapping[str, Any], **kwargs: Any) -> Any:
    """Run the tiny copy; a failure inside transformers becomes :class:`OracleUnsupported`."""
    try:
        return model(**kwargs)
    except Exception as exc:  # transformers bugs of every kind
        raise OracleUnsupported(
            f"forward of the tiny {info['model_class']} fails in transformers "
            f"{TRANSFORMERS_VERSION}: {type(exc).__name__}: {exc}"
        ) from exc


def _returned_cache(output: Any) -> Any:
    """The cache object of a model output (transformers 5 names it ``cache``)."""
    cache = getattr(output, "cache", None)
    if cache is None:
        cache = getattr(output, "past_key_values", None)
    return getattr(cache, "self_attention_cache", cache)


_KIND_BY_ATTR: dict[str, str] = {
    "keys": "key",
    "values": "value",
    "indexer_keys": "indexer_key",
    "idx_keys": "indexer_key",  # MiniMax-M3's lightning-indexer key cache (sparse layers)
    "conv_states": "conv_state",
    "recurrent_states": "recurrent_state",
}
#: Kinds that grow with the sequence (per-token KV) versus fixed-size recurrent state.
KV_KINDS: frozenset[str] = frozenset({"key", "value", "indexer_key"})
STATE_KINDS: frozenset[str] = frozenset({"conv_state", "recurrent_state", "linear_cache"})


def _tensors_in(obj: Any, prefix: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield (path, tensor) for tensors held directly or in dicts/lists/tuples by ``obj``."""
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _tensors_in(v, f"{prefix}[{k}]")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors_in(v, f"{prefix}[{i}]")


def _kind(attr: str) -> str:
    """Classify a cache attribute name as key/value/indexer_key/conv_state/... or bookkeeping."""
    if attr in _KIND_BY_ATTR:
        return _KIND_BY_ATTR[attr]
    if attr.startswith("_"):
        return "bookkeeping"
    if "conv" in attr:
        return "conv_state"
    if "recurrent" in attr or "ssm" in attr:
        return "recurrent_state"
    return "other"


def inspect_cache(cache: Any) -> list[dict[str, Any]]:
    """List every tensor a transformers cache holds, per layer, with kind, shape, dtype and bytes.

    Walks ``cache.layers`` (DynamicLayer, DynamicSlidingWindowLayer, LinearAttention*Layer, ...)
    and, for caches that keep state outside their layers (MiniMax ``linear_cache``), those lists.
    Tensors shared between layers are reported once (``shared_with`` marks repeats).
    """
    seen: dict[int, str] = {}
    layers: list[dict[str, Any]] = []
    cache_layers = list(getattr(cache, "layers", []) or [])
    extra = {
        attr: value
        for attr, value in vars(cache).items()
        if attr != "layers" and isinstance(value, list) and value
    }
    count = max([len(cache_layers)] + [len(v) for v in extra.values()])
    for i in range(count):
        entry: dict[str, Any] = {"index": i, "tensors": []}
        sources: list[tuple[str, Any]] = []
        if i < len(cache_layers):
            layer = cache_layers[i]
            entry["cache_layer_class"] = type(layer).__name__
            entry["is_sliding"] = bool(getattr(layer, "is_sliding", False))
            entry["window"] = getattr(layer, "sliding_window", None) if entry["is_sliding"] else None
            sources.extend(vars(layer).items())
        for attr, value in extra.items():
            if i < len(value):
                sources.append((attr, value[i]))
        for attr, value in sources:
            kind = "linear_cache" if attr == "linear_cache" else _kind(attr)
            for path, t in _tensors_in(value, attr):
                key = id(t)
                record = {
                    "name": path,
                    "kind": kind,
                    "shape": list(t.shape),
                    "dtype": str(t.dtype).replace("torch.", ""),
                    "bytes": t.numel() * t.element_size(),
                }
                if key in seen:
                    record["shared_with"] = seen[key]
                    record["bytes"] = 0
                else:
                    seen[key] = f"layer {i} {path}"
                entry["tensors"].append(record)
        tensors = [t for t in entry["tensors"] if t["kind"] != "bookkeeping"]
        entry["kv_bytes"] = sum(t["bytes"] for t in tensors if t["kind"] in KV_KINDS)
        entry["state_bytes"] = sum(t["bytes"] for t in tensors if t["kind"] in STATE_KINDS)
        entry["other_bytes"] = sum(t["bytes"] for t in tensors if t["kind"] not in KV_KINDS | STATE_KINDS)
        keys = [t for t in tensors if t["kind"] == "key"]
        entry["cached_tokens"] = keys[0]["shape"][-2] if keys else None
        layers.append(entry)
    return layers


def _cache_notes(text: PreTrainedConfig, layers: list[dict[str, Any]], dtype: str) -> list[str]:
    """Plain-language remarks on what a measured cache holds that a formula might not expect."""
    notes: list[str] = []
    rank = getattr(text, "kv_lora_rank", None)
    keys = [t for e in layers for t in e["tensors"] if t["kind"] == "key"]
    if rank and any(t["shape"][-1] == rank and t["shape"][1] == 1 for t in keys):
        notes.append(
            "MLA: the cache holds the compressed latent, not per-head K/V: 'keys' is "
            f"kv_a_layernorm(c_KV) [1 x {rank}] and 'values' the shared roped key "
            f"[1 x {getattr(text, 'qk_rope_head_dim', '?')}] per token"
        )
    if any(e.get("is_sliding") for e in layers):
        notes.append(
            "sliding/chunked layers keep at most window - 1 tokens after a forward "
            "(DynamicSlidingWindowLayer); the next query token completes the window"
        )
    odd = sorted(
        {
            f"{t['kind']}={t['dtype']}"
            for e in layers
            for t in e["tensors"]
            if t["kind"] != "bookkeeping" and t["dtype"] != dtype
        }
    )
    if odd:
        notes.append(f"tensors not in the model dtype {dtype}: {', '.join(odd)}")
    return notes


def kv_cache_bytes(
    cfg: Mapping[str, Any],
    seq_len: int,
    num_layers: int | None = None,
    *,
    dtype: str = "float32",
    batch_size: int = 1,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Bytes of the cache transformers returns after a ``seq_len``-token forward of a tiny copy.

    The copy (see :func:`tiny_text_config`) runs on CPU in ``dtype`` with ``use_cache=True``; the
    result lists, per layer and in total, attention KV bytes (grow with tokens) apart from
    fixed conv/recurrent state bytes, plus the tiny config so a caller can compute the same
    figure.  ``sliding_layers_capped`` says whether sliding-window layers really kept fewer
    tokens than were fed (``None`` when ``seq_len`` does not exceed the window).
    """
    model, info = _build_tiny(cfg, num_layers, overrides, dtype)
    ids = _input_ids(model, seq_len, batch_size)
    with torch.no_grad():
        out = _forward(model, info, input_ids=ids, use_cache=True)
    cache = _returned_cache(out)
    if cache is None:
        raise OracleUnsupported(f"{info['model_class']} returned no cache")
    layers = inspect_cache(cache)
    pattern = info["layer_pattern"] or []
    for entry in layers:
        if entry["index"] < len(pattern):
            entry["layer_type"] = pattern[entry["index"]]
    text = model.config.get_text_config(decoder=True)
    sliding = [e for e in layers if e.get("is_sliding")]
    windows = sorted({int(e["window"]) for e in sliding if e.get("window") is not None})
    tested = [e for e in sliding if e.get("window") is not None and seq_len > int(e["window"])]
    capped = all((e["cached_tokens"] or 0) < seq_len for e in tested) if tested else None
    return {
        **info,
        "notes": _cache_notes(text, layers, dtype),
        "seq_len": seq_len,
        "batch_size": batch_size,
        "dtype": dtype,
        "bytes_per_element": torch.tensor([], dtype=_DTYPES[dtype]).element_size(),
        "cache_class": type(cache).__name__,
        "layers": layers,
        "kv_bytes": sum(e["kv_bytes"] for e in layers),
        "state_bytes": sum(e["state_bytes"] for e in layers),
        "other_bytes": sum(e["other_bytes"] for e in layers),
        "total_bytes": sum(e["kv_bytes"] + e["state_bytes"] + e["other_bytes"] for e in layers),
        "sliding_window": getattr(text, "sliding_window", None),
        "sliding_windows": windows,
        "sliding_layers": [e["index"] for e in sliding],
        "sliding_cached_tokens": sorted({e["cached_tokens"] for e in sliding}) or None,
        "sliding_layers_capped": capped,
    }


def _op_name(op: Any) -> str:
    """Short name of an aten op packet as FlopCounterMode reports it (``aten.mm`` -> ``mm``)."""
    return str(op).split(".")[-1] if str(op).startswith("aten.") else str(op)


def _flop_breakdown(counter: FlopCounterMode) -> dict[str, Any]:
    """Totals, per-op, per-module and per-part FLOPs from a finished FlopCounterMode.

    ``by_module`` holds each module's *exclusive* FLOPs (its own minus those of its nearest
    descendants that counted any), so they sum to the total; ``by_part`` classifies each module
    as ``<module>.weight`` through :data:`PART_PATTERNS`, so the score/value matmuls done inside
    ``self_attn`` count as attention.  FLOPs of the root module's own code go to ``other``.
    """
    counts = counter.get_flop_counts()
    by_op: Counter[str] = Counter()
    for op, n in counts.get("Global", {}).items():
        by_op[_op_name(op)] += int(n)
    totals = {mod: int(sum(ops.values())) for mod, ops in counts.items() if mod != "Global"}
    exclusive = dict(totals)
    for mod, n in totals.items():
        parent = mod
        while "." in parent:
            parent = parent.rsplit(".", 1)[0]
            if parent in totals:
                exclusive[parent] -= n
                break
    by_module: dict[str, int] = {}
    by_part = dict.fromkeys(PARTS, 0)
    for mod, n in exclusive.items():
        if "." not in mod:  # the root model class itself
            by_module[""] = by_module.get("", 0) + n
            by_part["other"] += n
            continue
        name = mod.split(".", 1)[1]
        by_module[name] = n
        by_part[classify(name + ".weight")] += n
    total = int(sum(by_op.values()))
    assert sum(by_part.values()) == total, "module breakdown must partition the FLOPs"
    return {"total": total, "by_op": dict(by_op), "by_part": by_part, "by_module": by_module}


#: Families whose transformers experts run every token through every expert (dense bmm).
_DENSE_EXPERT_FAMILIES: dict[str, str] = {
    "llama4_text": "Llama-4 experts run every token through all num_local_experts experts "
    "(dense bmm, router scores applied to the inputs), so expert FLOPs are not top-k FLOPs",
}


def forward_flops(
    cfg: Mapping[str, Any],
    seq_len: int,
    decode_context: int | None = None,
    *,
    num_layers: int | None = None,
    dtype: str = "float32",
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """FLOPs torch's FlopCounterMode counts for a prefill (and optionally one decode step).

    Runs the tiny copy with eager attention and eager experts (grouped_mm has no FLOP formula in
    torch 2.13): ``prefill`` is one forward of ``seq_len`` tokens; ``decode`` (when
    ``decode_context`` is given) is one extra token after an uncounted prefill of
    ``decode_context`` tokens.  Only matmul-like ops (mm, addmm, bmm, baddbmm, convolution,
    sdpa/flash kernels) are counted, each as 2 x MACs; causal masking does not reduce them.
    """
    model, info = _build_tiny(cfg, num_layers, overrides, dtype, experts_eager=True)
    result: dict[str, Any] = {**info, "seq_len": seq_len, "dtype": dtype}
    text = model.config.get_text_config(decoder=True)
    notes = [
        "eager attention computes the full s x s score and value matmuls; causal and "
        "sliding-window masks are applied afterwards and do not reduce the count"
    ]
    if getattr(text, "kv_lora_rank", None):
        notes.append(
            "MLA: transformers caches the latent and re-expands every cached token with "
            "kv_b_proj at each step, so decode FLOPs grow with context in kv_b_proj too"
        )
    if any(k in ("linear_attention", "hybrid") for k in (info["layer_pattern"] or [])):
        notes.append(
            "linear-attention / SSM FLOPs are those of transformers' torch reference "
            "implementation (chunked scans, padding to the chunk size), not of fused kernels"
        )
    if text.model_type in _DENSE_EXPERT_FAMILIES:
        notes.append(_DENSE_EXPERT_FAMILIES[text.model_type])
    if info["experts_implementation"] != "eager":
        notes.append("experts did not run eagerly; their grouped_mm FLOPs are not counted")
    result["notes"] = notes
    with torch.no_grad():
        ids = _input_ids(model, seq_len)
        with FlopCounterMode(display=False) as counter:
            _forward(model, info, input_ids=ids, use_cache=True)
        result["prefill"] = _flop_breakdown(counter)
        result["decode_context"] = decode_context
        result["decode"] = None
        if decode_context is not None:
            ids = _input_ids(model, decode_context + 1)
            out = _forward(model, info, input_ids=ids[:, :decode_context], use_cache=True)
            cache = _returned_cache(out)
            with FlopCounterMode(display=False) as counter:
                _forward(model, info, input_ids=ids[:, decode_context:], cache=cache, use_cache=True)
            result["decode"] = _flop_breakdown(counter)
    return result
