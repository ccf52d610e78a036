"""Communication per collective: latency + bytes / bandwidth, on the link a group of GPUs shares.

Small messages are latency-bound: a decode step's all-reduce carries a few KiB per token,
so its time is the link's measured small-message latency plus the ring's bytes over the
bandwidth. The latencies are data (``schemas/gpus.json``, ``links``, each with its source),
per link kind and group size; a group larger than the preset's scale-up domain crosses
nodes over InfiniBand, at that link's latency and per-GPU bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache

from ..core.resources import load_schema_file
from .gpus import GPU

SCALE_OUT = "infiniband"


@dataclass(frozen=True)
class Link:
    """One link kind: measured latencies and the bandwidth one GPU gets on it (one direction)."""

    kind: str
    name: str
    allreduce_us: Mapping[int, float]  # group size → small-message all-reduce time
    p2p_us: float
    bytes_per_s: float

    def allreduce_latency_s(self, group: int) -> float:
        """The measured all-reduce time of the group size nearest ``group`` (log scale; ties
        go to the larger group)."""
        sizes = sorted(self.allreduce_us)
        near = min(sizes, key=lambda n: (abs(math.log(n) - math.log(max(group, 1))), -n))
        return self.allreduce_us[near] * 1e-6

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "name": self.name,
            "allreduce_latency_us": {str(k): v for k, v in sorted(self.allreduce_us.items())},
            "p2p_latency_us": self.p2p_us,
            "bytes_per_s": self.bytes_per_s,
        }


@cache
def links() -> dict[str, Link]:
    """The link kinds of ``schemas/gpus.json``."""
    out = {}
    for kind, e in load_schema_file("gpus.json").get("links", {}).items():
        lat = {int(n): float(us) for n, us in e["allreduce_latency_us"].items()}
        out[kind] = Link(kind, e["name"], lat, float(e["p2p_latency_us"]), float(e.get("bytes_per_s") or 0))
    return out


def link_for(gpu: GPU, group: int) -> Link | None:
    """The link a group of ``group`` GPUs talks over: the preset's scale-up link inside its
    domain (at half its bidirectional figure), InfiniBand beyond it; None for one GPU."""
    if group <= 1:
        return None
    table = links()
    if group > gpu.domain and SCALE_OUT in table:
        out = table[SCALE_OUT]
        bw = min(out.bytes_per_s, gpu.link_bandwidth) if gpu.link_bandwidth else out.bytes_per_s
        return replace(out, bytes_per_s=bw)
    base = table.get(gpu.link_type)
    if base is None:
        return Link(gpu.link_type, gpu.link_type, {2: 0.0}, 0.0, gpu.link_bandwidth)
    return replace(base, bytes_per_s=gpu.link_bandwidth)


@dataclass(frozen=True)
class Traffic:
    """Collectives of one step on one GPU: how many, bytes sent, seconds."""

    count: int = 0
    bytes: float = 0.0
    latency_s: float = 0.0
    transfer_s: float = 0.0

    @property
    def seconds(self) -> float:
        return self.latency_s + self.transfer_s

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(
            self.count + other.count,
            self.bytes + other.bytes,
            self.latency_s + other.latency_s,
            self.transfer_s + other.transfer_s,
        )

    def times(self, n: float) -> Traffic:
        return Traffic(int(self.count * n), self.bytes * n, self.latency_s * n, self.transfer_s * n)


NONE = Traffic()


def allreduce(link: Link | None, group: int, message: float, count: int = 1) -> Traffic:
    """``count`` all-reduces of ``message`` bytes over ``group`` GPUs: each a ring sending
    2·(n−1)/n of the message from every GPU, plus the measured latency."""
    if link is None or group <= 1 or count <= 0:
        return NONE
    sent = 2 * (group - 1) / group * message
    moved = sent / link.bytes_per_s if link.bytes_per_s else 0.0
    return Traffic(count, count * sent, count * link.allreduce_latency_s(group), count * moved)


def all_to_all(link: Link | None, group: int, sent: float, count: int = 1) -> Traffic:
    """``count`` all-to-alls in which each GPU sends ``sent`` bytes (no measured all-to-all
    latency was found: the group's all-reduce latency stands for it)."""
    if link is None or group <= 1 or count <= 0:
        return NONE
    moved = sent / link.bytes_per_s if link.bytes_per_s else 0.0
    return Traffic(count, count * sent, count * link.allreduce_latency_s(group), count * moved)


def send(link: Link | None, message: float, count: int = 1) -> Traffic:
    """``count`` point-to-point sends of ``message`` bytes (pipeline hops)."""
    if link is None or count <= 0:
        return NONE
    moved = message / link.bytes_per_s if link.bytes_per_s else 0.0
    return Traffic(count, count * message, count * link.p2p_us * 1e-6, count * moved)
