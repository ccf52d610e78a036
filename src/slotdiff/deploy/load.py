"""Time to first token and inter-token latency under load, as an engine schedules the work.

A closed loop like ``vllm bench serve --max-concurrency C --random-input-len P
--random-output-len O --num-prompts R``: C requests start at once, and each one that finishes
lets the next start. Every engine step is scheduled as vLLM's V1 scheduler does with chunked
prefill: the running requests first (a decode token each, then the rest of a partly prefilled
prompt), then waiting requests while the step's token budget (``max_num_batched_tokens``) and
``max_num_seqs`` allow, a prompt split across steps when it does not fit. A request's first
token comes out of the step that finishes its prompt; each later step gives it one more.

Each step is priced by the one step model (``cost.step``) on the deployment's layout: its
weights read once for all the step's tokens, every decoding sequence's KV at its context, each
prompt chunk's prefix KV read once and its attention over the prefix, the FLOPs of every token,
communication and pipeline stages. Per-stage KV and attention at a context are interpolated on
a grid of contexts; a stretch of steps where only decodes run is priced at its middle context.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import UsageError
from ..cost.deployment import Deployment, StageCost
from ..cost.step import Step, Work, assemble, hops, stage_time

MAX_REQUESTS = 100_000
MAX_STEPS = 200_000  # scheduled steps a run may take (decode-only stretches count once)


@dataclass
class Request:
    arrival: float
    done_prompt: int = 0
    generated: int = 0
    first_token: float | None = None
    finished: float | None = None


@dataclass(frozen=True)
class LoadReport:
    """What a benchmark client would print, from the simulated schedule."""

    model: str
    gpu: str
    layout: str
    gpus: int
    concurrency: int
    prompt: int
    output: int
    requests: int
    max_num_batched_tokens: int
    max_num_seqs: int
    ttft_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    duration_s: float
    steps: int
    decode_only_itl_ms: float  # one decode step with every request decoding, no prompt in it
    bound: bool
    efficiency: str
    notes: tuple[str, ...] = field(default=())

    @property
    def output_tokens(self) -> int:
        return self.requests * self.output

    def _stats(self, xs: tuple[float, ...]) -> dict[str, float]:
        if not xs:
            return {"mean": 0.0, "median": 0.0, "p99": 0.0}
        ordered = sorted(xs)
        p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
        return {"mean": statistics.fmean(xs), "median": statistics.median(xs), "p99": p99}

    @property
    def ttft(self) -> dict[str, float]:
        return self._stats(self.ttft_ms)

    @property
    def tpot(self) -> dict[str, float]:
        return self._stats(self.tpot_ms)

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s else 0.0

    @property
    def tokens_per_s_per_user(self) -> float:
        m = self.tpot["mean"]
        return 1e3 / m if m else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "gpu": self.gpu,
            "layout": self.layout,
            "gpus": self.gpus,
            "concurrency": self.concurrency,
            "prompt_tokens": self.prompt,
            "output_tokens": self.output,
            "requests": self.requests,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": self.max_num_seqs,
            "ttft_ms": self.ttft,
            "tpot_ms": self.tpot,
            "itl_decode_only_ms": self.decode_only_itl_ms,
            "duration_s": self.duration_s,
            "steps": self.steps,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.gpus,
            "output_tokens_per_s_per_user": self.tokens_per_s_per_user,
            "request_throughput_per_s": self.requests / self.duration_s if self.duration_s else 0.0,
            "bound": self.bound,
            "efficiency": self.efficiency,
            "notes": list(self.notes),
        }


class Profile:
    """Per stage: KV bytes and attention FLOPs per token at a context, interpolated on a grid."""

    def __init__(self, dep: Deployment, longest: int) -> None:
        self.dep = dep
        grid = sorted(
            {
                1,
                longest,
                *(min(longest, 2**i) for i in range(0, 41)),
                *range(0, longest, max(1, longest // 32)),
            }
            - {0}
        )
        self.grid = grid
        self.tables = [dep.stages(c) for c in grid]
        self.base = self.tables[-1]

    def at(self, context: float) -> tuple[StageCost, ...]:
        """The stages' costs at ``context`` (linear between grid points)."""
        g = self.grid
        c = min(max(context, g[0]), g[-1])
        hi = next(i for i, x in enumerate(g) if x >= c)
        if g[hi] == c or hi == 0:
            return self.tables[hi]
        lo = hi - 1
        w = (c - g[lo]) / (g[hi] - g[lo])
        return tuple(
            replace(
                a,
                kv_bytes=a.kv_bytes + w * (b.kv_bytes - a.kv_bytes),
                attention_flops=a.attention_flops + w * (b.attention_flops - a.attention_flops),
            )
            for a, b in zip(self.tables[lo], self.tables[hi], strict=True)
        )


def forward(
    prof: Profile,
    decodes: int,
    decode_context: float,
    chunks: list[tuple[int, int]],
) -> Step:
    """One engine step: ``decodes`` sequences at (mean) ``decode_context`` and prompt chunks
    (prefix, tokens), on the deployment's layout."""
    dep = prof.dep
    lay = dep.layout
    seqs = decodes + len(chunks)
    tokens = decodes + sum(n for _, n in chunks)
    micro = max(1, min(seqs, lay.pp))
    at_decode = prof.at(decode_context) if decodes else prof.base
    parts = [(prof.at(q), prof.at(q + n / 2), n) for q, n in chunks]
    times = []
    for s, stage in enumerate(at_decode):
        kv = decodes * (stage.kv_bytes + stage.state_bytes)
        attn = decodes * stage.attention_flops
        for prefix, middle, n in parts:
            kv += prefix[s].kv_bytes + prefix[s].state_bytes
            attn += n * middle[s].attention_flops
        # the step split into micro-batches, each a DP rank's share
        m_seqs = max(1, math.ceil(seqs / micro / lay.dp))
        m_tokens = max(1, math.ceil(tokens / micro / lay.dp))
        share = m_tokens / tokens if tokens else 1.0
        per = replace(
            stage, kv_bytes=kv * share / m_seqs, state_bytes=0.0, attention_flops=attn * share / m_tokens
        )
        expert_tokens = math.ceil(tokens / micro) if lay.ep else m_tokens
        times.append(stage_time(dep, per, Work(m_tokens, m_seqs, expert_tokens)))
    expert_tokens = math.ceil(tokens / micro) if lay.ep else math.ceil(tokens / micro / lay.dp)
    hop = hops(dep, math.ceil(tokens / micro))
    return assemble(dep, tuple(times), seqs, int(decode_context), micro, hop, expert_tokens)


def simulate(
    dep: Deployment,
    concurrency: int,
    prompt: int,
    output: int,
    requests: int | None = None,
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 1024,
) -> LoadReport:
    """Run the closed loop and report TTFT, TPOT, throughput (module docstring)."""
    for name, v in (("--concurrency", concurrency), ("--prompt", prompt), ("--output", output)):
        if v < 1:
            raise UsageError(f"{name} must be at least 1, got {v}")
    total = requests or min(MAX_REQUESTS, max(10 * concurrency, 100))
    if total > MAX_REQUESTS:
        raise UsageError(f"--requests must be at most {MAX_REQUESTS:,}, got {total:,}")
    if max_num_batched_tokens < 1 or max_num_seqs < 1:
        raise UsageError("--max-num-batched-tokens and --max-num-seqs must be at least 1")
    chunk = max(1, max_num_batched_tokens - min(concurrency, max_num_seqs) + 1)  # prompt tokens a step
    if total * (math.ceil(prompt / chunk) + 2) > MAX_STEPS:
        raise UsageError(
            f"{total:,} requests of {prompt:,} prompt tokens take more than {MAX_STEPS:,} steps of "
            f"{max_num_batched_tokens:,} tokens: pass fewer --requests or a larger --max-num-batched-tokens"
        )
    notes: list[str] = []
    fits = dep.max_batch(prompt + output)
    running_cap = min(concurrency, max_num_seqs)
    if fits is not None and fits < running_cap:
        notes.append(
            f"only {fits:,} sequences of {prompt + output:,} tokens fit the GPUs (10% kept for the runtime): "
            f"the rest wait (an engine would preempt or refuse them)"
        )
        running_cap = max(1, fits)
    if concurrency > max_num_seqs:
        notes.append(f"max_num_seqs {max_num_seqs:,} caps the running batch below the concurrency")
    prof = Profile(dep, prompt + output)
    budget = max_num_batched_tokens
    waiting: deque[Request] = deque()
    prefilling: list[Request] = []
    decoding: list[tuple[int, int, Request]] = []  # (finish step index, id, request)
    ctx_sum = 0  # Σ contexts of the decoding requests
    started = done = steps = 0
    now = 0.0
    finished: list[Request] = []
    for _ in range(min(concurrency, total)):
        waiting.append(Request(0.0))
        started += 1
    while done < total:
        if steps > 10 * MAX_STEPS:
            raise UsageError(f"the schedule passed {10 * MAX_STEPS:,} steps: pass fewer --requests")
        if steps > MAX_STEPS:
            raise UsageError(
                f"the schedule passed {MAX_STEPS:,} steps: pass fewer --requests or a shorter --output"
            )
        left = budget - len(decoding)
        chunks: list[tuple[int, int]] = []
        for r in prefilling:  # running requests first: the rest of their prompts
            if left <= 0:
                break
            n = min(prompt - r.done_prompt, left)
            chunks.append((r.done_prompt, n))
            left -= n
        admitted = []
        while waiting and left > 0 and len(decoding) + len(prefilling) + len(admitted) < running_cap:
            r = waiting.popleft()
            n = min(prompt, left)
            chunks.append((0, n))
            admitted.append(r)
            left -= n
        prefilling += admitted
        if not chunks and decoding and not waiting:
            # a stretch of decode-only steps: jump to the next finish (contexts grow linearly)
            k = decoding[0][0] - steps
            mean = ctx_sum / len(decoding) + (k - 1) / 2
            dt = forward(prof, len(decoding), mean, []).step_ms / 1e3
            now += k * dt
            steps += k
            ctx_sum += k * len(decoding)
        else:
            mean = ctx_sum / len(decoding) if decoding else 0.0
            now += forward(prof, len(decoding), mean, chunks).step_ms / 1e3
            steps += 1
            ctx_sum += len(decoding)
            # the prompt chunks
            progress = iter(n for _, n in chunks)
            still = []
            for r in prefilling:
                n = next(progress, 0)
                r.done_prompt += n
                if r.done_prompt >= prompt:
                    r.first_token = now
                    r.generated = 1
                    if output == 1:
                        r.finished = now
                        finished.append(r)
                        done += 1
                    else:
                        heapq.heappush(decoding, (steps + output - 1, id(r), r))
                        ctx_sum += prompt + 1
                else:
                    still.append(r)
            prefilling = still
        while decoding and decoding[0][0] <= steps:
            _, _, r = heapq.heappop(decoding)
            r.generated = output
            r.finished = now
            ctx_sum -= prompt + output
            finished.append(r)
            done += 1
        while started < total and len(waiting) + len(prefilling) + len(decoding) < concurrency:
            waiting.append(Request(now))
            started += 1
    ttft = tuple((r.first_token - r.arrival) * 1e3 for r in finished if r.first_token is not None)
    tpot = tuple(
        (r.finished - r.first_token) * 1e3 / (output - 1)
        for r in finished
        if output > 1 and r.first_token is not None and r.finished is not None
    )
    steady = forward(prof, min(running_cap, concurrency), prompt + output / 2, [])
    wl = dep.workload
    notes += [
        f"vLLM V1 scheduling: decodes first, then prompt chunks up to {budget:,} tokens a step, at most "
        f"{max_num_seqs:,} running sequences; a closed loop of {concurrency:,} clients, {total:,} requests",
        "each step priced by the decode model (cost/step.py): weights once per step, each sequence's KV, "
        "each prompt chunk's prefix KV and attention, communication and pipeline stages",
        "no prefix caching, no preemption, no scheduling or sampling overhead on the CPU; requests of "
        "exactly --prompt and --output tokens (vllm bench serve --ignore-eos)",
        wl.efficiency_note,
    ]
    return LoadReport(
        model=dep.arch.name,
        gpu=dep.device.id,
        layout=dep.layout.label(),
        gpus=dep.gpus,
        concurrency=concurrency,
        prompt=prompt,
        output=output,
        requests=total,
        max_num_batched_tokens=budget,
        max_num_seqs=max_num_seqs,
        ttft_ms=ttft,
        tpot_ms=tpot,
        duration_s=now,
        steps=steps,
        decode_only_itl_ms=steady.step_ms,
        bound=wl.bound,
        efficiency=wl.efficiency_note,
        notes=tuple(notes),
    )
