"""Words for a scan report's parts, shared by its Markdown, terminal and HTML forms: dates,
popularity, each figure, and each difference with both of its values ("layers 32 → 48",
"RoPE θ=5e5, llama3 ×8 → RoPE θ=1e6, yarn ×4")."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..render.fmt import active as fmt_active
from ..render.fmt import bin_bytes, count, si_bytes
from .pipelines import size_names


def short_count(x: int | None) -> str:
    if x is None:
        return ""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if x >= size:
            return f"{x / size:.1f}".rstrip("0").rstrip(".") + unit
    return str(x)


def day(text: str | None) -> str:
    return (text or "")[:10]


def when(listed: Mapping[str, Any]) -> str:
    created, modified = day(listed.get("created")), day(listed.get("modified"))
    if created and modified and modified != created:
        return f"created {created}, updated {modified}"
    return f"created {created}" if created else (f"updated {modified}" if modified else "")


def popularity(listed: Mapping[str, Any]) -> str:
    parts = []
    if listed.get("downloads") is not None:
        parts.append(f"{short_count(listed['downloads'])} downloads")
    if listed.get("likes") is not None:
        parts.append(f"{short_count(listed['likes'])} likes")
    return " · ".join(parts)


def size_name(facet: str, size: str) -> str:
    """``layers``, ``FFN width``: the short name of one size (``facet.size`` when unnamed)."""
    return size_names().get(f"{facet}.{size}", f"{facet}.{size}")


def _value(x: Any) -> str:
    if x is None:
        return "none"
    if isinstance(x, float) and x.is_integer() and abs(x) >= 1000:
        return f"{x:g}"
    return str(x)


def size_change(c: Mapping[str, Any]) -> str:
    """``layers 32 → 48``."""
    return f"{size_name(c['facet'], c['size'])} {_value(c['was'])} → {_value(c['now'])}"


def size_changes(changes: Sequence[Mapping[str, Any]], limit: int = 8) -> str:
    shown = [size_change(c) for c in changes[:limit]]
    more = f" (+{len(changes) - limit} more)" if len(changes) > limit else ""
    return ", ".join(shown) + more


def difference(d: Mapping[str, Any]) -> str:
    """``attention.range: full causal → sliding window 4,096 on every layer``."""
    if d.get("was") is None and d.get("now") is None:
        return d["facet"]
    return f"{d['facet']}: {d.get('was') or '?'} → {d.get('now') or '?'}"


def figures(f: Mapping[str, Any] | None) -> str:
    """``8.03B params (8.03B active) · 16.06 GB weights · 128 KiB KV/token · fits 1× H100-SXM · verified``."""
    if not f:
        return ""
    parts = []
    if f.get("params") is not None:
        active = f.get("active_params")
        shown = fmt_active(active, f.get("active_is") == "maximum")
        extra = f" ({shown} active)" if active is not None and active != f["params"] else ""
        parts.append(f"{count(f['params'])} params{extra}")
    if f.get("weight_bytes") is not None:
        parts.append(f"{si_bytes(f['weight_bytes'])} weights")
    if f.get("kv_bytes_per_token") is not None:
        parts.append(f"{bin_bytes(f['kv_bytes_per_token'])} KV/token")
    fit = fit_words(f)
    if fit:
        parts.append(fit)
    if f.get("trust"):
        parts.append(f["trust"])
    if f.get("note") and f.get("params") is None:
        parts.append(f["note"])
    return " · ".join(parts)


def fit_words(f: Mapping[str, Any]) -> str:
    """``fits 1× H100-SXM`` / ``needs 4× H100-SXM`` / ``no H100-SXM layout fits``."""
    gpu = f.get("gpu")
    if not gpu or f.get("fits") is None:
        return ""
    name = gpu.upper()
    if f["fits"]:
        return f"fits 1× {name}"
    if f.get("min_gpus"):
        return f"needs {f['min_gpus']}× {name}"
    return f"no {name} layout fits"


def unreadable_lines(
    unread: Mapping[str, Any],
    esc: Callable[[Any], str],
    code: Callable[[Any], str],
    max_keys: int | None = None,
) -> list[str]:
    """What a report says of a config the schema layer cannot read: why, the nearest known
    model_type by key overlap, the keys it could not read; ``esc``/``code`` are the format's."""
    lines = [f"the schema layer cannot read it: {esc(unread['why'])}"]
    near = unread.get("nearest_by_keys")
    if near:
        lines.append(
            f"nearest known model_type by keys: {code(near['model_type'])} "
            f"({near['overlap']:.0%} key overlap, {int(near['shared'])} keys shared)"
        )
    keys = unread.get("unread_keys") or []
    if keys:
        lines.append("keys it could not read: " + ", ".join(code(k) for k in keys[:max_keys]))
    return lines


def shown_type(m: Mapping[str, Any]) -> str | None:
    """The model_type a report shows: the repo's own (``qwen3_vl_moe``), not the text model it
    wraps (``qwen3_vl_moe_text``)."""
    return m.get("repo_model_type") or m.get("model_type")


def checkpoint_lines(data: Mapping[str, Any]) -> list[str]:
    """The report's checkpoint section, first in every format: each model whose count differs
    from the stored count the listing gave, then per week the share that match."""
    ck = data.get("checkpoints") or {}
    out = []
    differs = ck.get("differs") or []
    if differs:
        shown = "; ".join(
            f"{d['repo_id']} (stored {d.get('stored_params'):,}, config {d.get('expected_params'):,})"
            for d in differs[:20]
        )
        more = f"; and {len(differs) - 20} more" if len(differs) > 20 else ""
        out.append(f"counts that differ from the checkpoint ({len(differs)}): {shown}{more}")
    for w in ck.get("weeks") or []:
        share = f" ({w['share']:.0%})" if w.get("share") is not None else ""
        none = f", {w['no_safetensors']} without safetensors" if w.get("no_safetensors") else ""
        out.append(
            f"week {w['week']}: {w['match']} of {w['compared']} counts equal the checkpoint's{share}{none}"
        )
    return out
