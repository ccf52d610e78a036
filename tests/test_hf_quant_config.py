"""ModelOpt's separate hf_quant_config.json (NVIDIA's NVFP4/FP8 repos written by ModelOpt 0.29
and before): read beside a local config.json and from the test Hub on 127.0.0.1, merged as the
``quantization_config`` vLLM makes of it, and every broken file one line naming file and key.

The model is DeepSeek-V3's published config (tests/fixtures) shrunk to sizes worked by hand,
with NVIDIA's split: NVFP4 linears, ``lm_head`` and every layer's ``self_attn`` left in bf16.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from slotdiff.cli import main
from slotdiff.scan.engine import run_scan
from slotdiff.scan.report import to_dict
from test_scan import isolated, make_families, options
from test_scan import repo as scan_repo

from conftest import raw
from hubserver import Fault, HubServer, Repo, run_slotdiff

# DeepSeek-V3's config at small sizes; its fp8 quantization_config and auto_map dropped.
CONFIG: dict[str, Any] = {
    k: v
    for k, v in json.loads(raw("deepseek-ai/DeepSeek-V3").read_text(encoding="utf-8")).items()
    if k not in ("quantization_config", "auto_map")
}
CONFIG.update(
    hidden_size=256,
    num_attention_heads=4,
    num_key_value_heads=4,
    q_lora_rank=64,
    kv_lora_rank=32,
    qk_nope_head_dim=32,
    qk_rope_head_dim=16,
    v_head_dim=32,
    intermediate_size=512,
    moe_intermediate_size=128,
    n_routed_experts=4,
    num_experts_per_tok=2,
    n_group=1,
    topk_group=1,
    num_hidden_layers=3,
    first_k_dense_replace=1,
    vocab_size=1024,
    num_nextn_predict_layers=0,
)

# As nvidia/DeepSeek-R1-FP4's file reads (its layers' attention and the head in bf16).
SIDECAR: dict[str, Any] = {
    "producer": {"name": "modelopt", "version": "0.23.0"},
    "quantization": {
        "quant_algo": "NVFP4",
        "kv_cache_quant_algo": "FP8",
        "group_size": 16,
        "exclude_modules": [
            "lm_head",
            "model.layers.0.self_attn*",
            "model.layers.1.self_attn*",
            "model.layers.2.self_attn*",
        ],
    },
}

# By hand. bf16 (2 B a parameter) outside the NVFP4 linears:
#   table and head 1,024 × 256 × 2 = 524,288 B each; final norm 256 × 2 = 512 B;
#   per layer two norms 2 × 256 × 2 = 1,024 B, and MLA (excluded, bf16): q_a 64 × 256 = 16,384,
#   q_a norm 64, q_b 4·(32+16) × 64 = 12,288, kv_a (32+16) × 256 = 12,288, kv_a norm 32,
#   kv_b 4·(32+32) × 32 = 8,192, o 256 × 4·32 = 32,768: 82,016 parameters = 164,032 B;
#   the router of an MoE layer 4 × 256 × 2 = 2,048 B (e_score_correction_bias is a buffer).
# NVFP4: a rows × cols linear takes rows·cols/2 B of 4-bit values plus rows·cols/16 one-byte
# FP8 scales (one per 16 inputs):
#   dense MLP (layer 0): gate and up 512 × 256, down 256 × 512: each 65,536 + 8,192 = 73,728 B,
#   221,184 B in all; an expert (and the one shared expert, width 128 × 1): gate and up
#   128 × 256, down 256 × 128: each 16,384 + 2,048 = 18,432 B, 55,296 B an expert; an MoE layer
#   (layers 1, 2): 2,048 + 4 × 55,296 + 55,296 = 278,528 B.
# And per NVFP4 tensor two fp32 scalars (weight_scale_2, input_scale: 8 B): layer 0's dense MLP
#   3 tensors, each MoE layer (4 + 1) × 3 = 15: 33 tensors, 264 B.
# Total: 524,288 + 524,288 + 512 + 3 × (1,024 + 164,032) + 221,184 + 2 × 278,528 + 264 = 2,322,760 B.
NVFP4_BYTES = 2_322_760
# Without the file, every one of the 2,150,432 parameters in bf16: 524,288 + 256 + 3 × (512 +
# 82,016) + 3 × 131,072 + 2 × (1,024 + 5 × 98,304) = 2,150,432 parameters = 4,300,864 B.
BF16_BYTES = 4_300_864


def weights(data: dict[str, Any]) -> int | None:
    return data["cost"]["weights"]["bytes"]


def folder(tmp_path: Path, sidecar: Any, config: dict[str, Any] | None = None) -> Path:
    """A model folder: config.json and, unless ``sidecar`` is None, hf_quant_config.json
    (bytes written as they are, anything else as JSON)."""
    (tmp_path / "config.json").write_text(json.dumps(config or CONFIG), encoding="utf-8")
    if sidecar is not None:
        body = sidecar if isinstance(sidecar, bytes) else json.dumps(sidecar).encode()
        (tmp_path / "hf_quant_config.json").write_bytes(body)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--json"])
    out = capsys.readouterr()
    return code, out.out, out.err


def priced(capsys: pytest.CaptureFixture[str], path: Path) -> dict[str, Any]:
    code, out, err = run(capsys, str(path))
    assert code == 0, err
    return json.loads(out)


def test_a_local_folder_reads_the_file_beside_config_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = folder(tmp_path, SIDECAR)
    for path in (model, model / "config.json"):
        data = priced(capsys, path)
        assert weights(data) == NVFP4_BYTES
        assert data["cost"]["weights"]["format"] == "nvfp4"
        assert "hf_quant_config.json (ModelOpt 0.23.0, NVFP4)" in data["source"]["note"]


def test_without_the_file_the_weights_are_the_configs_dtype(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = priced(capsys, folder(tmp_path, None))
    assert weights(data) == BF16_BYTES and data["source"]["note"] is None


def test_a_quantization_config_in_config_json_wins_as_in_vllm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mxfp4 = {**CONFIG, "quantization_config": {"quant_method": "mxfp4"}}
    data = priced(capsys, folder(tmp_path, SIDECAR, mxfp4))
    assert data["cost"]["weights"]["format"] == "mxfp4" and data["source"]["note"] is None


def test_a_file_named_otherwise_is_not_a_model_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = folder(tmp_path, SIDECAR)
    other = model / "other.json"
    other.write_text(json.dumps(CONFIG), encoding="utf-8")
    assert weights(priced(capsys, other)) == BF16_BYTES


@pytest.mark.parametrize(
    ("quantization", "fmt", "note"),
    [
        ({"quant_algo": "FP8", "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]}, "fp8", "FP8"),
        ({"quant_algo": None, "kv_cache_quant_algo": "FP8"}, "bf16", "quantizes no weights"),
        (
            {"quant_algo": "MIXED_PRECISION", "quantized_layers": {}},
            "quantized-modelopt-mixed_precision",
            "MIXED",
        ),
    ],
)
def test_other_algorithms_as_the_modelopt_path_reads_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], quantization: dict[str, Any], fmt: str, note: str
) -> None:
    data = priced(capsys, folder(tmp_path, {**SIDECAR, "quantization": quantization}))
    assert data["cost"]["weights"]["format"] == fmt and note in data["source"]["note"]
    if fmt.startswith("quantized-"):  # a mixed export is refused, not priced as one format
        assert weights(data) is None
    if fmt == "bf16":
        assert weights(data) == BF16_BYTES


def test_a_format_not_modelled_gives_no_decode_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """W4A8_AWQ (vLLM refuses it too): weight bytes unknown, so the decode step, which still
    needs bytes, reads them as bf16 and says so: an estimate (≈), never a bound (≥)."""
    path = folder(
        tmp_path, {**SIDECAR, "quantization": {**SIDECAR["quantization"], "quant_algo": "W4A8_AWQ"}}
    )
    data = priced(capsys, path)
    assert weights(data) is None
    assert any(a.startswith("weight bytes unknown") for a in data["cost"]["assumptions"])
    assert main([str(path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("decode on"))
    assert "weights read as bf16" in line and "≈" in line and "≥" not in line


@pytest.mark.parametrize("maker", ["someone", "ModelOpt"])  # vLLM matches "modelopt" exactly
def test_another_producers_file_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], maker: str
) -> None:
    data = priced(capsys, folder(tmp_path, {**SIDECAR, "producer": {"name": maker}}))
    assert weights(data) == BF16_BYTES and "not ModelOpt" in data["source"]["note"]


BROKEN: list[tuple[Any, str]] = [
    (b'{"producer": {"name": "modelopt"}, ', "hf_quant_config.json:1:"),
    (b"\xff\xfe{}", "hf_quant_config.json:"),
    ([1, 2], "top level is an array"),
    ({"producer": "modelopt", "quantization": {}}, "hf_quant_config.json: producer: expected an object"),
    ({"producer": {"name": 5}}, "producer.name: expected a string"),
    ({"producer": {"name": "modelopt"}}, "quantization: missing"),
    ({**SIDECAR, "quantization": ["NVFP4"]}, "quantization: expected an object, got an array"),
    ({**SIDECAR, "quantization": {"quant_algo": 4}}, "quantization.quant_algo: expected a string"),
    ({**SIDECAR, "quantization": {"quant_algo": "NVFP4", "group_size": "16"}}, "quantization.group_size"),
    ({**SIDECAR, "quantization": {"quant_algo": "NVFP4", "group_size": 0}}, "quantization.group_size"),
    ({**SIDECAR, "quantization": {"quant_algo": "NVFP4", "group_size": 2**41}}, "1..1,099,511,627,776"),
    ({**SIDECAR, "quantization": {"quant_algo": "NVFP4", "group_size": True}}, "quantization.group_size"),
    (b'{"producer": {"name": "modelopt"}, "quantization": {"group_size": 1e999}}', "got inf"),
    ({**SIDECAR, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": 8}}, "kv_cache_quant_algo"),
    ({**SIDECAR, "quantization": {"quant_algo": "NVFP4", "exclude_modules": "lm_head"}}, "exclude_modules:"),
    ({**SIDECAR, "quantization": {"quant_algo": "NVFP4", "exclude_modules": [None]}}, "exclude_modules[0]"),
    ({**SIDECAR, "quantization": {"quant_algo": "NVFP4", "exclude_modules": ["re:(a+)+"]}}, "backtracking"),
    (b"[" * 100 + b"]" * 100, "nesting"),
]


@pytest.mark.parametrize(("body", "needle"), BROKEN)
def test_a_broken_file_is_one_line_naming_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: Any, needle: str
) -> None:
    code, out, err = run(capsys, str(folder(tmp_path, body)))
    assert code == 2 and out == "", (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(tmp_path / "hf_quant_config.json") in lines[0] and needle in lines[0], lines[0]


def test_a_folder_or_fifo_in_its_place_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = folder(tmp_path, None)
    (model / "hf_quant_config.json").mkdir()
    code, _, err = run(capsys, str(model))
    assert code == 2 and "hf_quant_config.json: not a regular file" in err
    (model / "hf_quant_config.json").rmdir()
    os.mkfifo(model / "hf_quant_config.json")
    code, _, err = run(capsys, str(model))
    assert code == 2 and "hf_quant_config.json: not a regular file (a FIFO" in err


# ------------------------------------------------------------------- the test Hub on 127.0.0.1


BAD_GROUP = {"quant_algo": "NVFP4", "group_size": -1}
BAD = {**SIDECAR, "quantization": BAD_GROUP}


def repos() -> list[Repo]:
    side = "hf_quant_config.json"
    return [
        Repo("nvidia/tiny-V3-FP4", files={"config.json": CONFIG, side: SIDECAR}),
        Repo("acme/plain", files={"config.json": CONFIG}),
        Repo("acme/broken", files={"config.json": CONFIG, side: b'{"producer": {"name": "modelopt"'}),
        Repo("acme/badgroup", files={"config.json": CONFIG, side: {**SIDECAR, "quantization": BAD_GROUP}}),
        Repo(
            "acme/huge",
            files={"config.json": CONFIG, side: b"{}"},
            faults=[Fault.huge(5 * 1024 * 1024, files=(side,))],
        ),
        Repo(
            "acme/stall",
            files={"config.json": CONFIG, side: SIDECAR},
            faults=[Fault.delay(25, times=None, files=(side,))],
        ),
        Repo(
            "acme/flaky",
            files={"config.json": CONFIG, side: SIDECAR},
            faults=[Fault.server_error(500, times=None, files=(side,))],
        ),
    ]


@pytest.fixture(scope="module")
def hub():  # type: ignore[no-untyped-def]
    with HubServer(repos()) as server:
        yield server


def ok(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_hub_serves_the_file_and_the_offline_run_finds_it_in_the_cache(
    hub: HubServer, tmp_path: Path
) -> None:
    data = ok(run_slotdiff(hub, tmp_path, "nvidia/tiny-V3-FP4"))
    assert data["source"]["origin"] == "hub" and weights(data) == NVFP4_BYTES
    assert "quantization_config read from hf_quant_config.json" in data["source"]["note"]
    asked = hub.requests(repo_id="nvidia/tiny-V3-FP4", filename="hf_quant_config.json")
    commit = hub.repos["nvidia/tiny-V3-FP4"].sha("main")
    assert asked and all(commit in e.path for e in asked)  # pinned to config.json's commit
    hub.clear_log()
    cached = ok(run_slotdiff(hub, tmp_path, "nvidia/tiny-V3-FP4", HF_HUB_OFFLINE="1"))
    assert cached["source"]["origin"] == "hf-cache" and weights(cached) == NVFP4_BYTES
    assert "hf_quant_config.json" in cached["source"]["note"]
    assert hub.count(repo_id="nvidia/tiny-V3-FP4") == 0


def test_a_repo_without_the_file_is_priced_as_before_and_says_nothing(hub: HubServer, tmp_path: Path) -> None:
    data = ok(run_slotdiff(hub, tmp_path, "acme/plain"))
    assert weights(data) == BF16_BYTES and data["source"]["note"] is None
    assert hub.statuses(repo_id="acme/plain", filename="hf_quant_config.json") == [404]
    offline = ok(run_slotdiff(hub, tmp_path, "acme/plain", HF_HUB_OFFLINE="1"))
    assert weights(offline) == BF16_BYTES


@pytest.mark.parametrize(
    ("repo", "needle"),
    [
        ("acme/broken", "acme/broken/hf_quant_config.json:1:"),
        ("acme/badgroup", "acme/badgroup/hf_quant_config.json: quantization.group_size: expected an integer"),
        ("acme/huge", "acme/huge/hf_quant_config.json: file is 5,242,880 bytes, over the"),
    ],
)
def test_a_broken_file_on_the_hub_is_one_line(hub: HubServer, tmp_path: Path, repo: str, needle: str) -> None:
    out = run_slotdiff(hub, tmp_path, repo)
    assert out.returncode == 2 and out.stdout == "", out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr and needle in lines[0], out.stderr


def test_a_hub_failing_on_the_file_leaves_the_weights_to_config_json_and_says_so(
    hub: HubServer, tmp_path: Path
) -> None:
    data = ok(run_slotdiff(hub, tmp_path, "acme/flaky"))
    assert weights(data) == BF16_BYTES
    assert "hf_quant_config.json could not be read (the Hub answered HTTP 500)" in data["source"]["note"]


# ------------------------------------------------------------------------------------ the scan


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("scan-hfq")
    make_families(tmp / "families")
    packed = {"BF16": 1_000, "U8": 2_000, "F8_E4M3": 300, "F32": 10}  # what the listing says
    side = "hf_quant_config.json"
    when = scan_repo("acme/any", CONFIG, hours=1).created_at

    def packed_repo(repo_id: str, body: Any, *faults: Fault) -> Repo:
        files = {"config.json": CONFIG, side: body}
        return Repo(repo_id, files=files, created_at=when, safetensors=packed, faults=list(faults))

    repos = [
        packed_repo("nvidia/tiny-V3-FP4", SIDECAR),
        packed_repo("acme/bad-FP4", BAD),
        packed_repo("acme/badjson-FP4", b'{"producer": {"name": "modelopt"'),
        Repo(  # quantization_config null states none: the file is read, as vLLM and the CLI do
            "acme/null-FP4",
            files={"config.json": {**CONFIG, "quantization_config": None}, side: SIDECAR},
            created_at=when,
            safetensors=packed,
        ),
        packed_repo("acme/flaky-FP4", SIDECAR, Fault.server_error(500, times=None, files=(side,))),
        # the same config.json bytes, a bf16 checkpoint: the file is not asked for
        scan_repo("acme/tiny-V3", CONFIG, hours=2, safetensors={"BF16": 2_150_432}),
        scan_repo("acme/tiny-V3-fp8", CONFIG, hours=3, safetensors={"F8_E4M3": 2_000, "BF16": 100}),
    ]
    with pytest.MonkeyPatch.context() as mp, isolated(mp, tmp), HubServer(repos) as server:
        result = run_scan(options(server, tmp, state=None))
        yield {"data": to_dict(result), "hub": server}


def test_the_scan_asks_where_the_listing_says_the_checkpoint_is_quantized(scanned: dict[str, Any]) -> None:
    models = {m["repo_id"]: m for m in scanned["data"]["models"]}
    fp4 = models["nvidia/tiny-V3-FP4"]["figures"]
    assert fp4["weight_bytes"] == NVFP4_BYTES and fp4["quantized"]
    assert "quantization_config read from hf_quant_config.json" in fp4["source_note"]
    assert models["nvidia/tiny-V3-FP4"]["checkpoint"]["status"] == "not compared"  # packed counts
    plain = models["acme/tiny-V3"]["figures"]  # same config bytes, not served the FP4 analysis
    assert plain["weight_bytes"] == BF16_BYTES and plain["source_note"] is None
    assert models["acme/tiny-V3"]["checkpoint"]["status"] == "match"
    fp8 = models["acme/tiny-V3-fp8"]["figures"]  # asked, 404: priced as before, nothing said
    assert fp8["weight_bytes"] == BF16_BYTES and fp8["source_note"] is None
    hub = scanned["hub"]
    asked = {e.repo_id: e.status for e in hub.requests(filename="hf_quant_config.json")}
    assert asked == {
        "nvidia/tiny-V3-FP4": 200,
        "acme/tiny-V3-fp8": 404,
        "acme/bad-FP4": 200,
        "acme/badjson-FP4": 200,
        "acme/null-FP4": 200,
        "acme/flaky-FP4": 500,
    }
    bad = models["acme/bad-FP4"]  # a broken file: the model is unreadable as published, and says why
    assert (bad["verdict"], bad["reason"]) == ("skipped", "unreadable")
    assert bad["detail"].startswith("hf_quant_config.json: quantization.group_size: expected an integer")
    assert models["acme/null-FP4"]["figures"]["weight_bytes"] == NVFP4_BYTES
    torn = models["acme/badjson-FP4"]  # not JSON: named too (its error's source ends in :line:col)
    assert (torn["verdict"], torn["reason"]) == ("skipped", "unreadable")
    assert torn["detail"].startswith("hf_quant_config.json: ")
    flaky = models["acme/flaky-FP4"]["figures"]  # the Hub failing on it: config.json's weights, said so
    assert flaky["weight_bytes"] == BF16_BYTES and "could not be read" in flaky["source_note"]
    schema = json.loads((Path(__file__).parents[1] / "schemas" / "scan-report.schema.json").read_text())
    jsonschema.validate(json.loads(json.dumps(scanned["data"])), schema)


def test_a_stalled_file_ends_within_the_hub_deadline(hub: HubServer, tmp_path: Path) -> None:
    started = time.monotonic()
    data = ok(run_slotdiff(hub, tmp_path, "acme/stall", SLOTDIFF_HUB_DEADLINE="3"))
    assert time.monotonic() - started < 15  # the stall is 25 s
    assert weights(data) == BF16_BYTES and "hf_quant_config.json could not be read" in data["source"]["note"]
