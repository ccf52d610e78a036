"""Number formatting shared by every renderer (units stated, never ambiguous)."""

from __future__ import annotations

from typing import Any


def count(n: float | int | None) -> str:
    """Parameter counts: 8030261248 → 8.03B, 124439808 → 124.4M."""
    if n is None:
        return "—"
    a = abs(n)
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if a >= div:
            digits = 2 if a / div < 100 else 1
            return f"{n / div:.{digits}f}{unit}"
    return f"{n:.0f}"


def active(n: float | int | None, maximum: bool = False) -> str:
    """An active-parameter count: ``32.18B``, or ``at most 32.18B`` when it is a maximum (the
    router also picks zero-compute experts: ``ParamCount.active_is_maximum``)."""
    return ("at most " if maximum else "") + count(n)


def si_bytes(n: float | int | None) -> str:
    """Decimal bytes for weights: 16060522496 → 16.06 GB."""
    if n is None:
        return "—"
    a = abs(n)
    for div, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if a >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n:.0f} B"


def bin_bytes(n: float | int | None) -> str:
    """Binary bytes for caches: 131072 → 128 KiB, 17179869184 → 16.00 GiB."""
    if n is None:
        return "—"
    a = abs(n)
    for div, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if a >= div:
            v = n / div
            return f"{v:.0f} {unit}" if float(v).is_integer() else f"{v:.2f} {unit}"
    return f"{n:.0f} B"


def flops(n: float | int | None) -> str:
    """FLOPs: 15009316864 → 15.01 GFLOP."""
    if n is None:
        return "—"
    a = abs(n)
    for div, unit in ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP")):
        if a >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n:.0f} FLOP"


def ms(x: float | None) -> str:
    if x is None:
        return "—"
    if abs(x) >= 1000:
        return f"{x / 1000:.2f} s"
    if abs(x) < 0.01 and x != 0:
        return f"{x * 1000:.2f} µs"
    return f"{x:.2f} ms"


def signed(text: str, value: float | int | None) -> str:
    """Prefix a formatted delta with its sign."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    return ("+" if value > 0 else "") + text


def short_name(name: str) -> str:
    """ "NVIDIA H100 Tensor Core GPU, H100 SXM (SXM5, 80 GB)" → "H100 SXM (SXM5, 80 GB)"."""
    return name.split(", ", 1)[1] if ", " in name else name


def shape_line(shape: Any, kv: Any) -> str | None:
    """Layers, the longest context the config declares and the KV cache there, beside the
    workload's (``shape``: analysis.report.Shape; ``kv``: the cost pass's KVCost or None)."""
    if shape is None:
        return None
    line = f"layers {shape.layers}"
    if shape.max_context is None:
        return line + f"; longest context: {shape.max_context_source}"
    line += f"; longest context {shape.max_context:,} tokens ({shape.max_context_source})"
    if shape.kv_bytes_at_max_context is not None and kv is not None:
        line += (
            f": KV cache {bin_bytes(shape.kv_bytes_at_max_context)} there, beside "
            f"{bin_bytes(kv.bytes_at_context)} at the workload's {kv.context:,}"
        )
        if shape.state_bytes_per_sequence:
            line += f" (+ fixed state {bin_bytes(shape.state_bytes_per_sequence)}/sequence)"
    return line


#: Display order and names of the parameter count's parts (cost.params by_part keys).
PARTS = {
    "embedding": "embedding",
    "position": "position table",
    "attention": "attention",
    "ffn": "FFN (dense)",
    "experts": "routed experts",
    "shared_experts": "shared experts",
    "router": "router",
    "norms": "norms",
    "head": "head",
    "vision": "vision tower",
    "connector": "connector",
    "audio": "audio encoder",
}


def part_rows(by_part: Any, total: int) -> list[tuple[str, str, str]]:
    """(part, params, share of the total) rows in display order, parts of zero left out."""
    by_part = dict(by_part)
    order = [k for k in PARTS if k in by_part] + sorted(k for k in by_part if k not in PARTS)
    rows = []
    for key in order:
        n = by_part[key]
        if not n:
            continue
        share = f"{100 * n / total:.1f}%" if total else ""
        rows.append((PARTS.get(key, key.replace("_", " ")), count(n), share))
    return rows
