"""The cost pass's outputs, for proving a speed-up changes none of them (maintainers' check).

    PYTHONPATH=<one checkout>/src python benchmarks/cost_identity.py OUT.json [SEED]
    python benchmarks/cost_identity.py --compare BEFORE.json AFTER.json

Runs ``slotdiff`` in-process (``cli.main``) over every corpus, published, vision and engine-log
config × six workloads as ``--json`` (the contract), plus the table, ``--against`` Llama-3-8B
and, on every fourth config, ``fit``, ``sweep`` and ``diff`` against it, in a shuffled order (caches see any
order), and writes {argv: [exit status, stdout, stderr]}. Run it on the base and on the
change (the published configs are written to one temporary folder, so both runs name the
same paths), then ``--compare``: any difference is a bug in the change.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
WORKLOADS = (
    (),
    ("--gpu", "a100", "--batch", "64", "--context", "32K"),
    ("--dtype", "fp8", "--kv-dtype", "fp8", "--gpus", "8"),
    ("-tp", "2", "-pp", "2", "--batch", "8"),
    ("--enable-expert-parallel", "--gpus", "8", "--batch", "256", "--efficiency", "vllm-h100"),
    ("--context", "1M", "--batch", "3", "--mfu", "0.5", "--dtype", "int4"),
)
LLAMA = FIXTURES / "corpus" / "raw" / "meta-llama__Meta-Llama-3-8B.json"


def configs() -> list[Path]:
    out = sorted((FIXTURES / "corpus").rglob("*.json"))
    folder = Path(tempfile.gettempdir()) / "slotdiff-cost-identity"
    folder.mkdir(exist_ok=True)
    for p in sorted((FIXTURES / "conformance" / "published").glob("*.json")):
        copy = folder / p.name
        copy.write_text(json.dumps(json.loads(p.read_text(encoding="utf-8"))["config"]), encoding="utf-8")
        out.append(copy)
    out += sorted((FIXTURES / "engine_logs" / "configs").glob("*.json"))
    return out + sorted((FIXTURES / "vision").glob("*.json"))


def jobs(seed: int) -> list[list[str]]:
    out = []
    paths = configs()
    for c in paths:
        out += [[str(c), "--json", "--no-weights", *w] for w in WORKLOADS]
        out.append([str(c), "--no-weights", "--width", "160"])
        out.append([str(c), "--json", "--no-weights", "--against", str(LLAMA)])
    for c in paths[::4]:
        out.append(["fit", str(c), "--json", "--batch", "16"])
        out.append(["sweep", str(c), "--json", "--over", "batch"])
        out.append(["sweep", str(c), "--json", "--over", "context", "--gpus", "2"])
        out.append(["diff", str(LLAMA), str(c), "--json"])
    random.Random(seed).shuffle(out)
    return out


def run(target: Path, seed: int) -> None:
    from slotdiff.cli import main

    results = {}
    for argv in jobs(seed):
        out, err, real = io.StringIO(), io.StringIO(), sys.stdout
        with contextlib.redirect_stderr(err):
            sys.stdout = out
            try:
                code = main(argv)
            finally:
                sys.stdout = real
        results[" ".join(argv)] = [code, out.getvalue(), err.getvalue()]
    target.write_text(json.dumps(results, sort_keys=True), encoding="utf-8")
    print(f"{len(results)} runs, {sum(1 for v in results.values() if v[0])} with a non-zero status")


def compare(before: Path, after: Path) -> int:
    a, b = (json.loads(p.read_text(encoding="utf-8")) for p in (before, after))
    if a.keys() != b.keys():
        print("not the same runs")
        return 1
    differ = [k for k in a if a[k] != b[k]]
    print(f"{len(a)} runs, {len(differ)} differ")
    for k in differ[:10]:
        print("DIFF", k)
        for line in list(difflib.unified_diff(a[k][1].splitlines(), b[k][1].splitlines(), lineterm="", n=0))[
            :12
        ]:
            print("   ", line[:200])
        if a[k][2] != b[k][2]:
            print("    stderr:", a[k][2][:200], "|", b[k][2][:200])
    return 1 if differ else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"]:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    run(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
