"""How long reading a 163-shard checkpoint's tensor index from the Hub takes (issue 26).

    PYTHONPATH=src python benchmarks/checkpoint_read.py [--latency 0.1] [--shards 163]

The fake Hub (tests/hubserver.py) serves DeepSeek-V3's config and its stored tensors (the
names and shapes transformers' save_pretrained writes, built on the meta device) split into
163 header-only shards with model.safetensors.index.json, as the real repository is, each
request held ``--latency`` seconds before its answer. slotdiff's Hub read
(``read.hub_weights.hub_index``: one HEAD and one download of the index, then one range
request per shard, 32 at a time) is timed cold, then again from its per-commit cache.
Nothing here asserts a time; tests/test_checkpoint_hub.py checks the behaviour.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from common import private_hf_home

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1, help="seconds added to each request")
    parser.add_argument("--shards", type=int, default=163)
    parser.add_argument("--repeat", type=int, default=3, help="cold reads (a fresh cache each)")
    args = parser.parse_args()
    private_hf_home()
    from checkpoints import stored_layout, write_checkpoint
    from hubserver import Fault, HubServer, Repo

    config = json.loads((ROOT / "tests/fixtures/corpus/raw/deepseek-ai__DeepSeek-V3.json").read_text())
    layout = stored_layout({k: v for k, v in config.items() if k != "quantization_config"})
    plain = {**config}
    plain.pop("quantization_config")
    files = write_checkpoint(
        Path(tempfile.mkdtemp()), {n: ("BF16", s) for n, s in layout.items()}, shards=args.shards
    )
    repo = Repo("deepseek-ai/DeepSeek-V3", files={"config.json": plain, **files})
    faults = [Fault.delay(args.latency, times=None)] if args.latency else []
    with HubServer([repo], faults=faults) as hub:
        from huggingface_hub import constants  # imported with transformers: point it at the fake Hub

        constants.ENDPOINT = hub.url
        constants.HUGGINGFACE_CO_URL_TEMPLATE = hub.url + "/{repo_id}/resolve/{revision}/{filename}"

        from slotdiff.read.hub_weights import hub_index

        sha = repo.sha("main")
        cold = []
        for _ in range(args.repeat):
            constants.HF_HUB_CACHE = tempfile.mkdtemp(prefix="slotdiff-bench-cache-")
            hub.clear_log()
            start = time.perf_counter()
            index = hub_index(repo.id, None, sha)
            cold.append(time.perf_counter() - start)
            requests = len(hub.log)
        start = time.perf_counter()
        again = hub_index(repo.id, None, sha)
        cached = time.perf_counter() - start
    assert not hasattr(index, "why"), index
    print(
        f"{len(index.tensors):,} tensors in {index.shards_read} shards, {requests} requests, "
        f"{args.latency * 1000:.0f} ms added per request"
    )
    print(f"cold read: {', '.join(f'{t:.2f} s' for t in cold)} (best {min(cold):.2f} s)")
    print(f"cached read: {cached * 1000:.1f} ms (cached={again.cached})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
