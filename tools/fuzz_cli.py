"""Fuzz the slotdiff CLI: hostile configs and hostile flags through every subcommand and format.

Each case is a seed: it picks a corpus config (tests/fixtures), mutates it (random JSON
edits: keys deleted, renamed, retyped; values set to 0, negative, huge, NaN/Infinity, lone
surrogates, control characters, deep nesting, long strings; sometimes the bytes themselves
cut or corrupted), picks a subcommand and an output format, and sometimes breaks a flag
(NaN, inf, negative, empty, absurd). The case runs through ``slotdiff.cli.main(argv)`` in
a worker process with stdout/stderr captured (fast), and a slice of cases runs through the
installed CLI, ``python -m slotdiff`` in a subprocess (the real streams and encodings).

Some cases swap the config for a FIFO, a symlink to /dev/zero or /dev/null, or a folder;
some lint a file named like an option (``--config=x.json``, ``-v``, ``--``) after ``--``; a
third of the subprocess cases write to a stdout on /dev/full; numeric flags are also broken
with values too small or too large to price (``1e-300``, ``5e-324``, ``1e300``).

A case fails on: exit 3 (internal error), a traceback on stderr, an exit status outside
{0, 1, 2}, invalid JSON on stdout from a JSON format, a control character or lone surrogate
in any output, more than one stderr line for exit 2, or a run over ``--case-timeout``; an
option-named file after ``--`` that lint did not read as a file (exit 2); a full stdout
that is not exit 2.

    PYTHONPATH=src python tools/fuzz_cli.py --cases 50000 --workers 2        # the long run
    PYTHONPATH=src python tools/fuzz_cli.py --cases 300 --subprocess 20      # a quick look

Prints the case count, the exit-code histogram and every failure (seed, argv, reason);
exits 1 when any case failed. The same seed always builds the same case.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import math
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
CORPUS = sorted((FIXTURES / "corpus" / "raw").glob("*.json")) + sorted((FIXTURES / "vision").glob("*.json"))

HOSTILE_NUMBERS: list[Any] = [0, -1, 1, 2, -(2**63), 2**63, 2**40 + 1, 10**30, 1e308, -1e308, 0.5, 1e-320]
HOSTILE_STRINGS = [
    "",
    "\ud800",
    "x\udfffy",
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "llama\x7f",
    "a\x85b\x9bc",
    "\u202eevil",
    "line\nbreak",
    "::error file=x::y",
    "a\u2028b",
    "%0A::warning::x",
    "[bold]x[/bold]",
    "../../etc/passwd",
    "x" * 100_000,
    "\x00",
    "llama",
    "mixtral",
    "deepseek_v3",
    "qwen2_vl",
]
# Written into the JSON text as bare tokens (json.dumps cannot make them in strict mode).
RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "123456789012345678901234567890"]
NUMERIC_BREAKS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "-1",
    "0",
    "",
    "1e999",
    "1e-999",
    "99999999999999999999",
    "1e",
    "\x1b",
    "1e-300",
    "2e-308",
    "5e-324",
    "1e-4",
    "1e300",
]
FLAG_BREAKS = ["--", "-", "--x", "\ud800", "a\nb", "\x1b[31m"]
# What a config path can be instead of a regular file (issue 30.3): none may block or be read
# without the cap.
SPECIAL_FILES = ["fifo", "dev-zero", "dev-null", "folder"]
# File names that look like options (issue 30.1): after ``--`` lint reads each as a file.
OPTION_NAMES = ["--config=x.json", "-v", "--", "-", "--format=sarif", "--no-config", "-q"]

# Subcommand → (argv builder over file paths, the formats it has). "{F}" is the config, "{G}" another.
COMMANDS: dict[str, list[list[str]]] = {
    "catalog": [["catalog"], ["catalog", "--json"], ["catalog", "--markdown"]],
    "gpus": [["gpus"], ["gpus", "--json"], ["gpus", "--markdown"]],
    "choose": [
        ["choose", "--candidates", "{F},{G}", "--no-catalog"],
        ["choose", "--candidates", "{F}", "--no-catalog", "--json"],
        [
            "choose",
            "--candidates",
            "{F},{G}",
            "--no-catalog",
            "--gpus",
            "8",
            "--context",
            "128K",
            "--markdown",
        ],
    ],
    "analyze": [
        ["{F}"],
        ["{F}", "--json"],
        ["{F}", "--markdown"],
        ["{F}", "--no-cost"],
        ["{F}", "--against", "{G}"],
    ],
    "diff": [["diff", "{F}", "{G}"], ["diff", "{F}", "{G}", "--json"], ["diff", "{F}", "{G}", "--markdown"]],
    "fingerprint": [["fingerprint", "{F}", "--stdout"]],
    "lint": [["lint", "{F}", "--no-config", "--format", f] for f in ("text", "json", "sarif", "github")],
    "fit": [["fit", "{F}"], ["fit", "{F}", "--json"], ["fit", "{F}", "--engine", "vllm", "--json"]],
    "train": [["train", "{F}"], ["train", "{F}", "--json"], ["train", "{F}", "--markdown"]],
    "sweep": [
        ["sweep", "{F}", "--over", "context", "--points", "1K,8K"],
        ["sweep", "{F}", "--over", "batch", "--json"],
    ],
    "moe": [["moe", "{F}"], ["moe", "{F}", "--json"]],
    "specdec": [
        ["specdec", "{F}"],
        ["specdec", "{F}", "--draft", "mtp", "--json"],
        ["specdec", "{F}", "--json"],
    ],
    "formats": [["formats", "{F}"], ["formats", "{F}", "--json"]],
    "image": [["image", "{F}", "--image", "1024x1024"], ["image", "{F}", "--image", "336x336", "--json"]],
    "latency": [
        ["latency", "{F}", "--concurrency", "2", "--requests", "4", "--output", "8"],
        ["latency", "{F}", "--prompt", "64", "--output", "4", "--requests", "2", "--json"],
    ],
}
# Subcommands the fuzzer leaves out, and why (tests/test_fuzz_cli.py checks every other is in).
NOT_FUZZED = {
    "scan": "needs a Hub: tests/test_scan*.py and tests/test_hub_bounds.py attack it on 127.0.0.1",
}
# Numeric flags each command takes, to break.
NUMERIC_FLAGS: dict[str, list[str]] = {
    "analyze": ["--context", "--batch", "--mfu", "--mbu", "--gpu-mem", "--bandwidth", "--tflops"],
    "fit": [
        "--context",
        "--batch",
        "--tensor-parallel-size",
        "--gpu-memory-utilization",
        "--max-model-len",
        "--mbu",
        "--bandwidth",
        "--kv-cache-memory",
    ],
    "train": ["--batch", "--context", "--gpus", "--tflops", "--mfu"],
    "sweep": ["--gpus", "--batch", "--mbu", "--mfu", "--bandwidth"],
    "moe": ["--ep", "--batch", "--context"],
    "specdec": ["--alpha", "--gamma", "--gpus", "--draft-cost"],
    "image": ["--min-pixels", "--max-pixels"],
    "formats": ["--context", "--batch", "--bandwidth", "--mbu"],
    "latency": ["--concurrency", "--prompt", "--output", "--requests", "--mfu", "--bandwidth"],
    "choose": ["--max-decode-ms", "--mbu", "--gpu-mem"],
}
JSON_OUTPUT = ("--json", "json", "sarif", "--stdout")
_BAD_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


# ------------------------------------------------------------------------------ mutation


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node[:8]):
            yield from _paths(v, (*prefix, i))


def _hostile_value(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(HOSTILE_NUMBERS)
    if roll < 0.6:
        return rng.choice(HOSTILE_STRINGS)
    if roll < 0.7:
        return rng.choice([None, True, False, [], {}, [0], [2], [2, 2, 2], {"a": 1}])
    if roll < 0.8:
        deep: Any = 1
        for _ in range(rng.choice([10, 63, 70, 200])):
            deep = [deep] if rng.random() < 0.5 else {"k": deep}
        return deep
    if roll < 0.9:
        return "@RAW" + rng.choice(RAW_TOKENS) + "@"
    return rng.choice([[rng.choice(HOSTILE_NUMBERS)] * rng.choice([1, 3, 100, 20000]), list(range(64))])


def _mutate(data: Any, rng: random.Random) -> Any:
    paths = list(_paths(data))
    for _ in range(rng.choice([0, 1, 1, 2, 3, 6])):
        path = rng.choice(paths)
        if not path:
            continue
        parent = data
        try:
            for step in path[:-1]:
                parent = parent[step]
            last = path[-1]
            op = rng.random()
            if op < 0.15 and isinstance(parent, dict):
                del parent[last]
            elif op < 0.25 and isinstance(parent, dict):
                parent[rng.choice(HOSTILE_STRINGS[:12]) + str(last)] = parent.pop(last)
            elif op < 0.35:
                parent[last] = [parent[last]] if rng.random() < 0.5 else {"value": parent[last]}
            else:
                parent[last] = _hostile_value(rng)
        except (KeyError, IndexError, TypeError):
            continue
    if isinstance(data, dict) and rng.random() < 0.2:  # a key slotdiff reads, made hostile
        key = rng.choice(
            [
                "num_experts_per_tok",
                "n_routed_experts",
                "num_local_experts",
                "num_hidden_layers",
                "hidden_size",
                "num_attention_heads",
                "num_key_value_heads",
                "head_dim",
                "vocab_size",
                "sliding_window",
                "max_position_embeddings",
                "rope_scaling",
                "quantization_config",
                "model_type",
                "torch_dtype",
                "vision_config",
                "text_config",
                "layer_types",
            ]
        )
        data[key] = _hostile_value(rng)
    if isinstance(data, dict) and isinstance(data.get("vision_config"), dict) and rng.random() < 0.5:
        vc = data["vision_config"]
        vc[rng.choice(["hidden_size", "patch_size", "spatial_merge_size", "merge_kernel_size", "depth"])] = (
            rng.choice([0, -1, [2], [], [0, 0], 2**41, "x", None])
        )
    return data


def _text(data: Any, rng: random.Random) -> bytes:
    text = json.dumps(data, ensure_ascii=rng.random() < 0.5, allow_nan=True)
    text = re.sub(r'"@RAW([^@"]*)@"', r"\1", text)
    raw = text.encode("utf-8", "surrogatepass")
    roll = rng.random()
    if roll < 0.04:
        raw = raw[: rng.randrange(len(raw) + 1)]
    elif roll < 0.07:
        i = rng.randrange(len(raw) + 1)
        raw = raw[:i] + rng.choice([b"\xff", b"\xc3", b"\x00", b"\xed\xa0\x80", b"}", b"]"]) + raw[i:]
    elif roll < 0.08:
        raw = rng.choice([b"", b"[]", b"null", b"1", b'"x"', b"[" * 100000, b"{}"])
    return raw


def build_case(seed: int, folder: Path) -> list[str]:
    """The argv of case ``seed``, its config files written into ``folder``."""
    rng = random.Random(seed)
    base = json.loads(rng.choice(CORPUS).read_text(encoding="utf-8"))
    other = json.loads(rng.choice(CORPUS).read_text(encoding="utf-8"))
    f = folder / f"c{seed}.json"
    g = folder / f"d{seed}.json"
    f.write_bytes(_text(_mutate(base, rng), rng))
    g.write_bytes(_text(_mutate(other, rng) if rng.random() < 0.5 else other, rng))
    command = rng.choice(sorted(COMMANDS))
    argv = [a.replace("{F}", str(f)).replace("{G}", str(g)) for a in rng.choice(COMMANDS[command])]
    if rng.random() < 0.3 and NUMERIC_FLAGS.get(command):
        argv += [rng.choice(NUMERIC_FLAGS[command]), rng.choice(NUMERIC_BREAKS)]
    if rng.random() < 0.03:
        argv.insert(rng.randrange(1, len(argv) + 1), rng.choice(FLAG_BREAKS))
    roll = rng.random()
    if roll < 0.03:  # the config is a FIFO, a device or a folder
        f.unlink()
        _special(f, rng.choice(SPECIAL_FILES))
    elif roll < 0.06:  # lint of a file named like an option, after -- (relative: run in folder)
        name = rng.choice(OPTION_NAMES)
        f.rename(folder / name)
        fmt = rng.choice(["text", "json", "sarif", "github"])
        argv = ["lint", "--no-config", "--format", fmt, "--", name]
    return argv


def _special(path: Path, kind: str) -> None:
    """A path that is not a regular file: a FIFO, a symlink to a device, a folder."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero" if kind == "dev-zero" else "/dev/null")


def full_stdout(seed: int) -> bool:
    """Whether a subprocess case runs with stdout on /dev/full (issue 30.6): a third of them."""
    return seed % 3 == 0


# ------------------------------------------------------------------------------ judging


def judge(argv: list[str], code: int | None, out: str, err: str, full: bool = False) -> str | None:
    """Why this outcome is a failure, or None (``full``: stdout was /dev/full)."""
    if code is None:
        return "timed out"
    if argv[:1] == ["lint"] and "--" in argv and code == 2 and not full:
        return f"a file named after -- was not linted as a file: {err.strip()[:200]}"
    if full and code != 2 and not (argv[:1] == ["lint"] and code == 0 and "text" in argv):
        return f"exit {code} with stdout on /dev/full (expected exit 2, cannot write)"
    if full and code == 2 and "internal error" not in err and err.count("\n") != 1:
        return f"exit 2 with {err.count(chr(10))} stderr lines on a full stdout: {err[:200]!r}"
    if code == 3 or "internal error" in err:
        return f"exit {code}: {err.strip()[-300:]}"
    if "Traceback (most recent call last)" in err or "Traceback (most recent call last)" in out:
        return "traceback"
    if code not in (0, 1, 2):
        return f"exit {code}"
    for name, text in (("stdout", out), ("stderr", err)):
        bad = _BAD_CHARS.search(text)
        if bad:
            return f"{name} holds {bad.group()!r}"
    if code == 2 and err.count("\n") != 1:
        return f"exit 2 with {err.count(chr(10))} stderr lines: {err[:200]!r}"
    if code in (0, 1) and out and any(a in JSON_OUTPUT for a in argv):
        try:
            json.loads(out, parse_constant=_no_constant)  # every --json is one document
        except ValueError as e:
            return f"invalid JSON on stdout: {e}"
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


class _Timeout(BaseException):
    """Raised by SIGALRM inside a case; a BaseException so the CLI's handlers let it through."""


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def _in_process(argv: list[str], timeout: float) -> tuple[int | None, str, str]:
    from slotdiff.cli import main

    out, err = io.StringIO(), io.StringIO()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code: int | None = main(argv)
    except _Timeout:
        code = None
    except SystemExit as e:  # pragma: no cover - main returns, never exits
        code = int(e.code or 0)
    except BaseException as e:  # anything main let escape is a failure
        code, err = 3, err.getvalue() + f"\ninternal error: escaped main: {type(e).__name__}: {e}\n"
        return code, out.getvalue(), err
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return code, out.getvalue(), err.getvalue()


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", HF_HOME=os.environ["HF_HOME"], COLUMNS="100")
    return env


def _subprocess(argv: list[str], timeout: float, full: bool = False) -> tuple[int | None, str, str]:
    # An argv is bytes to the OS: a lone surrogate goes as its UTF-8-ish bytes, which the
    # child decodes with surrogateescape, as it would an undecodable file name.
    args = [a.encode("utf-8", "surrogatepass") for a in argv]
    try:
        with open("/dev/full" if full else os.devnull, "wb") as sink:
            proc = subprocess.run(
                [os.fsencode(sys.executable), b"-m", b"slotdiff", *args],
                stdout=sink if full else subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=timeout,
                env=_env(),
                check=False,
            )
    except subprocess.TimeoutExpired:
        return None, "", ""
    # The real bytes: undecodable output is itself a failure.
    out = (proc.stdout or b"").decode("utf-8", "surrogateescape")
    err = proc.stderr.decode("utf-8", "surrogateescape")
    return proc.returncode, out, err


def run_chunk(
    job: tuple[list[int], float, bool],
) -> tuple[collections.Counter[str], list[tuple[int, list[str], str]]]:
    """Run the cases of ``seeds``; (histogram, failures)."""
    seeds, timeout, via_subprocess = job
    hist: collections.Counter[str] = collections.Counter()
    failures: list[tuple[int, list[str], str]] = []
    with tempfile.TemporaryDirectory(prefix="slotdiff-fuzz-") as tmp:
        folder = Path(tmp)
        os.chdir(folder)  # a worker process of its own: option-named files are relative to it
        for seed in seeds:
            argv = build_case(seed, folder)
            full = via_subprocess and full_stdout(seed)
            try:
                if via_subprocess:
                    code, out, err = _subprocess(argv, timeout * 4, full)
                else:
                    code, out, err = _in_process(argv, timeout)
            except Exception as e:  # the harness itself failed: reported, the run goes on
                hist["harness"] += 1
                failures.append((seed, argv, f"harness: {type(e).__name__}: {e}"))
                continue
            hist["timeout" if code is None else str(code)] += 1
            why = judge(argv, code, out, err, full)
            if why:
                failures.append((seed, argv, why))
            for p in folder.iterdir():
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
        os.chdir(ROOT)
    return hist, failures


def fuzz(cases: int, workers: int, subprocess_cases: int, seed: int, timeout: float) -> int:
    """Run the cases; print the histogram and failures; return the number of failures."""
    os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="slotdiff-fuzz-hf-"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    started = time.monotonic()
    chunk = 50
    seeds = list(range(seed, seed + cases))
    jobs = [(seeds[i : i + chunk], timeout, False) for i in range(0, len(seeds), chunk)]
    sub = list(range(seed + cases, seed + cases + subprocess_cases))
    jobs += [(sub[i : i + 10], timeout, True) for i in range(0, len(sub), 10)]
    hist: collections.Counter[str] = collections.Counter()
    failures: list[tuple[int, list[str], str]] = []
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers, maxtasksperchild=20) as pool:
        for h, f in pool.imap_unordered(run_chunk, jobs):
            hist.update(h)
            failures.extend(f)
    elapsed = time.monotonic() - started
    total = sum(hist.values())
    print(
        f"slotdiff fuzz: {total} cases ({cases} in-process, {subprocess_cases} subprocess) in {elapsed:.0f} s"
    )
    print("exit codes: " + ", ".join(f"{k}: {v}" for k, v in sorted(hist.items())))
    for s, argv, why in sorted(failures)[:50]:
        shown = " ".join(a if len(a) < 60 else a[:57] + "..." for a in argv)
        print(f"FAIL seed {s}: {why[:300]!r}\n    slotdiff {shown!r}")
    if len(failures) > 50:
        print(f"... and {len(failures) - 50} more failures")
    print(f"failures: {len(failures)}")
    return len(failures)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000, help="in-process cases (default 2000)")
    parser.add_argument(
        "--subprocess", type=int, default=50, help="cases through python -m slotdiff (default 50)"
    )
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2)), help="worker processes")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--case-timeout", type=float, default=20.0, help="seconds per case (default 20)")
    parser.add_argument(
        "--replay", type=int, metavar="SEED", help="write case SEED's files to --keep and print its argv"
    )
    parser.add_argument(
        "--keep", type=Path, default=Path("fuzz-case"), help="folder for --replay (default fuzz-case)"
    )
    args = parser.parse_args(argv)
    if args.replay is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        print(" ".join(build_case(args.replay, args.keep)))
        return 0
    if not math.isfinite(args.case_timeout) or args.case_timeout <= 0:
        parser.error("--case-timeout must be a positive number")
    return 1 if fuzz(args.cases, args.workers, args.subprocess, args.seed, args.case_timeout) else 0


if __name__ == "__main__":
    raise SystemExit(main())
