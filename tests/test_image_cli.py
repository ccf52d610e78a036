"""`slotdiff image`: the command around cost/images.py (its rules are checked in test_images.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import raw

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", "image", *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )


def test_llava_image_json() -> None:
    out = run(str(raw("llava-hf/llava-1.5-7b-hf")), "--image", "336x336", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    (img,) = data["images"]
    # LLaVA-1.5: a 336×336 image is (336 / 14)² = 576 patch features (class token dropped).
    assert img["decoder_tokens"] == 576
    # Its KV in the Llama-2-7B decoder: 576 × 32 layers × 2 × 4096 × 2 B = 288 MiB.
    assert img["kv_bytes"] == 576 * 32 * 2 * 4096 * 2 == data["kv_bytes_per_token"] * 576


def test_text_only_model_is_a_clear_error() -> None:
    out = run(str(raw("openai/gpt-oss-20b")))
    assert out.returncode == 2 and "no vision encoder" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_bad_size_is_a_usage_error() -> None:
    out = run(str(raw("llava-hf/llava-1.5-7b-hf")), "--image", "big")
    assert out.returncode == 2 and "WIDTHxHEIGHT" in out.stderr
