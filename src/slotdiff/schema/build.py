"""``build``: a RawConfig through the resolver, the layer layout and the towers into one
frozen Architecture, the schema layer's output."""

from __future__ import annotations

from ..core.errors import SlotdiffError
from ..read.source import (
    AUDIO_CONFIG_KEYS,
    TEXT_CONFIG_PATHS,
    VISION_CONFIG_KEYS,
    RawConfig,
    custom_code,
    custom_code_text,
)
from . import agreement
from .arch import Architecture
from .fill import fill, ignored_flat_keys
from .keymap import model_type_spec
from .layers import counted_layers, layout
from .relations import check_relations
from .resolver import Resolver, resolve_all
from .towers import audio_config_key, read_vision

# Keys holding a sub-model's own config (read by the towers, or the nested text config).
_SUBCONFIG_KEYS = frozenset(
    (*VISION_CONFIG_KEYS, *AUDIO_CONFIG_KEYS, *(path[0] for path in TEXT_CONFIG_PATHS))
)


def _audio(raw: RawConfig) -> tuple[str, str | None] | None:
    """(config key, model_type) of the audio encoder, when the file has one.

    None also when ``architectures`` names only classes the family's file lists under
    ``audio_not_built_by`` (MoshiForCausalLM builds no Mimi codec): that config then
    describes another model's part, not one this count leaves out.
    """
    key = audio_config_key(raw.data)
    if key is None:
        return None
    spec = model_type_spec(str(raw.data.get("model_type") or "")) or {}
    outside = set(spec.get("audio_not_built_by", ()))
    archs = raw.data.get("architectures")
    if outside and isinstance(archs, list) and archs and all(a in outside for a in archs):
        return None
    mt = raw.data[key].get("model_type")
    return key, str(mt) if mt else None


def _read_keys(res: Resolver) -> tuple[tuple[str, object], ...]:
    """Text-config keys some resolution or layer rule read, cited, with their values; for a
    nested text config also the file's own keys a field read (Kimi-K3's top-level tie)."""
    reads = res.read | set(res.spec.get("reads", ()))
    own = tuple((res.cite(k), v) for k, v in res.text.items() if k in reads)
    if not res.prefix:
        return own
    return own + tuple((k, v) for k, v in res.raw.data.items() if k in res.read_top)


def build(raw: RawConfig, donor: str | None = None) -> Architecture:
    """Read ``raw`` into an Architecture (dims, per-layer specs, provenance); a model_type
    slotdiff does not know is read with ``donor``'s facts, each marked as assumed. An absent
    text sub-config takes its class's defaults first (``fill``), as transformers does."""

    given, raw = raw, fill(raw)
    res = resolve_all(raw, donor)
    for required in ("d_model", "n_layers", "vocab"):
        if not res.values[required].known or res.values[required].value is None:
            if res.spec.get("no_" + required):
                continue
            if required == "n_layers" and counted_layers(res) is not None:
                continue
            aliases = ", ".join(res.aliases(required)[:3])
            raise SlotdiffError(raw.name, f"missing {required} (looked for {aliases})")
    check_relations(res)
    layers = layout(res)
    agreed, disagree = agreement.check(res, layers)
    notes = list(res.notes)
    notes.extend(
        f"{d.key} is {d.given!r} but {res.model_type}'s class builds {d.built!r} ({d.rule}) whatever the "
        "key says: the figures are the class's build; an engine that reads the key builds another model"
        for d in disagree
    )
    ignored = ignored_flat_keys(given, raw, res.read_top)
    if ignored:
        notes.append(
            f"no text_config: transformers builds the text model from {res.model_type}'s defaults "
            f"and ignores the top-level {', '.join(ignored[:6])}{' ...' if len(ignored) > 6 else ''}"
        )
    scopes = [("auto_map", raw.data)] + ([(res.cite("auto_map"), res.text)] if raw.text_path else [])
    for at, node in scopes:
        refs = custom_code(node)
        if refs:
            notes.append(
                f"{at} names custom code ({custom_code_text(refs)}) that transformers imports only "
                "with trust_remote_code=True; slotdiff read this config as data and imported none of it"
            )
    if res.donor:
        notes.append(
            f"model_type {res.model_type or '(none)'!r} is not in slotdiff's key map: read as "
            f"{res.donor}, the known model_type whose keys and design it matches (its structure "
            "facts are assumed)"
        )
    elif not res.spec:
        notes.append(
            f"model_type {res.model_type or '(none)'!r} is not in slotdiff's key map: "
            "fields were read by their common names and structure facts are assumed"
        )
    return Architecture(
        name=raw.name,
        model_type=res.model_type,
        fields=res.values,
        layers=layers,
        text_path=raw.text_path,
        vision=read_vision(raw),
        unknown_keys=res.unknown_keys(),
        unread_keys=res.unread_keys(_SUBCONFIG_KEYS | agreed) + ignored,
        read_keys=_read_keys(res),
        config_model_type=str(raw.data.get("model_type") or "") or None,
        audio=_audio(raw),
        notes=tuple(notes),
        known_model_type=bool(res.spec) and not res.donor,
        donor=res.donor,
        disagreements=tuple((d.key, d.given, d.built, d.rule) for d in disagree),
        origin_note=raw.note,
        quant_file=raw.quant_file,
    )
