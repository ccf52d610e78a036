"""Memory verdicts (slotdiff fit) against cases worked by hand, and the per-GPU decode model.

Conventions used in the arithmetic: H100 SXM "80 GB" = 80 GiB = 85,899,345,920 B (the
preset); H200 "141 GB" = 141 GiB; the default runtime reserve is 10%, so 72 GiB =
77,309,411,328 B of an H100 is usable. Under tensor parallelism every tensor splits over
the GPUs except the norms (replicated on each); KV follows the KV heads. The H100's NVLink
is 900 GB/s bidirectional, 450e9 B/s each way. Every expected number below comes from the
model's published sizes, not from running the code.
"""

from __future__ import annotations

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.errors import UsageError
from slotdiff.cost.price import cost_of
from slotdiff.cost.workload import Workload
from slotdiff.deploy.fit import fit
from slotdiff.deploy.serving import RESERVE_FRACTION, decode_step, deployment

from conftest import raw

KiB, GiB = 1024, 1024**3
H100_USABLE = 77_309_411_328  # 0.9 × 80 GiB
LLAMA70_PARAMS = 70_553_706_496  # Llama-3-70B (3.1 config): DESIGN.md's 70.6B, counted exactly in the anchors
LLAMA70_BF16 = 2 * LLAMA70_PARAMS  # 141,107,412,992 B = 131.4 GiB
LLAMA70_EMBED = 128256 * 8192 * 2  # the token table, a gather at decode: 2,101,346,304 B
LLAMA70_NORMS = (80 * 2 + 1) * 8192 * 2  # two RMSNorms per layer and the final one: 2,637,824 B
LINK = 450e9  # NVLink 4, one direction


def per_gpu(tp: int) -> int:
    """Llama-3.1-70B bf16 on one of ``tp`` GPUs: everything but the norms split, norms whole."""
    return (LLAMA70_BF16 - LLAMA70_NORMS) // tp + LLAMA70_NORMS


def arch(repo: str):  # type: ignore[no-untyped-def]
    return load(raw(repo)).arch


def test_reserve_default_is_ten_percent() -> None:
    assert RESERVE_FRACTION == 0.10
    assert 0.9 * 80 * GiB == H100_USABLE


def test_llama3_70b_bf16_does_not_fit_one_h100() -> None:
    # 141,107,412,992 B of weights > 77,309,411,328 B usable: no room for even one sequence.
    # At 8K one sequence adds 320 KiB × 8,192 = 2,684,354,560 B, so the shortfall is
    # 141,107,412,992 + 2,684,354,560 − 77,309,411,328 = 66,482,356,224 B (61.92 GiB).
    f = fit(arch("meta-llama/Llama-3.1-70B"), Workload(context=8192), gpus=1)
    assert f.weights_bytes == LLAMA70_BF16
    assert not f.fits
    assert f.shortfall_per_gpu == 66_482_356_224
    assert f.max_sequences == 0 and f.max_context == 0
    assert f.min_gpus == 2
    assert f.decode is None and f.decode_at_max is None


def test_llama3_70b_bf16_fits_two_h100_with_five_sequences_at_8k() -> None:
    # Per GPU: (141,107,412,992 − 2,637,824) / 2 + 2,637,824 = 70,555,025,408 B; free
    # 77,309,411,328 − 70,555,025,408 = 6,754,385,920 B. KV at 8K: 80 layers × 8 KV heads × 128
    # × 2 (K, V) × 2 B = 320 KiB/token × 8,192 = 2,684,354,560 B per sequence, 4 of the 8 heads
    # per GPU: 1,342,177,280 B. Sequences: floor(6,754,385,920 / 1,342,177,280) = floor(5.03) = 5.
    f = fit(arch("meta-llama/Llama-3.1-70B"), Workload(context=8192), gpus=2)
    assert f.fits and f.valid and f.layout.tp == 2
    assert f.weights_per_gpu == per_gpu(2) == 70_555_025_408
    assert f.kv_per_sequence == 2_684_354_560
    assert f.kv_per_sequence_per_gpu == 1_342_177_280
    assert f.kv_replication == 1
    assert f.max_sequences == 5
    # Longest single sequence: 6,754,385,920 / (160 KiB = 163,840 B per token per GPU) = 41,225.5.
    assert f.max_context == 41_225
    # Decode at 5 sequences, per GPU: weights read once without the embedding table, the norms
    # (2,637,824 B) whole on each GPU and the rest split: (141,107,412,992 − 2,101,346,304 −
    # 2,637,824) / 2 + 2,637,824 = 69,504,352,256 B, plus 5 × 1,342,177,280 = 6,710,886,400 B of
    # KV = 76,215,238,656 B / 3.35e12 B/s = 22.751 ms. FLOPs per GPU ≈ 5 × 160 GFLOP / 2 = 0.4
    # TFLOP = 0.41 ms: memory-bound. Plus two all-reduces per layer (160) of 5 tokens × 8,192 × 2
    # B, each 3.7 µs (the measured TP=2 latency on NVLink) + a ring's 81,920 B at 450e9 B/s:
    # 0.592 + 13,107,200 / 450e9 s = 0.621 ms. 5 / (22.751 + 0.621) ms = 213.9 tokens/s.
    d = f.decode_at_max
    assert d is not None and d.batch == 5 and d.bound == "memory"
    read = (LLAMA70_BF16 - LLAMA70_EMBED - 2_637_824) / 2 + 2_637_824
    assert d.bytes == pytest.approx(read + 5 * 1_342_177_280) == 76_215_238_656
    assert d.memory_ms == pytest.approx(76_215_238_656 / 3.35e12 * 1e3)
    assert d.comm_bytes == pytest.approx(13_107_200)
    comm = 160 * 3.7e-3 + 13_107_200 / LINK * 1e3
    assert d.step_ms == pytest.approx(76_215_238_656 / 3.35e12 * 1e3 + comm)
    assert d.tokens_per_s == pytest.approx(213.94, abs=0.01)


def test_llama3_70b_on_eight_h100_at_128k() -> None:
    # The example. Per GPU: (141,107,412,992 − 2,637,824) / 8 + 2,637,824 =
    # 17,640,734,720 B; free 77,309,411,328 − 17,640,734,720 = 59,668,676,608 B. KV at 128K:
    # 40 GiB per sequence (seed 04), one of 8 heads per GPU: 5 GiB = 5,368,709,120 B.
    # floor(59.67e9 / 5.37e9) = 11.
    f = fit(arch("meta-llama/Llama-3.1-70B"), Workload(context=131072), gpus=8)
    assert f.fits and f.kv_per_sequence == 40 * GiB
    assert f.weights_per_gpu == per_gpu(8) == 17_640_734_720
    assert f.max_sequences == 11
    # Longest single context: 59,668,676,608 / (40 KiB per token per GPU) = 1,456,754.8 tokens,
    # eleven times the model's trained 131,072: memory is not what limits one sequence here.
    assert f.max_context == 1_456_754
    assert f.model_max_context == 131072


def test_batch_that_does_not_fit_reports_the_shortfall() -> None:
    # 12 sequences at 128K on 8 × H100 (TP=8), per GPU: 17,640,734,720 + 12 × 5,368,709,120 =
    # 82,065,244,160 B against 77,309,411,328: short 4,755,832,832 B per GPU. Past TP=8 each GPU
    # still holds one of the 8 KV heads (TP=16 holds 5 GiB per sequence too), so more TP does
    # not help; pipeline stages split the layers and their KV. Every layout of ≤ 9 GPUs fails:
    #   TP=8: above; TP=4 × PP=2: 17.64e9 + 12 × 5.37e9; TP=2 × PP=4: 18.16e9 + 12 × 5.37e9;
    #   PP=8: 19.21e9 + 12 × 5.37e9 (all ≥ 82e9); 9 GPUs: no PP divides the 80 layers by 9,
    #   TP=9 and 3 divide neither the 64 heads nor the 8 KV heads.
    # 10 GPUs, TP=2 × PP=5 (16 layers a stage): the first stage holds half the embedding
    # 1,050,673,152 + 16 × (855,638,016 + 32,768) = 14,741,405,696 B (the last: half the head
    # and the final norm, 14,741,422,080) and 16 layers × 2,048 B (4 of 8 heads) × 131,072 =
    # 4 GiB per sequence: 14,741,422,080 + 12 × 4,294,967,296 = 66,281,029,632 ≤ usable.
    # (PP=10 also fits on 10; ties go to the layout with fewer stages.)
    f = fit(arch("meta-llama/Llama-3.1-70B"), Workload(context=131072, batch=12), gpus=8)
    assert not f.fits
    assert f.shortfall_per_gpu == pytest.approx(4_755_832_832)
    assert f.min_gpus == 10
    assert f.min_layout is not None and (f.min_layout.tp, f.min_layout.pp) == (2, 5)


def test_gqa_heads_replicate_past_the_kv_head_count() -> None:
    # Llama-3-8B has 8 KV heads: on 16 GPUs (TP=16, a multiple of 8) each holds one head,
    # KV stored twice over. 1 GiB per sequence at 8K (128 KiB × 8,192).
    a = arch("meta-llama/Meta-Llama-3-8B")
    assert fit(a, Workload(context=8192), gpus=1).kv_per_sequence_per_gpu == 1 * GiB
    assert fit(a, Workload(context=8192), gpus=8).kv_per_sequence_per_gpu == GiB / 8
    f = fit(a, Workload(context=8192), gpus=16)
    assert f.valid and f.kv_per_sequence_per_gpu == GiB / 8  # not /16
    assert f.kv_replication == 2
    assert any("replicated ×2" in n for n in f.assumptions)


def test_mla_latent_is_whole_on_every_gpu() -> None:
    # DeepSeek-V3: 61 layers × (512 latent + 64 RoPE key) × 2 B = 70,272 B/token; at 128K
    # 9,210,691,584 B (8.58 GiB) per sequence, all of it on each of the 8 GPUs.
    f = fit(arch("deepseek-ai/DeepSeek-V3"), Workload(gpu="h200", context=131072), gpus=8)
    assert f.kv_per_sequence == 61 * 576 * 2 * 131072 == 9_210_691_584
    assert f.kv_per_sequence_per_gpu == f.kv_per_sequence
    assert f.kv_replication == 8
    # Checkpoint fp8: ~671B params at 1 B plus scales and bf16 embeddings/norms: 671–676 GB.
    assert 671e9 <= f.weights_bytes <= 676e9
    # H200: 0.9 × 141 GiB = 136,257,837,465.6 B usable. Each GPU holds 1/8 of the sharded
    # weights and all of the replicated ones: MLA's down projections q_a (7,168 × 1,536) and
    # kv_a (7,168 × 576) in 61 layers, 0.92e9 fp8 bytes; routers 58 × 256 × 7,168 bf16,
    # 0.21e9; norms. So 84.1e9 < per GPU < 84.1e9 + 1.2e9, which leaves 51–52e9: 5 sequences
    # of 9.21e9.
    assert f.weights_bytes / 8 < f.weights_per_gpu < f.weights_bytes / 8 + 1.2e9
    free = 0.9 * 141 * GiB - f.weights_per_gpu
    assert f.max_sequences == int(free // 9_210_691_584) == 5
    assert any("MLA" in n for n in f.assumptions)


def test_sliding_window_everywhere_means_memory_does_not_bound_context() -> None:
    # Mistral-7B-v0.1: every layer slides over 4,096 tokens, so one sequence never holds
    # more than 4,096 × 128 KiB = 512 MiB of KV, however long its context.
    f = fit(arch("mistralai/Mistral-7B-v0.1"), Workload(context=131072), gpus=1)
    assert f.kv_per_sequence == 4096 * 128 * KiB
    assert f.max_context is None


def test_recurrent_state_counts_per_sequence() -> None:
    # Qwen3.5-35B-A3B: 30 Gated DeltaNet layers hold 32 value heads × 128 × 128 recurrent
    # state in float32 (its config says mamba_ssm_dtype float32) plus a 4-wide conv window
    # over (2 × 16 × 128 + 32 × 128) channels in bf16:
    # 30 × (524,288 × 4 B + 32,768 × 2 B) = 30 × 2,162,688 = 64,880,640 B per sequence.
    f = fit(arch("Qwen/Qwen3.5-35B-A3B"), Workload(context=8192, batch=4), gpus=1)
    state = 30 * (32 * 128 * 128 * 4 + (2 * 16 * 128 + 32 * 128) * 4 * 2)
    assert f.state_per_sequence == state == 64_880_640
    assert f.needed_per_gpu == pytest.approx(f.weights_bytes + 4 * (f.kv_per_sequence + state))


def test_reserve_and_gpus_are_checked() -> None:
    a = arch("meta-llama/Meta-Llama-3-8B")
    with pytest.raises(UsageError):
        fit(a, gpus=0)
    with pytest.raises(UsageError):
        fit(a, reserve=1.0)
    # No reserve: 80 GiB − 16,060,522,496 B of weights = 69,838,823,424 B for 1 GiB sequences → 65.
    assert fit(a, Workload(context=8192), reserve=0).max_sequences == 65


@pytest.mark.parametrize(
    "repo",
    ["meta-llama/Meta-Llama-3-8B", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3-30B-A3B", "google/gemma-2-9b"],
)
@pytest.mark.parametrize(("batch", "context"), [(1, 8192), (64, 32768)])
def test_one_gpu_decode_step_equals_the_cost_pass(repo: str, batch: int, context: int) -> None:
    wl = Workload(batch=batch, context=context)
    a = arch(repo)
    ref = cost_of(a, wl).decode
    step = decode_step(deployment(a, wl), batch, context)
    assert step.bytes == pytest.approx(ref.bytes)
    assert step.flops == pytest.approx(ref.flops)
    assert step.step_ms == pytest.approx(ref.step_ms)
    assert step.bound == ref.bound


def test_tensor_parallel_divides_weights_and_flops() -> None:
    a = arch("meta-llama/Meta-Llama-3-8B")
    one = decode_step(deployment(a, Workload(), 1), 8, 8192)
    eight = decode_step(deployment(a, Workload(), 8), 8, 8192)
    # The norms (65 × 4,096 × 2 B = 532,480 B) are whole on every GPU; the rest splits 8 ways.
    norms = 532_480
    assert eight.weight_bytes == pytest.approx((one.weight_bytes - norms) / 8 + norms)
    assert eight.kv_bytes == pytest.approx(one.kv_bytes / 8)  # 8 KV heads, one per GPU
    assert eight.flops == pytest.approx(one.flops / 8)
    assert one.comm_ms == 0
    # Two all-reduces per layer: 2 × 32 × 2·(8−1)/8 × 8 tokens × 4,096 × 2 B = 7,340,032 B
    # sent per GPU over 450e9 B/s, and 64 × 5.9 µs of latency (TP=8 on NVLink): 0.394 ms on top
    # of the memory-bound step, most of it latency.
    assert eight.comm_bytes == pytest.approx(7_340_032)
    comm = 64 * 5.9e-3 + 7_340_032 / LINK * 1e3
    assert eight.comm_ms == pytest.approx(comm)
    assert eight.step_ms == pytest.approx(eight.memory_ms + comm)
