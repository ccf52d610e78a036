"""Worst-case time at each documented input cap (docs/TESTING.md, "Limits slotdiff enforces").

For every cap, a config (or flag) right at the cap goes through the commands that read it,
in process (``slotdiff.cli.main`` with stdout captured), and the time is printed beside the
same command on the config it was made from, with their ratio. Nothing is asserted: this
prints figures for a person (and for the issue that asked for them), it does not gate CI.

    PYTHONPATH=src python benchmarks/caps.py            # best of 3 per row
    PYTHONPATH=src python benchmarks/caps.py --quick    # one run per row
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import private_hf_home

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "tests" / "fixtures" / "corpus" / "raw"
LLAMA = json.loads((RAW / "meta-llama__Meta-Llama-3-8B.json").read_text(encoding="utf-8"))
MIXTRAL = json.loads((RAW / "mistralai__Mixtral-8x7B-v0.1.json").read_text(encoding="utf-8"))
GEMMA2 = json.loads((RAW / "google__gemma-2-9b.json").read_text(encoding="utf-8"))
QWEN_VL = json.loads(
    (ROOT / "tests" / "fixtures" / "vision" / "Qwen__Qwen3-VL-30B-A3B-Instruct.json").read_text(
        encoding="utf-8"
    )
)
MAX_BYTES = 4 * 1024 * 1024
LAYERS = 16_384
SIZE = 2**40
EXPERTS = 2**20


def _nested(depth: int) -> Any:
    node: Any = 1
    for _ in range(depth):
        node = {"k": node}
    return node


def _padded(base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with an unread string that brings the file just under the size cap."""
    room = MAX_BYTES - len(json.dumps(base)) - 64
    return {**base, "padding_note": "x" * room}


def _many_keys(base: dict[str, Any]) -> dict[str, Any]:
    extra = {f"k{i}": i for i in range(99_990 - len(base))}
    return {**base, "unread_table": extra}


def _near_misses(base: dict[str, Any]) -> dict[str, Any]:
    """99,000 top-level keys, each one or two edits from a key slotdiff reads: lint's spelling
    check (SD105) and unknown-key list (SD201) at their worst."""
    stems = ["hidden_sise", "num_atention_heads", "vocab_sizes", "intermediate_sizes", "rope_thetas"]
    out = dict(base)
    i = 0
    while len(out) < 99_000:
        out[f"{stems[i % len(stems)]}{i}"] = i
        i += 1
    return out


# cap name → (what is at the cap, the config, the base config, extra flags per command)
CASES: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = [
    ("config size 4 MiB", "an unread 4 MiB string", _padded(LLAMA), LLAMA),
    ("nesting depth 64", "an unread key nested 62 deep", {**LLAMA, "deep": _nested(62)}, LLAMA),
    ("100,000 keys", "99,990 keys in an unread table", _many_keys(LLAMA), LLAMA),
    ("100,000 keys", "99,000 top-level near misses of read keys", _near_misses(LLAMA), LLAMA),
    (
        "arrays (no cap of their own)",
        "a 64,000-item array, changed at its end",
        {**LLAMA, "x": [0] * 63_999 + [1]},
        {**LLAMA, "x": [0] * 64_000},
    ),
    ("layers 16,384", "num_hidden_layers = 16,384", {**LLAMA, "num_hidden_layers": LAYERS}, LLAMA),
    (
        "layer list 16,384",
        "Gemma-2 with a 16,384-entry layer_types list",
        {
            **GEMMA2,
            "num_hidden_layers": LAYERS,
            "layer_types": ["sliding_attention", "full_attention"] * (LAYERS // 2),
        },
        {
            **GEMMA2,
            "num_hidden_layers": LAYERS,
            "layer_types": ["full_attention", "sliding_attention"] * (LAYERS // 2),
        },
    ),
    (
        "size fields 2^40",
        "vocab_size and intermediate_size = 2^40",
        {**LLAMA, "vocab_size": SIZE, "intermediate_size": SIZE},
        LLAMA,
    ),
    (
        "experts 2^20",
        "Mixtral with 2^20 experts, top-2^20",
        {**MIXTRAL, "num_local_experts": EXPERTS, "num_experts_per_tok": EXPERTS},
        MIXTRAL,
    ),
    (
        "vision dimensions 2^40",
        "Qwen3-VL with a 2^40-wide vision MLP",
        {**QWEN_VL, "vision_config": {**QWEN_VL["vision_config"], "intermediate_size": SIZE}},
        QWEN_VL,
    ),
]
# "{F}" the config at the cap, "{B}" the config it was made from; "lint --diff-base" runs in a
# git repository whose HEAD holds {B} as config.json and whose work tree holds {F}.
COMMANDS: dict[str, list[str]] = {
    "analyze --json": ["{F}", "--json"],
    "lint": ["lint", "--no-config", "{F}"],
    "lint --format json": ["lint", "--no-config", "--format", "json", "{F}"],
    "lint --format sarif": ["lint", "--no-config", "--format", "sarif", "{F}"],
    "lint --diff-base": ["lint", "--no-config", "--diff-base", "HEAD", "config.json"],
    "diff --json": ["diff", "{B}", "{F}", "--json"],
    "fit --json": ["fit", "{F}", "--json"],
    "train --json": ["train", "{F}", "--json"],
}
FLAG_CAPS: list[tuple[str, list[str]]] = [
    ("--context 2^40", ["{F}", "--json", "--context", str(SIZE)]),
    ("--batch 2^40", ["{F}", "--json", "--batch", str(SIZE)]),
    ("fit --context 2^40", ["fit", "{F}", "--json", "--context", str(SIZE)]),
    ("sweep --over context to 2^40", ["sweep", "{F}", "--over", "context", "--points", f"1K,1M,{SIZE}"]),
]


def _time(argv: list[str], runs: int, cwd: Path | None = None) -> tuple[float, int]:
    """Best CPU seconds of ``runs`` (CPU, not wall: a shared machine's load inflates wall
    time, not the work done; git's own CPU, in a child, is not counted) and the exit status."""
    from slotdiff.cli import main

    times, code = [], 0
    here = Path.cwd()
    for _ in range(runs):
        out, err = io.StringIO(), io.StringIO()
        os.chdir(cwd or here)
        started = time.process_time()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
        finally:
            os.chdir(here)
        times.append(time.process_time() - started)
    return min(times), code


def _git_repo(folder: Path, base: Path, new: Path) -> Path:
    """A repository whose HEAD holds ``base`` as config.json and whose work tree holds ``new``."""
    folder.mkdir()
    for args in (["init", "-q"], ["config", "user.name", "caps"], ["config", "user.email", "caps@invalid"]):
        subprocess.run(["git", *args], cwd=folder, check=True)
    shutil.copyfile(base, folder / "config.json")
    subprocess.run(["git", "add", "-A"], cwd=folder, check=True)
    subprocess.run(["git", "-c", "commit.gpgsign=false", "commit", "-qm", "base"], cwd=folder, check=True)
    shutil.copyfile(new, folder / "config.json")
    return folder


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def run(runs: int, tmp: Path, echo: Callable[[str], None] = print) -> float:
    """Print the table; return the worst time seen (seconds)."""
    echo(_row(["cap", "at the cap", "command", "at the cap (CPU s)", "base (CPU s)", "ratio", "exit"]))
    echo(_row(["---"] * 7))
    worst = 0.0
    for i, (cap, what, at_cap, base) in enumerate(CASES):
        f, b = tmp / f"cap{i}.json", tmp / f"base{i}.json"
        f.write_text(json.dumps(at_cap), encoding="utf-8")
        b.write_text(json.dumps(base), encoding="utf-8")
        assert f.stat().st_size <= MAX_BYTES, (cap, f.stat().st_size)
        repos = (_git_repo(tmp / f"repo{i}", b, f), _git_repo(tmp / f"same{i}", b, b))
        for name, argv in COMMANDS.items():
            at = {"F": str(f), "B": str(b)}
            same = {"F": str(b), "B": str(b)}  # the base row: the command on the base alone
            cwd = repos if "--diff-base" in argv else (None, None)
            t_cap, code = _time([a.format(**at) if "{" in a else a for a in argv], runs, cwd[0])
            t_base, _ = _time([a.format(**same) if "{" in a else a for a in argv], runs, cwd[1])
            worst = max(worst, t_cap)
            echo(
                _row(
                    [
                        cap,
                        what,
                        name,
                        f"{t_cap:.3f}",
                        f"{t_base:.3f}",
                        f"{t_cap / max(t_base, 1e-3):.1f}",
                        str(code),
                    ]
                )
            )
    b = tmp / "llama.json"
    b.write_text(json.dumps(LLAMA), encoding="utf-8")
    for name, argv in FLAG_CAPS:
        t_cap, code = _time([a.replace("{F}", str(b)) for a in argv], runs)
        plain = [a for a in argv if a not in (str(SIZE), f"1K,1M,{SIZE}")]
        plain = [a for a in plain if a not in ("--context", "--batch", "--points")]
        t_base, _ = _time([a.replace("{F}", str(b)) for a in plain], runs)
        worst = max(worst, t_cap)
        echo(
            _row(
                [
                    name,
                    "the flag at its cap",
                    "analyze" if argv[0] == "{F}" else argv[0],
                    f"{t_cap:.3f}",
                    f"{t_base:.3f}",
                    f"{t_cap / max(t_base, 1e-3):.1f}",
                    str(code),
                ]
            )
        )
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run per row (CI)")
    args = ap.parse_args(argv)
    private_hf_home()  # never the user's HF_HOME
    os.environ["HF_HUB_OFFLINE"] = "1"
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; best of {1 if args.quick else 3} per row")
    with tempfile.TemporaryDirectory() as name:
        started = time.perf_counter()
        worst = run(1 if args.quick else 3, Path(name))
    print(f"\nworst case at any cap: {worst:.3f} s; whole run {time.perf_counter() - started:.0f} s")
    print("exit 2 rows are inputs refused at the cap with a reason (the time to say so is what is shown)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
