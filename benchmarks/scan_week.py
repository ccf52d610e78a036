"""A scan the size of a real Hub week: tens of thousands of listed models, cards included.

    PYTHONPATH=src python benchmarks/scan_week.py [--models 50000] [--workers 16] [--latency 0.1]

The fake Hub (tests/hubserver.py) runs in its own process with ``--models`` repos built from
the corpus configs (each made unique, as on the Hub), each with a model card (a quarter are
quantized copies of an earlier repo, a quarter fine-tunes), tagged ``text-generation`` or
``image-text-to-text``, and ``--latency`` added to every request. Measured:

1. the server's own serving time for the requests a first scan makes: one listing per tag
   of the ``lm`` preset (paged), then config.json and README.md of every model, from one
   plain httpx2 client with as many threads as the scan has workers;
2. ``slotdiff scan --pipeline-tag lm`` as a subprocess (the CLI, state file and JSON report
   included): wall time, the ratio to (1), its own peak RSS, CPU seconds, the state file's size per
   model, and the report's count of models (each once);
3. the same scan killed with SIGKILL half-way and run again: every model reported once, and
   no model finished before the kill fetched again.

``--every-report`` has the first scan write the Markdown and HTML reports as well, as the
weekly job does.

Nothing here asserts; the figures go to docs/SCAN.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import signal
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
CORPUS = ROOT / "tests" / "fixtures" / "corpus" / "raw"
TAGS = ("text-generation", "image-text-to-text")


def make_repos(n: int) -> list[Any]:
    """``n`` repos, newest first, deterministic (the server process builds them itself)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hubserver import Repo, model_card

    configs = []
    for p in sorted(CORPUS.glob("*.json")):
        data = json.loads(p.read_text(encoding="utf-8"))
        if isinstance(data.get("model_type"), str):
            configs.append((p.stem.split("__")[-1], data))
    now = datetime.now(UTC)
    repos = []
    for i in range(n):
        name, cfg = configs[i % len(configs)]
        cfg = {**cfg, "_name_or_path": f"week/m{i:05d}"}  # every config unique, as on the Hub
        rid = f"org{i % 97}/m{i:05d}-{name}"[:96]
        if i % 4 == 1 and i > 4:
            base = repos[i - 4].id
            card = model_card(base_model=base, base_model_relation="quantized", license="mit")
        elif i % 4 == 2 and i > 4:
            card = model_card(base_model=repos[i - 4].id, license="apache-2.0")
        else:
            card = model_card(license="mit")
        repos.append(
            Repo(
                rid,
                files={"config.json": json.dumps(cfg, indent=2), "README.md": card},
                created_at=(now - timedelta(seconds=5 * i + 5)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
                downloads=i,
                pipeline_tag=TAGS[1] if i % 5 == 0 else TAGS[0],
            )
        )
    return repos


SERVER = textwrap.dedent(
    """
    import collections, json, sys
    sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
    from hubserver import Fault, HubServer
    from scan_week import make_repos
    n, latency = int(sys.argv[3]), float(sys.argv[4])
    faults = [Fault.delay(latency)] if latency else []
    with HubServer(make_repos(n), faults=faults) as hub:
        print(hub.url, flush=True)
        for line in sys.stdin:  # "stats": requests served since the last "stats"
            log = list(hub.log)
            hub.clear_log()
            gets = collections.Counter(
                e.repo_id for e in log if e.method == "GET" and e.filename == "config.json"
            )
            print(json.dumps({
                "by_method": collections.Counter(e.method for e in log),
                "by_file": collections.Counter(e.filename or e.kind for e in log),
                "config_gets": gets,
            }), flush=True)
    """
)


# The scan as a child that reports its own peak RSS (VmHWM of its own address space): wait4's
# ru_maxrss is no measure of it, since Linux carries the parent's peak into a child across fork
# and exec, and this parent holds a whole 50,000-model report when it starts the rerun.
CHILD = textwrap.dedent(
    """
    import os, sys
    from slotdiff.cli import main
    try:
        code = main(sys.argv[1:])
    finally:
        with open("/proc/self/status") as fh:
            peak = next(line.split()[1] for line in fh if line.startswith("VmHWM:"))
        with open(os.environ["SLOTDIFF_BENCH_PEAK"], "w") as fh:
            fh.write(peak)  # kB
    sys.exit(code)
    """
)


def start_server(n: int, latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(ROOT / "tests"), str(ROOT / "benchmarks"), str(n), str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def served(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("stats\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def raw_serving(url: str, workers: int) -> tuple[float, int]:
    """The server's time for a first scan's requests, from a plain client; (seconds, models)."""
    import httpx2

    sys.path.insert(0, str(ROOT / "src"))
    from slotdiff.scan.pipelines import expand_pipeline_tags

    client = httpx2.Client(timeout=60)
    t0 = time.perf_counter()
    ids: list[str] = []
    for tag in expand_pipeline_tags("lm"):
        nxt: str | None = f"{url}/api/models?sort=lastModified&pipeline_tag={tag}&limit=1000"
        while nxt:
            resp = client.get(nxt)
            ids += [m["id"] for m in resp.json()]
            nxt = resp.links.get("next", {}).get("url")
    fetch_each(client, url, ids, ("config.json", "README.md"), workers)
    took = time.perf_counter() - t0
    client.close()
    return took, len(ids)


def scan_cmd(
    url: str, tmp: Path, n: int, workers: int, state: Path, report: Path, every_report: bool = False
) -> tuple[list[str], dict]:
    cmd = [
        sys.executable,
        "-c",
        CHILD,
        "scan",
        "--since", "30d",
        "--limit", str(n),
        "--pipeline-tag", "lm",
        "--workers", str(workers),
        "--state", str(state),
        "--cache-dir", str(tmp / "hf-cache"),
        "--write-json", str(report),
        "--quiet",
        "--json",
    ]  # fmt: skip
    if every_report:  # what the weekly CI job writes (docs/SCAN.md): Markdown and HTML as well
        cmd += ["--write-markdown", str(report.with_suffix(".md"))]
        cmd += ["--write-html", str(report.with_suffix(".html"))]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "HF_ENDPOINT": url,
        "HF_HOME": str(tmp / "hf-home"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "SLOTDIFF_BENCH_PEAK": str(tmp / "peak-kb"),
    }
    env.pop("HF_TOKEN", None)
    env.pop("HF_HUB_OFFLINE", None)
    return cmd, env


def run_child(cmd: list[str], env: dict) -> tuple[float, int, float, float]:
    """(wall s, exit code, the child's own peak RSS MiB, CPU s) of one scan subprocess."""
    peak = Path(env["SLOTDIFF_BENCH_PEAK"])
    peak.unlink(missing_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    rss = int(peak.read_text()) / 1024
    return wall, os.waitstatus_to_exitcode(status), rss, usage.ru_utime + usage.ru_stime


def done_count(state: Path) -> int:
    journal = state.with_name(state.name + ".journal")
    n = 0
    try:
        cur = json.loads(state.read_text()).get("current") or {}
        n = len(cur.get("done", {}))
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError):
        n += sum(1 for _ in journal.open())
    return n


def done_ids(state: Path) -> set[str]:
    data = json.loads(state.read_text())
    ids = set((data.get("current") or {}).get("done", {}))
    journal = state.with_name(state.name + ".journal")
    if journal.exists():
        for line in journal.open():
            with contextlib.suppress(ValueError, KeyError):
                ids.add(json.loads(line)["record"]["repo_id"])
    return ids


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=int, default=50_000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--no-resume", action="store_true", help="skip the kill-and-resume round")
    ap.add_argument(
        "--every-report", action="store_true", help="also write the Markdown and HTML reports (as the CI job)"
    )
    args = ap.parse_args()
    private_hf_home()  # never the user's HF_HOME, for this process, the server and each scan
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", flush=True
    )
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        t0 = time.perf_counter()
        proc, url = start_server(args.models, args.latency)
        print(f"server up with {args.models} repos in {time.perf_counter() - t0:.1f} s", flush=True)
        try:
            raw, listed = raw_serving(url, args.workers)
            raw_req = served(proc)
            print(f"raw serving: {listed} models, {dict(raw_req['by_file'])}, {raw:.1f} s", flush=True)

            state, report = tmp / "state.json", tmp / "report.json"
            cmd, env = scan_cmd(url, tmp, args.models, args.workers, state, report, args.every_report)
            wall, code, rss, cpu = run_child(cmd, env)
            req = served(proc)
            data = json.loads(report.read_text())
            models = [m["repo_id"] for m in data["models"]]
            size = state.stat().st_size
            print(
                f"scan: exit {code}, {wall:.1f} s = {wall / raw:.2f}x raw, {cpu:.1f} s CPU "
                f"({cpu / max(1, len(models)) * 1000:.1f} ms/model), peak RSS {rss:.0f} MiB; "
                f"{len(models)} models reported ({len(set(models))} distinct); "
                f"state {size / 1e6:.1f} MB = {size / max(1, len(models)):.0f} B/model; "
                f"{dict(req['by_file'])}; counts { ({k: v for k, v in data['counts'].items() if v}) }",
                flush=True,
            )
            if args.no_resume:
                return
            state2, report2 = tmp / "state2.json", tmp / "report2.json"
            cmd, env = scan_cmd(url, tmp, args.models, args.workers, state2, report2)
            t1 = time.perf_counter()
            child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
            while done_count(state2) < args.models // 2 and child.poll() is None:
                time.sleep(0.5)
            child.send_signal(signal.SIGKILL)
            child.wait()
            killed_at = time.perf_counter() - t1
            before = done_ids(state2)
            first = served(proc)["config_gets"]
            wall2, code2, rss2, _ = run_child(cmd, env)
            second = served(proc)["config_gets"]
            data2 = json.loads(report2.read_text())
            ids2 = [m["repo_id"] for m in data2["models"]]
            refetched = sorted(r for r in before if second.get(r))
            twice = [r for r, c in collections.Counter({**first}).items() if c > 1]
            print(
                f"resume: killed after {killed_at:.1f} s with {len(before)} done; rerun exit {code2}, "
                f"{wall2:.1f} s, peak RSS {rss2:.0f} MiB; {len(ids2)} reported ({len(set(ids2))} distinct, "
                f"resumed={data2['scan']['resumed']}); done-before fetched again: {len(refetched)}; "
                f"repos fetched twice before the kill: {len(twice)}",
                flush=True,
            )
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=60)


if __name__ == "__main__":
    main()
