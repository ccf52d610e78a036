"""The wheel carries the data folders (schemas/, fingerprints/, catalog/) and works installed.

pre-commit installs the hook with pip, so a data folder left out of the wheel would only
show at run time; this builds a real (non-editable) wheel, installs it into a fresh
virtualenv and runs the console script offline from an unrelated directory.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (found,) = out.glob("slotdiff-*.whl")
    return found


def test_wheel_contains_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "slotdiff/_data/schemas/keymap.json",
        "slotdiff/_data/schemas/report.schema.json",
        "slotdiff/_data/schemas/gpus.json",
        "slotdiff/_data/schemas/defaults.json",
        "slotdiff/_data/schemas/model_types/llama.json",
        "slotdiff/catalog/index.tsv",
        "slotdiff/catalog/openai-community__gpt2.json",
        "slotdiff/knowledge.bundle",
    ):
        assert required in names, required
    fingerprints = [n for n in names if n.startswith("slotdiff/_data/fingerprints/") and n.endswith(".json")]
    assert len(fingerprints) == len(list((ROOT / "fingerprints").glob("*.json")))


def test_installed_wheel_runs_offline(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    # The runtime dependencies come from the interpreter running the tests, appended after the
    # new environment's own site-packages so the wheel's slotdiff is the one imported.
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "-q",
            "--force-reinstall",
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["HF_HUB_OFFLINE"] = "1"
    out = subprocess.run(
        [str(env_dir / "bin" / "slotdiff"), "Qwen/Qwen3-30B-A3B", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["source"]["origin"] == "catalog"
    where = subprocess.run(
        [str(py), "-c", "import slotdiff.core.resources as r; print(r.data_dir('schemas'))"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=True,
    )
    assert "_data" in where.stdout and str(env_dir) in where.stdout
