"""Number formatting shared by every renderer (units stated, never ambiguous)."""

from __future__ import annotations


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
