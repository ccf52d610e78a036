"""Measure the checkpoint reconciliation on the conformance registry and the corpus.

    python tools/gen_checkpoint_names.py --layouts /tmp/layouts.json   # transformers' stored layouts
    python tools/checkpoint_check.py registry /tmp/layouts.json         # every harness row
    python tools/checkpoint_check.py corpus                             # every corpus config

Each row's stored layout (what save_pretrained writes for its config, from transformers on the
meta device) is reconciled with slotdiff's count of the same config, as ``slotdiff MODEL``
does for a checkpoint beside a config. Prints the share that match and each row that does not.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

from slotdiff.analysis.analyze import load  # noqa: E402
from slotdiff.analysis.reconcile import reconcile  # noqa: E402
from slotdiff.cost.params import count  # noqa: E402
from slotdiff.read.checkpoint import StoredIndex, StoredTensor  # noqa: E402

BYTES = {"F32": 4, "BF16": 2, "F16": 2}


def index_of(layout: dict[str, Any], where: str) -> StoredIndex:
    tensors = []
    for name, (dtype, shape) in sorted(layout.items()):
        n = 1
        for d in shape:
            n *= d
        tensors.append(StoredTensor(name, dtype, tuple(shape), n * BYTES.get(dtype, 4)))
    return StoredIndex(tuple(tensors), "safetensors headers", where, 1, 1)


def check(config: dict[str, Any], layout: dict[str, Any], where: str) -> tuple[str, str]:
    try:
        model = load(config)
        params = count(model.arch)
    except Exception as err:  # a row slotdiff refuses: not a reconciliation result
        return "refused", f"{type(err).__name__}: {err}"[:160]
    ck = reconcile(model.arch, params, index_of(layout, where))
    if ck.status == "differs":
        d = ck.differences[0]
        return (
            "differs",
            f"{ck.sentence()} [{d.slot}: {d.expected_params} vs {d.stored_params}; {d.names[:2]}]",
        )
    return ck.status, ck.why or ""


def registry(path: Path, exact_only: bool) -> int:
    from conformance import EXPECTED, REFERENCE, read_json, rows

    data = json.loads(path.read_text())
    expected = read_json(EXPECTED)["rows"]
    statuses: Counter[str] = Counter()
    for row in rows(read_json(REFERENCE)):
        if row.id not in data["rows"] or (exact_only and expected.get(row.id, {}).get("status") != "exact"):
            continue
        status, why = check(row.config, data["rows"][row.id], row.id)
        statuses[status] += 1
        if status != "match":
            print(f"{row.id}: {status}: {why}")
    total = sum(statuses.values())
    print(f"{statuses['match']}/{total} rows match ({dict(statuses)}); {len(data['failed'])} not built")
    return 0


def corpus() -> int:
    from checkpoints import stored_layout
    from conftest import RAW

    statuses: Counter[str] = Counter()
    for path in sorted(RAW.glob("*.json")):
        config = json.loads(path.read_text())
        try:
            layout = {n: ["BF16", s] for n, s in stored_layout(config).items()}
        except Exception as err:  # transformers cannot build it: no layout to compare
            statuses["no layout"] += 1
            print(f"{path.stem}: no layout: {type(err).__name__}: {str(err)[:120]}")
            continue
        status, why = check(config, layout, path.stem)
        statuses[status] += 1
        if status != "match":
            print(f"{path.stem}: {status}: {why}")
    print(f"{statuses['match']}/{sum(statuses.values())} corpus configs match ({dict(statuses)})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    reg = sub.add_parser("registry")
    reg.add_argument("layouts", type=Path)
    reg.add_argument("--all-rows", action="store_true", help="also rows the harness does not mark exact")
    sub.add_parser("corpus")
    args = parser.parse_args()
    import warnings

    warnings.filterwarnings("ignore")
    return registry(args.layouts, not args.all_rows) if args.what == "registry" else corpus()


if __name__ == "__main__":
    sys.exit(main())
