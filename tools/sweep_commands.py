"""Every model config under tests/fixtures × every subcommand and its main flag variants, run
in-process, to find the inputs a command answers with a traceback or a number that cannot be.

A maintainer tool, not run by the suite (its findings become regression tests). For each run it
records the exit status and flags:

- ``internal``: an exception escaped the command (the CLI's exit 3, "internal error"); the
  sweep runs with SLOTDIFF_DEBUG=1 so the exception reaches it, and groups by exception type and
  the innermost slotdiff frame;
- ``refusal``: exit 2 whose line does not name the config file (bad input must name it);
- ``multiline``: an error on stderr that is not one line;
- ``nonfinite``: nan / inf in stdout (a JSON walk and the text);
- ``negative``: a negative number under a size key of the JSON output (bytes, GiB, params,
  tokens, FLOPs, sequences, context) that is not a delta, a shortfall or what is left.

  PYTHONPATH=$PWD/src python tools/sweep_commands.py [--only SUBSTR] [--commands a,b] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import re
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
OTHER = FIXTURES / "corpus" / "raw" / "meta-llama__Llama-3.2-1B.json"  # diff's second config

# name → argv, with {f} the config, {o} Llama-3.2-1B and {n} the next config swept
COMMANDS: dict[str, list[str]] = {
    "analyze": ["{f}"],
    "analyze --json": ["{f}", "--json"],
    "analyze --markdown": ["{f}", "--markdown"],
    "analyze -tp 8": ["{f}", "-tp", "8", "--json"],
    "fit": ["fit", "{f}", "--json"],
    "fit vllm": ["fit", "{f}", "--engine", "vllm", "--json"],
    "fit vllm text": ["fit", "{f}", "--engine", "vllm"],
    "fit sglang": ["fit", "{f}", "--engine", "sglang", "--json"],
    "fit vllm fp8": ["fit", "{f}", "--engine", "vllm", "--kv-cache-dtype", "fp8", "--json"],
    "fit sglang fp8": ["fit", "{f}", "--engine", "sglang", "--kv-cache-dtype", "fp8", "--json"],
    "fit vllm -tp 8": ["fit", "{f}", "--engine", "vllm", "-tp", "8", "--json"],
    "fit sglang -tp 8": ["fit", "{f}", "--engine", "sglang", "-tp", "8", "--json"],
    "fit vllm -pp 2": ["fit", "{f}", "--engine", "vllm", "-pp", "2", "--json"],
    "fit -tp 8 -pp 2 --markdown": ["fit", "{f}", "-tp", "8", "-pp", "2", "--markdown"],
    "fit --kv-dtype fp8": ["fit", "{f}", "--kv-dtype", "fp8", "--context", "128K", "--json"],
    "fit vllm 0.6.4": ["fit", "{f}", "--engine", "vllm", "--engine-version", "0.6.4", "--json"],
    "fit vllm 0.10.1 -pp 2 no-hybrid": [
        *("fit", "{f}", "--engine", "vllm", "--engine-version", "0.10.1", "-pp", "2"),
        *("--disable-hybrid-kv-cache-manager", "--json"),
    ],
    "fit vllm -tp 8 available 20": [
        "fit",
        "{f}",
        "--engine",
        "vllm",
        "-tp",
        "8",
        "--available-kv-gib",
        "20",
        "--json",
    ],
    "fit vllm kv-cache-memory 10": [
        "fit",
        "{f}",
        "--engine",
        "vllm",
        "--kv-cache-memory",
        "10",
        "--gpus",
        "8",
        "--json",
    ],
    "fit vllm block 1 context 1": [
        "fit",
        "{f}",
        "--engine",
        "vllm",
        "--block-size",
        "1",
        "--context",
        "1",
        "--json",
    ],
    "fit sglang -pp 2 free 80": [
        "fit",
        "{f}",
        "--engine",
        "sglang",
        "-pp",
        "2",
        "-tp",
        "4",
        "--free-gib",
        "80",
        "--json",
    ],
    "fit sglang max-total 4096": [
        "fit",
        "{f}",
        "--engine",
        "sglang",
        "-tp",
        "8",
        "--max-total-tokens",
        "4096",
        "--json",
    ],
    "fit int4 1M b200": [
        "fit",
        "{f}",
        "--gpu",
        "b200",
        "--dtype",
        "int4",
        "--context",
        "1M",
        "--batch",
        "64",
        "--json",
    ],
    "analyze context 1": ["{f}", "--context", "1", "--batch", "1", "--json"],
    "analyze -tp 8 -pp 8": ["{f}", "--gpus", "64", "-tp", "8", "-pp", "8", "--json"],
    "sweep batch": ["sweep", "{f}", "--over", "batch", "--json"],
    "sweep context": ["sweep", "{f}", "--over", "context", "--markdown"],
    "sweep context points": [
        "sweep",
        "{f}",
        "--over",
        "context",
        "--points",
        "1,1K,1M",
        "--vs",
        "{o}",
        "--json",
    ],
    "specdec": ["specdec", "{f}", "--json"],
    "specdec mtp": ["specdec", "{f}", "--draft", "mtp"],
    "specdec gamma 1 alpha .99": [
        "specdec",
        "{f}",
        "--gamma",
        "1",
        "--alpha",
        "0.99",
        "--batches",
        "1,256",
        "--json",
    ],
    "moe": ["moe", "{f}", "--json"],
    "moe -tp 8 --ep": ["moe", "{f}", "-tp", "8", "--enable-expert-parallel"],
    "moe ep 64 batch 512": ["moe", "{f}", "--ep", "64", "--batch", "512", "--json"],
    "latency": ["latency", "{f}", "--json"],
    "latency text": ["latency", "{f}", "--concurrency", "16"],
    "latency long prompt": [
        "latency",
        "{f}",
        "--concurrency",
        "256",
        "--prompt",
        "32K",
        "--output",
        "1",
        "--json",
    ],
    "choose": ["choose", "--candidates", "{f}", "--no-catalog", "--json"],
    "train": ["train", "{f}", "--json"],
    "train lora ckpt": ["train", "{f}", "--lora-rank", "16", "--checkpointing", "full", "--json"],
    "train selective zero3": ["train", "{f}", "--checkpointing", "selective", "--zero", "3", "--gpus", "8"],
    "train tp2 pp2 8bit": [
        *("train", "{f}", "-tp", "2", "-pp", "2", "--gpus", "8", "--zero", "1"),
        *("--optimizer", "adamw-8bit", "--json"),
    ],
    "train lora attention context 1": [
        *("train", "{f}", "--lora-rank", "1", "--lora-targets", "attention"),
        *("--checkpointing", "selective", "--context", "1", "--json"),
    ],
    "image": ["image", "{f}", "--json"],
    "image two": ["image", "{f}", "--image", "336x336", "--image", "1920x1080"],
    "formats": ["formats", "{f}", "--json"],
    "formats text": ["formats", "{f}"],
    "diff": ["diff", "{f}", "{o}", "--json"],
    "diff text": ["diff", "{o}", "{f}"],
    "diff next": ["diff", "{f}", "{n}", "--markdown"],
    "lint": ["lint", "{f}"],
    "lint --json": ["lint", "--json", "--", "{f}"],
}

SIZE_KEY = re.compile(
    r"bytes|gib|_gb\b|params|tokens|flops|sequences|context|blocks|concurrency|layers", re.I
)
# a delta, a shortfall or what is left of memory may be negative (the verdict then says so)
ALLOWED_NEGATIVE = re.compile(
    r"shortfall|delta|change|diff|saving|margin|available|pool|headroom|spare|left|<rest>", re.I
)
TEXT_NONFINITE = re.compile(r"(?<![\w.])(nan|inf|-inf|infinity)(?![\w])", re.I)


def configs(tmp: Path) -> Iterator[tuple[str, Path]]:
    """(label, path) of every model config under tests/fixtures, identical bytes once."""
    seen: set[str] = set()
    paths: list[tuple[str, Path]] = []
    for folder in ("corpus/raw", "corpus/transformers-defaults", "vision", "engine_logs/configs", "seeds"):
        for p in sorted((FIXTURES / folder).glob("*.json")):
            if "preprocessor" not in p.name:
                paths.append((f"{folder}/{p.name}", p))
    for p in sorted((FIXTURES / "conformance" / "published").glob("*.json")):
        doc = json.loads(p.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and isinstance(doc.get("config"), dict):
            out = tmp / p.name
            out.write_text(json.dumps(doc["config"], indent=2), encoding="utf-8")
            paths.append((f"published/{p.name}", out))
    for label, p in paths:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            yield label, p


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) of a JSON value; a dict's ``name`` joins its path (a term's name says
    whether its bytes may be negative)."""
    if isinstance(value, dict):
        tag = f"<{value['name']}>" if isinstance(value.get("name"), str) else ""
        for k, v in value.items():
            yield from walk(v, f"{path}{tag}.{k}" if path else f"{tag}{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")
    else:
        yield path, value


def findings_of_output(out: str) -> list[tuple[str, str]]:
    """(class, detail) for nan / inf and negative sizes in a command's stdout."""
    found: list[tuple[str, str]] = []
    try:
        doc = json.loads(out) if out.lstrip().startswith(("{", "[")) else None
    except ValueError:
        doc = None
    if doc is not None:
        for path, v in walk(doc):
            if path.endswith("__float__"):  # a config's own inf, written as strict JSON
                continue
            if (isinstance(v, float) and not math.isfinite(v)) or (
                isinstance(v, str) and v.lower() in ("nan", "inf", "-inf", "infinity", "-infinity")
            ):
                found.append(("nonfinite", f"{path}={v}"))
            elif isinstance(v, int | float) and not isinstance(v, bool) and v < 0:
                leaf = path.rsplit(".", 1)[-1]
                if SIZE_KEY.search(leaf) and not ALLOWED_NEGATIVE.search(path):
                    found.append(("negative", f"{path}={v}"))
        return found
    for line in out.splitlines():  # text: deltas are signed, so only nan / inf
        if TEXT_NONFINITE.search(line) and "--request-rate inf" not in line and 'Infinity"}' not in line:
            found.append(("nonfinite", line.strip()[:160]))
    return found


def run_one(argv: list[str]) -> tuple[int | None, str, str, str | None]:
    """(exit status or None when an exception escaped, stdout, stderr, where it was raised)."""
    from slotdiff.cli import main

    out, err = io.StringIO(), io.StringIO()
    where = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code: int | None = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except Exception as exc:  # SLOTDIFF_DEBUG=1: the CLI's exit 3 re-raises here
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "slotdiff" in f.filename]
        last = frames[-1] if frames else None
        spot = f"{Path(last.filename).name}:{last.lineno} {last.name}" if last else "?"
        where = f"{type(exc).__name__} at {spot}"
        err.write(f"{type(exc).__name__}: {exc}")
        code = None
    return code, out.getvalue(), err.getvalue(), where


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help="configs whose label contains this")
    parser.add_argument("--commands", help="comma-separated command names (default all)")
    parser.add_argument("--json", dest="json_out", help="write every finding here")
    opts = parser.parse_args()
    os.environ["SLOTDIFF_DEBUG"] = "1"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("COLUMNS", "120")
    names = opts.commands.split(",") if opts.commands else list(COMMANDS)
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    records: list[dict[str, Any]] = []
    runs = 0
    exits: dict[str, dict[int | None, int]] = defaultdict(lambda: defaultdict(int))
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        todo = [(lab, p) for lab, p in configs(Path(tmp)) if not opts.only or opts.only in lab]
        for i, (label, path) in enumerate(todo):
            after = str(todo[(i + 1) % len(todo)][1])
            for name in names:
                argv = [a.format(f=str(path), o=str(OTHER), n=after) for a in COMMANDS[name]]
                code, out, err, where = run_one(argv)
                runs += 1
                exits[name][code] += 1
                found: list[tuple[str, str]] = []
                if code is None or code == 3:
                    found.append(("internal", where or err.strip()[:200]))
                else:
                    lines = [x for x in err.splitlines() if x.strip()]
                    errors = [x for x in lines if x.startswith("slotdiff: error")]
                    files = [Path(a).name for a in argv if a.endswith(".json")]
                    if code == 2 and errors and not any(f in errors[0] for f in files):
                        found.append(("refusal", errors[0][:200]))
                    if errors and len(lines) > 1:
                        found.append(("multiline", " | ".join(lines)[:200]))
                    found += findings_of_output(out)
                for cls, detail in found:
                    key = (cls, detail if cls == "internal" else re.sub(r"[\d.,]+", "N", detail)[:100])
                    groups[key].append(f"{label} :: {name}")
                    records.append(
                        {"config": label, "command": name, "exit": code, "class": cls, "detail": detail}
                    )
            print(f"{label}: done ({runs} runs, {time.monotonic() - start:.0f}s)", file=sys.stderr)
    n_configs = len(todo)
    print(f"sweep: {n_configs} configs × {len(names)} commands = {runs} runs, {len(records)} findings")
    for name in names:
        print(f"  {name:<28} " + ", ".join(f"exit {c}: {n}" for c, n in sorted(exits[name].items(), key=str)))
    for (cls, detail), where in sorted(groups.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
        print(f"[{cls}] {detail}  ×{len(where)}")
        for w in where[:3]:
            print(f"    {w}")
    if opts.json_out:
        Path(opts.json_out).write_text(json.dumps(records, indent=1), encoding="utf-8")
    return 1 if records else 0


if __name__ == "__main__":
    sys.exit(main())
