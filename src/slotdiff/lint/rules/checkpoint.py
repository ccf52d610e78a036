"""The rule on the weights beside a config: a ``config.json`` whose folder holds safetensors
files or an index JSON must describe them (layers, experts, head tying, biases, widths)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...analysis.reconcile import DIFFERS, SlotDifference, reconcile
from ...core.errors import SlotdiffError
from ...cost.params import count
from ...read.checkpoint import Unavailable, local_index
from ..document import KeyPath
from ..registry import Hit, params, rule


def _key(doc: Any, fields: list[str]) -> tuple[KeyPath, str]:
    """The first of ``fields`` the file writes (its path and name); the first field otherwise."""
    for field in fields:
        path = doc.key_of(field)
        if path:
            return path, str(path[-1])
    return (), fields[0]


@rule("SD117", needs="arch")
def checkpoint_mismatch(cx: Any) -> Iterator[Hit]:
    """The checkpoint beside config.json stores what the config describes."""
    doc = cx.doc
    where = Path(doc.location)
    if where.name != "config.json" or not where.is_file():
        return
    lookup = local_index(where.parent)
    if lookup is None:
        return
    if isinstance(lookup, Unavailable):
        yield Hit((), f"the checkpoint beside it cannot be read: {lookup.why}")
        return
    try:
        counted = count(doc.arch)
    except SlotdiffError:  # a structure slotdiff cannot count (SD207) or an impossible one (SD1xx)
        return
    ck = reconcile(doc.arch, counted, lookup)
    if ck.status != DIFFERS:
        return
    yield from _hits(doc, ck)


def _hits(doc: Any, ck: Any) -> Iterator[Hit]:
    arch = doc.arch
    rest = list(ck.differences)
    if any(d.missing_layers or d.extra_layers for d in rest):
        path, name = _key(doc, ["n_layers"])
        yield Hit(path, f"{name} is {arch.n_layers} but the checkpoint holds {ck.layers} layers")
        rest = [d for d in rest if d.slot == "unplaced"]  # the other slots differ by those layers
    experts = arch.get("n_experts") or 0
    if ck.experts and experts and ck.experts != experts:
        path, name = _key(doc, ["n_experts"])
        yield Hit(path, f"{name} is {experts} but the checkpoint holds {ck.experts} experts per layer")
        rest = [d for d in rest if d.slot not in ("experts", "router")]
    for d in rest:
        yield _slot_hit(doc, d)


def _slot_hit(doc: Any, d: SlotDifference) -> Hit:
    if d.slot == "unplaced":
        names = ", ".join(d.names[:3])
        return Hit(("model_type",), f"the checkpoint stores tensors this model_type does not have: {names}")
    if d.slot == "head":
        path, name = _key(doc, ["tie_embeddings"])
        tied = bool(doc.arch.get("tie_embeddings"))
        stored = "a separate lm_head" if tied else "no lm_head (a tied head)"
        return Hit(path, f"{name} is {str(tied).lower()} but the checkpoint stores {stored}")
    shapes = d.stored_shapes + d.expected_shapes  # "4096 ×32": 1-D tensors only, i.e. biases
    vectors = bool(shapes) and all(s.split(" ")[0].isdigit() for s in shapes)
    keys = params("SD117")["bias_keys" if vectors else "slot_keys"]
    path, _name = _key(doc, keys.get(d.slot, ["d_model"]))
    if d.expected_params is not None and d.stored_params is not None:
        shapes = ""
        if d.stored_shapes or d.expected_shapes:
            shapes = (
                f" (only stored: {', '.join(d.stored_shapes) or 'none'}; "
                f"only described: {', '.join(d.expected_shapes) or 'none'})"
            )
        what = f"stores {d.stored_params:,} parameters, the config describes {d.expected_params:,}{shapes}"
    else:
        what = "has tensors there" if not d.expected_params else "has no tensors there"
    return Hit(path, f"the checkpoint's {d.slot} differs: it {what}")
