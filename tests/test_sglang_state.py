"""SGLang's recurrent-state pool (MambaPool) taken out of the rest before the KV tokens are
sized, for the hybrids SGLang 0.5.2-0.5.6 serves; expected values worked by hand from SGLang's
own code, read from the PyPI wheels sglang 0.5.3, 0.5.4, 0.5.5 and 0.5.6:

* ``model_executor/model_runner.py`` ``profile_max_num_token`` / ``handle_max_mamba_cache``:
  0.5.4-0.5.6 with the radix cache on, ``max_mamba_cache_size = int(rest × r / (1 + r) //
  mamba_cache_per_req)`` (r = ``mamba_full_memory_ratio`` 0.9); with it off (and always in
  0.5.2-0.5.3) ``--max-mamba-cache-size`` or ``--max-running-requests`` or 512; then
  ``max_total_num_tokens = (rest − size × per_req) // cell_size`` over the full-attention layers;
* ``ModelRunner.__init__``: ``mamba2_config`` (Falcon-H1, Nemotron-H) disables the radix cache;
  ``server_args.py`` does so for KimiLinearForCausalLM (0.5.5+);
* ``configs/mamba_utils.py``: ``mamba_cache_per_req = (prod(conv) × 2 [bf16] + prod(temporal) ×
  4 [float32 --mamba-ssm-dtype]) × recurrent layers``; Mamba2StateShape conv = (inner + 2 ×
  groups × state) / tp × (kernel − 1), groups raised to tp when tp does not divide them,
  temporal = heads / tp × head_dim × state; KimiLinearStateShape conv = 3 × (heads × d / tp) ×
  (kernel − 1), temporal = heads / tp × d × d.

``available_kv_gib`` pins the rest, so the token counts below are exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cli import main
from slotdiff.constructs import construct
from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.gpus import gpu
from slotdiff.cost.memory import MemoryPlan
from slotdiff.cost.weights import effective_format
from slotdiff.deploy.sglang import sglang_fit
from slotdiff.deploy.vllm import EngineArgs, EngineFit

from conftest import FIXTURES, RAW

GiB = 2**30
DEFAULTS = FIXTURES / "corpus" / "transformers-defaults"
QWEN3_NEXT = RAW / "Qwen__Qwen3-Next-80B-A3B-Thinking.json"
NEMOTRON3_NANO = RAW / "nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"


def fit(path: Path, **flags: Any) -> EngineFit:
    arch = load(path).arch
    plan = MemoryPlan(arch, effective_format(arch, None)[0], "bfloat16")
    return sglang_fit(arch, plan, gpu("h100-sxm"), EngineArgs(engine="sglang", max_model_len=32768, **flags))


def state_term(f: EngineFit) -> float:
    return next(t.bytes for t in f.stages[0].terms if t.name == "recurrent_state")


# Qwen3-Next-80B-A3B at TP 4: 48 layers, every 4th full attention (12), 36 gated-DeltaNet
# layers with 16 k heads, 32 v heads, d_k = d_v = 128, conv kernel 4.
#   conv = (32·128 + 2·16·128) / 4 × (4 − 1) = 8192 / 4 × 3 = 6,144 elements × 2 B = 12,288 B
#   temporal = 32 / 4 × 128 × 128 = 131,072 elements × 4 B = 524,288 B
#   per request = 36 × 536,576 = 19,316,736 B
# cell = 12 layers × max(1, 2 / 4) KV heads × 256 × 2 (K, V) × 2 B = 12,288 B
QN_PER = 36 * (6144 * 2 + 131072 * 4)
REST = 20 * GiB  # 21,474,836,480 B


def test_qwen3_next_layer_state_is_sglangs_mamba2_shape() -> None:
    arch = load(QWEN3_NEXT).arch
    gdn = next(s for s in arch.layers if s.mixer == "linear_attention")
    assert construct(gdn.mixer).sglang_state(arch, gdn, 4) == (6144, 131072)
    assert QN_PER == 19_316_736


def test_qwen3_next_ratio_split_in_055() -> None:
    # rest × 0.9 / 1.9 = 10,172,290,964.2 B // 19,316,736 = 526 slots = 10,160,603,136 B;
    # (21,474,836,480 − 10,160,603,136) // 12,288 = 920,754 tokens (1,747,626 without the pool)
    f = fit(QWEN3_NEXT, tensor_parallel_size=4, available_kv_gib=20)
    assert state_term(f) == 526 * QN_PER
    assert f.kv_pool_tokens == 920_754
    assert f.kv_pool_bytes == REST - 526 * QN_PER
    # the radix cache admits 526 // 3 = 175 running requests: 920,754 / 32,768 = 28.1 binds
    assert f.max_concurrency == pytest.approx(920_754 / 32768)
    assert any("max_mamba_cache_size: 526 " in n for n in f.notes)
    # 0.5.4-0.5.6 overwrite a given --max-mamba-cache-size while the radix cache is on
    assert (
        fit(QWEN3_NEXT, tensor_parallel_size=4, available_kv_gib=20, max_mamba_cache_size=8).kv_pool_tokens
        == 920_754
    )


def test_qwen3_next_state_dtype_and_fixed_pools() -> None:
    # --mamba-ssm-dtype bfloat16: 36 × (12,288 + 262,144) = 9,879,552 B a request;
    # 10,172,290,964.2 // 9,879,552 = 1,029 slots; (rest − 1,029 × 9,879,552) // 12,288 = 920,310
    bf16 = fit(QWEN3_NEXT, tensor_parallel_size=4, available_kv_gib=20, mamba_ssm_dtype="bfloat16")
    assert state_term(bf16) == 1029 * 9_879_552
    assert bf16.kv_pool_tokens == 920_310
    # 0.5.3: no ratio, 512 slots: (21,474,836,480 − 512 × 19,316,736) // 12,288 = 942,762
    old = fit(QWEN3_NEXT, tensor_parallel_size=4, available_kv_gib=20, version="0.5.3")
    assert old.kv_pool_tokens == 942_762
    # radix cache off, --max-running-requests 64: (rest − 64 × 19,316,736) // 12,288 = 1,647,018
    off = fit(
        QWEN3_NEXT, tensor_parallel_size=4, available_kv_gib=20, disable_radix_cache=True, max_num_seqs=64
    )
    assert off.kv_pool_tokens == 1_647_018
    # 4 running requests: (rest − 4 × 19,316,736) // 12,288 = 1,741,338 tokens, but 4 requests
    few = fit(
        QWEN3_NEXT, tensor_parallel_size=4, available_kv_gib=20, disable_radix_cache=True, max_num_seqs=4
    )
    assert few.kv_pool_tokens == 1_741_338
    assert few.max_concurrency == 4


def test_nemotron_h_fixed_pool_and_its_moe_layers_from_056() -> None:
    # Nemotron-3-Nano-30B-A3B: 23 "M" layers (64 heads × 64, 8 groups, state 128, kernel 4)
    #   conv = (4096 + 2·8·128) × 3 = 18,432 × 2 B; temporal = 64·64·128 = 524,288 × 4 B
    #   per request = 23 × (36,864 + 2,097,152) = 49,082,368 B; radix cache off (mamba2_config):
    #   512 slots = 25,130,172,416 B (23.40 GiB); cell = 6 "*" layers × 2 × 128 × 2 × 2 = 6,144 B
    #   (40 GiB − 25,130,172,416) // 6,144 = 2,900,309 tokens (6,990,506 without the pool)
    f = fit(NEMOTRON3_NANO, available_kv_gib=40, version="0.5.6")
    assert state_term(f) == 512 * 49_082_368
    assert f.kv_pool_tokens == 2_900_309
    # its "E" (MoE) layers: configs/nemotron_h.py knows only M, * and - before 0.5.6
    with pytest.raises(
        SlotdiffError, match=r"not supported: SGLang serves this nemotron_h model from 0\.5\.6"
    ):
        fit(NEMOTRON3_NANO, available_kv_gib=40, version="0.5.5")


def test_falcon_h1_every_layer_attention_and_mamba() -> None:
    # transformers' FalconH1Config defaults: 32 layers, each attention (8 KV heads × 128) and
    # Mamba-2 (mamba_d_ssm 1024, 128 heads × 8, 1 group, state 256, kernel 4)
    #   TP 1: conv = (1024 + 2·1·256) × 3 = 4,608; temporal = 128·8·256 = 262,144;
    #   per request = 32 × (9,216 + 1,048,576) = 33,849,344 B; cell = 32 × 8 × 128 × 2 × 2 = 131,072
    #   (30 GiB − 512 × 33,849,344) // 131,072 = 113,536 tokens (245,760 without the pool)
    path = DEFAULTS / "falcon_h1.json"
    one = fit(path, available_kv_gib=30)
    assert state_term(one) == 512 * 33_849_344
    assert one.kv_pool_tokens == 113_536
    #   TP 2: 1 group % 2 → 2 groups: conv = (1024 + 2·2·256) / 2 × 3 = 3,072; temporal = 64·8·256;
    #   per request = 32 × (6,144 + 524,288) = 16,973,824 B; cell = 32 × 4 × 128 × 2 × 2 = 65,536
    #   (30 GiB − 512 × 16,973,824) // 65,536 = 358,912 tokens
    two = fit(path, available_kv_gib=30, tensor_parallel_size=2)
    assert state_term(two) == 512 * 16_973_824
    assert two.kv_pool_tokens == 358_912


def test_kimi_linear_kda_state_from_055(tmp_path: Path) -> None:
    # a Kimi-Linear config as the Hub writes it (linear_attn_config, 1-based layer lists):
    # 27 layers, MLA on 4, 8, ..., 24 (6), KDA elsewhere (21): 32 heads × 128, kernel 4
    #   conv = 3 × 32·128 × 3 = 36,864 × 2 B; temporal = 32·128·128 = 524,288 × 4 B
    #   per request = 21 × (73,728 + 2,097,152) = 45,588,480 B; 512 slots (radix cache forced off)
    #   cell = 6 × (512 + 64) × 2 B = 6,912; (30 GiB − 512 × 45,588,480) // 6,912 = 1,283,413
    cfg = json.loads((DEFAULTS / "kimi_linear.json").read_text())
    for key in ("layer_types", "linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim"):
        cfg.pop(key, None)
    cfg["linear_attn_config"] = {
        "num_heads": 32,
        "head_dim": 128,
        "short_conv_kernel_size": 4,
        "kda_layers": [i for i in range(1, 28) if i % 4],
        "full_attn_layers": [i for i in range(1, 28) if i % 4 == 0],
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    f = fit(path, available_kv_gib=30)
    assert state_term(f) == 512 * 45_588_480
    assert f.kv_pool_tokens == 1_283_413
    with pytest.raises(SlotdiffError, match=r"from 0\.5\.5, not 0\.5\.4"):
        fit(path, available_kv_gib=30, version="0.5.4")


@pytest.mark.parametrize(
    ("path", "version", "why"),
    [
        (DEFAULTS / "minimax.json", None, "no recurrent-state pool for minimax"),  # lightning attention
        (DEFAULTS / "jamba.json", None, "no recurrent-state pool for jamba"),  # Mamba-1
        (DEFAULTS / "zamba2.json", None, "no recurrent-state pool for zamba2"),
        (RAW / "Qwen__Qwen3.5-35B-A3B.json", None, "no recurrent-state pool for qwen3_5_moe_text"),
        (QWEN3_NEXT, "0.5.1", "from 0.5.2, not 0.5.1"),
        # transformers' flattened keys (linear_num_heads, layer_types): SGLang's KimiLinearConfig
        # reads the KDA layers and shapes from linear_attn_config only
        (DEFAULTS / "kimi_linear.json", None, "from linear_attn_config"),
        (QWEN3_NEXT, "0.5.9", "read only through 0.5.6"),
        # TP 32 over 16 key heads: 0.5.2-0.5.3 shard conv_dim as it is, 0.5.4+ add 16 groups
        (QWEN3_NEXT, "0.5.3", "shards 16 key heads over TP 32 without the extra groups"),
    ],
)
def test_hybrids_sglang_does_not_size_are_refused(path: Path, version: str | None, why: str) -> None:
    tp = 32 if "TP 32" in why else 1
    with pytest.raises(SlotdiffError, match=f"not supported: .*{why}"):
        fit(path, available_kv_gib=20, version=version, tensor_parallel_size=tp)


def test_groups_raised_to_tp_from_054() -> None:
    # Qwen3-Next at TP 32, 0.5.5: 16 k heads % 32 → 32 groups; conv = (4096 + 2·32·128) / 32 × 3
    # = 384 × 3 = 1,152; temporal = 32 / 32 × 128 × 128 = 16,384
    arch = load(QWEN3_NEXT).arch
    gdn = next(s for s in arch.layers if s.mixer == "linear_attention")
    assert construct(gdn.mixer).sglang_state(arch, gdn, 32) == (1152, 16384)


def test_uneven_tp_split_is_refused() -> None:
    # TP 3: 16 k heads % 3 → 3 groups, conv = 4096 + 2·3·128 = 4,864 channels, not a multiple of 3
    with pytest.raises(SlotdiffError, match="not supported: SGLang shards the convolution's channels"):
        fit(QWEN3_NEXT, tensor_parallel_size=3, available_kv_gib=20)


def test_cli_refusal_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["fit", str(DEFAULTS / "minimax.json"), "--engine", "sglang", "--gpu", "h100", "--gpus", "8"])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert (
        len(err.splitlines()) == 1
        and "model_type: not supported: SGLang sizes no recurrent-state pool" in err
    )


def test_cli_flags_reach_the_pool(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["fit", str(QWEN3_NEXT), "--engine", "sglang", "--gpu", "h100", "--gpus", "4"]
    main([*argv, "--available-kv-gib", "20", "--json"])
    base = json.loads(capsys.readouterr().out)["kv_pool_tokens"]
    main([*argv, "--available-kv-gib", "20", "--mamba-ssm-dtype", "bfloat16", "--json"])
    assert (base, json.loads(capsys.readouterr().out)["kv_pool_tokens"]) == (920_754, 920_310)
    main(
        [*argv, "--available-kv-gib", "20", "--disable-radix-cache", "--max-mamba-cache-size", "64", "--json"]
    )
    assert json.loads(capsys.readouterr().out)["kv_pool_tokens"] == 1_647_018
