"""What a new user reading the cost pages trips on (issue 30, item 13), through the console script.

The MLA FLOPs headline is the form docs/COSTS.md names; Qwen3-VL images are priced with its
own processor fields; ``sweep --plot`` marks what does not fit as the table does; suffix hints
under --help appear only on flags that take sizes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")} | {"HF_HUB_OFFLINE": "1"}


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=300,
        check=False,
    )


# ------------------------------------------------------------------ MLA: the headline form


def test_mla_headline_is_the_absorbed_form_the_docs_name() -> None:
    res = run("deepseek-ai/DeepSeek-V3", "--json")
    assert res.returncode == 0, res.stderr
    flops = json.loads(res.stdout)["cost"]["flops"]
    # DeepSeek-V3: 61 MLA layers, 128 heads, kv_lora_rank 512, rope 64, nope 128, v 128; decode
    # at 8,192 attends 8,192 keys. Absorbed: 2·h·(r_kv + rope + r_kv)·s per layer.
    absorbed = 61 * 2 * 128 * (512 + 64 + 512) * 8192
    decompressed = 61 * 2 * 128 * ((128 + 64) + 128) * 8192
    reexpand = 61 * 2 * 512 * 128 * (128 + 128) * (8192 - 1)  # kv_b_proj over the other cached latents
    assert flops["attention_per_token"] == absorbed
    assert flops["attention_per_token_transformers"] == decompressed + reexpand
    assert flops["mla_form"].startswith("absorbed")
    text = run("deepseek-ai/DeepSeek-V3").stdout
    assert f"attention {absorbed / 1e9:.2f} GFLOP" in text  # the text headline is the same figure
    doc = " ".join((ROOT / "docs" / "COSTS.md").read_text().split())
    bullet = doc[doc.index("MLA decode is headlined") :][:700]
    assert "absorbed form" in bullet and "`cost.flops.attention_per_token`" in bullet
    assert "`attention_per_token_transformers`" in bullet
    assert "MLA is counted as transformers runs it" not in doc


# ------------------------------------------------------------------ Qwen3-VL's own image fields


def test_qwen3_vl_image_uses_its_published_processor_fields() -> None:
    res = run("image", "Qwen/Qwen3-VL-30B-A3B-Instruct", "--image", "1920x1080", "--json")
    assert res.returncode == 0, res.stderr
    img = json.loads(res.stdout)["images"][0]
    # patch 16, merge 2 → factor 32: 1080 → 1088, 1920 → 1920; 1088 · 1920 = 2,088,960 lies in
    # [256², 4096²] → (1088 / 16) · (1920 / 16) = 68 · 120 = 8160 patches → 8160 / 4 = 2040.
    # Under Qwen2-VL's 28²·1280 it would have been shrunk to 736 × 1312 → 943.
    assert (img["decoder_tokens"], img["resized_to"]) == (2040, "1920x1088"), img
    shown = json.dumps(img)
    assert "16777216" in shown and "65536" in shown and "1003520" not in shown


# ------------------------------------------------------------------ sweep --plot marks what does not fit


def _svg_text(path: Path) -> str:
    return " ".join(re.findall(r">([^<>]+)<", path.read_text()))


def test_sweep_plot_marks_batches_that_do_not_fit(tmp_path: Path) -> None:
    svg = tmp_path / "batch.svg"
    argv = ["sweep", "meta-llama/Llama-3.1-70B", "--over", "batch", "--gpu", "h100", "--gpus", "2"]
    data = json.loads(run(*argv, "--json").stdout)["models"][0]
    unfit = [r["batch"] for r in data["rows"] if not r["fits"]]
    assert unfit and data["max_batch_that_fits"] is not None
    res = run(*argv, "--plot", str(svg))
    assert res.returncode == 0, res.stderr
    text = _svg_text(svg)
    assert f"does not fit above B={data['max_batch_that_fits']:,}" in text, text[:600]
    # a sweep where every batch fits says nothing of the kind
    fits = tmp_path / "fits.svg"
    ok = run("sweep", "meta-llama/Llama-3.2-1B", "--over", "batch", "--points", "1,2,4", "--plot", str(fits))
    assert ok.returncode == 0 and "does not fit" not in _svg_text(fits)


def test_sweep_plot_marks_contexts_that_do_not_fit(tmp_path: Path) -> None:
    svg = tmp_path / "ctx.svg"
    argv = ["sweep", "meta-llama/Llama-3.1-70B", "--over", "context", "--gpu", "h100", "--gpus", "2"]
    rows = json.loads(run(*argv, "--json").stdout)["models"][0]["rows"]
    first = next(r["context"] for r in rows if not r["fits"])
    assert run(*argv, "--plot", str(svg)).returncode == 0
    assert f"does not fit from {first:,} tokens" in _svg_text(svg)


# ------------------------------------------------------------------ suffix hints only on sizes

# Flags whose values are sizes (tokens, sequences, pixels, bytes, models listed): the only ones
# whose --help offers suffixes. A new flag with a hint must be added here on purpose.
SIZE_FLAGS = {
    "--batch", "--batches", "--concurrency", "--context", "--points", "--prompt", "--output",
    "--requests", "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens", "--max-total-tokens",
    "--min-pixels", "--max-pixels", "--limit", "--gpu-mem", "--kv-cache-memory", "--non-torch-gib",
    "--activation-gib", "--cuda-graph-gib", "--weights-gib", "--available-kv-gib", "--free-gib",
}  # fmt: skip


def _help_entries(text: str) -> dict[str, str]:
    """Each option's help text under --help, by its first flag (wrapped lines joined)."""
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^  (-{1,2}[a-z][\w-]*)", line)
        if m:
            current = m.group(1)
            out[current] = line
        elif current and line.startswith("    "):
            out[current] += " " + line.strip()
        else:
            current = None
    return {k: " ".join(v.split()) for k, v in out.items()}


def test_suffix_hints_only_on_flags_that_take_sizes() -> None:
    from slotdiff import cli

    hinted: set[str] = set()
    for name in cli.COMMANDS:
        entries = _help_entries(run(name, "--help").stdout)
        for flag, text in entries.items():
            if "takes 8K = 8192" in text or "takes 80 (GiB)" in text:
                hinted.add(flag)
    assert hinted <= SIZE_FLAGS, hinted - SIZE_FLAGS
    assert {"--context", "--batch", "--gpu-mem"} <= hinted
    for command, flag in (("specdec", "--gamma"), ("train", "--zero"), ("moe", "--ep"), ("fit", "--gpus")):
        text = _help_entries(run(command, "--help").stdout)[flag]
        assert "takes" not in text, (command, flag, text)


@pytest.mark.parametrize(
    "argv",
    [
        ["specdec", "meta-llama/Llama-3.1-8B", "--gamma", "4K"],
        ["train", "meta-llama/Llama-3.1-8B", "--zero", "1k"],
        ["fit", "meta-llama/Llama-3.1-8B", "--gpus", "1K"],
    ],
)
def test_small_counts_refuse_a_size_suffix_in_one_line(argv: list[str]) -> None:
    res = run(*argv)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "expected a plain whole number" in res.stderr and argv[-2] in res.stderr


def test_every_hinted_flag_type_is_a_size() -> None:
    """In process: each parser's flags whose type carries a suffix hint are size flags."""
    for name, module_name in importlib.import_module("slotdiff.cli").COMMANDS.items():
        parser = argparse.ArgumentParser()
        importlib.import_module(module_name).add_arguments(parser)
        for action in parser._actions:
            if getattr(action.type, "accepts", None):
                assert action.option_strings[0] in SIZE_FLAGS, (name, action.option_strings)
