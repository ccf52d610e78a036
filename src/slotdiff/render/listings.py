"""Pages of the listing commands (gpus, catalog, fingerprint) and of ``slotdiff image``.

Each builds render/page.py blocks, so the text view and ``--markdown`` say the same thing.
A figure a GPU does not have is shown as "—" with a footnote saying why, never as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import fmt, page
from .page import Block

MISSING = "—"


def _tflops(n: int | None) -> str:
    return MISSING if not n else f"{n / 1e12:,.1f}"


def gpus_page(gpus: Sequence[Any], aliases: Mapping[str, str], style: str, width: int | None) -> str:
    """The presets: memory, bandwidth, dense bf16/fp8/fp4 peaks, link; "—" where the part has none."""
    body = []
    for g in gpus:
        link = f"{g.link_bytes_per_s / 1e9:,.0f} GB/s" if g.link_bytes_per_s else MISSING
        body.append(
            [
                g.id,
                g.name,
                f"{g.memory_bytes / 2**30:,.0f} GiB",
                f"{g.bandwidth / 1e12:.2f} TB/s",
                _tflops(g.peak.get("bf16")),
                _tflops(g.peak.get("fp8")),
                _tflops(g.peak.get("fp4")),
                link,
            ]
        )
    headers = ["id", "name", "memory", "HBM", "bf16 TFLOP/s", "fp8", "fp4", "link"]
    blocks: list[Block] = ["GPU presets (dense peaks, TFLOP/s)", *page.rows(headers, body, left=2)]
    notes = [
        "— in fp8 or fp4: the part has no dense tensor-core peak of that type (its datasheet lists none; "
        "Ampere has no fp8, Hopper no fp4); math in it runs at the bf16 peak, as engines run such "
        "weights through weight-only kernels",
    ]
    if any(not g.link_bytes_per_s for g in gpus):
        notes.append("— under link: the preset gives no scale-up interconnect")
    notes.append("aliases: " + ", ".join(f"{a} = {b}" for a, b in sorted(aliases.items())))
    notes.append("link = the scale-up interconnect, bidirectional")
    notes.append("sources: slotdiff gpus --json (every figure cites its datasheet)")
    return page.render(blocks, notes, style, width, notes_title="notes:")


def catalog_page(entries: Sequence[Any], style: str, width: int | None) -> str:
    blocks: list[Block] = [
        f"bundled catalog: {len(entries)} published configs, served when the Hub is unreachable"
    ]
    if style == "markdown":
        body = [[e.repo_id, "complete" if e.complete else "trimmed", e.source] for e in entries]
        blocks += page.rows(["repo id", "copy", "taken from"], body, left=3)
    else:  # two lines an entry: the sources are paths too long for a column
        for e in entries:
            blocks += [e.repo_id + ("" if e.complete else "  (trimmed copy)"), f"    from {e.source}"]
    notes = ["trimmed: that copy lacks some keys of the published file (the analysis says which)"]
    return page.render(blocks, notes, style, width, notes_title="notes:")


def fingerprint_page(record: Mapping[str, Any], style: str, width: int | None) -> str:
    fills = record.get("fills", {})
    body = [[k, str(v)] for k, v in sorted(fills.items())]
    blocks: list[Block] = [
        f"family {record.get('name')} ({record.get('id')}): model types "
        + ", ".join(record.get("model_types", [])),
        "exemplars: " + ", ".join(record.get("exemplars", [])),
        *page.rows(["facet", "fill"], body, left=2),
    ]
    return page.render(blocks, [record["notes"]] if record.get("notes") else [], style, width, "notes:")


def image_page(out: Mapping[str, Any], style: str, width: int | None) -> str:
    """What each image costs: tokens, encoder FLOPs, KV, and the processor rule followed."""
    blocks: list[Block] = [
        f"{out['model']}: vision tower {fmt.count(out['vision_params'])} params, connector "
        f"{fmt.count(out['connector_params'])}; decoder KV {fmt.bin_bytes(out['kv_bytes_per_token'])}"
        f"/token ({out['kv_dtype']})"
    ]
    inj = out.get("injection")
    if inj:
        unit = (
            f"per image state: KV {fmt.bin_bytes(inj['kv_bytes_per_state'])}, decoder input "
            f"{fmt.bin_bytes(inj['decoder_input_bytes_per_state'])}, {fmt.flops(inj['flops_per_state'])}"
        )
        if inj["method"] == "cross-attention":
            unit += f" once, + {fmt.flops(inj['flops_per_text_token_per_state'])} per text token reading it"
        else:
            unit += " of decoder weights in its prefill (attention aside)"
        blocks.append(f"injection: {inj['method']}: {inj['text']}; {unit}")
    if out.get("images_unsupported"):
        blocks.append(f"states per image: not counted: {out['images_unsupported']}")
    for r in out["images"]:
        blocks.append("")
        blocks.append(
            f"{r['image']} → resized to {r['resized_to']}"
            + (f", {r['tiles']} tiles" if r["tiles"] > 1 else "")
            + f", {r['patches']:,} patches in {r['encoder_sequences']} encoder "
            f"sequence(s) of {r['encoder_positions_per_sequence']:,}"
        )
        blocks.append(
            f"  decoder: {r['decoder_tokens']:,} image tokens + {r['marker_tokens']} markers = "
            f"{r['decoder_positions']:,} positions, KV {fmt.bin_bytes(r['kv_bytes'])}"
        )
        if r["cross_attention_states"]:
            blocks.append(
                f"  cross-attention: {r['cross_attention_states']:,} image states, "
                f"KV {fmt.bin_bytes(r['cross_kv_bytes'])}"
            )
        blocks.append(
            f"  encoder: {fmt.flops(r['encoder_flops'])} per image (matmuls "
            f"{fmt.flops(r['encoder_matmul_flops'])}, attention "
            f"{fmt.flops(r['encoder_attention_flops'])}, connector {fmt.flops(r['connector_flops'])}); "
            f"{fmt.ms(r['encoder_ms'])} on {out['gpu']} ({out['layout']['label']}), once per image at prefill"
        )
        act = f"{r['activation_bytes']} bytes each"
        blocks.append(
            f"  encoder output: {fmt.bin_bytes(r['encoder_output_bytes'])} from the tower, "
            f"{fmt.bin_bytes(r['decoder_input_bytes'])} after the connector ({act})"
        )
        blocks.append(f"  injection: {r['injection']}: {r['injection_text']}")
        if r["injection"] == "cross-attention":
            blocks.append(
                f"    K/V of the image states {fmt.flops(r['decoder_prefill_flops'])} once, "
                f"{fmt.flops(r['decoder_flops_per_text_token'])} per text token reading them, "
                f"KV {fmt.bin_bytes(r['cross_kv_bytes'])}"
            )
        else:
            blocks.append(
                f"    decoder prefill of its {r['decoder_positions']:,} positions "
                f"{fmt.flops(r['decoder_prefill_flops'])}, KV {fmt.bin_bytes(r['kv_bytes'])}"
            )
        blocks.append(f"  rule: {r['rule']} ({r['source']})")
        blocks += [f"    {s['name']} = {s['value']} ({s['from']})" for s in r["settings"]]
        blocks += [f"  note: {n}" for n in r["notes"]]
    return page.render(blocks, (), style, width)
