"""How fast ``slotdiff scan`` is, and whether the server or slotdiff is the limit.

    PYTHONPATH=src python benchmarks/scan_speed.py [--models 500] [--workers 16]

1. Classification: every corpus config (tests/fixtures/corpus), repeated to over 1,000,
   read from bytes already on disk through the scan's own path (parse, schema layer, fills,
   fingerprint, verdict). Reported cold (each config analyzed in full), as the scan runs
   it on identical config bytes (analyzed once), and as it runs on the Hub's copies of a
   model: every config made unique by its ``_name_or_path`` (distinct bytes, 76 designs),
   through the scan's worker (scan/examine.py: bytes hashed, parsed, and analyzed once per
   design).
2. A 500-model scan against the fake Hub (tests/hubserver.py) running in a subprocess, next
   to the server's raw serving time for the same models, measured in the same run: one
   plain httpx2 client, as many threads as the scan has workers, making the requests a
   first scan makes (the listing, config.json and README.md per model). The ratio scan / raw says how much
   of the scan's time is slotdiff's own. Then the same with ``--hf-cache``
   (hf_hub_download: HEAD + HEAD + GET per model), a second scan of each (all unchanged),
   the requests the server counted for each, and the scan's own CPU time. Further rounds
   add a per-request latency to the server (``--latency``, default 20 ms and 100 ms; a
   real Hub round trip is in that range), where the server's time dominates as it does
   against the Hub.

Nothing here asserts a time; the tests check behaviour, this file measures.
benchmarks/run.py uses the same functions for its scan rows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import fetch_each, private_hf_home

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
CORPUS = ROOT / "tests" / "fixtures" / "corpus"


def corpus_configs() -> list[tuple[str, bytes]]:
    files = sorted((CORPUS / "raw").glob("*.json")) + sorted(
        (CORPUS / "transformers-defaults").glob("*.json")
    )
    return [(p.stem.replace("__", "/"), p.read_bytes()) for p in files]


def families_folder(folder: Path) -> Path:
    """Family files for a few corpus designs (as the lead's fingerprints/ will hold)."""
    from slotdiff.analysis.analyze import load
    from slotdiff.slots.classify import family_record, slugify

    folder.mkdir(parents=True, exist_ok=True)
    for name in (
        "meta-llama__Meta-Llama-3-8B",
        "Qwen__Qwen3-30B-A3B",
        "openai-community__gpt2",
        "Qwen__Qwen3-8B",
    ):
        m = load(str(CORPUS / "raw" / f"{name}.json"))
        rid = name.replace("__", "/")
        rec = family_record(rid.split("/")[1], [m.arch.model_type], m.fills, [rid])
        (folder / f"{slugify(rid)}.json").write_text(json.dumps(rec), encoding="utf-8")
    return folder


def bench_classify(tmp: Path, at_least: int = 1200, rounds: int = 5) -> dict[str, float]:
    """Configs per second through the scan's classify + judge step, best of ``rounds``.

    Measured in wall time and in process CPU time: on a shared machine the CPU figure is
    the one that does not depend on what else is running.
    """
    from slotdiff.read.retry import Retrier
    from slotdiff.scan.examine import Examiner
    from slotdiff.scan.listing import Listed
    from slotdiff.scan.options import ScanOptions
    from slotdiff.scan.verdict import Knowledge, analyze_config, judge

    configs = corpus_configs()
    know = Knowledge.build(families_folder(tmp / "fp"))
    reps = -(-at_least // len(configs))
    work = [c for _ in range(reps) for c in configs]
    listed = Listed("org/model")
    for name, data in configs:  # warm caches (key map, defaults) outside the timing
        judge(listed, analyze_config(data, name), know)

    def cold() -> None:
        for name, data in work:
            judge(listed, analyze_config(data, name), know)

    def memo() -> None:
        seen: dict[bytes, object] = {}
        for name, data in work:
            a = seen.get(data)
            if a is None:
                a = seen[data] = analyze_config(data, name)
            judge(listed, a, know)  # type: ignore[arg-type]

    copies: list[bytes] = []  # every config distinct in its bytes, as the Hub's copies of a model are
    for i, (_, data) in enumerate(work):
        cfg = json.loads(data)
        cfg["_name_or_path"] = f"bench/m{i:05d}"
        copies.append(json.dumps(cfg, indent=2).encode())

    def hub() -> None:
        examiner = Examiner(ScanOptions(), know, Retrier(), {})
        for data in copies:
            examiner.classify(listed, data, hashlib.sha256(data).hexdigest(), {}, None)

    out: dict[str, float] = {"configs": len(work), "unique": len(configs)}
    for label, fn in (("cold", cold), ("memo", memo), ("hub", hub)):
        wall = cpu = float("inf")
        for _ in range(rounds):
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall = min(wall, time.perf_counter() - w0)
            cpu = min(cpu, time.process_time() - c0)
        out[f"{label}_wall_per_s"] = len(work) / wall
        out[f"{label}_cpu_per_s"] = len(work) / cpu
    return out


SERVER = textwrap.dedent(
    """
    import collections, json, sys
    sys.path.insert(0, sys.argv[1])
    from hubserver import Fault, HubServer, Repo
    spec = json.load(open(sys.argv[2]))
    latency = float(sys.argv[3])
    repos = [Repo(r["id"], files={"config.json": r["config"].encode(), "README.md": r["card"]},
                  created_at=r["created"], downloads=r["downloads"], likes=r["likes"]) for r in spec]
    faults = [Fault.delay(latency)] if latency else []
    with HubServer(repos, faults=faults) as hub:
        print(hub.url, flush=True)
        for line in sys.stdin:  # "stats": requests served since the last "stats"
            counts = collections.Counter(e.method for e in hub.log)
            hub.clear_log()
            print(json.dumps(counts), flush=True)
    """
)


def start_server(n: int, tmp: Path, latency: float = 0.0) -> tuple[subprocess.Popen[str], str, list[str]]:
    configs = [(name, data) for name, data in corpus_configs() if b'"model_type"' in data]
    now = datetime.now(UTC)
    spec = []
    for i in range(n):
        name, data = configs[i % len(configs)]
        cfg = json.loads(data)
        cfg["_name_or_path"] = f"bench/m{i:04d}"  # every config unique, as on the Hub
        spec.append(
            {
                "id": f"bench{i % 7}/m{i:04d}-{name.split('/')[-1]}"[:96],
                "config": json.dumps(cfg, indent=2),
                "created": (now - timedelta(minutes=i + 1)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                "downloads": i,
                "likes": i % 13,
                "card": "---\nlicense: mit\n---\n# model card\n",  # read by the scan for lineage
            }
        )
    path = tmp / "repos.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(ROOT / "tests"), str(path), str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url, [s["id"] for s in spec]


def raw_serving(url: str, ids: list[str], workers: int) -> float:
    """The server's own time: the requests a first scan makes (the listing, then config.json
    and the model card of each model), from one plain httpx2 client with as many threads as
    the scan has workers."""
    import httpx2

    client = httpx2.Client(timeout=30)
    t0 = time.perf_counter()
    listing = client.get(f"{url}/api/models", params={"sort": "lastModified", "limit": len(ids)})
    assert len(listing.json()) == len(ids)
    fetch_each(client, url, ids, ("config.json", "README.md"), workers)  # config and model card
    took = time.perf_counter() - t0
    client.close()
    return took


def served(proc: subprocess.Popen[str]) -> dict[str, int]:
    """Requests the server answered since the last call, by method."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("stats\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def scan_once(
    url: str, tmp: Path, workers: int, state: Path, n: int, via_hf_cache: bool = False
) -> tuple[float, float, dict[str, object]]:
    from huggingface_hub import constants
    from huggingface_hub.utils import disable_progress_bars

    from slotdiff.scan.engine import ScanOptions, run_scan

    constants.HF_HUB_OFFLINE = False
    disable_progress_bars()
    opts = ScanOptions(
        since="30d",
        limit=n,
        workers=workers,
        endpoint=url,
        cache_dir=str(state.with_suffix(".hf-cache")),  # a fresh HF cache per scan series
        state=state,
        fingerprints=tmp / "fp",
        token=False,
        via_hf_cache=via_hf_cache,
    )
    w0, c0 = time.perf_counter(), time.process_time()
    result = run_scan(opts)
    return time.perf_counter() - w0, time.process_time() - c0, result.counts()


def scan_pair(
    proc: subprocess.Popen[str], url: str, tmp: Path, workers: int, n: int, label: str, via_hf_cache: bool
) -> dict[str, Any]:
    """A first scan (fresh state and HF cache) and a second one over the same models: wall and
    CPU seconds, verdict counts and the requests the server answered for each."""
    state = tmp / f"state-{label}-{via_hf_cache}.json"
    wall, cpu, counts = scan_once(url, tmp, workers, state, n, via_hf_cache=via_hf_cache)
    req = served(proc)
    again, _, again_counts = scan_once(url, tmp, workers, state, n, via_hf_cache=via_hf_cache)
    return {
        "wall": wall,
        "cpu": cpu,
        "counts": counts,
        "requests": req,
        "again": again,
        "again_counts": again_counts,
        "again_requests": served(proc),
    }


def bench_scan(n: int, workers: int, latency: float, tmp: Path) -> None:
    proc, url, ids = start_server(n, tmp, latency)
    try:
        raw = raw_serving(url, ids, workers)
        raw_req = served(proc)
        tag = f"server latency {latency * 1000:.0f} ms" if latency else "no added latency"
        print(f"\n[{tag}] raw serving: {len(ids)} models, {raw_req} requests, {raw:.2f} s")
        for via in (False, True):
            m = scan_pair(proc, url, tmp, workers, n, str(latency), via)
            counts = m["counts"]
            name = "scan --hf-cache" if via else "scan"
            print(
                f"  {name:16s} {m['wall']:5.2f} s = {m['wall'] / raw:.2f}x raw  ({m['cpu']:.2f} s CPU; "
                f"{m['requests']} requests; "
                f"{counts['new_fingerprint']} new fp, {counts['new_sizes']} new sizes, "
                f"{counts['known']} known, {counts['skipped']} skipped)"
            )
            print(
                f"  {name + ' again':16s} {m['again']:5.2f} s  "
                f"({m['again_counts']['unchanged']} unchanged; {m['again_requests']} requests)"
            )
    finally:
        stop_server(proc)


def stop_server(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=500)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument(
        "--latency",
        type=float,
        nargs="*",
        default=[0.02, 0.1],
        help="per-request server delays (s) for further rounds, like a real Hub's round trip",
    )
    args = ap.parse_args()
    os.environ.pop("HF_HUB_OFFLINE", None)
    private_hf_home()  # never the user's HF_HOME: a hostile answer could poison its caches
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        c = bench_classify(tmp)
        print(
            f"classification of {c['configs']:.0f} cached configs "
            f"({c['unique']:.0f} corpus configs repeated):\n"
            f"  cold  {c['cold_wall_per_s']:7,.0f} configs/s wall, "
            f"{c['cold_cpu_per_s']:7,.0f} configs/s CPU\n"
            f"  memo  {c['memo_wall_per_s']:7,.0f} configs/s wall, "
            f"{c['memo_cpu_per_s']:7,.0f} configs/s CPU"
            "  (identical bytes analyzed once, as the scan does)\n"
            f"  hub   {c['hub_wall_per_s']:7,.0f} configs/s wall, "
            f"{c['hub_cpu_per_s']:7,.0f} configs/s CPU"
            "  (distinct bytes, differing in _name_or_path only: each design analyzed once)"
        )
        for latency in [0.0, *args.latency]:
            bench_scan(args.models, args.workers, latency, tmp)


if __name__ == "__main__":
    main()
