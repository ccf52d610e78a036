"""MoE decode traffic (seed 06): experts touched, weights actually read, all-to-all bytes.

Expected figures are the seed's (163 / 252 experts) or worked by hand from the published
configs: DeepSeek-V3 d = 7168, 256 routed experts top-8, 58 MoE layers of 61 (3 dense
first); Mixtral 8x7B d = 4096, 8 experts top-2, expert width 14336, 32 layers.
"""

from __future__ import annotations

from math import comb

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import UsageError
from slotdiff.cost.workload import Workload
from slotdiff.deploy.moe import experts_read, moe_traffic, remote_gpus_per_token
from slotdiff.deploy.serving import deployment

from conftest import raw


def dep(repo: str, **wl):  # type: ignore[no-untyped-def]
    return deployment(load(raw(repo)).arch, Workload(**wl))


def test_deepseek_v3_experts_touched_seed_anchors() -> None:
    # Seed 06: E·[1 − (1 − k/E)^B] with E = 256, k = 8: ≈ 163 at B = 32, ≈ 252 at B = 128.
    m = moe_traffic(dep("deepseek-ai/DeepSeek-V3"), 32, 8)
    by = {r.tokens: r for r in m.rows}
    assert by[1].experts_touched == 8  # one token: exactly its top-8
    assert round(by[32].experts_touched) == 163
    assert round(by[128].experts_touched) == 252
    assert (m.n_experts, m.top_k, m.n_shared, m.moe_layers) == (256, 8, 1, 58)


def test_weights_read_grow_from_active_toward_total() -> None:
    # Seed 06's three numbers: 671B params, 37B activated, and what a step reads, which at
    # B = 128 is already ~98% of the routed experts (252/256).
    m = moe_traffic(dep("deepseek-ai/DeepSeek-V3"), 128, 8)
    by = {r.tokens: r for r in m.rows}
    assert round(m.params_total / 1e9) == 671
    assert by[1].params_read < m.params_active < by[32].params_read < by[128].params_read < m.params_total
    routed_share_128 = 1 - (1 - 8 / 256) ** 128
    non_routed = m.params_total - m.routed_params
    assert by[128].params_read == pytest.approx(
        non_routed - 129280 * 7168 + m.routed_params * routed_share_128  # embedding table is a gather
    )
    reads = [r.bytes_read for r in m.rows]
    assert reads == sorted(reads)


def test_mixtral_read_per_step() -> None:
    # Routed params: 32 layers × 8 experts × 3 × 4096 × 14336 = 45,097,156,608; total
    # 46,702,792,704; embedding 32000 × 4096 = 131,072,000 (a gather). One token reads
    # 46,702,792,704 − 131,072,000 − 45,097,156,608 + 45,097,156,608 × 2/8 = 12,748,853,248
    # params: the 12.9B activated minus the embedding table.
    d = dep("mistralai/Mixtral-8x7B-v0.1")
    routed = 32 * 8 * 3 * 4096 * 14336
    assert routed == 45_097_156_608
    one = experts_read(d, 1)
    assert one.experts_touched == 2
    assert one.params_read == 46_702_792_704 - 131_072_000 - routed + routed // 4 == 12_748_853_248
    # B = 8: 8 × (1 − 0.75^8) = 7.199 of 8 experts.
    assert experts_read(d, 8).experts_touched == pytest.approx(8 * (1 - 0.75**8))


def test_deepseek_v3_all_to_all_ep8() -> None:
    # Each token's 8 copies leave its GPU with probability 7/8: 7 remote copies of a
    # 7,168-wide bf16 vector = 100,352 B per token; 32 tokens: 3,211,264 B dispatch per layer,
    # the same back (combine); per GPU 6,422,528 / 8 = 802,816 B; 58 MoE layers per step:
    # 372,506,624 B.
    a = moe_traffic(dep("deepseek-ai/DeepSeek-V3"), 32, 8).a2a
    assert a.remote_copies_per_token == 7
    assert a.dispatch_bytes == 32 * 7 * 7168 * 2 == 3_211_264
    assert a.combine_bytes == 3_211_264
    assert a.layer_bytes_per_gpu == 802_816
    assert a.step_bytes == 58 * 6_422_528 == 372_506_624
    # Sent once per destination GPU instead: 7 × (1 − C(224, 8) / C(256, 8)) other GPUs.
    assert a.remote_gpus_per_token == pytest.approx(7 * (1 - comb(224, 8) / comb(256, 8)))
    assert a.dispatch_bytes_dedup < a.dispatch_bytes
    # TP over 8 instead: two ring all-reduces of 32 × 7168 × 2 B, each moving 2 × 7/8 of it
    # per GPU: 2 × 1.75 × 458,752 = 1,605,632 B per layer per GPU.
    assert a.tp_allreduce_bytes_per_gpu == pytest.approx(1_605_632)


def test_fp8_dispatch_halves_dispatch_only() -> None:
    a = moe_traffic(dep("deepseek-ai/DeepSeek-V3"), 32, 8, dispatch_dtype="float8_e4m3fn").a2a
    assert a.dispatch_bytes == 3_211_264 / 2 and a.combine_bytes == 3_211_264


def test_one_gpu_sends_nothing_and_dense_models_are_refused() -> None:
    a = moe_traffic(dep("deepseek-ai/DeepSeek-V3"), 32, 1).a2a
    assert a.layer_bytes == 0 and remote_gpus_per_token(256, 8, 1) == 0
    with pytest.raises(UsageError):
        moe_traffic(dep("meta-llama/Meta-Llama-3-8B"), 32, 8)
    with pytest.raises(UsageError):
        moe_traffic(dep("deepseek-ai/DeepSeek-V3"), 32, 0)
