"""Keys a published config repeats that its transformers class derives instead (MiMo-V2-Flash's
``swa_*`` sizes and per-layer lists), and keys a class reads out of ``kwargs``.

Truth comes from outside slotdiff: the published file's stored transformers reference
(tests/fixtures/conformance/published), and transformers' own config class, which shows
what it reads (a key it reads changes the config it builds) and what it ignores.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from slotdiff.analysis.analyze import analyze, load
from slotdiff.core.resources import load_schema_file
from slotdiff.lint import engine
from slotdiff.lint.policy import Policy

transformers = pytest.importorskip("transformers")

PUBLISHED = Path(__file__).parent / "fixtures" / "conformance" / "published"
MIMO = json.loads((PUBLISHED / "XiaomiMiMo__MiMo-V2-Flash.json").read_text())


def _write(tmp_path: Path, config: dict[str, Any], name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config, indent=1))
    return path


def _lint(path: Path) -> list[tuple[str, str]]:
    run = engine.lint([str(path)], Policy())
    return [(d.code, d.message) for d in run.diagnostics]


def _transformers_config(config: dict[str, Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls = transformers.CONFIG_MAPPING[config["model_type"]]
        return cls(**{k: v for k, v in config.items() if k != "model_type"})


def test_mimo_v2_flash_as_published_is_lint_clean_verified_and_exact(tmp_path: Path) -> None:
    path = _write(tmp_path, MIMO["config"])
    assert _lint(path) == []
    report = analyze(path, weights=False)
    assert report.coverage.status == "verified", report.coverage.reasons
    assert report.cost is not None
    assert report.cost.params.total == MIMO["reference"]["params"]["total"] == 308_778_768_832
    assert report.cost.params.active == MIMO["reference"]["params"]["active"]


# Each repeated key, a value that differs from the layers the class builds, and where it shows.
CHANGED = [
    ("swa_num_key_value_heads", 16, "swa_num_key_value_heads is 16", "builds 8"),
    ("swa_num_attention_heads", 32, "swa_num_attention_heads is 32", "builds 64"),
    ("swa_head_dim", 128, "swa_head_dim is 128", "builds 192"),
    ("swa_v_head_dim", 192, "swa_v_head_dim is 192", "builds 128"),
    ("add_full_attention_sink_bias", True, "add_full_attention_sink_bias is True", "builds False"),
]


@pytest.mark.parametrize(("key", "value", "said", "built"), CHANGED, ids=[c[0] for c in CHANGED])
def test_a_repeated_key_that_disagrees_is_an_error_and_costs_trust(
    tmp_path: Path, key: str, value: Any, said: str, built: str
) -> None:
    config = {**MIMO["config"], key: value}
    # transformers' class does not read the key: it builds the same config as the published one
    ours, published = _transformers_config(config), _transformers_config(MIMO["config"])
    assert ours.num_key_value_heads == published.num_key_value_heads
    assert ours.layer_types == published.layer_types and ours.head_dim == published.head_dim
    path = _write(tmp_path, config)
    found = _lint(path)
    assert [c for c, _ in found] == ["SD118"], found
    assert said in found[0][1] and built in found[0][1]
    report = analyze(path, weights=False)
    assert report.coverage.status == "unverified"
    assert any(key in r for r in report.coverage.reasons)
    assert report.cost is not None  # the figures stay the class's build
    assert report.cost.params.total == MIMO["reference"]["params"]["total"]


def test_a_per_layer_list_that_disagrees_is_told_by_its_first_layer(tmp_path: Path) -> None:
    config = json.loads(json.dumps(MIMO["config"]))
    published = _transformers_config(MIMO["config"])
    assert published.layer_types[3] == "sliding_attention"  # the class's own layout
    assert published.mlp_layer_types[0] == "dense"
    config["hybrid_layer_pattern"][3] = 0  # says full attention where the class builds sliding
    config["moe_layer_freq"][0] = 1  # says MoE where the class builds the dense layer
    found = _lint(_write(tmp_path, config))
    messages = sorted(m for c, m in found if c == "SD118")
    assert len(found) == 2 and len(messages) == 2, found
    assert messages[0].startswith("hybrid_layer_pattern[3] is 0") and "builds 1" in messages[0]
    assert messages[1].startswith("moe_layer_freq[0] is 1") and "builds 0" in messages[1]


def test_a_list_of_another_length_is_reported_not_compared_entry_by_entry(tmp_path: Path) -> None:
    config = {**MIMO["config"], "moe_layer_freq": [1] * 50}
    found = _lint(_write(tmp_path, config))
    assert [c for c, _ in found] == ["SD118"]
    assert "moe_layer_freq is '50 entries'" in found[0][1] and "'48 layers'" in found[0][1]


def test_without_the_repeated_keys_the_config_is_the_same_model(tmp_path: Path) -> None:
    dropped = {k: v for k, v in MIMO["config"].items() if not k.startswith(("swa_", "add_"))}
    for key in ("hybrid_layer_pattern", "moe_layer_freq", "layernorm_epsilon"):
        dropped.pop(key)
    path = _write(tmp_path, dropped)
    assert _lint(path) == []
    report = analyze(path, weights=False)
    assert report.coverage.status == "verified"
    assert report.cost is not None
    assert report.cost.params.total == MIMO["reference"]["params"]["total"]


# Keys a class reads from kwargs in __post_init__ rather than declaring a field, each with a
# value that changes the config transformers builds (so the class does read it).
KWARGS_KEYS = [
    ("glm_moe_dsa", "index_topk_pattern", "FS" * 39, "indexer_types"),
    ("gemma3_text", "rope_local_base_freq", 1234.0, "rope_parameters"),
    ("qwen3_next", "full_attention_interval", 2, "layer_types"),
]


@pytest.mark.parametrize(
    ("model_type", "key", "value", "changes"), KWARGS_KEYS, ids=[k[1] for k in KWARGS_KEYS]
)
def test_a_key_a_class_reads_from_kwargs_is_a_transformers_key(
    model_type: str, key: str, value: Any, changes: str
) -> None:
    default = _transformers_config({"model_type": model_type})
    given = _transformers_config({"model_type": model_type, key: value})
    assert getattr(given, changes) != getattr(default, changes)  # transformers reads the key
    assert key in load_schema_file("config_keys.json")["keys"]


# The DSA classes re-route a ``num_experts`` kwarg onto ``n_routed_experts`` (a null one does
# nothing); GLM-5-Next's class has no such re-route.
EXPERT_KEYS = [
    {"num_experts": 128, "n_routed_experts": 256},
    {"num_experts": None, "n_routed_experts": 192},
    {"num_experts": None},
    {"num_experts": 64},
    {"n_routed_experts": 96},
    {"num_local_experts": 48},
]


DSA_TYPES = ["deepseek_v32", "glm_moe_dsa", "mistral_large4_text", "glm5_next_text"]


@pytest.mark.parametrize("model_type", DSA_TYPES)
@pytest.mark.parametrize("keys", EXPERT_KEYS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_routed_experts_as_the_class_takes_them(model_type: str, keys: dict[str, Any]) -> None:
    config = {"model_type": model_type, **keys}
    theirs = _transformers_config(config).n_routed_experts
    assert load(config).arch.get("n_experts") == theirs


# Every error `slotdiff lint` finds on the real published configs, each a true finding: MLC's
# own rope_type for GPT-J (the Hub file has no rope_scaling), remote-code model_types one edit
# away from a transformers type (SD116's "did you mean"), composites given flat text keys that
# their class ignores, MiniMax-M3's per-layer moe_layer_freq and Hunyuan-A13B's per-layer
# moe_intermediate_size under their remote-code types, and Megatron-Bridge's trimmed Falcon-H1
# copy, whose default SSM width its 24 heads do not divide (transformers refuses it too).
PUBLISHED_ERRORS = {
    ("EleutherAI__gpt-j-6b", "SD102"),
    ("MiniMaxAI__MiniMax-M3", "SD116"),
    ("MiniMaxAI__MiniMax-M3", "SD103"),
    ("XiaomiMiMo__MiMo-7B-Base", "SD116"),
    ("internlm__internlm2_5-7b-chat", "SD116"),
    ("openbmb__MiniCPM-MoE-8x2B", "SD116"),
    ("stepfun-ai__Step-3.7-Flash-FP8", "SD116"),
    ("stepfun-ai__Step-3.7-Flash", "SD116"),
    ("tclf90__GLM-4.1V-9B-Thinking-AWQ", "SD116"),
    ("tencent__Hunyuan-A13B-Instruct", "SD103"),
    ("tiiuae__Falcon-H1-0.5B-Base", "SD103"),
}


def test_published_configs_lint_with_only_their_true_errors(tmp_path: Path) -> None:
    paths = []
    for path in sorted(PUBLISHED.glob("*.json")):
        entry = json.loads(path.read_text())
        if "config" in entry:
            paths.append(_write(tmp_path, entry["config"], path.name))
    run = engine.lint([str(p) for p in paths], Policy())
    errors = {(Path(d.path).stem, d.code) for d in run.diagnostics if d.severity == "error"}
    assert len(paths) >= 225
    assert errors == PUBLISHED_ERRORS
