"""The four conventions GPT-2 took for granted: the training objective (MTP), decoding steps,
weight precision and input modality."""

from __future__ import annotations

from ..constructs import is_cross
from ..schema.arch import Architecture
from ..schema.precision import weight_format
from .fill import Collector, Fill


def objective_target(arch: Architecture) -> Fill:
    ev = Collector(arch)
    n = ev.use("mtp_layers") or 0
    if n:
        return ev.fill(
            "objective.target",
            "mtp",
            f"next token + {n} MTP module{'s' if n > 1 else ''}",
            {},
            {"mtp_modules": n},
        )
    return ev.fill("objective.target", "next-token", "next token")


def decoding_steps(arch: Architecture) -> Fill:
    ev = Collector(arch)
    n = ev.use("mtp_layers") or 0
    if n:
        return ev.fill(
            "decoding.steps",
            "mtp-draft",
            f"one token per forward; the {n} MTP module{'s' if n > 1 else ''} can draft for "
            "speculative decoding",
            {},
            {"mtp_modules": n},
        )
    return ev.fill(
        "decoding.steps",
        "one-token",
        "one token per forward (speculative decoding is an engine setting, not in the config)",
    )


def precision_weights(arch: Architecture) -> Fill:
    ev = Collector(arch)
    ev.use("dtype")
    q = arch.get("quantization_config")
    if q:
        ev.use("quantization_config")
    fmt = weight_format(arch)
    return ev.fill("precision.weights", fmt.kind, fmt.detail, {}, {})


def modality_input(arch: Architecture) -> Fill:
    ev = Collector(arch)
    vis = arch.vision
    cross = sum(n for s, n in arch.layer_runs if is_cross(s.mixer))
    audio = arch.get("audio", None)
    if not vis:
        return ev.fill("modality.input", "text", "text tokens")
    key = vis["config_key"].value
    ev.items[f"{key}.model_type"] = vis["model_type"].value
    enc = vis["model_type"].value or "vision encoder"
    layers, hidden = vis.get("layers"), vis.get("hidden")
    dims = f" ({layers.value} layers × {hidden.value})" if layers and hidden else ""
    # an audio encoder beside the vision tower is said on the same line
    also = f"; audio encoder {arch.audio[1] or arch.audio[0]}" if arch.audio is not None else ""
    own = vis.get("modality")
    if own is not None and own.value:  # a multimodal file naming its own input (Evolla: protein)
        detail = vis.get("modality_detail")
        text = str(detail.value) if detail is not None and detail.value else enc
        return ev.fill("modality.input", str(own.value), f"{text}{dims}{also}", {"audio": bool(audio)})
    if cross:
        ev.use("cross_attention_layers")
        return ev.fill(
            "modality.input",
            "vision-cross-attention",
            f"{enc}{dims}, read through {cross} cross-attention layers{also}",
            {"audio": bool(audio)},
        )
    return ev.fill(
        "modality.input",
        "vision-tokens",
        f"{enc}{dims} + connector, image features injected as tokens{also}",
        {"audio": bool(audio)},
    )
