"""Hostile input, fuzzed: no config makes slotdiff crash, hang, lie or write where it should not.

Three generators feed the Python API (analyze, the cost pass, diff, the lint engine and the
renderers) and, for a sample, the CLI in a subprocess:

1. random JSON values: any document, and objects built from the keys slotdiff reads;
2. the real corpus configs, mutated: keys deleted, renamed, retyped, set to 0, negative,
   huge (10^30), NaN/Infinity, deeply nested or very long strings;
3. well-formed random architectures built on corpus templates, which must be priced.

Every input either succeeds, with finite non-negative costs that obey the invariants of
``check_costs``, or fails with SlotdiffError: one line naming the source (and the key), exit
status 2. Any other exception, a lint rule that "could not be checked", bare NaN in JSON
output, or a run longer than TIME_LIMIT fails the test. Budgets: conftest.py ("ci" profile,
fixed examples and seed) and docs/TESTING.md (the long local run).
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotdiff.analysis.analyze import Model, analyze, load
from slotdiff.analysis.compare import diff
from slotdiff.analysis.report import Report
from slotdiff.core.errors import SlotdiffError
from slotdiff.cost.kv import kv_cost, layer_span
from slotdiff.lint import engine
from slotdiff.lint.policy import from_mapping as policy_from_mapping
from slotdiff.lint.reporters import REPORTER_BY_NAME as LINT_REPORTERS
from slotdiff.read.source import RawConfig, parse_config
from slotdiff.render import REPORTER_BY_NAME
from slotdiff.render.diff import render_markdown, render_table
from slotdiff.schema.arch import Architecture, Value
from slotdiff.schema.keymap import keymap, known_model_types
from slotdiff.schema.resolver import _type_error

from conftest import RAW, budget, raw

ROOT = Path(__file__).resolve().parent.parent
TIME_LIMIT = 20.0  # seconds for one input through every stage; the slowest real config takes < 1
NAME = "fuzz/config.json"
# Budgets make the lint engine run the cost pass (SD301-SD304) on every input too.
POLICY = policy_from_mapping(
    {
        "budgets": {
            "max-kv-bytes-per-token": "1 MiB",
            "max-decode-ms": 100,
            "max-total-params": "1T",
            "max-active-params": "100B",
        }
    },
    "fuzz policy",
    ROOT,
)


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail (TimeoutError, which no stage treats as bad input) if the block runs too long."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _reject_constant(name: str) -> Any:
    raise AssertionError(f"bare {name} in JSON output")


def strict_json(text: str) -> Any:
    """Parse output that must be strict JSON (no NaN / Infinity tokens)."""
    return json.loads(text, parse_constant=_reject_constant)


# --------------------------------------------------------------------------- invariants


def check_error(err: SlotdiffError, source: str) -> None:
    """The documented failure: one line that starts with the source, exit status 2."""
    line = err.line()
    assert err.exit_code == 2
    assert "\n" not in line and line.startswith(source), line
    assert err.reason.strip(), line


def _numbers(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, value


def without_gqa(arch: Architecture) -> Architecture:
    """The same model with every KV head count raised to the query head count (MHA)."""
    h = arch.get("n_heads") or 0
    g = max(arch.get("n_kv_heads") or 0, h)
    fields = {**arch.fields, "n_kv_heads": Value(g, "derived")}
    layers = tuple(replace(s, n_kv_heads=max(s.n_kv_heads, h)) if s.n_kv_heads else s for s in arch.layers)
    return replace(arch, fields=fields, layers=layers)


CONTEXTS = (1, 100, 4096, 8192, 131072, 10**7)


def check_costs(report: Report) -> None:
    """Finite, non-negative figures that obey the cost model's invariants."""
    cost = report.cost
    if cost is None:
        assert report.changes and report.changes[0].note, "cost skipped without saying why"
        return
    for path, x in _numbers(cost.to_dict()):
        assert math.isfinite(x) and x >= 0, f"cost{path} = {x}"
    p = cost.params
    assert 0 <= p.active <= p.total, (p.active, p.total)
    if cost.weights.supported:
        assert cost.weights.bytes > 0
    arch = report.arch
    kv = [kv_cost(arch, s, cost.kv.dtype).bytes_at_context for s in CONTEXTS]
    assert kv == sorted(kv), f"KV shrinks with context: {kv}"
    for s in CONTEXTS:
        assert (
            kv_cost(arch, 2 * s, cost.kv.dtype).bytes_at_context
            >= kv_cost(arch, s, cost.kv.dtype).bytes_at_context
        )
        for layer in arch.layers:
            span = layer_span(layer, s)
            assert 0 <= span <= s
            if layer.window:
                assert span <= layer.window, f"layer {layer.index} caches {span} > window {layer.window}"
    mha = kv_cost(without_gqa(arch), 8192, cost.kv.dtype)
    assert mha.bytes_per_token >= cost.kv.bytes_per_token, "removing GQA lowered KV"


def check_report(report: Report) -> None:
    check_costs(report)
    for name, render in REPORTER_BY_NAME.items():
        text = render(report)
        assert text, name
    strict_json(REPORTER_BY_NAME["json"](report))


def check_lint(text: bytes, base: bytes | None = None) -> engine.Run:
    run = engine.lint([NAME], POLICY, texts={NAME: text}, bases={NAME: base} if base is not None else None)
    for d in run.diagnostics:
        assert "could not be checked" not in d.message, f"{d.code}: {d.message}"
        assert "\n" not in d.message
        assert d.line >= 1 and d.col >= 1
    for name, render in LINT_REPORTERS.items():
        out = render(run)
        if name in ("json", "sarif"):
            strict_json(out)
    assert run.exit_code in (0, 1)
    return run


def through_everything(
    text: bytes, base: Model | None = None, base_text: bytes | None = None
) -> Report | None:
    """``text`` as a config file through analyze (with cost), lint, diff and every renderer."""
    report = None
    with time_limit(TIME_LIMIT):
        try:
            data, parsed = parse_config(text, NAME)
            report = analyze(RawConfig(NAME, data, parsed, "file", NAME))
        except SlotdiffError as err:
            check_error(err, NAME)
        if report is not None:
            check_report(report)
        run = check_lint(text, base_text)
        if report is None:
            assert run.exit_code == 1, "analyze refused the config but lint passed it"
        if base is not None and report is not None:
            model = load(RawConfig(NAME, data, parsed, "file", NAME))
            cmp = diff(base, model)
            strict_json(json.dumps(cmp.to_dict(), allow_nan=False, default=str))
            render_table(cmp)
            render_markdown(cmp)
    return report


# ---------------------------------------------------------------------- 1. random JSON

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=40,
)


@cache
def read_keys() -> list[str]:
    """Top-level config keys slotdiff reads (every alias of every canonical field)."""
    keys = {a.split(".")[0] for spec in keymap()["fields"].values() for a in spec["aliases"]}
    return sorted(keys | {"model_type", "torch_dtype", "quantization_config", "layer_types", "auto_map"})


sizes = st.one_of(
    st.integers(min_value=1, max_value=4096),
    st.sampled_from([0, -1, 2**40, 2**40 + 1, 10**30, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
)
# A small model every family can read, then up to 25 keys slotdiff reads set to anything:
# the core keeps most examples past "missing d_model" and into layout, fills and the cost pass.
CORE = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 128, "num_attention_heads": 4}
known_objects = st.builds(
    lambda model_type, core, rest: {"model_type": model_type, **(CORE if core else {}), **rest},
    st.sampled_from(sorted(known_model_types())) | st.text(max_size=10),
    st.booleans(),
    st.dictionaries(st.sampled_from(read_keys()), sizes | json_values, max_size=25),
)


@budget(150)
@given(json_values)
def test_any_json_document(value: Any) -> None:
    text = json.dumps(value, allow_nan=True).encode()
    through_everything(text)


@budget(150)
@given(known_objects)
def test_objects_of_known_keys(data: dict[str, Any]) -> None:
    through_everything(json.dumps(data, allow_nan=True).encode())


@budget(100)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes(text: bytes) -> None:
    through_everything(text)


# -------------------------------------------------------------- 2. corpus, mutated

CORPUS_FILES = sorted(RAW.glob("*.json"))


@cache
def corpus_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _paths(node: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[Any, ...]]:
    """Every key and list element down to depth 3 (text_config.rope_parameters.factor)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        yield (*prefix, k)
        if depth < 3 and isinstance(v, (dict, list)) and (isinstance(v, dict) or len(v) <= 64):
            yield from _paths(v, (*prefix, k), depth + 1)


def _nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


MUTATIONS = (
    "delete",
    "rename",
    "retype",
    "zero",
    "negative",
    "huge",
    "nonfinite",
    "nested",
    "long_string",
    "null",
)


def mutate(data: dict[str, Any], path: tuple[Any, ...], op: str, pick: int) -> None:
    """Apply one mutation in place at ``path``; ``pick`` chooses among an op's variants."""
    *parents, last = path
    node: Any = data
    for k in parents:
        node = node[k]
    value = node[last]
    if op == "delete":
        if isinstance(node, dict):
            del node[last]
        else:
            node.pop(last)
        return
    if op == "rename":
        if isinstance(node, dict):
            new = [last + "_", last.upper(), last[:-1] or "x", "__" + last, last.replace("_", "")][pick % 5]
            node[new] = node.pop(last)
        return
    if op == "retype":
        choices = [str(value), [value], {"value": value}, True, json.dumps(value)[:50], 1.5]
        node[last] = choices[pick % len(choices)]
    elif op == "zero":
        node[last] = [0, 0.0, False, "", [], {}][pick % 6]
    elif op == "negative":
        node[last] = -value if isinstance(value, (int, float)) and value else [-1, -(2**40), -1e30][pick % 3]
    elif op == "huge":
        node[last] = [10**30, 1e30, 2**63, 2**40 + 1, 1e308, 10**400][pick % 6]
    elif op == "nonfinite":
        node[last] = [math.nan, math.inf, -math.inf, {"__float__": "Infinity"}, "Infinity"][pick % 5]
    elif op == "nested":
        node[last] = _nest(value, [10, 40, 62][pick % 3])
    elif op == "long_string":
        node[last] = ["x" * 100_000, "[/bold]\x1b]0;t\x07\u202e" * 100, "../" * 1000][pick % 3]
    elif op == "null":
        node[last] = None


@st.composite
def mutated_corpus(draw: st.DrawFn) -> tuple[Path, dict[str, Any], list[tuple[Any, ...]]]:
    path = draw(st.sampled_from(CORPUS_FILES))
    data = json.loads(corpus_text(path))
    applied = []
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(data))
        if not paths:
            break
        where = paths[draw(st.integers(0, len(paths) - 1))]
        op = draw(st.sampled_from(MUTATIONS))
        mutate(data, where, op, draw(st.integers(0, 5)))
        applied.append((where, op))
    return path, data, applied


@cache
def corpus_model(path: Path) -> Model:
    return load(path)


@budget(200)
@given(mutated_corpus())
def test_mutated_corpus_configs(case: tuple[Path, dict[str, Any], list[Any]]) -> None:
    path, data, _ = case
    text = json.dumps(data, allow_nan=True).encode()
    through_everything(text, base=corpus_model(path), base_text=path.read_bytes())


# Fields whose written value the schema layer reads, for the present-but-invalid property.
def _int_fields() -> list[str]:
    out = []
    for name, spec in keymap()["fields"].items():
        types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
        if "integer" in types and "string" not in types:
            out.append(name)
    return out


INVALID = (0, -1, -4096, 2**40 + 1, 10**30, 1.5, math.nan, math.inf, "4096", True, [8], {"v": 8})


def _invalid(spec: dict[str, Any], value: Any) -> bool:
    types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    if _type_error(value, types):
        return True
    if isinstance(value, float) and not math.isfinite(value):
        return True
    low, high = spec.get("minimum"), spec.get("maximum")
    return (low is not None and value < low) or (high is not None and value > high)


def _written_fields(model: Model) -> list[tuple[str, str]]:
    """(field, key) for the integer fields this config writes under a plain key."""
    prefix = ".".join(model.arch.text_path)
    out = []
    for field in _int_fields():
        val = model.arch.v(field)
        if val.how not in ("explicit", "alias") or not val.keys:
            continue
        key = val.keys[0]
        rel = key[len(prefix) + 1 :] if prefix and key.startswith(prefix + ".") else key
        if "." not in rel:
            out.append((field, key))
    return out


@budget(150)
@given(st.sampled_from(CORPUS_FILES), st.data())
def test_present_but_invalid_is_never_defaulted(path: Path, data: st.DataObject) -> None:
    """A written field with a value outside its type or range fails, naming that key."""
    model = corpus_model(path)
    field, key = data.draw(st.sampled_from(_written_fields(model)), label="field")
    spec = keymap()["fields"][field]
    bad = data.draw(st.sampled_from([v for v in INVALID if _invalid(spec, v)]), label="value")
    config = json.loads(corpus_text(path))
    node = config
    *parents, last = key.split(".")
    for k in parents:
        node = node[k]
    node[last] = bad
    text = json.dumps(config, allow_nan=True).encode()
    with pytest.raises(SlotdiffError) as caught:
        parsed_data, parsed = parse_config(text, NAME)
        analyze(RawConfig(NAME, parsed_data, parsed, "file", NAME), cost=False)
    check_error(caught.value, NAME)
    assert caught.value.key is not None and caught.value.key.startswith(key), (caught.value.line(), key)
    run = check_lint(text)
    assert any(d.severity == "error" and (d.key or "").startswith(key) for d in run.diagnostics), [
        (d.code, d.key, d.message) for d in run.diagnostics
    ]


# ------------------------------------------------------ 3. well-formed architectures

# Templates: (corpus repo, {role: key}); roles the generator fills with consistent sizes.
TEMPLATES: dict[str, dict[str, str]] = {
    "meta-llama/Meta-Llama-3-8B": {},
    "mistralai/Mistral-7B-v0.1": {"window": "sliding_window"},
    "google/gemma-2-2b": {"window": "sliding_window", "head_dim": "head_dim"},
    "Qwen/Qwen2.5-7B": {"window": "sliding_window", "switch": "use_sliding_window"},
    "mistralai/Mixtral-8x7B-v0.1": {"experts": "num_local_experts"},
    "Qwen/Qwen3-30B-A3B": {
        "experts": "num_experts",
        "expert_ff": "moe_intermediate_size",
        "head_dim": "head_dim",
    },
    "deepseek-ai/DeepSeek-V3": {
        "experts": "n_routed_experts",
        "expert_ff": "moe_intermediate_size",
        "mla": "1",
    },
    "openai-community/gpt2": {"gpt2": "1"},
}


@st.composite
def architectures(draw: st.DrawFn) -> dict[str, Any]:
    """A config that a real loader would accept: divisible heads, k ≤ E, consistent MLA dims."""
    repo = draw(st.sampled_from(sorted(TEMPLATES)))
    roles = TEMPLATES[repo]
    data = json.loads(raw(repo).read_text(encoding="utf-8"))
    big = draw(st.booleans()) and draw(st.booleans())  # a quarter of the cases near the bounds
    h = draw(st.integers(1, 1024 if big else 64))
    g = draw(st.sampled_from([d for d in range(1, h + 1) if h % d == 0]))
    hd = 8 * draw(st.integers(1, 4096 if big else 32))
    layers = draw(st.integers(1, 512 if big else 24))
    vocab = draw(st.integers(1, 2**40 if big else 300_000))
    ff = draw(st.integers(1, 2**24 if big else 50_000))
    positions = draw(st.integers(1, 2**30))
    if "gpt2" in roles:
        data.update(n_embd=h * hd, n_head=h, n_layer=layers, vocab_size=vocab, n_positions=positions)
        data["n_inner"] = draw(st.none() | st.just(ff))
        return data
    data.update(
        hidden_size=h * hd,
        num_attention_heads=h,
        num_key_value_heads=g,
        num_hidden_layers=layers,
        vocab_size=vocab,
        intermediate_size=ff,
        max_position_embeddings=positions,
        tie_word_embeddings=draw(st.booleans()),
    )
    if "head_dim" in roles:
        data["head_dim"] = hd
    if "window" in roles:
        data[roles["window"]] = draw(st.integers(1, 2**20))
    if "switch" in roles:
        data[roles["switch"]] = draw(st.booleans())
        data["max_window_layers"] = draw(st.integers(0, layers))
    if "experts" in roles:
        experts = draw(st.integers(1, 256))
        data[roles["experts"]] = experts
        data["num_experts_per_tok"] = draw(st.integers(1, experts))
        if "expert_ff" in roles:
            data[roles["expert_ff"]] = draw(st.integers(1, 8192))
    if "mla" in roles:
        data.update(
            kv_lora_rank=draw(st.integers(1, 1024)),
            q_lora_rank=draw(st.none() | st.integers(1, 2048)),
            qk_rope_head_dim=draw(st.integers(1, 128)),
            qk_nope_head_dim=draw(st.integers(1, 256)),
            v_head_dim=draw(st.integers(1, 256)),
            first_k_dense_replace=draw(st.integers(0, layers)),
            n_shared_experts=draw(st.integers(0, 4)),
            n_group=1,
            topk_group=1,
            num_nextn_predict_layers=draw(st.integers(0, 2)),
        )
    return data


@budget(120)
@given(architectures())
def test_well_formed_architectures_are_priced(data: dict[str, Any]) -> None:
    with time_limit(TIME_LIMIT):
        report = analyze(data)
        assert report.cost is not None, report.to_dict().get("cost_note")
        check_report(report)
        if "num_key_value_heads" in data and "kv_lora_rank" not in data:
            mha = analyze({**data, "num_key_value_heads": data["num_attention_heads"]})
            assert mha.cost.kv.bytes_per_token >= report.cost.kv.bytes_per_token
            assert mha.cost.params.total >= report.cost.params.total
        check_lint(json.dumps(data).encode())


# ------------------------------------------------------------------ the CLI, sampled

ENV = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotdiff", *args],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def check_cli(res: subprocess.CompletedProcess[str], ok: tuple[int, ...] = (0, 2)) -> None:
    assert res.returncode in ok, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    if res.returncode == 2:
        lines = res.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("slotdiff: error: "), res.stderr
    assert "\x1b" not in res.stdout + res.stderr  # nothing from a config drives the terminal


@budget(6)
@given(mutated_corpus())
def test_cli_sample(tmp_path_factory: pytest.TempPathFactory, case: Any) -> None:
    _, data, _ = case
    folder = tmp_path_factory.mktemp("cli")
    cfg = folder / "config.json"
    cfg.write_text(json.dumps(data, allow_nan=True), encoding="utf-8")
    table = run_cli(str(cfg), cwd=folder)
    check_cli(table)
    res = run_cli(str(cfg), "--json", cwd=folder)
    check_cli(res)
    assert res.returncode == table.returncode
    if res.returncode == 0:
        strict_json(res.stdout)
    lint = run_cli("lint", "--no-config", "--format", "json", str(cfg), cwd=folder)
    check_cli(lint, ok=(0, 1))
    strict_json(lint.stdout)
    assert sorted(p.name for p in folder.iterdir()) == ["config.json"], "the CLI wrote a file"
