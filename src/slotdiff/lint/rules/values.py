"""Rules on what the sizes say together: KV heads that divide the heads, head_dim against
hidden/heads, top-k within the experts, layer lists of the right length, complete RoPE
scaling and MLA blocks, tensor-core-friendly sizes, a window inside the context."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ...read.jsonpos import dotted
from ...schema.keymap import keymap
from ...schema.relations import broken, lint_relations
from ..document import KeyPath
from ..registry import Hit, params, rule
from .keys import _scopes


def _positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


def _mla(cx: Any) -> bool:
    return bool(cx.doc.value("kv_lora_rank"))


@rule("SD110", needs="values")
def kv_heads_divisor(cx: Any) -> Iterator[Hit]:
    """Query heads must split evenly over KV heads (GQA): the relation rows of
    schemas/field_relations.json marked SD110, the ones the analysis refuses a config by."""
    doc = cx.doc
    for rel in lint_relations("SD110"):
        why = broken(rel, doc.value, doc.given)
        if why is None:
            continue
        a, b = rel["field"], rel["multiple_of"]
        where = doc.key_of(rel.get("cite", a)) or doc.key_of(a) or doc.key_of(b)
        head = f"{_name(doc, a)} {doc.value(a)} is not a multiple of {_name(doc, b)} {doc.value(b)}"
        yield Hit(where, f"{head}: {why}")


def _name(doc: Any, field: str) -> str:
    """The key a field was written as (its last part), or the field's first alias."""
    path = doc.key_of(field)
    if path:
        return str(path[-1])

    return keymap()["fields"][field]["aliases"][0]


@rule("SD111", needs="values")
def head_dim_mismatch(cx: Any) -> Iterator[Hit]:
    """Without head_dim, heads × head width must come out at hidden_size."""
    doc = cx.doc
    d, h = doc.value("d_model"), doc.value("n_heads")
    hd_val = doc.fields.get("head_dim")
    if _mla(cx) or not (_positive_int(d) and _positive_int(h)) or hd_val is None:
        return
    where = doc.key_of("d_model") or doc.key_of("n_heads")
    dk, hk = _name(doc, "d_model"), _name(doc, "n_heads")
    if hd_val.how == "derived" and d % h:
        hd = d // h
        yield Hit(
            where,
            f"{dk} {d} is not divisible by {hk} {h} and no head_dim is given: loaders use head_dim "
            f"{hd} ({h} × {hd} = {h * hd}, not {d})",
        )
    elif hd_val.how == "default" and where and _positive_int(hd_val.value) and h * hd_val.value != d:
        # (neither size written: the class's own defaults, whatever they multiply to)
        hd = hd_val.value
        mt = doc.text_config.get("model_type") or doc.data.get("model_type")
        yield Hit(
            where,
            f"no head_dim is given, so the {mt} class's default head_dim {hd} applies: "
            f"{h} × {hd} = {h * hd}, not {dk} {d}",
        )


@rule("SD112", needs="values")
def top_k_exceeds_experts(cx: Any) -> Iterator[Hit]:
    """A token cannot be routed to more experts than exist."""
    doc = cx.doc
    e, k = doc.value("n_experts"), doc.value("top_k")
    if _positive_int(e) and _positive_int(k) and k > e:
        yield Hit(
            doc.key_of("top_k") or doc.key_of("n_experts"),
            f"{_name(doc, 'top_k')} {k} is larger than {_name(doc, 'n_experts')} {e}",
        )


@rule("SD113", needs="values")
def layer_types_length(cx: Any) -> Iterator[Hit]:
    """layer_types needs one entry per layer."""
    doc = cx.doc
    types, n = doc.value("layer_types"), doc.value("n_layers")
    if isinstance(types, list) and _positive_int(n) and len(types) != n and doc.given("layer_types"):
        yield Hit(
            doc.key_of("layer_types"),
            f"layer_types has {len(types)} entries for {_name(doc, 'n_layers')} {n}",
        )


def _rope_blocks(cx: Any) -> Iterator[tuple[KeyPath, Mapping[str, Any]]]:
    """Every RoPE parameter block: rope_scaling / rope_parameters and per-layer-type blocks."""
    for prefix, scope in _scopes(cx):
        for key in ("rope_scaling", "rope_parameters"):
            block = scope.get(key)
            if not isinstance(block, Mapping):
                continue
            yield (*prefix, key), block
            for sub, inner in block.items():
                if isinstance(inner, Mapping):
                    yield (*prefix, key, sub), inner


@rule("SD114")
def rope_scaling_fields(cx: Any) -> Iterator[Hit]:
    """A RoPE scaling type needs its own fields."""
    required: Mapping[str, list[str]] = params("SD114")["required"]
    for path, block in _rope_blocks(cx):
        kind = block.get("rope_type", block.get("type"))
        if not isinstance(kind, str) or kind not in required:
            continue
        missing = [f for f in required[kind] if block.get(f) is None]
        if missing:
            yield Hit(path, f"{dotted(path)}: {kind} scaling needs {', '.join(missing)}")


@rule("SD115", needs="values")
def mla_partial(cx: Any) -> Iterator[Hit]:
    """MLA fields come as a set, in a model that has MLA: a latent rank (``kv_lora_rank``, given
    or the family's default). Other families' classes read ``v_head_dim`` or
    ``qk_rope_head_dim`` on their own (MiMo-V2-Flash, DeepSeek-V4), which is no partial MLA."""
    doc = cx.doc
    if not _mla(cx):
        return
    fields = params("SD115")["fields"]
    given = [f for f in fields if doc.given(f)]
    if given and len(given) < len(fields):
        missing = [f for f in fields if f not in given]
        yield Hit(
            doc.key_of(given[0]),
            f"MLA fields partly given: {', '.join(given)} set, {', '.join(missing)} missing",
        )


@rule("SD203", needs="values")
def tensor_core_size(cx: Any) -> Iterator[Hit]:
    """Widths that tile badly on tensor cores."""
    doc = cx.doc
    for field, multiple in params("SD203")["multiples"].items():
        value = doc.value(field)
        if not doc.given(field) or not _positive_int(value) or value % multiple == 0:
            continue
        if field == "head_dim" and _mla(cx):
            continue
        padded = -(-value // multiple) * multiple
        yield Hit(
            doc.key_of(field),
            f"{_name(doc, field)} {value} is not a multiple of {multiple} (tensor cores tile "
            f"{multiple}); {padded} would be",
        )


@rule("SD204", needs="arch")
def window_exceeds_context(cx: Any) -> Iterator[Hit]:
    """A sliding window as long as the context never slides."""
    doc = cx.doc
    context = doc.value("max_positions")
    windows = sorted({s.window for s in doc.arch.layers if s.window})
    if not _positive_int(context) or not windows or windows[-1] < context:
        return
    w = windows[-1]
    yield Hit(
        doc.key_of("sliding_window") or doc.key_of("max_positions"),
        f"sliding window {w:,} ≥ {_name(doc, 'max_positions')} {context:,}: the window never "
        "closes, so these layers attend to the whole context",
    )
