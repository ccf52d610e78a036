"""Onboard a model family: slotdiff's tensors beside transformers', and a drafted data file.

    python tools/onboard.py MODEL_TYPE [--config FILE] [--draft] [--write]

For the model_type's default config (or ``--config``), builds transformers' model on the
meta device and prints, part by part (embedding, attention, ffn, experts, router, norms,
head, vision ...), transformers' parameter tensors by module name beside slotdiff's tensor
rows, with the parts that differ marked. ``--draft`` reads the structure facts a model_type
file states (norm kind and placement, biases, gated MLP, q/k norms, fused qkv, learned
positions, sinks, router and expert biases ...) off the module tree transformers builds,
and prints a ``schemas/model_types/<model_type>.json`` draft with what it could not decide
marked for review; ``--write`` also writes it (never over an existing file) and compares
again with it in place. A person reviews the draft against the modeling file before it is
committed; tests/test_conformance.py then holds it to transformers' counts.

Needs the test extra (torch, transformers); imports slotdiff and tests/oracle only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402
from transformers import CONFIG_MAPPING  # noqa: E402

from slotdiff.analysis.analyze import load  # noqa: E402
from slotdiff.core.errors import SlotdiffError  # noqa: E402
from slotdiff.cost.params import count  # noqa: E402
from slotdiff.schema.keymap import keymap  # noqa: E402

from oracle import hf_oracle  # noqa: E402

MODEL_TYPES = ROOT / "schemas" / "model_types"

# Names transformers' families give the parts of a decoder layer, most common first.
ATTENTION_NAMES = ("self_attn", "attention", "attn", "self_attention", "mixer")
MLP_NAMES = ("mlp", "feed_forward", "ffn", "block_sparse_moe")
FUSED_QKV = ("qkv_proj", "query_key_value", "c_attn", "Wqkv", "qkv", "W_pack")
Q_NAMES = ("q_proj", "query", "q")
O_NAMES = ("o_proj", "dense", "c_proj", "out_proj", "wo", "o")
GATED = (("gate_proj", "up_proj"), ("w1", "w3"), ("gate_up_proj",), ("fc1_g",))
PLAIN = (
    ("fc1", "fc2"),
    ("c_fc", "c_proj"),
    ("fc_in", "fc_out"),
    ("dense_h_to_4h", "dense_4h_to_h"),
    ("up_proj", "down_proj"),
)
FINAL_NORMS = ("norm", "final_layernorm", "ln_f", "final_layer_norm", "norm_f", "final_norm")
EMBED_NORMS = ("embed_layernorm", "word_embeddings_layernorm", "emb_ln", "embedding_norm", "embed_norm")
POSITION_TABLES = ("embed_positions", "wpe", "position_embeddings")


# ------------------------------------------------------------------------------ both sides


def theirs(cfg: dict[str, Any]) -> dict[str, list[tuple[str, tuple[int, ...], int]]]:
    """transformers' parameters by part: (name with indices as N, shape, how many)."""
    model, _ = hf_oracle.build_meta(cfg)
    grouped: dict[tuple[str, tuple[int, ...]], int] = defaultdict(int)
    for name, p in model.named_parameters():
        grouped[(hf_oracle.normalise_name(name), tuple(p.shape))] += 1
    out: dict[str, list[tuple[str, tuple[int, ...], int]]] = defaultdict(list)
    for (name, shape), n in sorted(grouped.items()):
        out[hf_oracle.classify(name.replace("N", "0"))].append((name, shape, n))
    return out


def ours(cfg: dict[str, Any]) -> tuple[dict[str, list[tuple[str, str, int, int, int]]], str | None]:
    """slotdiff's tensor rows by part: (part name, module, rows, cols, count), or why none."""
    try:
        counted = count(load(cfg).arch)
    except SlotdiffError as err:
        return {}, err.line()
    out: dict[str, list[tuple[str, str, int, int, int]]] = defaultdict(list)
    for t in counted.tensors:
        out[t.slot].append((t.part, t.module, t.rows, t.cols, t.count))
    return out, None


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def compare(cfg: dict[str, Any]) -> int:
    """Print the two breakdowns part by part; return how many parts differ."""
    them = theirs(cfg)
    us, refused = ours(cfg)
    if refused:
        print(f"slotdiff refuses: {refused}")
    differ = 0
    parts = [p for p in hf_oracle.PARTS if p in them or p in us]
    total_them = total_us = 0
    for part in parts:
        a = sum(numel(shape) * n for _, shape, n in them.get(part, []))
        b = sum(r * c * n for _, _, r, c, n in us.get(part, []))
        total_them, total_us = total_them + a, total_us + b
        mark = "  " if a == b else "≠ "
        differ += a != b
        print(f"{mark}{part:<15} transformers {a:>16,}   slotdiff {b:>16,}   Δ {b - a:+,}")
        if a != b:
            for name, shape, n in them.get(part, []):
                print(f"      T  {name}  {list(shape)} ×{n}")
            for pname, module, r, c, n in us.get(part, []):
                print(f"      S  {pname} ({module})  [{r}, {c}] ×{n}")
    print(
        f"  {'total':<15} transformers {total_them:>16,}   slotdiff {total_us:>16,}"
        f"   Δ {total_us - total_them:+,}"
    )
    return differ


# ------------------------------------------------------------------------------ the draft


def _child(module: torch.nn.Module, names: tuple[str, ...]) -> tuple[str, torch.nn.Module] | None:
    for name in names:
        sub = getattr(module, name, None)
        if isinstance(sub, torch.nn.Module):
            return name, sub
    return None


def _has_bias(module: torch.nn.Module | None) -> bool:
    return module is not None and getattr(module, "bias", None) is not None


def _layers(model: torch.nn.Module, n: int) -> tuple[torch.nn.Module, torch.nn.ModuleList] | None:
    """The decoder's layer list (the first ModuleList of ``n`` entries outside a vision
    tower) and the module that holds it (where the embedding and final norm live too)."""
    modules = dict(model.named_modules())
    for name, sub in modules.items():
        if isinstance(sub, torch.nn.ModuleList) and len(sub) == n and "vision" not in name:
            return modules[name.rpartition(".")[0]], sub
    return None


def _norm_kind(norm: torch.nn.Module) -> dict[str, Any]:
    name = type(norm).__name__
    facts: dict[str, Any] = {"norm": "rmsnorm" if "RMS" in name or "Rms" in name else "layernorm"}
    if getattr(norm, "weight", None) is None:
        facts["norm_affine"] = False
    if _has_bias(norm):
        facts["norm_bias"] = True
    return facts


def infer(cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Structure facts and consts read off transformers' module tree, and what needs review."""
    model, config = hf_oracle.build_meta(cfg)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    review: list[str] = []
    structure: dict[str, Any] = {}
    const: dict[str, Any] = {}
    found = _layers(model, text.num_hidden_layers)
    if found is None:
        return structure, const, ["no layer list of num_hidden_layers entries found: lay it out by hand"]
    base, layers = found
    layer = layers[0]
    norms = [(n, m) for n, m in layer.named_children() if "norm" in type(m).__name__.lower() or "norm" in n]
    if norms:
        structure.update(_norm_kind(norms[0][1]))
        placement = {1: "parallel", 2: "pre", 4: "sandwich"}.get(len(norms))
        if placement is None:
            review.append(
                f"{len(norms)} norms per layer ({', '.join(n for n, _ in norms)}): set norm_placement"
            )
        else:
            structure["norm_placement"] = placement
            if placement == "pre":
                review.append(
                    f"two norms per layer ({norms[0][0]}, {norms[1][0]}): pre-norm assumed; "
                    "post and parallel2 count the same parameters — check the forward"
                )
    attn = _child(layer, ATTENTION_NAMES)
    if attn is not None:
        _, a = attn
        fused = _child(a, FUSED_QKV)
        if fused is not None:
            structure["fused_qkv"] = True
        q = fused or _child(a, Q_NAMES)
        if q is not None:
            const["qkv_bias"] = _has_bias(q[1])
        o = _child(a, O_NAMES)
        if o is not None:
            const["o_bias"] = _has_bias(o[1])
        qn = _child(a, ("q_norm", "q_layernorm", "query_layernorm"))
        const["qk_norm"] = qn is not None
        if qn is not None:
            w = getattr(qn[1], "weight", None)
            head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
            if w is None:
                structure["qk_norm_kind"] = "l2"
            elif w.dim() == 2:
                structure["qk_norm_kind"] = "head_separate"
            elif w.shape[0] != head_dim:
                structure["qk_norm_kind"] = "full"
            if _has_bias(qn[1]):
                structure["qk_norm_bias"] = True
        if any(n.endswith("sinks") for n, _ in a.named_parameters(recurse=False)):
            structure["sinks"] = True
    mlp = _child(layer, MLP_NAMES)
    if mlp is not None:
        _, m = mlp
        names = {n for n, _ in m.named_children()}
        if any(all(x in names for x in group) for group in GATED):
            structure["ffn_gated"] = True
        elif any(all(x in names for x in group) for group in PLAIN):
            structure["ffn_gated"] = False
        elif "experts" not in names:
            review.append(f"MLP children {sorted(names)}: set ffn_gated")
        linears = [s for s in m.children() if isinstance(s, torch.nn.Linear)]
        if linears:
            const["ffn_bias"] = any(_has_bias(s) for s in linears)
        gate = getattr(m, "gate", None)
        if isinstance(gate, torch.nn.Linear) and "experts" in names:
            structure["router_bias"] = _has_bias(gate)
        if "shared_expert_gate" in names:
            structure["shared_expert_gate"] = True
        if any(n.endswith("e_score_correction_bias") for n, _ in m.named_parameters()):
            structure["router_score_bias"] = True
    final = _child(base, FINAL_NORMS)
    structure["final_norm"] = final is not None
    if final is not None and not norms:
        structure.update(_norm_kind(final[1]))
    if _child(base, EMBED_NORMS) is not None:
        structure["embed_norm"] = True
    pos = _child(base, POSITION_TABLES)
    if pos is not None and isinstance(pos[1], torch.nn.Embedding):
        structure["position"] = "learned"
        offset = pos[1].num_embeddings - getattr(text, "max_position_embeddings", pos[1].num_embeddings)
        if offset:
            structure["position_offset"] = offset
    head = getattr(model, "lm_head", None)
    if _has_bias(head):
        structure["head_bias"] = True
    return structure, const, review


CORE_FIELDS = ("d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab", "max_positions")


def unresolved(cfg: dict[str, Any]) -> list[str]:
    """Core fields slotdiff could not resolve from this config (each needs an alias or a derive)."""
    try:
        arch = load(cfg).arch
    except SlotdiffError as err:
        return [err.line()]
    return [
        f"{name}: unknown to slotdiff (add an alias or a derive)"
        for name in CORE_FIELDS
        if arch.get(name) is None
    ]


def _defaults() -> dict[str, Any]:
    km = keymap()
    return {name: spec.get("default") for name, spec in km["structure"].items()}


def draft(model_type: str, cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A model_type data file stating the facts transformers' module tree shows."""
    structure, const, review = infer(cfg)
    review += unresolved(cfg)
    defaults = _defaults()
    structure = {k: v for k, v in structure.items() if defaults.get(k) != v}
    spec: dict[str, Any] = {
        "$schema": "../keymap.schema.json#/$defs/model_type",
        "model_type": model_type,
        "summary": f"DRAFT by tools/onboard.py from transformers' {model_type} module tree: "
        "review before committing",
    }
    if const:
        spec["const"] = const
    if structure:
        spec["structure"] = structure
    return spec, review


def default_config(model_type: str) -> dict[str, Any]:
    config = CONFIG_MAPPING[model_type]()
    d = config.to_dict()
    d["model_type"] = model_type
    return json.loads(json.dumps(d, default=str))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model_type")
    parser.add_argument("--config", type=Path, help="a config.json instead of the default config")
    parser.add_argument("--draft", action="store_true", help="print a drafted model_type file")
    parser.add_argument("--write", action="store_true", help="write the draft and compare again")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", args.model_type) or args.model_type not in CONFIG_MAPPING:
        parser.error(f"transformers has no model_type {args.model_type!r}")
    cfg = hf_oracle.load_config(args.config) if args.config else default_config(args.model_type)
    existing = MODEL_TYPES / f"{args.model_type}.json"
    print(f"# {args.model_type}: {'has' if existing.exists() else 'no'} schemas/model_types file")
    differ = compare(cfg)
    if args.draft or args.write:
        spec, review = draft(args.model_type, cfg)
        print("\n# draft (only facts that differ from the key map's defaults):")
        print(json.dumps(spec, indent=2))
        for line in review:
            print(f"# review: {line}")
        if args.write:
            if existing.exists():
                print(f"# not written: {existing} exists")
                return 1
            existing.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
            print(f"# wrote {existing}; comparing again with it in place\n")
            again = [sys.executable, __file__, args.model_type]
            if args.config:
                again += ["--config", str(args.config)]
            return subprocess.run(again, check=False).returncode
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
