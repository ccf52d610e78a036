"""Charts of sweeps, drawn with matplotlib (the optional ``plot`` extra): the only module that imports it.

Over batch: a roofline (attainable FLOP/s per GPU against FLOP/byte, each batch a point, with
and without KV) beside the decode step's two sides against batch, the compute-bound batch
marked. Over context: per model, FLOPs per decode token stacked weights + attention with the
crossover marked, and KV per sequence for every model. A point whose weights and KV do not fit
the GPUs is drawn as a cross and the range it starts is shaded and labelled "does not fit", as
the table marks it with ``*``. Figures are built on the Agg canvas
without pyplot, so nothing global changes; the suffix picks PNG or SVG.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.errors import SlotdiffError
from ..core.files import atomic_write
from ..schema.precision import dtype_label
from .deploy import display_name

INSTALL_HINT = "--plot needs matplotlib: pip install 'slotdiff[plot]'"
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def require_matplotlib() -> None:
    """Fail with one line (exit 2) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:
        raise SlotdiffError("slotdiff", INSTALL_HINT) from err


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Any, path: Path) -> None:
    """Write the figure atomically (a killed run leaves the previous plot intact)."""

    fmt = path.suffix.lower().lstrip(".") or "png"
    atomic_write(path, lambda fh: fig.savefig(fh, format=fmt))


def _tokens(x: float, _pos: Any = None) -> str:
    """Axis labels for token counts: 1024 → 1K, 131072 → 128K, 1048576 → 1M."""
    for div, unit in ((1 << 20, "M"), (1 << 10, "K")):
        if x >= div:
            return f"{x / div:g}{unit}"
    return f"{x:g}"


def _shown(b: int) -> bool:
    """Batches labelled on the roofline: 1, 16, 256, 4096, ..."""
    return b & (b - 1) == 0 and (b.bit_length() - 1) % 4 == 0


NO_FIT = "#7f7f7f"


def _mark_no_fit(ax: Any, s: Any, xs: Sequence[float], ys: Sequence[float]) -> None:
    """Crosses on the points that do not fit, the range they start shaded, and a legend entry
    with the limit (the largest batch that fits, or the first context that does not)."""
    bad = [(x, y) for x, y, r in zip(xs, ys, s.rows, strict=True) if not r.fits]
    if not bad:
        return
    i = next(i for i, r in enumerate(s.rows) if not r.fits)
    if s.over == "batch":
        what = f"above B={s.max_batch:,}" if s.max_batch else f"from B={xs[i]:,}"
    else:
        what = f"from {xs[i]:,} tokens"
    label = f"{display_name(s.model)}: does not fit {what}"
    ax.plot(*zip(*bad, strict=True), "x", color=NO_FIT, ms=9, mew=2, zorder=4, label=label)
    start = (xs[i - 1] * xs[i]) ** 0.5 if i else xs[i]  # halfway on the log axis
    ax.axvspan(start, xs[-1], color=NO_FIT, alpha=0.12, lw=0)


def plot_batch(sweeps: Sequence[Any], path: Path) -> None:
    from matplotlib.ticker import FuncFormatter

    fig = _figure(13, 5.4)
    roof, thr = fig.subplots(1, 2)
    first = sweeps[0]
    peak_t = first.peak / 1e12
    lo = min(min(r.step.intensity for r in s.rows) for s in sweeps)
    hi = max(first.ridge * 8, *(r.step.weight_flops / r.step.weight_bytes for s in sweeps for r in s.rows))
    xs = [lo / 2, first.ridge, hi * 4]
    roof.plot(
        xs, [min(peak_t, x * first.bandwidth / 1e12) for x in xs], color="black", lw=2.5, label="roofline"
    )
    roof.axvline(first.ridge, color="gray", ls=":", lw=1)
    roof.annotate(
        f"ridge {first.ridge:.0f} FLOP/byte",
        (first.ridge, peak_t),
        textcoords="offset points",
        xytext=(6, 6),
        fontsize=8,
        color="gray",
    )
    for i, (s, color) in enumerate(zip(sweeps, COLORS, strict=False)):
        name = display_name(s.model)
        bw, peak = s.bandwidth / 1e12, s.peak / 1e12
        batches = [r.batch for r in s.rows]
        with_kv = [r.step.intensity for r in s.rows]
        no_kv = [r.step.weight_flops / r.step.weight_bytes for r in s.rows]
        y_kv = [min(peak, x * bw) for x in with_kv]
        y_w = [min(peak, x * bw) for x in no_kv]
        roof.plot(no_kv, y_w, "s", color=color, ms=6, mfc="none", mew=1.5, label=f"{name}: weights only")
        roof.plot(with_kv, y_kv, "o", color=color, ms=4, label=f"{name}: with KV at {s.fixed:,} tokens")
        for x, y, b in zip(no_kv, y_w, batches, strict=True):
            if _shown(b) and y < peak / 3:  # labels near the ridge would sit on the star
                roof.annotate(
                    f"B={b:,}",
                    (x, y),
                    textcoords="offset points",
                    xytext=(6, -10 - 9 * i),
                    fontsize=8,
                    color=color,
                )
        cb = s.compute_bound_batch_weights
        if cb:
            roof.plot([s.ridge], [peak], "*", color=color, ms=16, mec="black", zorder=5)
            roof.annotate(
                f"compute-bound from B={cb:,}",
                (s.ridge, peak),
                textcoords="offset points",
                xytext=(14, -30 - 13 * i),
                fontsize=8,
                color=color,
            )
        thr.plot(
            batches, [r.step.tokens_per_s for r in s.rows], "o-", color=color, ms=4, label=f"{name}: with KV"
        )
        weights_tps = [
            r.batch / (max(r.step.weight_bytes / r.step.bandwidth, r.step.weight_flops / r.step.peak))
            for r in s.rows
        ]
        thr.plot(batches, weights_tps, "s--", color=color, ms=4, mfc="none", label=f"{name}: weights only")
        _mark_no_fit(thr, s, batches, [r.step.tokens_per_s for r in s.rows])
        unfit = [(x, y) for x, y, r in zip(with_kv, y_kv, s.rows, strict=True) if not r.fits]
        if unfit:
            roof.plot(
                *zip(*unfit, strict=True),
                "x",
                color=NO_FIT,
                ms=9,
                mew=2,
                zorder=4,
                label=f"{name}: does not fit",
            )
        marks = [
            (cb, ":", "compute-bound, weights only"),
            (s.compute_bound_batch, "-.", "compute-bound with KV"),
        ]
        for b, style, what in marks:
            if b and batches[0] <= b <= batches[-1]:
                thr.axvline(b, color=color, ls=style, lw=1.2)
                thr.text(
                    b,
                    0.02,
                    f" B={b:,}: {what}",
                    transform=thr.get_xaxis_transform(),
                    rotation=90,
                    ha="right",
                    va="bottom",
                    fontsize=8,
                    color=color,
                )
    roof.set_xscale("log")
    roof.set_yscale("log")
    roof.set_xlabel("arithmetic intensity of one decode step (FLOP / byte)")
    roof.set_ylabel(f"attainable TFLOP/s per GPU (dense peak {peak_t:,.0f})")
    roof.set_title("decode roofline: each point one batch size", fontsize=10)
    roof.grid(True, which="both", alpha=0.25)
    roof.legend(fontsize=7.5, loc="lower right")
    thr.set_xscale("log", base=2)
    thr.set_yscale("log")
    thr.xaxis.set_major_formatter(FuncFormatter(_tokens))
    thr.set_xlabel("batch (sequences)")
    thr.set_ylabel("decode throughput bound (tokens/s, all GPUs)")
    thr.set_title(f"decode tokens/s vs batch at {first.fixed:,} tokens", fontsize=10)
    thr.grid(True, which="both", alpha=0.25)
    thr.legend(fontsize=7.5, loc="upper left")
    fig.suptitle(f"decode over batch on {first.gpus} × {first.gpu_name}", fontsize=11)
    save(fig, path)


def plot_context(sweeps: Sequence[Any], path: Path) -> None:
    from matplotlib.ticker import FuncFormatter

    n = len(sweeps) + 1
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig = _figure(5.2 * cols, 4.4 * rows)
    grid = fig.subplots(rows, cols, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[n:]:
        ax.set_visible(False)
    kv_ax = axes[n - 1]
    for ax, s, color in zip(axes, sweeps, COLORS, strict=False):
        name = display_name(s.model)
        ctx = [r.context for r in s.rows]
        w = [r.weight_flops_per_token / 1e9 for r in s.rows]
        a = [r.attention_flops_per_token / 1e9 for r in s.rows]
        ax.stackplot(ctx, w, a, labels=["weights", "attention"], colors=(color, "#f2a65a"), alpha=0.85)
        ac = s.attention_overtakes_context
        if ac and ctx[0] <= ac <= ctx[-1]:
            ax.axvline(ac, color="black", ls="--", lw=1.2)
            ax.annotate(
                f"attention > weights\nfrom {ac:,} tokens",
                (ac, max(x + y for x, y in zip(w, a, strict=True)) * 0.95),
                textcoords="offset points",
                xytext=(-6, 0),
                ha="right",
                va="top",
                fontsize=8,
            )
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(_tokens))
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("FLOPs per decode token (GFLOP)")
        ax.set_title(name, fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="upper left")
        kv = [r.kv_bytes_per_sequence / 2**30 for r in s.rows]
        kv_ax.plot(ctx, kv, "o-", color=color, ms=4, label=name)
        _mark_no_fit(kv_ax, s, ctx, kv)
    kv_ax.set_xscale("log", base=2)
    kv_ax.set_yscale("log")
    kv_ax.xaxis.set_major_formatter(FuncFormatter(_tokens))
    kv_ax.set_xlabel("context (tokens)")
    kv_ax.set_ylabel(f"KV cache per sequence (GiB, {dtype_label(sweeps[0].kv_dtype)})")
    kv_ax.set_title("KV cache per sequence", fontsize=10)
    kv_ax.grid(True, which="both", alpha=0.25)
    kv_ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(
        "FLOPs per decode token, weights vs attention, and KV per sequence over context", fontsize=11
    )
    save(fig, path)


def plot_sweeps(sweeps: Sequence[Any], path: Path) -> None:
    """Draw ``sweeps`` (all over the same axis) to ``path`` (.png or .svg)."""
    require_matplotlib()
    import matplotlib

    # SVG text stays text (searchable, smaller) instead of glyph outlines.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "slotdiff"}):
        if sweeps[0].over == "batch":
            plot_batch(sweeps, path)
        else:
            plot_context(sweeps, path)
