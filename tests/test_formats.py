"""Number formats (seed 10): the facts in schemas/formats.json and what they do to a model.

The facts are checked twice: against the definitions (IEEE 754 layout, the OCP FP8 and MX
specs) worked out here from exponent and mantissa widths, and against torch.finfo. The
model-level figures are hand-worked from Llama-3-8B's published sizes.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from slotdiff.analysis.analyze import load
from slotdiff.core.resources import data_dir
from slotdiff.cost.kv import kv_cost
from slotdiff.cost.workload import Workload
from slotdiff.deploy.formats import COMPARED, format_facts, formats_report
from slotdiff.schema.precision import formats, storage_bits

from conftest import raw

KiB, GiB = 1024, 1024**3
IEEE_LIKE = ("float64", "float32", "tf32", "bfloat16", "float16", "float8_e5m2")


def test_formats_file_is_valid() -> None:
    schemas = data_dir("schemas")
    schema = json.loads((schemas / "formats.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    data = json.loads((schemas / "formats.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(data)
    for name, entry in data["dtypes"].items():
        assert entry.get("source") in data["sources"], name
    assert data["training_state"]["source"] in data["sources"]


@pytest.mark.parametrize("dtype", IEEE_LIKE)
def test_ieee_like_facts_follow_from_the_layout(dtype: str) -> None:
    # IEEE 754 layout: bias = 2^(e-1) - 1; the top exponent code is inf/NaN, so the largest
    # finite is (2 - 2^-m) * 2^(2^e - 2 - bias); smallest normal 2^(1 - bias); smallest
    # subnormal 2^(1 - bias - m); epsilon (gap above 1) 2^-m.
    f = format_facts(dtype)
    e, m = f.exponent_bits, f.mantissa_bits
    bias = 2 ** (e - 1) - 1
    assert formats()["dtypes"][dtype]["exponent_bias"] == bias
    assert f.max == (2 - 2.0**-m) * 2.0 ** (2**e - 2 - bias)
    assert f.min_normal == 2.0 ** (1 - bias)
    assert f.epsilon == 2.0**-m
    if f.min_subnormal is not None:
        assert f.min_subnormal == 2.0 ** (1 - bias - m)


def test_seed_10_bf16_and_the_8_bit_formats() -> None:
    bf16 = format_facts("bfloat16")
    assert (bf16.exponent_bits, bf16.mantissa_bits) == (8, 7)
    assert bf16.min_normal == format_facts("float32").min_normal  # "BF16 has fp32's range"
    assert bf16.epsilon == 2**-7 and bf16.unit_roundoff == 2**-8  # seed 10: 2^-7 gap, 2^-8 roundoff
    assert format_facts("float16").max == 65504
    # OCP OFP8: E4M3 gives up infinities, only S.1111.111 is NaN: max = 1.75 * 2^(15 - 7) = 448.
    e4m3 = format_facts("float8_e4m3fn")
    assert (e4m3.max, e4m3.min_normal, e4m3.min_subnormal, e4m3.epsilon) == (448, 2**-6, 2**-9, 2**-3)
    assert format_facts("float8_e5m2").max == 57344  # 1.75 * 2^(30 - 15)
    # OCP MX: E2M1 has no inf/NaN: max = 1.5 * 2^(3 - 1) = 6, min normal 2^0, subnormal 0.5.
    fp4 = format_facts("mxfp4")
    assert (fp4.max, fp4.min_normal, fp4.min_subnormal) == (6, 1, 0.5)
    assert (format_facts("int8").max, formats()["dtypes"]["int8"]["min"]) == (127, -128)


def test_block_scale_overhead() -> None:
    assert storage_bits("mxfp4") == 4 + 8 / 32  # one E8M0 per 32 elements = 4.25 bits
    assert storage_bits("nvfp4") == 4 + 8 / 16  # one E4M3 per 16 elements = 4.5 bits
    assert storage_bits("float8_e4m3fn") == 8 and storage_bits("bfloat16") == 16


def test_facts_agree_with_torch() -> None:
    import torch  # in the test extra: the format facts are checked against torch.finfo

    pairs = {
        "float64": torch.float64,
        "float32": torch.float32,
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
        "float8_e4m3fn": torch.float8_e4m3fn,
        "float8_e5m2": torch.float8_e5m2,
    }
    for name, dt in pairs.items():
        fi, f = torch.finfo(dt), format_facts(name)
        assert (f.bits, f.max, f.min_normal, f.epsilon) == (fi.bits, fi.max, fi.smallest_normal, fi.eps), name
    assert torch.iinfo(torch.int8).max == format_facts("int8").max


def test_compared_formats_are_all_in_the_data_file() -> None:
    assert set(COMPARED) <= set(formats()["dtypes"])
    assert {"float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "int4", "mxfp4"} <= set(
        COMPARED
    )


def test_kv_in_mxfp4_carries_its_scales() -> None:
    # Llama-3-8B: 2 (K and V) * 32 layers * 8 KV heads * 128 = 65,536 elements per token.
    # bf16: 2 B each = 131,072 B = 128 KiB. MXFP4: 4.25 bits = 0.53125 B each = 34,816 B = 34 KiB.
    arch = load(raw("meta-llama/Meta-Llama-3-8B")).arch
    assert kv_cost(arch, 1, "bfloat16").bytes_per_token == 128 * KiB
    assert kv_cost(arch, 1, "mxfp4").bytes_per_token == 34_816
    assert kv_cost(arch, 1, "float8_e4m3fn").bytes_per_token == 64 * KiB


def test_llama3_8b_in_each_format() -> None:
    r = formats_report(load(raw("meta-llama/Meta-Llama-3-8B")).arch, Workload(context=8192))
    by = {row.facts.id: row for row in r.rows}
    # 8,030,261,248 params; fp32 4 B each = 32.12 GB, bf16 2 B = 16.06 GB (seed 01).
    assert by["float32"].weight_bytes == 8_030_261_248 * 4
    assert by["bfloat16"].weight_bytes == 8_030_261_248 * 2
    # fp8: linears (6,979,321,856 params: 32 layers * (2*4096*4096 + 2*4096*1024 + 3*4096*14336))
    # at 1 B plus one fp32 scale per 128x128 tile; embedding and head (2 * 128256 * 4096 =
    # 1,050,673,152) and norms (65 * 4096 = 266,240) stay bf16.
    linears = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    assert linears == 6_979_321_856
    tiles = 32 * (2 * 32 * 32 + 2 * 8 * 32 + 3 * 112 * 32)  # ceil(out/128) * ceil(in/128) per matrix
    bf16_rest = (2 * 128256 * 4096 + 65 * 4096) * 2
    assert by["float8_e4m3fn"].weight_bytes == linears + tiles * 4 + bf16_rest
    # MXFP4: 4.25 bits per linear weight (every width divides by 32).
    assert by["mxfp4"].weight_bytes == linears * 17 // 32 + bf16_rest
    # KV per token scales with the element: 256 / 128 / 64 / 32 KiB for 32 / 16 / 8 / 4 bits.
    assert [by[d].kv_bytes_per_token // KiB for d in ("float32", "bfloat16", "float8_e5m2", "int4")] == [
        256,
        128,
        64,
        32,
    ]
    # Batch-1 decode is memory-bound, so fewer weight bytes mean a shorter step.
    steps = [by[d].decode_ms for d in ("float32", "bfloat16", "float8_e4m3fn", "mxfp4")]
    assert steps == sorted(steps, reverse=True)
    assert (by["bfloat16"].peak, by["float8_e4m3fn"].peak) == (989.4e12, 1979e12)  # H100 dense peaks


def test_training_state_seed_10() -> None:
    # Seed 10: mixed-precision Adam holds 16 B/param, "8B full training: 128 GB".
    r = formats_report(load(raw("meta-llama/Meta-Llama-3-8B")).arch)
    assert r.training_state_bytes_per_param == 2 + 2 + 4 + 4 + 4
    assert round(r.training_state_bytes / 1e9) == 128
