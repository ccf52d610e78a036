"""``slotdiff lint`` reads ModelOpt's hf_quant_config.json beside a config.json, as ``slotdiff
CONFIG`` does: its budgets (decode time, the diff's weight deltas) price NVIDIA's NVFP4/FP8
exports in their own format, a copy of the same config.json beside another file is priced on
its own, and a broken file is one finding naming it, never a traceback.

The model and the expected bytes are test_hf_quant_config's, worked by hand there: 2,322,496 B
with the NVFP4 file, 4,300,864 B (2,150,432 bf16 parameters) without.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cli import main
from slotdiff.cost.workload import Workload
from slotdiff.lint.document import Builds, read
from test_hf_quant_config import CONFIG, SIDECAR

WITH_FILE, WITHOUT = 2_322_760, 4_300_864  # test_hf_quant_config.py, by hand


def _folder(root: Path, name: str, sidecar: Any = None) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=2), encoding="utf-8")
    if sidecar is not None:
        body = sidecar if isinstance(sidecar, str) else json.dumps(sidecar)
        (folder / "hf_quant_config.json").write_text(body, encoding="utf-8")
    return folder / "config.json"


def test_lint_prices_the_weights_with_the_file_beside_config_json(tmp_path: Path) -> None:
    builds = Builds()  # one run: the two config.json files are byte-identical
    quantized = read(_folder(tmp_path, "fp4", SIDECAR), "fp4/config.json", builds)
    plain = read(_folder(tmp_path, "bf16"), "bf16/config.json", builds)
    assert quantized.cost(Workload()).weights.bytes == WITH_FILE
    assert plain.cost(Workload()).weights.bytes == WITHOUT


def test_a_file_beside_another_name_is_not_read(tmp_path: Path) -> None:
    path = _folder(tmp_path, "m", SIDECAR)
    other = path.with_name("draft.json")
    other.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert read(other, "m/draft.json").cost(Workload()).weights.bytes == WITHOUT


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("{not json", "hf_quant_config.json"),
        (
            json.dumps({**SIDECAR, "quantization": {**SIDECAR["quantization"], "group_size": -3}}),
            "group_size",
        ),
    ],
)
def test_a_broken_file_is_one_finding_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, needle: str
) -> None:
    path = _folder(tmp_path, "m", body)
    code = main(["lint", str(path)])
    out, err = capsys.readouterr()
    assert code != 0
    assert "Traceback" not in out + err
    lines = [line for line in (out + err).splitlines() if "hf_quant_config.json" in line]
    assert lines and needle in lines[0]


def test_copies_in_two_folders_each_name_their_own_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One run's copy memo builds identical bytes once; the file's path is part of its key,
    so each folder's finding names the file beside it."""
    broken = json.dumps({**SIDECAR, "quantization": {**SIDECAR["quantization"], "group_size": 0}})
    first, second = _folder(tmp_path, "a", broken), _folder(tmp_path, "b", broken)
    assert main(["lint", str(first), str(second)]) != 0
    out = capsys.readouterr().out
    for path in (first, second):
        line = next(line for line in out.splitlines() if line.startswith(str(path)))
        assert str(path.with_name("hf_quant_config.json")) in line and "group_size" in line


def test_an_unreadable_file_is_one_finding_and_only_where_it_would_be_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder in the file's place: an SD103 naming it when config.json states no scheme;
    nothing when config.json has its own quantization_config (vLLM never reads the file)."""
    path = _folder(tmp_path, "m")
    (path.parent / "hf_quant_config.json").mkdir()
    assert main(["lint", str(path)]) != 0
    out = capsys.readouterr().out
    assert "SD103" in out and "hf_quant_config.json" in out and "SD101" not in out
    own = {**CONFIG, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}
    path.write_text(json.dumps(own, indent=2), encoding="utf-8")
    main(["lint", str(path)])
    out = capsys.readouterr().out
    assert "hf_quant_config.json" not in out and "SD101" not in out
