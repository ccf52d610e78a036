"""Speculative decoding (seed 08) against the seed's figures and hand-worked roofline cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import UsageError
from slotdiff.cost.workload import Workload
from slotdiff.deploy.serving import deployment
from slotdiff.deploy.specdec import expected_tokens, specdec, specdec_report, speedup

from conftest import raw


def dep(repo: str, gpus: int = 1, **wl):  # type: ignore[no-untyped-def]
    return deployment(load(raw(repo)).arch, Workload(**wl), gpus)


def test_seed_08_anchor_2_4x() -> None:
    # (1 − 0.8^5) / (1 − 0.8) = (1 − 0.32768) / 0.2 = 3.3616 tokens per verification;
    # with a draft token at 10% of a step: 3.3616 / (4 × 0.1 + 1) = 2.401 ≈ 2.4×.
    assert expected_tokens(0.8, 4) == pytest.approx(3.3616)
    assert speedup(0.8, 4, 0.1) == pytest.approx(2.4, abs=0.01)


def test_edge_acceptance() -> None:
    assert expected_tokens(1.0, 4) == 5  # every draft accepted, plus the bonus token
    assert expected_tokens(0.0, 4) == 1  # nothing accepted: the verifier's own token


@given(st.floats(0, 0.999), st.integers(1, 16))
def test_expected_tokens_is_the_geometric_sum(alpha: float, gamma: int) -> None:
    assert expected_tokens(alpha, gamma) == pytest.approx(sum(alpha**i for i in range(gamma + 1)))


def test_verification_stops_being_free_near_batch_60() -> None:
    # Seed 08: B ≳ ridge / (γ + 1) = 295.3 / 5 ≈ 59. Llama-3-8B bf16 reads 15,009,849,344 B of
    # weights per step (16.06 GB less the embedding gather) and does 15,009,316,864 FLOPs of
    # weight matmuls per token, so 5·B tokens turn compute-bound when
    # 5·B × 15,009,316,864 / 989.4e12 ≥ 15,009,849,344 / 3.35e12 → B ≥ 59.07 → 60.
    s = specdec(dep("meta-llama/Meta-Llama-3-8B", context=8192))
    assert s.verify_compute_bound_batch_weights == 60
    assert s.ideal_speedup == pytest.approx(2.4, abs=0.01)
    by = {r.batch: r for r in s.rows}
    assert by[1].speedup == pytest.approx(2.4, abs=0.01)  # batch 1: verification is free
    # Weights alone (the seed's reasoning), at batch 1024 both steps are compute-bound and
    # verification costs 5 steps: 3.3616 / (0.4 + 5) = 0.6225 — below 1.
    assert by[1024].speedup_weights_only == pytest.approx(3.3616 / 5.4, rel=1e-3)
    # Break-even: 3.3616 / (0.4 + r) < 1 ⇔ r > 2.9616, with r = 5·B/295.3 once verification
    # is compute-bound and plain decode is not: B > 174.9 → 175.
    assert s.break_even_batch_weights == 175


def test_long_context_keeps_verification_memory_bound() -> None:
    # With every sequence's 1 GiB of KV (8K) read each step, decode intensity tends to
    # (15.0 + 4.3) GFLOP / 1.07 GB ≈ 18 FLOP/byte per token, ×5 for verification ≈ 90 < 295:
    # verification never turns compute-bound, so the speedup holds at every batch.
    s = specdec(dep("meta-llama/Meta-Llama-3-8B", context=8192))
    assert s.verify_compute_bound_batch is None and s.break_even_batch is None


def test_mtp_modules_are_offered_as_the_draft() -> None:
    # DeepSeek-V3 has one MTP module (num_nextn_predict_layers = 1): γ = 1, and its report's
    # 85–90% acceptance gives 1.85–1.90 tokens per step; the seed's table says ~1.8×.
    d = dep("deepseek-ai/DeepSeek-V3", gpus=8, gpu="h200", context=8192)
    r = specdec_report(d)
    assert r.external is not None and r.mtp is not None
    m = r.mtp
    assert (m.draft, m.gamma, m.alpha) == ("mtp", 1, 0.85)
    assert m.expected_tokens == pytest.approx(1.85)
    assert 0 < m.draft_cost < 0.1  # one layer + the head against the whole model
    assert m.ideal_speedup == pytest.approx(1.8, abs=0.1)
    # Large batch: every expert is read anyway, verification rides on the same read.
    assert {r.batch: r for r in m.rows}[512].speedup == pytest.approx(1.8, abs=0.1)
    # At batch 1 an MoE's verification reads more experts (2 tokens touch ~16 of 256), so
    # it is not free: the speedup is lower there.
    assert m.rows[0].verify_ratio > 1.2
    assert specdec_report(dep("meta-llama/Meta-Llama-3-8B")).mtp is None
    with pytest.raises(UsageError):
        specdec_report(dep("meta-llama/Meta-Llama-3-8B"), draft="mtp")


def test_bad_parameters() -> None:
    d = dep("meta-llama/Meta-Llama-3-8B")
    for kwargs in ({"alpha": 1.5}, {"gamma": 0}, {"draft_cost": -0.1}):
        with pytest.raises(UsageError):
            specdec(d, **kwargs)  # type: ignore[arg-type]
