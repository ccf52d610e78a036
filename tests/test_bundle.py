"""The knowledge bundle (src/slotdiff/knowledge.bundle) is what its sources say, and a run
gives the same answers with it as from the sources themselves."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slotdiff.analysis.analyze import BASELINE_FILLS, BASELINES, baseline, load
from slotdiff.core import bundle as bundle_module
from slotdiff.core.bundle import BUNDLE, SOURCES, sources_digest
from slotdiff.core.resources import data_dir
from slotdiff.schema.tower_files import (
    COMPOSITE_OWN,
    MULTIMODAL,
    Composites,
    _with_extends,
    multimodal_index,
    multimodal_types,
)
from slotdiff.slots.stored import decode, encode, fills_from_data, fills_to_data

from conftest import all_corpus, raw

ROOT = Path(__file__).resolve().parent.parent
ROOTS = {name: data_dir(name) for name in SOURCES}


def head() -> dict:
    with open(BUNDLE, "rb") as fh:
        return json.loads(fh.readline())


def test_bundle_is_not_stale() -> None:
    assert head()["sources_sha256"] == sources_digest(ROOTS), (
        "src/slotdiff/knowledge.bundle is stale against schemas/ and fingerprints/: "
        "run `PYTHONPATH=src python tools/bundle.py` and commit it"
    )


def test_bundle_tool_says_up_to_date() -> None:
    """The generator rebuilds byte for byte what is committed (validation included)."""
    # tools/published.py sets SLOTDIFF_NO_BUNDLE at import; a test importing it first must not leak it here
    env = {k: v for k, v in os.environ.items() if k != "SLOTDIFF_NO_BUNDLE"}
    env["PYTHONPATH"] = str(ROOT / "src")
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bundle.py"), "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "knowledge.bundle is up to date"


def test_every_source_is_in_the_bundle_as_written() -> None:
    with open(BUNDLE, "rb") as fh:
        lines = fh.read().splitlines()[1:]
    texts = dict(line.decode("utf-8").split("\t", 1) for line in lines)
    for name, root in ROOTS.items():
        files = sorted(root.rglob("*.json"))
        assert files
        for path in files:
            key = f"{name}/{path.relative_to(root).as_posix()}"
            assert json.loads(texts.pop(key)) == json.loads(path.read_text(encoding="utf-8")), key
    assert sorted(texts) == [BASELINE_FILLS], f"bundled files with no source: {sorted(texts)}"


def bundled_baselines() -> dict:
    with open(BUNDLE, "rb") as fh:
        lines = fh.read().splitlines()[1:]
    return json.loads(dict(line.decode("utf-8").split("\t", 1) for line in lines)[BASELINE_FILLS])


@pytest.mark.parametrize("which", sorted(BASELINES))
def test_bundled_baseline_fills_are_what_the_code_builds(which: str) -> None:
    """The precomputed fills equal, value and type, what the pipeline builds from the catalog
    now: a slot rule that changes GPT-2's or Llama-3-8B's fills makes the bundle stale."""
    stored = fills_from_data(bundled_baselines()[which])
    built = baseline(which).fills
    assert repr(stored) == repr(built), (
        f"the knowledge bundle's {which} fills are stale against the code: "
        "run `PYTHONPATH=src python tools/bundle.py` and commit it"
    )


def test_bundled_key_indexes_are_what_the_sources_give() -> None:
    """The known-key indexes equal what the key map's code computes with the bundle off: an
    index computed through an older bundle would copy itself and hide a change to that code."""
    code = (
        "import json; from slotdiff.schema.keymap import known_keys; "
        "print(json.dumps([sorted(known_keys(True)), sorted(known_keys(False))]))"
    )
    env = {**os.environ, "SLOTDIFF_NO_BUNDLE": "1", "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    with_ignored, without = json.loads(out.stdout)
    index = head()["index"]
    assert index["known_keys"] == with_ignored, "run `PYTHONPATH=src python tools/bundle.py`"
    assert index["known_keys_without_family_ignored"] == without, (
        "run `PYTHONPATH=src python tools/bundle.py`"
    )


def test_stored_fills_come_back_exactly() -> None:
    """Every corpus config's fills survive the bundle's JSON with their types (a tuple stays a
    tuple, True stays True, 1.0 stays a float)."""
    compact = {"separators": (",", ":"), "ensure_ascii": False, "sort_keys": True}
    for path in all_corpus():
        fills = load(path).fills
        back = fills_from_data(json.loads(json.dumps(fills_to_data(fills), **compact)))
        assert back == fills and repr(back) == repr(fills), path.name
    odd = {"a": (1, [True, 1.0, None], {"1": (float("inf"),)}), "l": ["x", ("y",)]}
    assert repr(decode(json.loads(json.dumps(encode(odd))))) == repr(odd)
    with pytest.raises(TypeError):
        encode({1, 2})


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
@pytest.mark.parametrize("last_newline", [True, False])
def test_bundle_lines_read_alike_whatever_their_endings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: bytes, last_newline: bool
) -> None:
    lines = BUNDLE.read_bytes().splitlines()
    copy = tmp_path / "knowledge.bundle"
    copy.write_bytes(ending.join(lines) + (ending if last_newline else b""))
    monkeypatch.setattr(bundle_module, "BUNDLE", copy)
    monkeypatch.delenv("SLOTDIFF_NO_BUNDLE", raising=False)
    bundle_module.bundle.cache_clear()
    try:
        read = bundle_module.bundle()
        assert read is not None
        names = [line.split(b"\t", 1)[0].decode() for line in lines[1:]]
        assert list(read.spans) == names
        for line in lines[1:]:
            name, text = line.decode("utf-8").split("\t", 1)
            assert read.file(name) == json.loads(text), name
    finally:
        bundle_module.bundle.cache_clear()


def test_digest_changes_with_one_byte_and_with_a_new_file(tmp_path: Path) -> None:
    roots = {}
    for name, root in ROOTS.items():
        roots[name] = tmp_path / name
        shutil.copytree(root, roots[name])
    before = sources_digest(roots)
    assert before == sources_digest(ROOTS)
    keymap = roots["schemas"] / "keymap.json"
    original = keymap.read_bytes()
    keymap.write_bytes(original + b" ")
    assert sources_digest(roots) != before
    keymap.write_bytes(original)
    assert sources_digest(roots) == before
    (roots["fingerprints"] / "new.json").write_text("{}", encoding="utf-8")
    assert sources_digest(roots) != before


@pytest.mark.parametrize(
    "config",
    [
        raw("Qwen/Qwen3-30B-A3B"),
        raw("openai-community/gpt2"),
        Path(__file__).parent / "fixtures" / "vision" / "Qwen__Qwen3-VL-30B-A3B-Instruct.json",
    ],
    ids=lambda p: p.stem,
)
def test_same_report_with_and_without_the_bundle(config: Path) -> None:
    reports = []
    for off in ("1", "0"):
        env = {**os.environ, "SLOTDIFF_NO_BUNDLE": off, "HF_HUB_OFFLINE": "1"}
        out = subprocess.run(
            [sys.executable, "-m", "slotdiff", str(config), "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        reports.append(out.stdout)
    assert reports[0] == reports[1]


AUDIT = """
import runpy, sys
opened = []
sys.addaudithook(lambda ev, args: opened.append(str(args[0])) if ev == "open" else None)
sys.argv = ["slotdiff", *sys.argv[1:]]
try:
    runpy.run_module("slotdiff", run_name="__main__")
except SystemExit:
    pass
print("\\n".join(opened), file=sys.stderr)
"""


def test_an_analysis_reads_the_bundle_once_and_no_data_file() -> None:
    # the child imports the same slotdiff as this process (installed or on PYTHONPATH), so the
    # bundle it opens is BUNDLE
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("SLOTDIFF_NO_BUNDLE", None)
    out = subprocess.run(
        [sys.executable, "-c", AUDIT, str(raw("Qwen/Qwen3-30B-A3B")), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert json.loads(out.stdout)["model_type"] == "qwen3_moe", out.stderr[-2000:]
    opened = out.stderr.splitlines()
    assert opened.count(str(BUNDLE)) == 1
    data = [p for p in opened if any(f"{os.sep}{name}{os.sep}" in p for name in SOURCES)]
    assert data == [], data


def test_a_family_file_added_after_the_bundle_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan's proposal written into the data set's folder counts at once, bundle or not."""
    from slotdiff.slots import classify

    folder = tmp_path / "fingerprints"
    shutil.copytree(ROOTS["fingerprints"], folder)
    monkeypatch.setattr(classify, "data_dir", lambda name: folder)
    before = classify.families()
    assert [f.slug for f in before] == [p.stem for p in sorted(folder.glob("*.json"))]
    shutil.copy(folder / "gpt-2.json", folder / "zz-proposed.json")
    after = classify.families()
    assert len(after) == len(before) + 1 and after[-1].slug == "zz-proposed"


def test_composite_files_read_one_at_a_time_are_those_read_all_at_once() -> None:
    """The composite files a run reads on demand (by the bundle's model_type index) are the
    ones reading every file merges: same model_types in the same order, same merged specs."""
    every: dict[str, dict] = {}
    for stem, spec in _with_extends(MULTIMODAL, own=COMPOSITE_OWN).items():
        for name in spec.get("model_types", [stem]):
            every[name] = spec
    assert list(multimodal_types()) == list(every)
    for pairs in (multimodal_index(), head()["index"]["multimodal_model_types"]):
        lazy = Composites(pairs)
        assert list(lazy) == list(every)
        assert all(lazy[name] == spec for name, spec in every.items())
