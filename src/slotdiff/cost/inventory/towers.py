"""Parameter tensors of the vision tower and the connector, from the config and data files.

What each tower and connector holds is data (``schemas/vision_types/*.json`` and
``schemas/multimodal/*.json``, read through ``vision_spec``); this module only turns the
items of those files into :class:`~slotdiff.cost.params.Tensor` rows:

- ``linear`` / ``conv``: a weight ``out × in`` (kind linear / conv) and, when ``bias`` is
  true, a bias vector ``out``;
- ``norm``: LayerNorm (weight and bias), RMSNorm (weight) or a scale-free RMSNorm (nothing);
- ``param``: a bare parameter ``rows × cols`` (class token, position table, gates...);
- ``group``: its ``tensors`` repeated ``count`` times (the encoder layers); with ``each``
  and ``over``, once per index 0..over-1 with the index bound to the name ``each``.

Every item may carry ``when`` (an expression; the item exists only when it is true) and
``count``. Tower tensors go to slot ``vision``, connector tensors to slot ``connector``; a
connector item with ``slot`` (attention, ffn, norms, head) is a decoder-side tensor the composite
adds, priced per text token like the decoder's own tensors.
Each tensor also keeps the token stream it is applied to (``per``: ``patch`` = every
encoder position, ``token`` = every image token the connector emits, ``seq`` = once per
encoder sequence, ``none`` = not a matmul), which ``images.vision_flops`` uses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ...schema.arch import Architecture
from ...schema.tower_spec import (
    AUDIO_PREFIX,
    ExprError,
    as_int,
    audio_types,
    evaluate,
    multimodal_types,
    vision_types,
)
from .tensor import Tensor, Unsupported


@dataclass(frozen=True)
class VisionTensor:
    """A tensor of the tower or connector and the token stream its matmul runs over."""

    tensor: Tensor
    per: str  # patch | token | seq | none
    # Routed experts of the tower (a ``param`` item's ``routed``: experts, top_k): the
    # parameters of this tensor no patch uses, left out of the active count.
    inactive: int = 0


@dataclass(frozen=True)
class AttentionStack:
    """Encoder layers that attend over the whole encoder sequence (for the s² FLOPs term)."""

    layers: int
    width: int  # heads × head_dim of the attention (equals the hidden size except Kimi-K3)


@dataclass(frozen=True)
class VisionModel:
    """The tower and connector of one multimodal config, as counted."""

    parent: str  # top-level model_type (llava, qwen2_vl, ...)
    tower: str  # vision_types file name
    tensors: tuple[VisionTensor, ...]
    attention: tuple[AttentionStack, ...]
    env: Mapping[str, Any]  # field values the expressions saw
    verified: bool  # counts checked against transformers' own instantiation
    note: str  # where the structure was read from, and why it is unverified if so
    # The audio encoder the composite model's file names (slot ``audio``; not in any image's cost).
    audio: tuple[VisionTensor, ...] = ()


def _env(arch: Architecture) -> dict[str, Any]:
    vis = arch.vision or {}
    env: dict[str, Any] = {name: val.value for name, val in vis.items() if not name.startswith(AUDIO_PREFIX)}
    env["d_model"] = arch.get("d_model")
    return env


def _audio_env(arch: Architecture) -> dict[str, Any]:
    """The audio encoder's own field values (prefix dropped) and the text width."""
    vis = arch.vision or {}
    env = {n.removeprefix(AUDIO_PREFIX): v.value for n, v in vis.items() if n.startswith(AUDIO_PREFIX)}
    env["d_model"] = arch.get("d_model")
    return env


def _requires(
    spec: Mapping[str, Any], env: Mapping[str, Any], arch: Architecture, what: str, key: str
) -> None:
    """Raise Unsupported when one of ``spec``'s ``requires`` expressions is false."""
    for need in spec.get("requires", []):
        try:
            ok = evaluate(need["expr"], env)
        except (ArithmeticError, TypeError, ValueError, KeyError, IndexError) as err:
            ok, need = False, {"why": str(err)}
        if not ok:
            raise Unsupported(arch.name, f"cannot count the {what}: {need['why']}", key=key)


def _audio(arch: Architecture, parent: Mapping[str, Any]) -> tuple[VisionTensor, ...]:
    """Tensors of the audio encoder ``parent`` names (slot ``audio``), or () when it names none."""
    audio = parent.get("audio")
    vis = arch.vision or {}
    if not audio or "audio_tower" not in vis:
        return ()
    name = vis["audio_tower"].value
    tower = audio_types()[name]
    env = {**tower.get("const", {}), **_audio_env(arch)}
    key = str(audio.get("config_key", "audio_config"))
    _requires(tower, env, arch, f"audio encoder ({name})", key)
    out: list[VisionTensor] = []
    try:
        module = str(audio.get("tower_module", "model.audio_tower")) + "."
        _build(tower.get("tensors", []), env, "audio", module, "", 1, out, [], "frame")
        # The composite's own projections of the audio features into the text width
        # (Phi-4-multimodal's speech projections), in the audio encoder's slot and fields.
        _build(audio.get("connector", []), env, "audio", "", "", 1, out, [], "frame")
    except (ArithmeticError, TypeError, ValueError, KeyError, IndexError) as err:  # ExprError too
        raise Unsupported(arch.name, f"cannot count the audio encoder ({name}): {err}", key=key) from err
    return tuple(out)


def audio_counted(arch: Architecture) -> bool:
    """Whether the composite model's data names the config's audio encoder (then it is counted)."""
    vis = arch.vision or {}
    return "audio_tower" in vis and vis["audio_tower"].value in audio_types()


NORM_KINDS = ("layernorm", "rmsnorm", "rmsnorm_noscale")
DECODER_SLOTS = ("attention", "ffn", "norms", "head")


def _norm_tensors(kind: str, width: int) -> list[tuple[str, int, int, str]]:
    if kind == "layernorm":
        return [("", width, 1, "vector"), (".bias", width, 1, "vector")]
    if kind == "rmsnorm":
        return [("", width, 1, "vector")]
    if kind == "rmsnorm_noscale":
        return []
    raise ExprError(f"unknown norm kind {kind!r}")


def _build(
    items: Iterable[Mapping[str, Any]],
    env: Mapping[str, Any],
    slot: str,
    prefix: str,
    part_prefix: str,
    count: int,
    out: list[VisionTensor],
    stacks: list[AttentionStack],
    default_per: str,
    runs: bool = True,
) -> None:
    """Append ``items``' tensors to ``out``; ``runs`` false: an image never passes through them
    (a second copy of the tower that only encodes video), so they carry no FLOPs."""

    def num(expr: Any) -> int:
        return as_int(evaluate(expr, env), expr)

    for item in items:
        if "when" in item and not evaluate(item["when"], env):
            continue
        n = count * num(item.get("count", 1))
        if n <= 0:
            continue
        if "group" in item and "each" in item:
            # An indexed group: its tensors once per index 0..over-1, the index bound to the
            # name ``each`` (a VQ-GAN's resolution levels, each with its own widths).
            name, var = item["group"], item["each"]
            for k in range(num(item["over"])):
                _build(
                    item["tensors"],
                    {**env, var: k},
                    slot,
                    f"{prefix}{name}.{k}.",
                    f"{part_prefix}{name}.",
                    n,
                    out,
                    stacks,
                    default_per,
                    runs,
                )
            continue
        if "group" in item:
            name = item["group"]
            if "attention" in item and runs:
                stacks.append(AttentionStack(n, num(item["attention"]["width"])))
            _build(
                item["tensors"],
                env,
                slot,
                f"{prefix}{name}.0.",
                f"{part_prefix}{name}.",
                n,
                out,
                stacks,
                default_per,
                runs,
            )
            continue
        kind = next(k for k in ("linear", "conv", "norm", "param") if k in item)
        name = item[kind]
        module = prefix + name
        # ``slot``: a decoder-side tensor the composite adds (Idefics' gated cross-attention
        # blocks), priced per text token with the decoder's slot, not per image.
        own = item.get("slot", slot)
        if own not in (*DECODER_SLOTS, slot):
            raise ExprError(f"unknown slot {own!r} for {name!r}")
        part = f"{own}/{(part_prefix + name).removeprefix('model.')}"
        per = item.get("per", default_per) if runs and own == slot else "none"
        rows: list[tuple[str, int, int, str, str]] = []
        inactive = 0
        if kind in ("linear", "conv"):
            width_out, width_in = num(item["out"]), num(item["in"])
            rows.append(("", width_out, width_in, kind, per))
            if evaluate(item.get("bias", False), env):
                rows.append((".bias", width_out, 1, "vector", "none"))
        elif kind == "norm":
            norm_kind = item["kind"]
            if norm_kind not in NORM_KINDS:
                norm_kind = evaluate(norm_kind, env)  # an expression choosing one of them
            rows += [(s, r, c, k, "none") for s, r, c, k in _norm_tensors(norm_kind, num(item["width"]))]
        else:
            param_kind = item.get("kind", "vector")
            if "routed" in item:
                # A tower's own routed experts (rows = experts × one expert's width): a patch
                # uses top_k of them, whatever the decoder's n_experts / top_k are.
                experts, top_k = num(item["routed"]["experts"]), num(item["routed"]["top_k"])
                if experts <= 0 or not 0 < top_k <= experts:
                    raise ExprError(f"{name!r}: routes to {top_k} of {experts} experts")
                total = num(item["rows"]) * num(item.get("cols", 1)) * n
                inactive = total - total * top_k // experts
            rows.append(
                (
                    "",
                    num(item["rows"]),
                    num(item.get("cols", 1)),
                    param_kind,
                    per if param_kind in ("linear", "conv") else "none",
                )
            )
        for suffix, r, c, tkind, tper in rows:
            if r <= 0 or c <= 0:
                continue
            out.append(VisionTensor(Tensor(part + suffix, own, r, c, n, tkind, module), tper, inactive))


def vision_model(arch: Architecture) -> VisionModel | None:
    """The counted tower and connector, or None for a config without a vision encoder.

    Raises :class:`Unsupported` (one-line reason, no number) when the config has a vision
    encoder slotdiff has no data for, or a field the data needs is unknown.
    """
    vis = arch.vision
    if not vis:
        return None
    parent_name = vis.get("multimodal")
    config_key = vis["config_key"].value if "config_key" in vis else "vision_config"
    vision_mt = vis["model_type"].value if "model_type" in vis else None
    if parent_name is None or parent_name.value is None:
        top = arch.name
        raise Unsupported(
            top,
            f"cannot count the vision encoder ({vision_mt or 'no model_type'}): "
            "slotdiff has no data for this multimodal model_type",
            key=config_key,
        )
    parent = multimodal_types()[parent_name.value]
    tower_val = vis.get("tower")
    if tower_val is None or tower_val.value not in vision_types():
        raise Unsupported(
            arch.name,
            f"cannot count the vision encoder: no tower data for {config_key}.model_type "
            f"{vision_mt!r} under {parent_name.value}",
            key=f"{config_key}.model_type",
        )
    tower = vision_types()[tower_val.value]
    env = {**tower.get("const", {}), **parent.get("const", {}), **_env(arch)}
    for spec in (tower, parent):
        _requires(spec, env, arch, f"vision encoder ({tower_val.value})", config_key)
    out: list[VisionTensor] = []
    stacks: list[AttentionStack] = []
    # ``tower_modules``: the composite builds several copies of the tower (Video-LLaVA's
    # image_tower and video_tower); an image runs through the first one only.
    modules = parent.get("tower_modules") or [parent.get("tower_module", "model.vision_tower")]
    try:
        for i, module in enumerate(modules):
            _build(
                tower.get("tensors", []),
                env,
                "vision",
                module + ".",
                "" if len(modules) == 1 else module.rsplit(".", 1)[-1] + ".",
                1,
                out,
                stacks,
                "patch",
                runs=i == 0,
            )
        for extra in parent.get("extra_towers", []):
            # A second encoder, its fields under the entry's prefix; it reads the image at
            # its own resolution, which no image rule models: no FLOPs (runs=False).
            second = vision_types()[extra["tower"]]
            names = {n: env.get(extra["prefix"] + n) for n in second.get("fields", {})}
            env2 = {**second.get("const", {}), **names, "d_model": env["d_model"]}
            for need in second.get("requires", []):
                if not evaluate(need["expr"], env2):
                    raise ValueError(f"{extra['config_key']}: {need['why']}")
            module = extra["module"]
            _build(
                second.get("tensors", []),
                env2,
                "vision",
                module + ".",
                extra.get("part", module.rsplit(".", 1)[-1]) + ".",
                1,
                out,
                stacks,
                "patch",
                runs=False,
            )
        _build(parent.get("connector", []), env, "connector", "", "", 1, out, stacks, "token")
    except (ArithmeticError, TypeError, ValueError, KeyError, IndexError) as err:  # ExprError too
        raise Unsupported(
            arch.name, f"cannot count the vision encoder ({tower_val.value}): {err}", key=config_key
        ) from err
    verified = bool(tower.get("verified", True)) and bool(parent.get("verified", True))
    notes = [tower.get("source", ""), parent.get("source", "")]
    for spec in (tower, parent):
        why = spec.get("unverified", "not checked against transformers")
        if not spec.get("verified", True) and why not in notes:
            notes.append(why)
    return VisionModel(
        parent=parent_name.value,
        tower=tower_val.value,
        tensors=tuple(out),
        attention=tuple(stacks),
        env=env,
        verified=verified,
        note="; ".join(n for n in notes if n),
        audio=_audio(arch, parent),
    )


# vision_tensors results by vision section: pricing a model counts it and ~8 counterfactuals
# that share its vision mapping (Architecture keeps a read-only mapping it is given).
# The entry holds the mapping itself, so its id cannot be reused while it is cached.
_TENSORS: dict[int, tuple[Mapping[str, Any], Any, tuple[Tensor, ...], int]] = {}


def _counted(arch: Architecture) -> tuple[tuple[Tensor, ...], int]:
    """The tower's tensors and the routed-expert parameters no patch uses, cached by vision section."""
    vis, d_model = arch.vision, arch.get("d_model")  # all the counting reads (names aside)
    if not vis:
        return (), 0
    hit = _TENSORS.get(id(vis))
    if hit is not None and hit[0] is vis and type(hit[1]) is type(d_model) and hit[1] == d_model:
        return hit[2], hit[3]
    model = vision_model(arch)
    rows = () if model is None else model.tensors + model.audio
    out, inactive = tuple(vt.tensor for vt in rows), sum(vt.inactive for vt in rows)
    if len(_TENSORS) >= 64:
        _TENSORS.clear()
    _TENSORS[id(vis)] = (vis, d_model, out, inactive)
    return out, inactive


def vision_tensors(arch: Architecture) -> tuple[Tensor, ...]:
    """Tensors of the vision tower (slot ``vision``), connector (``connector``) and the audio
    encoder the composite model's data names (``audio``).

    Empty for a text-only config; raises :class:`Unsupported` when the tower is unknown.
    """
    return _counted(arch)[0]


def vision_inactive(arch: Architecture) -> int:
    """Parameters of the tower's own routed experts that no patch uses (top_k of experts a
    block): the active count leaves them out. 0 for a tower without experts."""
    return _counted(arch)[1]


def extra_config_keys(arch: Architecture) -> frozenset[str]:
    """Config keys of the encoders the composite's data counts besides the vision tower
    (``extra_towers``: DeepSeek-VL hybrid's high_res_vision_config, Janus' VQ-GAN)."""
    vis = arch.vision or {}
    parent = vis.get("multimodal")
    spec = multimodal_types().get(parent.value) if parent is not None and parent.value else None
    return frozenset(e["config_key"] for e in (spec or {}).get("extra_towers", []))
