"""Self-check of the transformers oracle: run it over the corpus and print what it measures.

Not a pytest test.  Run from the repository root with the test environment:

    python tests/oracle/selfcheck.py            # everything (about a minute on 2 cores)
    python tests/oracle/selfcheck.py --params   # only the parameter counts

It prints ``file total`` and the per-part sums for every config in both corpus folders (and why
transformers cannot build the ones it cannot), then KV-cache bytes and FLOPs for one model of
each family slotdiff must get right, each checked against a closed-form count so a regression
in the oracle itself is visible.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import transformers

from oracle import hf_oracle as oracle

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "corpus"

#: (label, corpus file, overrides, dtype) for the KV-cache and FLOP checks.
FAMILIES: tuple[tuple[str, str, dict[str, Any] | None, str], ...] = (
    ("llama3-gqa", "raw/meta-llama__Meta-Llama-3-8B.json", None, "float32"),
    ("gpt2-mha", "raw/openai-community__gpt2.json", None, "float32"),
    ("mistral-swa", "raw/mistralai__Mistral-7B-v0.1.json", {"sliding_window": 8}, "float32"),
    ("gemma2-interleave", "raw/google__gemma-2-2b.json", {"sliding_window": 8}, "float32"),
    ("gpt-oss-sinks", "raw/openai__gpt-oss-20b.json", {"sliding_window": 8}, "float32"),
    ("qwen3-next-hybrid", "raw/Qwen__Qwen3-Next-80B-A3B-Thinking.json", None, "float32"),
    ("qwen3-next-bf16", "raw/Qwen__Qwen3-Next-80B-A3B-Thinking.json", None, "bfloat16"),
    ("jamba-ssm", "transformers-defaults/jamba.json", None, "float32"),
    ("mamba-ssm", "transformers-defaults/mamba.json", None, "float32"),
    ("deepseek-v2-mla", "raw/deepseek-ai__DeepSeek-V2-Lite.json", None, "float32"),
)
SEQ_LEN = 32
DECODE_CONTEXT = 32


def corpus_files() -> list[Path]:
    """Every config in the two corpus folders, raw first."""
    return sorted((CORPUS / "raw").glob("*.json")) + sorted((CORPUS / "transformers-defaults").glob("*.json"))


def check_params() -> None:
    """Print ``file total`` and non-zero part sums for every corpus config."""
    print(f"== param_count over {len(corpus_files())} corpus configs")
    unsupported: list[tuple[str, str]] = []
    for path in corpus_files():
        name = f"{path.parent.name}/{path.name}"
        start = time.perf_counter()
        try:
            result = oracle.param_count(oracle.load_config(path))
        except oracle.OracleUnsupported as exc:
            unsupported.append((name, exc.reason))
            print(f"{name} UNSUPPORTED")
            continue
        parts = " ".join(f"{k}={v}" for k, v in result["parts"].items() if v)
        extras = []
        if result["tied"]:
            extras.append(f"tied={len(result['tied'])}")
        if result["persistent_buffers"]:
            extras.append(f"buffers={sum(result['persistent_buffers'].values())}")
        if result["defaulted_subconfigs"]:
            extras.append(f"defaulted={','.join(result['defaulted_subconfigs'])}")
        if result["other_names"]:
            extras.append(f"OTHER={result['other_names']}")
        secs = time.perf_counter() - start
        print(f"{name} {result['total']} [{result['model_class']}] {parts} {' '.join(extras)}")
        if secs > 2:
            print(f"   slow: {secs:.1f}s")
    print("-- transformers cannot build:")
    for name, reason in unsupported:
        print(f"   {name}: {reason}")


def _head_geometry(cfg: dict[str, Any]) -> tuple[int, int, int]:
    """(query heads, KV heads, head_dim) of a plain attention layer of a tiny config dict."""
    heads = cfg.get("num_attention_heads") or cfg["n_head"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    hidden = cfg.get("hidden_size") or cfg["n_embd"]
    head_dim = cfg.get("head_dim") or hidden // heads
    return heads, kv_heads, head_dim


def expected_layer_state(cfg: dict[str, Any], entry: dict[str, Any]) -> int | None:
    """Closed-form bytes of one cache layer's recurrent + conv state, for the checked families."""
    kinds = {t["kind"]: t for t in entry["tensors"]}
    if "recurrent_state" not in kinds:
        return 0 if entry["state_bytes"] == 0 else None
    conv_b = _dtype_bytes(kinds["conv_state"]["dtype"])
    rec_b = _dtype_bytes(kinds["recurrent_state"]["dtype"])
    mt = cfg["model_type"]
    if mt == "qwen3_next":
        key_dim = cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
        value_dim = cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]
        conv = (2 * key_dim + value_dim) * cfg["linear_conv_kernel_dim"]
        rec = value_dim * cfg["linear_key_head_dim"]
    elif mt == "jamba":
        inner = cfg["mamba_expand"] * cfg["hidden_size"]
        conv, rec = inner * cfg["mamba_d_conv"], inner * cfg["mamba_d_state"]
    elif mt == "mamba":
        inner = cfg["intermediate_size"]
        conv, rec = inner * cfg["conv_kernel"], inner * cfg["state_size"]
    else:
        return None
    return conv * conv_b + rec * rec_b


def _dtype_bytes(name: str) -> int:
    return {"float32": 4, "bfloat16": 2, "float16": 2}[name]


def expected_layer_kv(cfg: dict[str, Any], entry: dict[str, Any], seq: int, nbytes: int) -> int:
    """Closed-form K+V bytes of one cache layer (plain attention or MLA latent)."""
    if entry["cached_tokens"] is None:
        return 0
    window = cfg.get("sliding_window")
    tokens = min(seq, window - 1) if entry.get("is_sliding") else seq
    if cfg.get("kv_lora_rank"):
        return tokens * (cfg["kv_lora_rank"] + cfg["qk_rope_head_dim"]) * nbytes
    _, kv_heads, head_dim = _head_geometry(cfg)
    return 2 * kv_heads * tokens * head_dim * nbytes


def check_kv() -> None:
    """KV-cache bytes of a SEQ_LEN forward per family, with a closed-form cross-check."""
    print(f"\n== kv_cache_bytes, seq_len={SEQ_LEN}, batch 1")
    for label, rel, overrides, dtype in FAMILIES:
        start = time.perf_counter()
        try:
            r = oracle.kv_cache_bytes(
                oracle.load_config(CORPUS / rel), SEQ_LEN, dtype=dtype, overrides=overrides
            )
        except oracle.OracleUnsupported as exc:
            print(f"{label}: UNSUPPORTED {exc.reason}")
            continue
        cfg = r["tiny_config"]
        ok = True
        for e in r["layers"]:
            want_kv = expected_layer_kv(cfg, e, SEQ_LEN, r["bytes_per_element"])
            want_state = expected_layer_state(cfg, e)
            ok &= want_kv == e["kv_bytes"] and want_state == e["state_bytes"]
        per_layer = ", ".join(
            f"{e.get('layer_type') or e.get('cache_layer_class')}:"
            f"{e['kv_bytes']}+{e['state_bytes']}"
            + (f"({e['cached_tokens']}tok)" if e["cached_tokens"] is not None else "")
            for e in r["layers"]
        )
        print(
            f"{label} [{r['model_class']}, {r['num_layers']} layers, {dtype}, "
            f"{r['bytes_per_element']} B/elt, geometry_preserved={r['geometry_preserved']}] "
            f"kv={r['kv_bytes']} state={r['state_bytes']} total={r['total_bytes']} "
            f"sliding_window={r['sliding_window']} capped={r['sliding_layers_capped']} "
            f"closed-form={'OK' if ok else 'MISMATCH'} ({time.perf_counter() - start:.1f}s)"
        )
        print(f"   per layer kv+state bytes: {per_layer}")
        for note in r["notes"]:
            print(f"   note: {note}")


def expected_matmul_flops(cfg: dict[str, Any], tokens: int) -> int | None:
    """2 x tokens x (weights of every matmul) for dense models without MoE; None otherwise."""
    if any(k in cfg for k in ("num_local_experts", "num_experts", "n_routed_experts")):
        return None
    counted = oracle.param_count(cfg)
    matrices = sum(
        n
        for name, n in counted["by_name"].items()
        if counted["part_of_name"][name] in ("attention", "ffn", "head")
        and not name.endswith(("bias", "sinks"))
    )
    if counted["tied"]:
        matrices += counted["parts"]["embedding"]
    return 2 * tokens * matrices


def expected_score_flops(cfg: dict[str, Any], seq: int, kv_len: int | None) -> int:
    """Q.K^T plus P.V FLOPs of all layers: full s x s in prefill, window-capped keys in decode."""
    heads, _, head_dim = _head_geometry(cfg)
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types") or ["full_attention"] * cfg.get("num_hidden_layers", cfg.get("n_layer"))
    if cfg["model_type"] == "mistral":
        types = ["sliding_attention"] * len(types)
    total = 0
    for kind in types:
        if kv_len is None:
            keys = seq
        elif kind == "sliding_attention":
            keys = min(kv_len, window)
        else:
            keys = kv_len
        total += 4 * heads * seq * keys * head_dim
    return total


def check_flops() -> None:
    """Prefill and decode FLOPs per family, with closed-form checks where they are simple."""
    print(f"\n== forward_flops, prefill {SEQ_LEN} tokens; decode 1 token after {DECODE_CONTEXT}")
    plain = {"llama3-gqa", "gpt2-mha", "mistral-swa", "gemma2-interleave", "gpt-oss-sinks"}
    for label, rel, overrides, dtype in FAMILIES:
        if dtype != "float32":
            continue
        start = time.perf_counter()
        try:
            r = oracle.forward_flops(
                oracle.load_config(CORPUS / rel),
                SEQ_LEN,
                decode_context=DECODE_CONTEXT,
                overrides=overrides,
            )
        except oracle.OracleUnsupported as exc:
            print(f"{label}: UNSUPPORTED {exc.reason}")
            continue
        cfg = r["tiny_config"]
        pre, dec = r["prefill"], r["decode"]
        checks = []
        if label in plain:
            score_ok = pre["by_op"].get("bmm", 0) == expected_score_flops(cfg, SEQ_LEN, None)
            dec_ok = dec["by_op"].get("bmm", 0) == expected_score_flops(cfg, 1, DECODE_CONTEXT + 1)
            checks.append(f"scores(full s^2)={'OK' if score_ok else 'MISMATCH'}")
            checks.append(f"decode-scores={'OK' if dec_ok else 'MISMATCH'}")
        want = expected_matmul_flops(cfg, SEQ_LEN)
        if want is not None and label in plain:
            got = pre["by_op"].get("mm", 0) + pre["by_op"].get("addmm", 0)
            checks.append(f"2*tokens*matrices={'OK' if got == want else f'MISMATCH {want}'}")
        parts = " ".join(f"{k}={v}" for k, v in pre["by_part"].items() if v)
        print(
            f"{label} [{r['model_class']}, {r['num_layers']} layers, "
            f"experts={r['experts_implementation']}] prefill={pre['total']} {pre['by_op']} "
            f"decode={dec['total']} {dec['by_op']} ({time.perf_counter() - start:.1f}s)"
        )
        print(f"   prefill by part: {parts}")
        if checks:
            print(f"   checks: {' '.join(checks)}")
        for note in r["notes"][1:]:
            print(f"   note: {note}")


def main(argv: list[str] | None = None) -> int:
    """Run the selected checks and print a timing summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", action="store_true", help="only the parameter counts")
    args = parser.parse_args(argv)
    transformers.logging.set_verbosity_error()
    print(
        f"transformers {oracle.TRANSFORMERS_VERSION}, torch {oracle.TORCH_VERSION}, "
        f"threads {torch.get_num_threads()}"
    )
    start = time.perf_counter()
    check_params()
    if not args.params:
        check_kv()
        check_flops()
    print(f"\nselfcheck done in {time.perf_counter() - start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
