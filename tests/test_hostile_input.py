"""What fuzzing found, pinned down, and the limits that keep hostile files cheap to refuse.

Each case is a config a stranger could publish: it either analyzes (exit 0, strict JSON) or
is refused with one line naming the file, the key and the reason (exit 2), never an
"internal error". Size, depth and key-count caps hold before a file is parsed in full;
``auto_map`` is reported and never followed; a run on a local file imports neither
huggingface_hub nor deepdiff nor matplotlib.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slotdiff.cli import main
from slotdiff.core.errors import SlotdiffError
from slotdiff.lint import engine
from slotdiff.lint.policy import Policy
from slotdiff.read import jsonpos
from slotdiff.read.jsonpos import MAX_BYTES, MAX_DEPTH, MAX_MEMBERS, JSONInputError
from slotdiff.read.source import from_file

from conftest import raw

ROOT = Path(__file__).resolve().parent.parent
LLAMA = json.loads(raw("meta-llama/Meta-Llama-3-8B").read_text())
GPT2 = json.loads(raw("openai-community/gpt2").read_text())
MAMBA2 = {"model_type": "mamba2", "hidden_size": 256, "num_hidden_layers": 2, "vocab_size": 1000}


def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], config: Any, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "config.json"
    text = config if isinstance(config, str) else json.dumps(config, allow_nan=True)
    path.write_text(text, encoding="utf-8")
    code = main([str(path), *args])
    out, err = capsys.readouterr()
    assert "internal error" not in err and "Traceback" not in err, err
    if code == 2:
        assert err.count("\n") == 1 and err.startswith(f"slotdiff: error: {path}"), err
    return code, out, err


def with_(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**base, **changes}


# (id, config, key the one-line error must name)
REFUSED = [
    ("float-1e308", with_(LLAMA, hidden_size=1e308), "hidden_size"),
    ("int-10^30", with_(LLAMA, hidden_size=10**30), "hidden_size"),
    ("layers-2^20", with_(LLAMA, num_hidden_layers=2**20), "num_hidden_layers"),
    ("vocab-negative", with_(LLAMA, vocab_size=-5), "vocab_size"),
    ("heads-string", with_(LLAMA, num_attention_heads="32"), "num_attention_heads"),
    ("experts-bool", with_(LLAMA, num_local_experts=True, model_type="mixtral"), "num_local_experts"),
    ("unknown-dtype", with_(LLAMA, torch_dtype="bfloat17"), "torch_dtype"),
    ("dtype-escape", with_(LLAMA, torch_dtype="\x1b]0;owned\x07"), "torch_dtype"),
    ("mlp-only-nested", with_(LLAMA, model_type="qwen2_moe", mlp_only_layers=[[1]]), "mlp_only_layers[0]"),
    (
        "quant-bits-string",
        with_(LLAMA, quantization_config={"quant_method": "awq", "bits": "four"}),
        "quantization_config.bits",
    ),
    (
        "quant-block-zero",
        with_(LLAMA, quantization_config={"quant_method": "fp8", "weight_block_size": [0, 0]}),
        "quantization_config.weight_block_size[0]",
    ),
    (
        "quant-block-huge",
        with_(LLAMA, quantization_config={"quant_method": "fp8", "weight_block_size": [1e308, 128]}),
        "quantization_config.weight_block_size[0]",
    ),
    (
        "quant-redos",
        with_(LLAMA, quantization_config={"quant_method": "fp8", "ignore": ["re:(a+)+$"]}),
        "quantization_config.ignore",
    ),
    (
        "quant-bad-regex",
        with_(LLAMA, quantization_config={"quant_method": "fp8", "modules_to_not_convert": ["re:(("]}),
        "quantization_config.modules_to_not_convert",
    ),
    (
        "quant-groups-list",
        with_(LLAMA, quantization_config={"quant_method": "compressed-tensors", "config_groups": [1]}),
        "quantization_config.config_groups",
    ),
    ("ssm-expand-huge", with_(MAMBA2, expand=1e300), "expand"),
    ("norm-eps-huge", with_(LLAMA, rms_norm_eps=10**30), "rms_norm_eps"),
    ("rope-theta-huge", with_(LLAMA, rope_theta=1e300), "rope_theta"),
    ("softcap-infinite", with_(LLAMA, final_logit_softcapping=float("inf")), "final_logit_softcapping"),
]


@pytest.mark.parametrize(("config", "key"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_with_the_key_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: Any, key: str
) -> None:
    code, _, err = cli(tmp_path, capsys, config)
    assert code == 2
    assert f": {key}: " in err, err
    assert "\x1b" not in err


# (id, config, what the report must say): accepted, with honest output.
ACCEPTED = [
    ("markup-activation", with_(LLAMA, hidden_act="[/bad]"), "[/bad]"),
    ("markup-key", with_(LLAMA, **{"[bold red]x[/]": 1}), "[bold red]x[/]"),
    ("escape-in-key", with_(LLAMA, **{"k\x1b[2J": 1}), "k\\x1b[2J"),
    ("bidi-in-key", with_(LLAMA, **{"abc\u202exyz": 1}), "abc\\u202exyz"),
    ("model-type-traversal", with_(LLAMA, model_type="../keymap"), "not in slotdiff's key map"),
    ("model-type-long", with_(LLAMA, model_type="x" * 10_000), "not in slotdiff's key map"),
    (
        "top-k-over-experts",
        with_(LLAMA, model_type="mixtral", num_local_experts=4, num_experts_per_tok=8),
        "only 4",
    ),
    ("learned-table-null", with_(GPT2, n_positions=None), "rows not stated"),
    (
        "vision-string",
        {
            **json.loads(raw("llava-hf/llava-1.5-7b-hf").read_text()),
            "vision_config": {
                "model_type": "clip_vision_model",
                "hidden_size": "wide",
                "image_size": 336,
                "patch_size": 14,
                "intermediate_size": 4096,
                "num_attention_heads": 16,
                "num_hidden_layers": 24,
            },
        },
        "vision encoder",
    ),
]


@pytest.mark.parametrize(("config", "needle"), [c[1:] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_and_rendered_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: Any, needle: str
) -> None:
    outputs = {}
    for fmt in ("table", "markdown", "json"):
        code, outputs[fmt], _ = cli(tmp_path, capsys, config, "--format", fmt)
        assert code == 0
        assert "\x1b" not in outputs[fmt] and "\u202e" not in outputs[fmt]
    json.loads(outputs["json"], parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert needle in " ".join(outputs["table"].split()), needle  # as written, escapes visible


def test_integer_literals_past_the_digit_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Python's int() refuses over 4,300 digits with a ValueError; slotdiff refuses at 100."""
    text = json.dumps(LLAMA)[:-1] + ', "initializer_range": ' + "9" * 5000 + "}"
    code, _, err = cli(tmp_path, capsys, text)
    assert code == 2 and "5,000-digit integer" in err
    run = engine.lint(["c.json"], Policy(), texts={"c.json": text.encode()})
    assert [d.code for d in run.diagnostics] == ["SD101"]


def test_infinity_written_by_transformers_in_ignored_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Mamba-2 configs carry time_step_limit [0.0, Infinity]; some tools write {"__float__": ...}."""
    for limit in ("[0.0, Infinity]", '[0.0, {"__float__": "Infinity"}]', "[-Infinity, NaN]"):
        text = json.dumps(MAMBA2)[:-1] + f', "time_step_limit": {limit}, "time_step_floor": Infinity}}'
        code, out, _ = cli(tmp_path, capsys, text, "--json")
        assert code == 0
        json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c}"))
        code, out, _ = cli(tmp_path, capsys, text, "--format", "table")
        assert code == 0
    run = engine.lint(["c.json"], Policy(), texts={"c.json": text.encode()})
    assert run.exit_code == 0, [(d.code, d.message) for d in run.diagnostics]


def test_nan_echoed_from_a_config_is_a_string_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = with_(LLAMA, rope_scaling={"rope_type": "linear", "factor": float("nan")})
    code, out, _ = cli(tmp_path, capsys, config, "--json")
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    assert code == 0 and "NaN" in json.dumps(data)


def test_absurd_workloads_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    for flag, value in (("--context", str(10**400)), ("--batch", str(2**41)), ("--context", "0")):
        code = main([str(path), flag, value])
        err = capsys.readouterr().err
        assert code == 2 and flag in err and err.count("\n") == 1 and len(err) < 200, err


# Every float flag a pricing command takes, with a command that prices with it.
FLOAT_FLAGS = [
    (["{cfg}"], "--bandwidth"),
    (["{cfg}"], "--tflops"),
    (["{cfg}"], "--mbu"),
    (["{cfg}"], "--mfu"),
    (["{cfg}"], "--gpu-mem"),
    (["fit", "{cfg}"], "--gpu-memory-utilization"),
    (["fit", "{cfg}"], "--kv-cache-memory"),
    (["sweep", "{cfg}", "--over", "batch"], "--mbu"),
    (["latency", "{cfg}"], "--mfu"),
    (["formats", "{cfg}"], "--bandwidth"),
    (["choose", "--no-catalog", "--candidates", "{cfg}"], "--max-decode-ms"),
]


@pytest.mark.parametrize(("argv", "flag"), FLOAT_FLAGS, ids=[" ".join([*a[:1], f]) for a, f in FLOAT_FLAGS])
@pytest.mark.parametrize("value", ["1e-300", "2e-308", "5e-324", "1e-4", "1e300", "1.7e308"])
def test_float_flags_out_of_range_are_exit_2_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], flag: str, value: str
) -> None:
    """Issue 30.6: a rate or share so small (or large) that a price divides by zero or comes
    out infinite is refused as the flag's value, never priced."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    if flag in ("--mbu", "--mfu", "--gpu-memory-utilization") and float(value) > 1:
        value = "1.5"
    code = main([a.format(cfg=path) for a in argv] + [flag, value, "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (out[:200], err)
    assert err.count("\n") == 1 and flag in err and "internal error" not in err, err


@pytest.mark.parametrize(("argv", "flag"), FLOAT_FLAGS, ids=[" ".join([*a[:1], f]) for a, f in FLOAT_FLAGS])
@pytest.mark.parametrize("edge", ["floor", "ceiling"])
def test_float_flags_at_their_bounds_price_finite_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], flag: str, edge: str
) -> None:
    """At the floor (0.001) and the ceiling (1e9, or 1 for a share) every figure is finite:
    strict JSON, and no "inf"/"nan" in the text."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    share = flag in ("--mbu", "--mfu", "--gpu-memory-utilization")
    ceiling = {"--bandwidth": "1e6", "--gpu-mem": "1048576", "--kv-cache-memory": "1e9"}.get(flag, "1e9")
    value = "0.001" if edge == "floor" else ("1" if share else ceiling)
    args = [a.format(cfg=path) for a in argv] + [flag, value]
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "internal error" not in err, err
    json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c}"))
    code = main(args)
    out, err = capsys.readouterr()
    assert code in (0, 1) and "internal error" not in err, err
    priced = out.replace("--request-rate inf", "")  # latency's vLLM bench line: a rate, not a figure
    assert not re.search(r"\b(inf|nan)\b", priced, re.IGNORECASE), [
        line for line in priced.splitlines() if re.search(r"\b(inf|nan)\b", line, re.IGNORECASE)
    ]


def test_diff_and_lint_on_hostile_strings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(LLAMA))
    b.write_text(json.dumps(with_(LLAMA, hidden_act="[/x]", **{"\x1b]0;t\x07": float("inf")})))
    for args in (
        ["diff", str(a), str(b)],
        ["diff", str(a), str(b), "--json"],
        ["lint", "--format", "json", str(b)],
    ):
        code = main(args)
        out, err = capsys.readouterr()
        assert code in (0, 1) and "internal error" not in err
        assert "\x1b" not in out
        if "--json" in args or "json" in args:
            json.loads(out, parse_constant=lambda c: pytest.fail(f"bare {c}"))


# ------------------------------------------------------------------ caps, before parsing


def _no_full_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if json.loads is handed a whole document (the tokenizer still decodes key strings)."""
    real = json.loads

    def loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        if len(text) > 1000:
            raise AssertionError("json.loads ran on a document over the caps")
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", loads)


def test_oversized_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    with open(path, "wb") as fh:
        fh.truncate(MAX_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(SlotdiffError, match=f"file is {MAX_BYTES + 1:,} bytes, over the"):  # from stat()
        from_file(path)
    run = engine.lint([str(path)], Policy())
    assert [d.code for d in run.diagnostics] == ["SD101"] and "cap" in run.diagnostics[0].message


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_special_files_are_refused_not_read(tmp_path: Path, special: str) -> None:
    """A FIFO blocks on open and /dev/zero never ends: only regular files are read."""
    path = Path(special)
    if special == "fifo":
        path = tmp_path / "config.json"
        os.mkfifo(path)
    with pytest.raises(SlotdiffError, match="not a regular file"):
        from_file(path)
    run = engine.lint([str(path)], Policy())
    assert [d.code for d in run.diagnostics] == ["SD101"]


DEEP = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
MANY_KEYS = "{" + ",".join(f'"k{i}":0' for i in range(MAX_MEMBERS + 1)) + "}"


@pytest.mark.parametrize(
    ("text", "why"), [(DEEP, "nesting deeper"), (MANY_KEYS, "more than")], ids=["depth", "keys"]
)
def test_caps_hold_before_the_full_parse(monkeypatch: pytest.MonkeyPatch, text: str, why: str) -> None:
    doc = '{"a": ' + text + "}" if text is DEEP else text
    _no_full_parse(monkeypatch)
    for with_positions in (True, False):  # analyze / lint positions, and the scan's value-only parse
        with pytest.raises(JSONInputError, match=why):
            jsonpos.parse(doc, with_positions=with_positions)
    from slotdiff.lint.document import Document

    assert why in str(Document("c.json", doc.encode()).error)


def test_positions_are_exact_and_linear_on_any_text() -> None:
    """Keys (escaped or not), array items, duplicates, every kind of whitespace; and a run of
    whitespace before a character no token starts with is read once (the tokenizer takes
    whitespace possessively: no backtracking over a 4 MB run)."""
    text = '{\n  "a\\u0062": 1,\n\t"c": [1, {"d": 2}],\r\n "c": 3,\n  "e" :\n   [ "x",\n  7 ]\n}'
    parsed = jsonpos.parse(text)
    assert dict(parsed.positions) == {
        (): (1, 1),
        ("ab",): (2, 3),
        ("c",): (3, 2),
        ("c", 0): (3, 8),
        ("c", 1): (3, 11),
        ("c", 1, "d"): (3, 12),
        ("e",): (5, 3),
        ("e", 0): (6, 6),
        ("e", 1): (7, 3),
    }
    assert parsed.duplicates == ((("c",), (4, 2)),)
    with pytest.raises(JSONInputError, match="invalid JSON"):
        jsonpos.parse(" " * (MAX_BYTES - 10) + "\x01")


def test_caps_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for text in ('{"a": ' + DEEP + "}", MANY_KEYS):
        code, _, err = cli(tmp_path, capsys, text)
        assert code == 2 and ("nesting deeper" in err or "more than" in err)


def test_in_memory_configs_get_the_same_caps() -> None:
    from slotdiff.analysis.analyze import analyze

    deep: Any = 1
    for _ in range(MAX_DEPTH + 5):
        deep = {"x": deep}
    with pytest.raises(SlotdiffError, match="nesting deeper"):
        analyze({**LLAMA, "deep": deep})
    loop: dict[str, Any] = dict(LLAMA)
    loop["self"] = loop
    with pytest.raises(SlotdiffError, match="cannot be written as JSON"):
        analyze(loop)


def test_in_memory_config_positions_are_those_of_its_indented_rendering() -> None:
    """A dict is read back from compact JSON; a diagnostic's line and column are still those
    of the dict written out with a two-space indent (located here by searching that text)."""
    from slotdiff.analysis.analyze import from_mapping

    config = {"model_type": "llama", "text_config": {"hidden_size": 64, "layers": [1, 2]}}
    text = json.dumps(config, indent=2)
    lines = text.splitlines()
    line = next(i for i, t in enumerate(lines, 1) if '"hidden_size"' in t)
    col = lines[line - 1].index('"hidden_size"') + 1
    parsed = from_mapping(config).parsed
    assert parsed.where(("text_config", "hidden_size")) == (line, col) == (4, 5)
    assert parsed.where(("text_config", "layers", 1)) == (7, 7)
    # 1 and "1" are two keys of a dict but one once written as JSON: a duplicate, as in a file
    # (the rendering holds the merged key at line 4, column 5)
    clash = from_mapping({"model_type": "llama", "n": {1: "a", "1": "b"}}).parsed
    assert clash.duplicates == ((("n", "1"), (4, 5)),)


# -------------------------------------------------------------------- auto_map, never run

EVIL = """
from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text("custom code ran")
class EvilConfig: pass
class EvilForCausalLM: pass
"""

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}


def test_auto_map_is_reported_and_never_followed(tmp_path: Path) -> None:
    (tmp_path / "configuration_evil.py").write_text(EVIL)
    (tmp_path / "modeling_evil.py").write_text(EVIL)
    config = with_(
        LLAMA,
        auto_map={
            "AutoConfig": "configuration_evil.EvilConfig",
            "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
            "AutoTokenizer": ["other/repo--tokenization_evil.EvilTokenizer", None],
        },
    )
    (tmp_path / "config.json").write_text(json.dumps(config))
    # The repo folder is on sys.path and the current directory: an import would find the module.
    env = {**ENV, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{tmp_path}"}
    runs = {
        "analyze": ["config.json", "--json"],
        "table": ["config.json"],
        "lint": ["lint", "--no-config", "--format", "json", "config.json"],
        "diff": ["diff", "config.json", str(raw("meta-llama/Meta-Llama-3-8B"))],
        "fingerprint": ["fingerprint", "config.json", "--name", "evil", "--stdout"],
    }
    out = {}
    for name, args in runs.items():
        res = subprocess.run(
            [sys.executable, "-m", "slotdiff", *args], capture_output=True, text=True, env=env, cwd=tmp_path
        )
        assert res.returncode in (0, 1), (name, res.stderr)
        out[name] = res.stdout
    assert not (tmp_path / "IMPORTED").exists(), "slotdiff imported the code auto_map names"
    notes = json.loads(out["analyze"])["notes"]
    assert any("modeling_evil.EvilForCausalLM" in n and "imported none of it" in n for n in notes)
    assert "modeling_evil.EvilForCausalLM" in out["table"]
    diags = json.loads(out["lint"])["diagnostics"]
    assert [d["key"] for d in diags if d["code"] == "SD206"] == ["auto_map"]
    assert "tokenization_evil" in next(d["message"] for d in diags if d["code"] == "SD206")


# ------------------------------------------------------------------------ start-up cost

PROBE = """
import sys
from slotdiff.cli import main
code = main(sys.argv[1:])
heavy = ",".join(m for m in ("huggingface_hub", "deepdiff", "matplotlib") if m in sys.modules)
print(code, heavy, file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["{cfg}"],
        ["{cfg}", "--json"],
        ["{cfg}", "--markdown"],
        ["{cfg}", "--no-cost"],
        ["lint", "{cfg}"],
        ["lint", "--no-config", "--format", "sarif", "{cfg}"],
        ["{bad}"],
        ["lint", "{bad}"],
    ],
    ids=["table", "json", "markdown", "no-cost", "lint", "lint-sarif", "bad", "lint-bad"],
)
def test_local_runs_import_no_heavy_modules(tmp_path: Path, args: list[str]) -> None:
    """``slotdiff MODEL`` and ``slotdiff lint`` on local files stay off the Hub client,
    deepdiff and matplotlib (sys.modules in a fresh interpreter)."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(with_(LLAMA, auto_map={"AutoConfig": "c.C"})))
    bad = tmp_path / "bad_config.json"
    bad.write_text(json.dumps(with_(LLAMA, hidden_size=1e308)))
    argv = [a.format(cfg=cfg, bad=bad) for a in args]
    res = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=tmp_path,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    code, _, heavy = res.stderr.strip().splitlines()[-1].partition(" ")
    assert int(code) in (0, 1, 2)
    assert heavy == "", f"imported {heavy}"


# ------------------------------------------ every file a user names: regular and capped

SPECIALS = ["fifo", "dev-zero", "dev-null-link", "folder"]


def _special(where: Path, kind: str) -> Path:
    """A path named like the file a command wants that is not a regular file behind it."""
    if kind == "fifo":
        os.mkfifo(where)
    elif kind == "dev-zero":
        where.symlink_to("/dev/zero")  # a read without a cap never ends
    elif kind == "dev-null-link":
        where.symlink_to("/dev/null")
    else:
        where.mkdir()
    return where


def _slotdiff(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The console script's module in a fresh interpreter; a hang fails at the timeout."""
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", *argv],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("kind", SPECIALS)
@pytest.mark.parametrize("name", ["x.json", "config.json"])
def test_lint_folder_with_a_special_json_file_neither_blocks_nor_reads_it(
    tmp_path: Path, kind: str, name: str
) -> None:
    """``lint FOLDER``: a FIFO or device named ``*.json`` is skipped with its reason, or (named
    like a config) reported as an error, and the real config beside it is still checked."""
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "real_config.json").write_text(json.dumps(with_(LLAMA, num_hidden_layers=0)))
    _special(folder / name, kind)
    res = _slotdiff("lint", "--no-config", "-v", "configs", cwd=tmp_path)
    assert res.returncode == 1 and "internal error" not in res.stderr, res.stderr
    assert "configs/real_config.json:" in res.stdout
    if kind == "folder":
        return  # a folder named *.json is walked into, never read as a file
    if name == "config.json":
        assert f"configs/{name}:1:1: SD101" in res.stdout and "not a regular file" in res.stdout
    else:
        assert f"skipping configs/{name} (not a regular file" in res.stderr, res.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dev-null-link"])
@pytest.mark.parametrize(
    "argv",
    [
        ["lint", "{cfg}", "--config", "{special}"],
        ["{cfg}", "--gpu-file", "{special}"],
        ["fit", "{cfg}", "--gpu-file", "{special}", "--gpu", "x"],
        ["lint", "{special}"],
        ["{special}"],
        ["diff", "{cfg}", "{special}"],
    ],
    ids=["lint-config", "gpu-file", "fit-gpu-file", "lint-file", "analyze", "diff"],
)
def test_a_named_special_file_is_one_line_and_exit_2(tmp_path: Path, kind: str, argv: list[str]) -> None:
    """Every path a user names on the command line (a policy, a GPU file, a config) behind a FIFO
    or a device: one line naming it, exit 2 (lint of the config itself: SD101, exit 1)."""
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA))
    special = _special(tmp_path / "special.json", kind)
    res = _slotdiff(*[a.format(cfg=cfg, special=special) for a in argv], cwd=tmp_path)
    assert "internal error" not in res.stderr and "Traceback" not in res.stderr, res.stderr
    if argv == ["lint", "{special}"]:
        assert res.returncode == 1 and "SD101" in res.stdout and "not a regular file" in res.stdout
        return
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert res.stderr.count("\n") == 1 and "special.json" in res.stderr, res.stderr
    assert "not a regular file" in res.stderr, res.stderr


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge", "not-json", "wrong-shape"])
def test_scan_fingerprints_folder_with_a_bad_family_file_is_exit_2_before_any_request(
    tmp_path: Path, kind: str
) -> None:
    """``scan --fingerprints DIR``: every family file is read capped and checked against
    fingerprint.schema.json first; no Hub is needed to see the refusal (HF_HUB_OFFLINE would
    only be said after it)."""
    folder = tmp_path / "families"
    folder.mkdir()
    bundled = ROOT / "src" / "slotdiff" / "fingerprints"
    bundled = bundled if bundled.is_dir() else ROOT / "fingerprints"
    good = sorted(bundled.glob("*.json"))[0]
    (folder / good.name).write_text(good.read_text())
    bad = folder / "zz-bad.json"
    if kind in ("fifo", "dev-zero"):
        _special(bad, kind)
    elif kind == "huge":
        with open(bad, "wb") as fh:
            fh.truncate(64 * 1024 * 1024)
    elif kind == "not-json":
        bad.write_text("{")
    else:
        bad.write_text(json.dumps({"name": "x"}))
    res = _slotdiff("scan", "--fingerprints", str(folder), "--state", str(tmp_path / "s.json"), cwd=tmp_path)
    assert res.returncode == 2 and "internal error" not in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1 and "zz-bad.json" in res.stderr, res.stderr
    assert not (tmp_path / "s.json").exists()
