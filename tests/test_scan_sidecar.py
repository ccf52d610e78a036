"""The scan's "unchanged" check covers ModelOpt's hf_quant_config.json where the scan reads it
beside config.json: a repo that switches its quantization scheme in that file alone (config.json
byte for byte the same, so the same etag and sha256) is priced again, not kept at old figures.

Against the fake Hub on 127.0.0.1 (tests/hubserver.py). The model and the by-hand weight bytes
are tests/test_hf_quant_config.py's (DeepSeek-V3's config at small sizes, NVIDIA's NVFP4 split).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema

from slotdiff.scan.engine import run_scan
from slotdiff.scan.verdict import Record
from test_hf_quant_config import BF16_BYTES, CONFIG, NVFP4_BYTES, SIDECAR
from test_scan import NOW, make_families, options

from hubserver import HubServer, Repo

ID = "nvidia/tiny-V3-FP4"
SIDE = "hf_quant_config.json"
PACKED = {"BF16": 1_000, "U8": 2_000, "F8_E4M3": 300, "F32": 10}  # what the listing says: quantized
ROOT = Path(__file__).resolve().parent.parent

FIRST = json.dumps(SIDECAR).encode()
# The same scheme with the attention linears quantized too (only lm_head left in bf16).
ALL_ATTENTION = {**SIDECAR, "quantization": {**SIDECAR["quantization"], "exclude_modules": ["lm_head"]}}
SECOND = json.dumps(ALL_ATTENTION).encode()
# By hand, from test_hf_quant_config's NVFP4_BYTES = 2,322,760 B (attention in bf16): a layer's
# MLA linears hold q_a 64 × 256 = 16,384, q_b 4·(32+16) × 64 = 12,288, kv_a (32+16) × 256 =
# 12,288, kv_b 4·(32+32) × 32 = 8,192, o 256 × 4·32 = 32,768: 81,920 parameters, in bf16
# 163,840 B; in NVFP4 81,920 / 2 + 81,920 / 16 = 40,960 + 5,120 = 46,080 B, plus 8 B of fp32
# scalars for each of its 5 tensors: 46,120 B (its norms, 96 parameters, stay bf16 either way).
# Three layers: 2,322,760 − 3 × (163,840 − 46,120) = 1,969,600 B.
ALL_ATTENTION_BYTES = 1_969_600


def hub_repo(sidecar: bytes | None, readme: str = "# tiny\n") -> Repo:
    files: dict[str, Any] = {"config.json": CONFIG, "README.md": readme}
    if sidecar is not None:
        files[SIDE] = sidecar
    return Repo(ID, files=files, created_at=NOW, safetensors=PACKED)


def scan(hub: HubServer, tmp: Path) -> Record:
    hub.clear_log()
    (rec,) = run_scan(options(hub, tmp, cards=False)).records
    return rec


def asked(hub: HubServer) -> list[tuple[str, str | None, int | None]]:
    return [(e.method, e.filename, e.status) for e in hub.log if e.repo_id == ID]


def state_entry(tmp: Path) -> dict[str, Any]:
    state = json.loads((tmp / "state.json").read_text(encoding="utf-8"))
    schema = json.loads((ROOT / "schemas" / "scan-state.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(state, schema)
    return state["models"][ID]


def test_a_changed_sidecar_behind_an_unchanged_etag_is_priced_again(tmp_path: Path) -> None:
    make_families(tmp_path / "families")
    with HubServer([hub_repo(FIRST)]) as hub:
        rec = scan(hub, tmp_path)
        assert rec.figures is not None and rec.figures["weight_bytes"] == NVFP4_BYTES
        assert state_entry(tmp_path)["quant_file"] == hashlib.sha256(FIRST).hexdigest()

        # A new commit whose config.json is the same bytes (same etag), its sidecar another scheme.
        hub.add(hub_repo(SECOND))
        rec = scan(hub, tmp_path)
        assert rec.verdict != "unchanged", rec.detail
        assert rec.figures is not None and rec.figures["weight_bytes"] == ALL_ATTENTION_BYTES
        assert asked(hub) == [("HEAD", "config.json", 200), ("GET", SIDE, 200), ("GET", "config.json", 200)]
        assert state_entry(tmp_path)["quant_file"] == hashlib.sha256(SECOND).hexdigest()

        # A new commit that changes neither file: unchanged, without downloading config.json.
        hub.add(hub_repo(SECOND, readme="# tiny, new card\n"))
        rec = scan(hub, tmp_path)
        assert (rec.verdict, rec.detail) == ("unchanged", f"config.json unchanged (same etag), {SIDE} too")
        assert asked(hub) == [("HEAD", "config.json", 200), ("GET", SIDE, 200)]

        # The sidecar removed (the ordinary 404): config.json's own weights again, in bf16.
        hub.add(hub_repo(None))
        rec = scan(hub, tmp_path)
        assert rec.verdict != "unchanged", rec.detail
        assert rec.figures is not None and rec.figures["weight_bytes"] == BF16_BYTES
        assert state_entry(tmp_path)["quant_file"] == "absent"

        # And put back: seen again (the 404 was recorded, not "nothing read").
        hub.add(hub_repo(FIRST))
        rec = scan(hub, tmp_path)
        assert rec.figures is not None and rec.figures["weight_bytes"] == NVFP4_BYTES


def test_a_changed_sidecar_behind_an_unchanged_sha256_is_priced_again(tmp_path: Path) -> None:
    """A state entry without an etag (a config.json read from the HF cache records none): the
    config is downloaded and its sha256 matches, yet the sidecar beside it changed."""
    make_families(tmp_path / "families")
    with HubServer([hub_repo(FIRST)]) as hub:
        scan(hub, tmp_path)
        state = json.loads((tmp_path / "state.json").read_text(encoding="utf-8"))
        state["models"][ID]["etag"] = None
        (tmp_path / "state.json").write_text(json.dumps(state), encoding="utf-8")

        hub.add(hub_repo(SECOND))
        rec = scan(hub, tmp_path)
        assert rec.verdict != "unchanged", rec.detail
        assert rec.figures is not None and rec.figures["weight_bytes"] == ALL_ATTENTION_BYTES

        hub.add(hub_repo(SECOND, readme="# tiny, new card\n"))
        state = json.loads((tmp_path / "state.json").read_text(encoding="utf-8"))
        state["models"][ID]["etag"] = None
        (tmp_path / "state.json").write_text(json.dumps(state), encoding="utf-8")
        rec = scan(hub, tmp_path)
        assert (rec.verdict, rec.detail) == ("unchanged", f"config.json unchanged (same sha256), {SIDE} too")


def test_a_bf16_listing_never_asks_for_the_sidecar_on_an_unchanged_etag(tmp_path: Path) -> None:
    """The common case keeps its cost: config.json alone is read, one HEAD when it is unchanged."""
    make_families(tmp_path / "families")
    plain = {"BF16": 2_150_432}  # test_hf_quant_config's parameter count, all bf16
    with HubServer([Repo(ID, files={"config.json": CONFIG}, created_at=NOW, safetensors=plain)]) as hub:
        rec = scan(hub, tmp_path)
        assert rec.figures is not None and rec.figures["weight_bytes"] == BF16_BYTES
        assert state_entry(tmp_path)["quant_file"] is None
        files = {"config.json": CONFIG, "README.md": "x"}
        hub.add(Repo(ID, files=files, created_at=NOW, safetensors=plain))
        rec = scan(hub, tmp_path)
        assert (rec.verdict, rec.detail) == ("unchanged", "config.json unchanged (same etag)")
        assert asked(hub) == [("HEAD", "config.json", 200)]


def test_a_quantized_config_that_states_its_scheme_needs_only_the_head(tmp_path: Path) -> None:
    """config.json names its own scheme (DeepSeek's block fp8) and the listing stores quantized
    dtypes: the sidecar is not wanted, the state says so ("stated"), and a later commit that
    leaves config.json alone (same etag) costs one HEAD, as an unquantized repo's does."""
    config = dict(CONFIG)
    config["quantization_config"] = {
        "quant_method": "fp8",
        "fmt": "e4m3",
        "activation_scheme": "dynamic",
        "weight_block_size": [128, 128],
    }
    stated = json.dumps(config).encode()

    def repo(readme: str) -> Repo:
        files = {"config.json": stated, "README.md": readme}
        return Repo(ID, files=files, created_at=NOW, safetensors=PACKED)

    make_families(tmp_path / "families")
    with HubServer([repo("# tiny\n")]) as hub:
        rec = scan(hub, tmp_path)
        assert rec.verdict != "skipped", rec.detail
        assert (SIDE not in [f for _, f, _ in asked(hub)]) and state_entry(tmp_path)["quant_file"] == "stated"
        hub.add(repo("# tiny, new card\n"))
        rec = scan(hub, tmp_path)
        assert rec.verdict == "unchanged", rec.detail
        assert asked(hub) == [("HEAD", "config.json", 200)]
        assert state_entry(tmp_path)["quant_file"] == "stated"
