"""Weight bytes in quantized formats (hand arithmetic from the format specs), and totals
against the parameter counts the models' owners publish (tests/fixtures/corpus/OFFICIAL.tsv).
"""

from __future__ import annotations

import csv
import json
from decimal import Decimal

import pytest

from slotdiff.analysis.analyze import load
from slotdiff.cost.params import count
from slotdiff.cost.price import cost_of

from conftest import CORPUS, raw


def test_gpt_oss_20b_mxfp4_weights() -> None:
    # quantization_config: mxfp4, modules_to_not_convert = attention, router, embeddings,
    # lm_head, so only the routed experts are MXFP4: 24 layers × 32 experts × (gate_up
    # 2·2880·2880 + down 2880·2880) = 19,110,297,600 weights at 4 bits + one 8-bit E8M0
    # scale per 32 (OCP MX v1.0) = 4.25 bits → 10,152,345,600 bytes. The other
    # 20,914,757,184 − 19,110,297,600 = 1,804,459,584 parameters are bf16 (2 bytes).
    c = cost_of(load(raw("openai/gpt-oss-20b")).arch)
    experts = 24 * 32 * 3 * 2880 * 2880
    assert experts == 19_110_297_600
    assert c.weights.bytes == experts * 17 // 32 + (20_914_757_184 - experts) * 2 == 13_761_264_768


def test_awq_int4_weights() -> None:
    # Llama-3-8B with an AWQ config (4 bits, group 128, zero point): every decoder linear is
    # int4 plus, per 128 weights, an fp16 scale and a 4-bit zero (20 bits); per layer the
    # linears hold 2·4096² + 2·4096·1024 + 3·4096·14336 = 218,103,808 weights.
    data = json.loads(raw("meta-llama/Meta-Llama-3-8B").read_text())
    data["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    c = cost_of(load(data).arch)
    linears = 32 * 218_103_808
    rest = 8_030_261_248 - linears  # embeddings, head and norms stay bf16
    assert c.weights.bytes == linears // 2 + linears // 128 * 20 // 8 + rest * 2 == 5_727_854_592
    assert c.weights.format == "int4-awq"


def test_dtype_override_reprices_weights() -> None:
    arch = load(raw("meta-llama/Meta-Llama-3-8B")).arch
    from slotdiff.cost.workload import Workload

    fp32 = cost_of(arch, Workload(weight_dtype="fp32")).weights.bytes
    assert fp32 == 8_030_261_248 * 4


def _stated(text: str) -> tuple[float, float] | None:
    """An owner's figure ('30.5B', '~109B', '1T') and half a unit of its last digit."""
    text = text.strip().lstrip("~").split(" ")[0]
    if not text:
        return None
    scale = {"M": 1e6, "B": 1e9, "T": 1e12}[text[-1]]
    value = Decimal(text[:-1])
    half_unit = Decimal(1).scaleb(value.as_tuple().exponent) / 2
    return float(value) * scale, float(half_unit) * scale


CARDS = list(csv.DictReader((CORPUS / "OFFICIAL.tsv").read_text("utf-8").splitlines(), delimiter="\t"))
IN_CORPUS = [r for r in CARDS if raw(r["hf_id"]).exists() and r["total_params"].strip()]

# Owners who count the embedding table among "activated" parameters; most do not (it is a
# lookup). Qwen's "A3B" names round a count no convention brings to 3.0B (Qwen3-Next: 3.56B
# without the embedding, 3.88B with it), so those two are not compared.
ACTIVE_WITH_EMBEDDING = {"Qwen/Qwen3-30B-A3B", "mistralai/Mixtral-8x7B-v0.1"}
ACTIVE_NOT_COMPARED = {"Qwen/Qwen3-Next-80B-A3B-Thinking", "Qwen/Qwen3.5-35B-A3B"}


@pytest.mark.parametrize("row", IN_CORPUS, ids=lambda r: r["hf_id"])
def test_totals_match_the_owners_figures(row: dict) -> None:
    # Tolerance: half a unit of the figure's last digit ("30.5B" ± 0.05B), or 1 % for the
    # owners' round numbers (GLM-4.5's "355B": transformers counts 352.8B; with its MTP
    # layer 356.8B).
    c = count(load(raw(row["hf_id"])).arch)
    value, half = _stated(row["total_params"])
    assert abs(c.total - value) <= max(half, 0.01 * value)


@pytest.mark.parametrize(
    "row",
    [r for r in IN_CORPUS if r["active_params"].strip() and r["hf_id"] not in ACTIVE_NOT_COMPARED],
    ids=lambda r: r["hf_id"],
)
def test_active_matches_the_owners_figures(row: dict) -> None:
    c = count(load(raw(row["hf_id"])).arch)
    ours = c.active if row["hf_id"] in ACTIVE_WITH_EMBEDDING else c.active_without_embedding
    value, half = _stated(row["active_params"])
    assert abs(ours - value) <= max(half, 0.03 * value)
