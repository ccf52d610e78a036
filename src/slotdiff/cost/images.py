"""How many decoder tokens one W×H image becomes, and what encoding it costs.

Each multimodal data file (``schemas/multimodal/<model_type>.json``) names the rule its
image processor follows (``images.rule``) and the processor settings that rule needs
(``images.settings``): a value or an expression over the config's fields, and where it
comes from. Settings the config does not carry (Qwen2-VL's min/max pixels, InternVL's tile
limits) are the processor class's defaults in transformers 5.24, named in the result;
callers may override them (``image_tokens(arch, w, h, max_pixels=...)``), as a checkpoint's
``preprocessor_config.json`` would.

The rules themselves are small named functions that transcribe transformers' processors,
named after them: ``image_rules`` (the resize budgets of Qwen2-VL and GLM-4V, the fixed
squares, Gemma's, Llama's and InternVL's), ``image_grids`` (tiles and grids: Pixtral,
LLaVA-NeXT, Idefics, Fuyu, Command A Vision, Granite-Docling, Aria, Step-3.7, MiniCPM-V) and
``image_budgets`` (patch or token budgets and fixed cells: GLM-5.3-Flash, Muse, Kimi-K2.5,
Nemotron Omni, Inkling, Kosmos-2.5, Phi-4, LFM2-VL, Molmo2). docs/TOWERS.md lists each rule with the
model_types that use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..constructs import PLAIN, construct, is_cross, softmax
from ..schema.arch import Architecture
from ..schema.tower_spec import ExprError, as_int, evaluate, multimodal_types
from .flops import flops_cost
from .image_budgets import RULES as BUDGET_RULES
from .image_grids import RULES as GRID_RULES
from .image_rules import RULES as BASE_RULES
from .inventory.tensor import Unsupported
from .inventory.towers import VisionModel, vision_model
from .params import ParamCount


@dataclass(frozen=True)
class ImageTokens:
    """One image through a model's processor and vision encoder."""

    tokens: int  # decoder positions the image's features fill (placeholder tokens)
    special: int  # marker tokens the processor adds around them (BOI/EOI, tile separators)
    patches: int  # image patches the encoder embeds (no class tokens, no padding)
    encoder_seqs: int  # independent encoder sequences (tiles, crops; 1 when untiled)
    encoder_len: int  # positions per encoder sequence (patches + class token + padding)
    connector_tokens: int  # rows the connector projects (the image states it emits)
    cross_tokens: int  # image states each decoder cross-attention layer reads (0: none)
    resize: tuple[int, int]  # (width, height) the image is resized (and padded) to
    tiles: int  # tiles or crops the image is cut into (1 when untiled)
    rule: str  # rule name (see module docstring)
    source: str  # transformers file(s) the rule transcribes
    settings: tuple[tuple[str, Any, str], ...] = ()  # (name, value, where it came from)
    notes: tuple[str, ...] = field(default_factory=tuple)
    # (count, length) of every group of encoder sequences, when they differ in length
    # (Step-3.7's global view and its local crops); empty: encoder_seqs of encoder_len
    sequences: tuple[tuple[int, int], ...] = ()

    @property
    def encoder_groups(self) -> tuple[tuple[int, int], ...]:
        """(count, length) of the encoder's sequences."""
        return self.sequences or ((self.encoder_seqs, self.encoder_len),)

    @property
    def encoder_positions(self) -> int:
        """Every position the encoder runs over, all sequences together."""
        return sum(n * length for n, length in self.encoder_groups)

    @property
    def total(self) -> int:
        """Decoder positions the image occupies: feature tokens plus markers."""
        return self.tokens + self.special


# ------------------------------------------------------------------------------ rules

RULES = {**BASE_RULES, **GRID_RULES, **BUDGET_RULES}


# ------------------------------------------------------------------------------- API


def _settings(
    spec: Mapping[str, Any], env: Mapping[str, Any], overrides: Mapping[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, Any, str]]]:
    values: dict[str, Any] = {}
    shown: list[tuple[str, Any, str]] = []
    for name, setting in spec.get("settings", {}).items():
        if name in overrides:
            value, where = overrides[name], "given by the caller"
        else:
            value, where = evaluate(setting["value"], {**env, **values}), setting["from"]
        values[name] = value
        shown.append((name, value, where))
    unknown = set(overrides) - set(values)
    if unknown:
        raise KeyError(f"its image processor has no {', '.join(sorted(unknown))} setting")
    low, high = values.get("min_pixels"), values.get("max_pixels")
    if isinstance(low, (int, float)) and isinstance(high, (int, float)) and low > high:
        raise ValueError(f"min_pixels {low:,} is above max_pixels {high:,}")
    return values, shown


def _image_spec(arch: Architecture) -> tuple[VisionModel, dict[str, Any]]:
    model = vision_model(arch)
    if model is None:
        raise Unsupported(arch.name, "has no vision encoder")
    spec = multimodal_types()[model.parent].get("images")
    if not spec:
        raise Unsupported(
            arch.name,
            f"image tokens for {model.parent} are not described: "
            + multimodal_types()[model.parent].get("images_unsupported", "no processor rule"),
        )
    return model, spec


def image_tokens(arch: Architecture, width: int, height: int, **overrides: Any) -> ImageTokens:
    """Decoder tokens and encoder work for one ``width`` × ``height`` image.

    ``overrides`` replace processor settings (e.g. ``max_pixels`` for Qwen2-VL) the way a
    checkpoint's preprocessor_config.json would.
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}×{height}")
    model, spec = _image_spec(arch)
    try:
        values, shown = _settings(spec, model.env, overrides)
        got = RULES[spec["rule"]](values, width, height)
        tokens = as_int(got["tokens"], "tokens")
    except KeyError as err:
        raise Unsupported(arch.name, f"cannot compute image tokens: {err.args[0]}") from err
    except (ExprError, ValueError, OverflowError, ZeroDivisionError) as err:
        raise Unsupported(arch.name, f"cannot compute image tokens: {err}") from err
    notes = tuple(spec.get("notes", ()))
    if "canvas" in got:
        cw, ch = got["canvas"]
        notes += (
            f"padded to a {cw}×{ch} canvas of {ch // values['image_size']}×"
            f"{cw // values['image_size']} tiles",
        )
    return ImageTokens(
        tokens=tokens,
        special=got.get("special", values.get("marker_tokens", 0)),
        patches=got["patches"],
        encoder_seqs=got.get("encoder_seqs", 1),
        encoder_len=got["encoder_len"],
        connector_tokens=got.get("connector_tokens", tokens),
        cross_tokens=got.get("cross_tokens", 0),
        resize=tuple(got["resize"]),  # type: ignore[arg-type]
        tiles=got.get("tiles", 1),
        rule=spec["rule"],
        source=spec["source"],
        settings=tuple(shown),
        notes=notes,
        sequences=tuple(tuple(g) for g in got.get("sequences", ())),  # type: ignore[misc]
    )


@dataclass(frozen=True)
class VisionCost:
    """Encoder FLOPs for one image and the decoder KV its tokens hold."""

    image: ImageTokens
    tower_matmul_flops: int  # 2 · params · positions for every tower matmul
    connector_flops: int  # 2 · params · rows for every connector matmul
    attention_flops: int  # 4 · L · s² · width per encoder sequence (QKᵀ and AV)
    kv_bytes: int | None  # decoder KV of the image's positions (None without kv_bytes_per_token)
    cross_kv_bytes: int | None  # KV of the image states in cross-attention layers
    notes: tuple[str, ...] = ()

    @property
    def flops(self) -> int:
        return self.tower_matmul_flops + self.connector_flops + self.attention_flops


def vision_flops(
    arch: Architecture,
    width: int,
    height: int,
    kv_bytes_per_token: int | None = None,
    **overrides: Any,
) -> VisionCost:
    """Encoder FLOPs for one image, and the KV bytes its tokens take in the decoder.

    Matmuls: 2 · parameters · positions they run over (every encoder position for the tower,
    every emitted image state for the connector). Attention: 4 · L · s² · width for each of
    the encoder's sequences of length s (QKᵀ and AV, full bidirectional attention over the
    sequence, padding included; windowed layers such as Qwen2.5-VL's are counted as full).
    Norms, activations and softmax are not counted. ``kv_bytes_per_token`` is the decoder's
    KV size per position (all layers), which the cost pass computes.
    """
    img = image_tokens(arch, width, height, **overrides)
    model = vision_model(arch)
    assert model is not None
    positions = img.encoder_positions
    runs = {"patch": positions, "seq": img.encoder_seqs, "token": img.connector_tokens}
    tower = conn = 0
    for vt in model.tensors:
        t = vt.tensor
        if not t.matmul or vt.per == "none":
            continue
        f = 2 * t.params * runs[vt.per]
        if t.slot == "connector":
            conn += f
        else:
            tower += f
    attn = sum(
        4 * st.layers * length**2 * st.width * n for st in model.attention for n, length in img.encoder_groups
    )
    notes: list[str] = []
    kv = cross = None
    if kv_bytes_per_token is not None:
        kv = img.total * kv_bytes_per_token
        if img.cross_tokens:
            self_layers = sum(1 for s in arch.layers if construct(s.mixer) is PLAIN)
            cross_layers = sum(1 for s in arch.layers if is_cross(s.mixer))
            per_layer = kv_bytes_per_token // self_layers if self_layers else 0
            cross = img.cross_tokens * cross_layers * per_layer
            notes.append(
                "cross-attention KV: image states × cross-attention layers × one "
                "self-attention layer's KV per position"
            )
    return VisionCost(img, tower, conn, attn, kv, cross, tuple(notes))


@dataclass(frozen=True)
class InjectionUnit:
    """How a model injects images and the decoder's cost per image state, known from the
    config alone (the number of states per image needs the processor's rule)."""

    method: str  # tokens | cross-attention
    text: str
    cross_layers: int  # decoder layers that read the image through cross-attention (0: tokens)
    kv_bytes_per_state: int  # decoder KV one image state holds
    decoder_input_bytes_per_state: int  # one connector output row: the text width × act_bytes
    flops_per_state: int  # tokens: 2 × active weights (its prefill, attention aside); cross: K/V
    flops_per_text_token_per_state: int  # cross only: a text token's q·kᵀ and p·v over one state

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def injection_unit(
    arch: Architecture, params: ParamCount, kv_bytes_per_token: int, act_bytes: int = 2
) -> InjectionUnit:
    """The image path of ``arch`` (the modality it reads through cross-attention layers or as
    tokens) and its per-state costs."""
    d = int(arch.get("d_model") or 0)
    cross = sum(1 for s in arch.layers if is_cross(s.mixer))
    if cross:
        self_layers = sum(1 for s in arch.layers if softmax(s.mixer))
        h, g = arch.get("n_heads") or 0, arch.get("n_kv_heads") or arch.get("n_heads") or 0
        hd = arch.get("head_dim") or 0
        # each cross-attention layer projects a state to K and V once (d → g·hd, twice) and
        # caches them like one self-attention layer's position
        return InjectionUnit(
            "cross-attention",
            f"image states read by {cross} cross-attention layers, outside the token stream",
            cross,
            cross * (kv_bytes_per_token // self_layers if self_layers else 0),
            d * act_bytes,
            cross * 2 * (2 * d * g * hd),
            cross * 4 * h * hd,
        )
    per_token = flops_cost(arch, params, 1).weights_per_token
    return InjectionUnit(
        "tokens",
        "a connector projects the image into decoder positions of the token stream",
        0,
        kv_bytes_per_token,
        d * act_bytes,
        per_token,
        0,
    )


@dataclass(frozen=True)
class Injection:
    """How the image reaches the decoder and what that costs there (seed 09's three bytes:
    the encoder's output, the states the decoder reads, and their KV; plus the FLOPs)."""

    method: str  # tokens | cross-attention
    text: str  # the method in words
    tower_output_bytes: int  # every encoder position × the tower's width, at ``act_bytes``
    decoder_input_bytes: int  # the connector's output: image states × the text width
    kv_bytes: int | None  # what the image holds in the decoder's cache
    prefill_flops: int  # decoder work on the image once: its positions' prefill, or cross K/V
    per_token_flops: int  # each later text token's extra work reading the image (cross only)
    act_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def injection(arch: Architecture, cost: VisionCost, unit: InjectionUnit, params: ParamCount) -> Injection:
    """The decoder-side cost of one image: ``cost`` from :func:`vision_flops`, ``unit`` the
    model's image path (:func:`injection_unit`), ``params`` its count (for the prefill)."""
    img = cost.image
    model = vision_model(arch)
    act = unit.decoder_input_bytes_per_state // max(1, int(arch.get("d_model") or 1))
    tower_out = img.encoder_positions * int((model.env.get("hidden") if model else 0) or 0) * act
    if unit.method == "cross-attention":
        return Injection(
            unit.method,
            f"{img.cross_tokens:,} image states read by {unit.cross_layers} cross-attention layers "
            f"(the image itself takes {img.total} placeholder position{'s' if img.total != 1 else ''})",
            tower_out,
            img.cross_tokens * unit.decoder_input_bytes_per_state,
            cost.cross_kv_bytes,
            img.cross_tokens * unit.flops_per_state,
            img.cross_tokens * unit.flops_per_text_token_per_state,
            act,
        )
    return Injection(
        unit.method,
        f"a connector projects the image into {img.total:,} decoder positions of the token stream",
        tower_out,
        img.connector_tokens * unit.decoder_input_bytes_per_state,
        cost.kv_bytes,
        flops_cost(arch, params, img.total).prefill if img.total else 0,
        0,
        act,
    )
