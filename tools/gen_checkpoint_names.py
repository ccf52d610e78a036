"""Generate ``schemas/checkpoint_names.json``: the tensor names each family stores, by slot.

For every row of the conformance harness (``tests/fixtures/conformance/reference.json``) and
every real published config of the tests (``conformance/published``, ``corpus/raw``: variants
the registry rows do not build, such as Gemma 4's experts), transformers builds the model on
the meta device, takes its ``state_dict`` (parameters and persistent buffers) and reverts its
weight conversions the way ``save_pretrained`` does (``revert_weight_conversion``: per-expert
tensors, legacy names), so the names are the ones a checkpoint stores.  Each name, with its
numeric path components written ``N``, is placed in a slot by the oracle's part table (the
same partition the harness checks slotdiff's counts against); persistent buffers are
``buffer`` (stored, not parameters).

    python tools/gen_checkpoint_names.py                       # writes schemas/checkpoint_names.json
    python tools/gen_checkpoint_names.py --layouts OUT.json    # also every row's stored layout
    python tools/gen_checkpoint_names.py --types llama qwen3_moe --layouts OUT.json

``--layouts`` writes, per row, the stored tensors (name → [dtype, shape]) that
``tools/checkpoint_check.py`` reconciles with slotdiff (the harness measurement).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

OUT = ROOT / "schemas" / "checkpoint_names.json"
PUBLISHED = ROOT / "tests" / "fixtures" / "conformance" / "published"  # real published configs
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "raw"
DTYPES = {"torch.float32": "F32", "torch.bfloat16": "BF16", "torch.float16": "F16"}


def stored_layout(config: dict[str, Any]) -> tuple[dict[str, tuple[str, list[int], bool]], str]:
    """Name → (dtype, shape, is_buffer) of what ``save_pretrained`` would write for ``config``,
    and the model's ``base_model_prefix`` (checkpoints saved from the base model omit it)."""
    from transformers.core_model_loading import revert_weight_conversion

    from oracle import hf_oracle

    model, _config = hf_oracle.build_meta(config)
    state = model.state_dict()
    buffers = {
        f"{mod}.{name}" if mod else name
        for mod, module in model.named_modules()
        for name, buf in module._buffers.items()
        if buf is not None and name not in module._non_persistent_buffers_set
    }
    # A tied tensor is written once (save_pretrained drops the alias, e.g. a tied lm_head).
    first: dict[int, str] = {}
    tied = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if first.setdefault(id(param), name) != name:
            tied.add(name)
    saved = revert_weight_conversion(model, {k: v for k, v in state.items() if k not in tied})
    # the buffers' names as saved (the conversions rename them too, e.g. model. -> backbone.)
    saved_buffers = set(revert_weight_conversion(model, {k: v for k, v in state.items() if k in buffers}))
    out: dict[str, tuple[str, list[int], bool]] = {}
    for name, tensor in saved.items():
        dtype = DTYPES.get(str(tensor.dtype), str(tensor.dtype))
        out[name] = (dtype, list(tensor.shape), name in saved_buffers)
    return out, model.base_model_prefix or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", nargs="*", help="only these model_types (default: every built type)")
    parser.add_argument("--layouts", type=Path, help="also write every row's stored layout here")
    parser.add_argument("--no-names", action="store_true", help="do not write schemas/checkpoint_names.json")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    import transformers

    from conformance import REFERENCE, read_json, rows

    from oracle import hf_oracle

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    reference = read_json(REFERENCE)
    names: dict[str, dict[str, str]] = {}
    layouts: dict[str, Any] = {}
    failed: dict[str, str] = {}
    prefixes: dict[str, str] = {}
    start = time.perf_counter()
    sources = [(row.id, row.model_type, row.config, True) for row in rows(reference)]
    for path in sorted(PUBLISHED.glob("*.json")) + sorted(CORPUS.glob("*.json")):
        config = json.loads(path.read_text(), object_hook=hf_oracle._decode_float_tags)
        config = config.get("config", config)  # a published fixture holds the config under "config"
        if isinstance(config.get("model_type"), str):
            sources.append((path.stem, config["model_type"], config, False))
    for row_id, model_type, config, registry_row in sources:
        if args.types and model_type not in args.types:
            continue
        try:
            layout, prefix = stored_layout(config)
        except Exception as err:
            failed[row_id] = f"{type(err).__name__}: {err}"[:200]
            continue
        prefixes.setdefault(model_type, prefix)
        table = names.setdefault(model_type, {})
        for name, (_dtype, _shape, buffer) in layout.items():
            slot = "buffer" if buffer else hf_oracle.classify(name)
            table.setdefault(hf_oracle.normalise_name(name), slot)
        if args.layouts and registry_row:
            layouts[row_id] = {n: [d, s] for n, (d, s, _b) in layout.items()}
    meta = {
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "about": "generated by tools/gen_checkpoint_names.py: per model_type, each stored tensor name "
        "(numeric path components as N) and its slot, from transformers' meta-device state_dict with "
        "its weight conversions reverted as save_pretrained does; buffer = a persistent buffer; prefix = the "
        "model's base_model_prefix, which a checkpoint saved from the base model leaves out",
    }
    if not args.no_names:
        doc = {
            **meta,
            "model_types": {
                k: {"prefix": prefixes[k], "names": dict(sorted(v.items()))} for k, v in sorted(names.items())
            },
        }
        OUT.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
    if args.layouts:
        args.layouts.write_text(json.dumps({**meta, "rows": layouts, "failed": failed}))
    print(
        f"{len(names)} types, {sum(len(v) for v in names.values())} names, {len(failed)} rows failed, "
        f"{time.perf_counter() - start:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
