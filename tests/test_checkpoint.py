"""The checkpoint beside a config, reconciled with its count (issue 26): header-only safetensors
files and index JSONs holding the tensors transformers' save_pretrained writes for the config
(built on the meta device: the expected names, shapes and totals come from transformers)."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import jsonschema
import pytest

from slotdiff.cli import main
from slotdiff.lint import engine
from slotdiff.lint.policy import Policy

from checkpoints import QUANTIZATION, quantize, stored_layout, write_checkpoint
from conftest import raw
from oracle import hf_oracle

pytest.importorskip("transformers")

LLAMA3 = "meta-llama/Meta-Llama-3-8B"
LLAMA3_PARAMS = 8_030_261_248  # DESIGN.md's anchor (the published count)


def _folder(tmp: Path, repo: str, edit: dict | None = None, **kw: object) -> Path:
    config = json.loads(raw(repo).read_text())
    layout = stored_layout(config)
    folder = tmp / repo.replace("/", "__")
    tensors = {name: ("BF16", shape) for name, shape in layout.items()}
    write_checkpoint(folder, tensors, **kw)
    (folder / "config.json").write_text(json.dumps({**config, **(edit or {})}))
    return folder


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    schema = json.loads((Path(__file__).parents[1] / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(data, schema)
    return data


def test_llama3_headers_match_and_upgrade_trust(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, LLAMA3, shards=4)
    data = _json(capsys, str(folder))
    ck = data["checkpoint"]
    assert ck["status"] == "match", ck
    assert ck["stored_params"] == LLAMA3_PARAMS
    assert ck["params_by_dtype"] == {"BF16": LLAMA3_PARAMS}
    assert ck["bytes_by_dtype"] == {"BF16": 2 * LLAMA3_PARAMS}
    assert (ck["shards"], ck["shards_read"], ck["layers"]) == (4, 4, 32)
    assert data["coverage"]["status"] == "verified by the checkpoint"


def test_one_layer_edit_differs_on_the_params_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path, LLAMA3, edit={"num_hidden_layers": 30})
    ck = _json(capsys, str(folder))["checkpoint"]
    assert ck["status"] == "differs" and ck["layers"] == 32
    slots = {d["slot"]: d for d in ck["differences"]}
    assert slots["layers"]["extra_layers"] == [30, 31] and ck["expected_layers"] == 30
    # two layers of Llama-3-8B attention: 2 × (2·4096² + 2·4096·1024) stored beyond the config's
    assert slots["attention"]["stored_params"] - slots["attention"]["expected_params"] == 2 * (
        2 * 4096 * 4096 + 2 * 4096 * 1024
    )
    assert data_status(capsys, folder) == "unverified"
    assert main([str(folder), "--width", "200"]) == 0
    params_line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("params "))
    assert "DIFFERS from the checkpoint" in params_line
    assert "holds 32 layers where the config describes 30" in params_line


def data_status(capsys: pytest.CaptureFixture[str], folder: Path) -> str:
    return _json(capsys, str(folder))["coverage"]["status"]


def test_index_json_alone_reads_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, LLAMA3, shards=2, headers=False)
    ck = _json(capsys, str(folder))["checkpoint"]
    assert (ck["status"], ck["source"], ck["shards_read"], ck["layers"]) == ("match", "index JSON", 0, 32)
    assert ck["stored_params"] is None and ck["bytes_by_dtype"] == {"total_size": 2 * LLAMA3_PARAMS}
    (folder / "config.json").write_text(
        json.dumps({**json.loads((folder / "config.json").read_text()), "tie_word_embeddings": True})
    )
    ck = _json(capsys, str(folder))["checkpoint"]
    assert ck["status"] == "differs" and [d["slot"] for d in ck["differences"]] == ["head"]


def test_tied_head_saved_twice_is_attributed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = json.loads(raw("meta-llama/Llama-3.2-1B").read_text())
    assert config["tie_word_embeddings"] is True
    layout = stored_layout(config)
    assert "lm_head.weight" not in layout  # save_pretrained writes a tied tensor once
    tensors = {n: ("BF16", s) for n, s in layout.items()}
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    write_checkpoint(tmp_path, tensors)
    (tmp_path / "config.json").write_text(json.dumps(config))
    ck = _json(capsys, str(tmp_path))["checkpoint"]
    assert ck["status"] == "match", ck
    assert ck["stored_params"] == 1_235_814_400  # Llama-3.2-1B's published count
    assert [a["what"] for a in ck["attributed"]] == ["a second copy of the tied embedding (lm_head)"]


def test_moe_per_expert_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, "Qwen/Qwen3-30B-A3B")
    ck = _json(capsys, str(folder))["checkpoint"]
    assert ck["status"] == "match", ck
    assert ck["experts"] == 128 and ck["layers"] == 48
    folder = _folder(tmp_path / "b", "Qwen/Qwen3-30B-A3B", edit={"num_experts": 64})
    ck = _json(capsys, str(folder))["checkpoint"]
    assert ck["status"] == "differs" and ck["experts"] == 128
    assert "experts" in {d["slot"] for d in ck["differences"]}


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\x01", "too small"),
        (struct.pack("<Q", 10**12), "too big"),
        (struct.pack("<Q", 5) + b"{nope", "not json"),
        (struct.pack("<Q", 2000) + b"{}", "truncated"),
    ],
)
def test_broken_header_is_unavailable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, why: str
) -> None:
    shutil.copy(raw(LLAMA3), tmp_path / "config.json")
    (tmp_path / "model.safetensors").write_bytes(content)
    data = _json(capsys, str(tmp_path))
    ck = data["checkpoint"]
    assert ck["status"] == "unavailable" and ck["why"].startswith("model.safetensors: not a readable")
    assert why in ck["why"].lower()
    assert data["coverage"]["status"] == "verified"  # the harness's level stands


@pytest.mark.parametrize("kind", ["fifo", "folder", "broken-link"])
def test_a_shard_that_is_no_regular_file_is_named_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A FIFO, folder or dangling link named like a shard is never opened (a FIFO would block)
    and the reason says what it is, not that there is no checkpoint."""
    shutil.copy(raw(LLAMA3), tmp_path / "config.json")
    shard = tmp_path / "model.safetensors"
    if kind == "fifo":
        os.mkfifo(shard)
    elif kind == "folder":
        shard.mkdir()
    else:
        shard.symlink_to(tmp_path / "gone.safetensors")
    words = {"fifo": "a FIFO", "folder": "a folder", "broken-link": "a broken link"}[kind]
    ck = _json(capsys, str(tmp_path))["checkpoint"]
    assert ck == {
        "status": "unavailable",
        "why": f"model.safetensors is not a regular file ({words}); nothing was read",
    }


def test_unreadable_checkpoint_is_said_in_text_and_markdown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminal and Markdown reports say a checkpoint beside the config was not compared,
    and why; a lone config says nothing about checkpoints."""
    shutil.copy(raw(LLAMA3), tmp_path / "config.json")
    (tmp_path / "model.safetensors").write_bytes(b"\x01")
    for style in ([], ["--markdown"]):
        assert main([str(tmp_path), "--width", "200", *style]) == 0
        out = capsys.readouterr().out
        assert "checkpoint not compared: model.safetensors: not a readable safetensors header" in out, out
    assert main([str(raw(LLAMA3)), "--width", "200"]) == 0
    assert "checkpoint not compared" not in capsys.readouterr().out


def test_no_weights_and_lone_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, LLAMA3)
    assert "checkpoint" not in _json(capsys, str(folder), "--no-weights")
    ck = _json(capsys, str(raw(LLAMA3)))["checkpoint"]
    assert ck == {"status": "unavailable", "why": "no safetensors file or index JSON beside the config"}


def _quantized(tmp: Path, repo: str, kind: str, quantization: dict | None) -> tuple[Path, int]:
    config = json.loads(raw(repo).read_text())
    if quantization is not None:
        config["quantization_config"] = quantization
    plain = {k: v for k, v in config.items() if k != "quantization_config"}
    layout = stored_layout(plain)
    total = hf_oracle.param_count(plain)["total"]  # transformers' own count (buffers apart)
    folder = tmp / kind
    write_checkpoint(folder, quantize(layout, kind), shards=3)
    (folder / "config.json").write_text(json.dumps(config))
    return folder, total


@pytest.mark.parametrize(
    ("repo", "kind", "same_bytes"),
    [
        ("deepseek-ai/DeepSeek-V3", "fp8", True),  # its own quantization_config: fp8, 128×128 blocks
        ("openai/gpt-oss-20b", "mxfp4", True),  # its own: mxfp4, router and attention in bf16
        ("meta-llama/Llama-3.2-1B", "gptq", False),  # g_idx: in int32 per input row, not priced
        ("meta-llama/Llama-3.2-1B", "awq", True),
        ("meta-llama/Llama-3.2-1B", "fbgemm", True),  # one fp32 scale per output row
        ("meta-llama/Llama-3.2-1B", "nvfp4", True),  # weight, per-16 scales, weight_scale_2, input_scale
        ("meta-llama/Llama-3.2-1B", "bnb4", False),  # nor bitsandbytes'
    ],
)
def test_quantized_layouts_reconcile_unpacked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], repo: str, kind: str, same_bytes: bool
) -> None:
    folder, total = _quantized(tmp_path, repo, kind, QUANTIZATION.get(kind))
    ck = _json(capsys, str(folder))["checkpoint"]
    assert ck["status"] == "match", ck
    assert ck["stored_params"] == total
    assert "quantization scales and zeros" in [a["what"] for a in ck["attributed"]]
    # the weights' bytes: every stored byte but those of attributed non-weights (DeepSeek's
    # e_score_correction_bias buffers, 58 layers × 256 in bf16)
    buffers = 58 * 256 * 2 if kind == "fp8" else 0
    assert ck["weight_bytes"]["stored"] == sum(ck["bytes_by_dtype"].values()) - buffers
    if same_bytes:  # slotdiff's weight bytes for the format equal the published layout's
        assert ck["weight_bytes"]["expected"] == ck["weight_bytes"]["stored"]


@pytest.mark.parametrize(
    ("edit", "key", "says"),
    [
        (
            {"num_hidden_layers": 15},
            "num_hidden_layers",
            "num_hidden_layers is 15 but the checkpoint holds 16 layers",
        ),
        ({"tie_word_embeddings": False}, "tie_word_embeddings", "stores no lm_head (a tied head)"),
        ({"attention_bias": True}, "attention_bias", "the checkpoint's attention differs"),
        ({"intermediate_size": 4096}, "intermediate_size", "the checkpoint's ffn differs"),
    ],
)
def test_lint_names_the_key_that_disagrees(tmp_path: Path, edit: dict, key: str, says: str) -> None:
    config = json.loads(raw("meta-llama/Llama-3.2-1B").read_text())
    write_checkpoint(tmp_path, {n: ("BF16", s) for n, s in stored_layout(config).items()})
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, **edit}, indent=2))
    run = engine.lint([str(path)], Policy(root=tmp_path))
    hits = [d for d in run.diagnostics if d.code == "SD117"]
    assert [d.key for d in hits] == [key] and says in hits[0].message, hits
    assert run.exit_code == 1
    path.write_text(json.dumps(config, indent=2))
    assert not [d for d in engine.lint([str(path)], Policy(root=tmp_path)).diagnostics if d.code == "SD117"]


def test_a_match_never_verifies_what_weights_do_not_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key slotdiff does not read may change KV or FLOPs, which no checkpoint shows: the count
    matches the weights, yet the answer stays unverified, with that reason."""
    folder = _folder(tmp_path, LLAMA3, edit={"attn_temperature_floor": 8192})
    data = _json(capsys, str(folder))
    assert data["checkpoint"]["status"] == "match"
    assert data["coverage"]["status"] == "unverified"
    assert data["coverage"]["reasons"] == [
        "keys slotdiff did not read, which may change the structure: attn_temperature_floor"
    ]
