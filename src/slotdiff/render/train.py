"""Text and Markdown views of a training-memory answer (``slotdiff train``).

Takes the TrainMemory duck-typed (``to_dict()`` is the contract, the same the JSON schema
checks); sizes in GiB with the decimal GB beside the totals, as the seed articles quote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import page
from .deploy import display_name, table

KIND_LABELS = {
    "embedding": "embedding (ids, masks, RoPE tables)",
    "norm": "norms",
    "attention": "attention",
    "mlp": "dense FFN",
    "moe": "MoE (router, experts)",
    "lora": "LoRA adapters",
    "checkpoint": "checkpoints (layer inputs)",
    "logits": "LM head and loss (log-softmax)",
}
OPTIMIZER_LABELS = {
    "adamw": "AdamW",
    "adamw-8bit": "AdamW 8-bit",
    "sgd": "SGD",
    "sgd-momentum": "SGD+momentum",
}


def gib(n: float) -> str:
    """GiB to two decimals; MiB or KiB below one GiB (a tensor group can be that small)."""
    if not n:
        return "0"
    div, unit = next(((d, u) for d, u in ((2**30, "GiB"), (2**20, "MiB")) if abs(n) >= d), (2**10, "KiB"))
    return f"{n / div:,.2f} {unit}"


def _both(n: float) -> str:
    return f"{n / 2**30:,.2f} GiB ({n / 1e9:,.2f} GB)"


def setup_line(d: dict[str, Any]) -> str:
    s = d["setup"]
    recompute = {
        "none": "no recomputation",
        "selective": "selective recomputation",
        "full": "full recomputation",
    }
    tuning = (
        f"LoRA r={s['lora_rank']} on {','.join(s['lora_targets'])}" if s["lora_rank"] else "full fine-tuning"
    )
    zero = (
        f"ZeRO-{s['zero_stage']} over {s['gpus']} GPUs" if s["gpus"] > 1 else f"ZeRO-{s['zero_stage']}, 1 GPU"
    )
    tp, pp = s.get("tensor_parallel_size", 1), s.get("pipeline_parallel_size", 1)
    if tp > 1 or pp > 1:
        zero += f" × TP={tp} × PP={pp} ({s['total_gpus']} GPUs)"
    flash = "flash attention" if s["flash_attention"] else "no flash attention"
    return (
        f"batch {s['batch_per_gpu']:,} × {s['context']:,} tokens per GPU · {s['dtype']} · "
        f"{OPTIMIZER_LABELS[s['optimizer']]} · {flash} · "
        f"{recompute[s['checkpointing']]} · {s['kernels']} kernels · {tuning} · {zero}"
    )


def _state_rows(d: dict[str, Any]) -> list[list[str]]:
    s, g, dt = d["state_bytes"], d["state_bytes_per_gpu"], d["setup"]["dtype"]
    rows = [
        [f"weights ({dt})", gib(s["weights"]), gib(g["weights"])],
        [f"gradients ({dt})", gib(s["gradients"]), gib(g["gradients"])],
        ["fp32 master weights", gib(s["master_weights"]), gib(g["master_weights"])],
        [
            f"optimizer ({OPTIMIZER_LABELS[d['setup']['optimizer']]})",
            gib(s["optimizer"]),
            gib(g["optimizer"]),
        ],
    ]
    if g["zero3_gathered"]:
        rows.append(["ZeRO-3 gathered unit", "", gib(g["zero3_gathered"])])
    return rows


def _activation_rows(d: dict[str, Any]) -> list[list[str]]:
    a = d["activations"]
    rows = [[KIND_LABELS[k], gib(v)] for k, v in a["by_kind"].items()]
    rows.append(["saved for backward", gib(a["saved_bytes"])])
    rows.append(["loss transient (logits + fp32 copy)", gib(a["loss_transient_bytes"])])
    if a["recompute_bytes"]:
        rows.append(["recomputed layer (during its backward)", gib(a["recompute_bytes"])])
    rows.append(["activation peak", gib(a["peak_bytes"])])
    share = d["per_gpu"].get("activation_share", 1.0)
    if share < 1:
        rows.append([f"per GPU (÷ TP {round(1 / share)}, sequence parallel)", gib(a["peak_bytes"] * share)])
    return rows


def _layer_lines(d: dict[str, Any]) -> list[str]:
    out = []
    for g in d["activations"]["layers"]:
        kept = gib(g["bytes_per_layer"])
        full = g["bytes_per_layer_without_recompute"]
        extra = f" (rebuilt to {gib(full)} during its backward)" if full != g["bytes_per_layer"] else ""
        out.append(f"  {g['design']} ×{g['count']}: {kept} each{extra}")
    return out


def _verdict(d: dict[str, Any]) -> str:
    p = d["per_gpu"]
    word = "FITS" if p["fits"] else "DOES NOT FIT"
    return (
        f"total per GPU {_both(p['total_bytes'])} — {word} in {gib(p['usable_bytes'])} usable of "
        f"{gib(p['memory_bytes'])} ({d['gpu_name'].split(', ', 1)[-1]})"
    )


def _params_line(d: dict[str, Any]) -> str:
    p = d["params"]
    extra = f", LoRA adapters {p['lora']:,}" if p["lora"] else ""
    return f"params {p['total']:,}, trainable {p['trainable']:,}{extra}"


def render_train(d: dict[str, Any], width: int | None = None) -> str:
    lines = [
        f"{display_name(d['model'])}  ·  {d['model_type']}  ·  training memory",
        setup_line(d),
        _params_line(d),
        "",
    ]
    lines += table(["model state", "all replicas", "per GPU"], _state_rows(d), left=1)
    lines += ["", *table(["activations (per GPU)", "bytes"], _activation_rows(d), left=1)]
    lines += ["per layer:", *_layer_lines(d), "", _verdict(d)]
    return page.render(lines, d["assumptions"], "text", width)


def render_train_markdown(d: dict[str, Any]) -> str:
    def md(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
        return [
            "| " + " | ".join(headers) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|",
            *("| " + " | ".join(r) + " |" for r in rows),
        ]

    lines = [
        f"## Training memory: `{display_name(d['model'])}` ({d['model_type']})",
        "",
        setup_line(d),
        "",
        _params_line(d),
        "",
    ]
    lines += md(["model state", "all replicas", "per GPU"], _state_rows(d))
    lines += ["", *md(["activations (per GPU)", "bytes"], _activation_rows(d)), "", "Per layer:", ""]
    lines += [f"- {line.strip()}" for line in _layer_lines(d)]
    lines += ["", f"**{_verdict(d)}**", "", "Assumes:", ""]
    lines += [f"- {n}" for n in d["assumptions"]]
    return "\n".join(lines) + "\n"
