"""Each attention mechanism lives in one construct module (src/slotdiff/constructs/<name>.py),
registered in constructs.CONSTRUCTS: no other module branches on a mixer's name.

Read from the source with ``ast``: a comparison of a ``mixer`` with a registered construct's
name, or the name of a construct other than plain attention written as a string anywhere,
outside the construct's own module is a mechanism fact leaking out of it (issue 25, point 4).
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pytest

from slotdiff.constructs import CONSTRUCTS, PLAIN, Construct, construct, is_cross, latent, recurrent, softmax

PKG = Path(__file__).resolve().parents[1] / "src" / "slotdiff"

# Modules that may still name a mixer outside constructs/, each with its reason. Paths are
# relative to src/slotdiff.
ALLOWED: dict[str, str] = {
    "schema/layers.py": "assigns the mixer from the config: a kv_lora_rank makes a layer MLA",
    "schema/layer_mixers.py": "layer rules that give the config's windows and chunks to attention layers",
    "schema/layer_rules.py": "layer rules that assign mixers from the config's layer types",
}

# Construct names that are also ordinary words of the code, so only a comparison with a
# ``mixer`` counts for them, not the bare string.
SHARED_WORDS: dict[str, str] = {
    "attention": "also a slot's name (every attention tensor's slot, the attention.* facets)",
    "conv": "also a tensor kind (a convolution's weights count toward matmul FLOPs)",
    "mamba": "also vLLM's cache-spec kind for any recurrent state page (deploy/kvspec.py)",
}


def _is_mixer(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "mixer") or (
        isinstance(node, ast.Name) and node.id == "mixer"
    )


def _strings(node: ast.AST) -> set[str]:
    return {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}


def leaks(source: str, names: set[str], own: set[str]) -> list[tuple[int, str]]:
    """(line, what) of mechanism branching in ``source``: a ``mixer`` compared with one of
    ``names``, or one of ``names`` other than plain attention's written as a string, except
    the names in ``own`` (the module's own construct)."""
    found = []
    special = names - set(SHARED_WORDS)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            hit = {s for p in parts for s in _strings(p)} & (names - own)
            if hit and any(_is_mixer(p) for p in parts):
                found.append((node.lineno, f"mixer compared with {sorted(hit)}"))
        elif isinstance(node, ast.Constant) and node.value in special - own:
            found.append((node.lineno, f"the string {node.value!r}"))
    return sorted(set(found))


def _modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def test_no_module_branches_on_a_mechanism_outside_its_construct() -> None:
    names = set(CONSTRUCTS)
    wrong = []
    for path in _modules():
        rel = path.relative_to(PKG).as_posix()
        if rel in ALLOWED or rel.startswith("constructs/"):
            continue
        wrong += [
            f"{rel}:{line}: {what}" for line, what in leaks(path.read_text(encoding="utf-8"), names, set())
        ]
    assert not wrong, "ask slotdiff.constructs instead of naming a mechanism:\n" + "\n".join(wrong)


def test_construct_modules_name_only_their_own_mechanism() -> None:
    names = set(CONSTRUCTS)
    wrong = []
    for path in sorted((PKG / "constructs").glob("*.py")):
        own = {n for n, c in CONSTRUCTS.items() if type(c).__module__ == f"slotdiff.constructs.{path.stem}"}
        for line, what in leaks(path.read_text(encoding="utf-8"), names, own):
            wrong.append(f"constructs/{path.name}:{line}: {what}")
    assert not wrong, "\n".join(wrong)


def test_every_allowed_module_still_needs_it() -> None:
    """An allow-list entry whose module no longer names a mechanism is stale."""
    names = set(CONSTRUCTS)
    for rel, reason in ALLOWED.items():
        assert reason
        assert leaks((PKG / rel).read_text(encoding="utf-8"), names, set()), rel


def test_the_check_can_fail() -> None:
    names = {"attention", "mla"}
    assert leaks('if layer.mixer == "mla":\n    pass\n', names, set()) == [
        (1, "mixer compared with ['mla']"),
        (1, "the string 'mla'"),
    ]
    assert leaks('ok = s.mixer in ("attention", "mamba")\n', names, set()) == [
        (1, "mixer compared with ['attention']")
    ]
    assert leaks('label = {"mla": "MLA"}.get(kind)\n', names, set()) == [(1, "the string 'mla'")]
    assert leaks('if spec.mixer in ("mamba", "mamba2"):\n    pass\n', CONSTRUCTS.keys(), set())[0] == (
        1,
        "mixer compared with ['mamba', 'mamba2']",
    )
    assert leaks('if layer.mixer == "mla":\n    pass\n', names, {"mla"}) == []
    assert leaks('slot = "attention"\n', names, set()) == []  # a slot's name, not a branch


@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_each_construct_is_one_module_keyed_by_its_mixer(name: str) -> None:
    """One module per mechanism (Mamba 1 and 2 share theirs, by version)."""
    mech = CONSTRUCTS[name]
    assert mech.name == name
    module = type(mech).__module__
    assert module == f"slotdiff.constructs.{name}" or (mech.ssm and module == "slotdiff.constructs.mamba")
    assert construct(name) is mech
    assert softmax(name) == mech.softmax
    assert recurrent(name) == (not mech.softmax and not is_cross(name))
    assert latent(name) == mech.latent_kv


@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_each_construct_answers_every_stage(name: str) -> None:
    """Every construct implements what cost/, train/ and slots/ ask of any mixer; the engine
    and counterfactual hooks where it declares a latent cache or is not plain attention."""
    cls = type(CONSTRUCTS[name])
    if not cls.softmax:  # a recurrence: its state and its tensors (and vLLM's page of it)
        required = ["tensors"]
        if CONSTRUCTS[name].recurrent:
            required += ["mixer_state"] + (["vllm_state_page"] if cls.vllm_kind else [])
        missing = [m for m in required if getattr(cls, m) is getattr(Construct, m)]
        assert not missing, f"{name} does not implement {missing}"
        return
    required = ["kv_elements", "qk_v_dims", "tensors", "saved", "lora_matrices", "kv_fill"]
    if CONSTRUCTS[name].latent_kv:
        required += ["engine_token_elements", "vllm_token_bytes", "tp_note"]
    if not cls.plain:
        required += ["as_attention"]
    missing = [m for m in required if getattr(cls, m) is getattr(Construct, m)]
    assert not missing, f"{name} does not implement {missing}"
    for m in required:
        assert inspect.getdoc(getattr(cls, m)), (name, m)


def test_exactly_one_plain_attention() -> None:
    assert [n for n, c in CONSTRUCTS.items() if c.plain] == [PLAIN.name]
    assert construct(None) is None and construct("retention") is None
    assert not softmax("linear_attention") and recurrent("mamba2") and not recurrent("mla")
    assert is_cross("cross_attention") and not softmax("cross_attention") and not recurrent("cross_attention")


def _literal(node: ast.AST) -> bool:
    """A string, or a tuple / list / set of strings, written in the code."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_literal(e) for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _model_type_literals(source: str) -> list[int]:
    """Lines comparing a ``model_type`` with strings written in the code (a family fact)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            named = any(
                (isinstance(p, ast.Attribute) and p.attr == "model_type")
                or (isinstance(p, ast.Name) and p.id == "model_type")
                for p in parts
            )
            if named and any(_literal(p) for p in parts):
                lines.append(node.lineno)
    return lines


def test_family_facts_are_data_not_code() -> None:
    """Which families a rule covers is read from schemas/ (train_numerics.json, ...), never a
    model_type compared with a string in the code (issue 25, point 4)."""
    assert _model_type_literals('if arch.model_type in ("deepseek_v3", "kimi_k2"):\n    pass\n') == [1]
    assert _model_type_literals('ok = model_type == "glm_moe_dsa"\n') == [1]
    assert _model_type_literals('ok = rec.model_type not in fp["model_types"]\n') == []
    wrong = [
        f"{p.relative_to(PKG).as_posix()}:{line}"
        for p in _modules()
        for line in _model_type_literals(p.read_text(encoding="utf-8"))
    ]
    assert not wrong, "family facts belong in schemas/:\n" + "\n".join(wrong)


def _data_mixers(node: object) -> set[str]:
    """Every ``"mixer"`` value a data file assigns (layer rules, layer maps, overrides)."""
    if isinstance(node, dict):
        own = {v for k, v in node.items() if k == "mixer" and isinstance(v, str)}
        return own.union(*(_data_mixers(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_data_mixers(v) for v in node))
    return set()


def test_every_mixer_the_data_or_the_layer_rules_assign_has_a_construct() -> None:
    """A mixer a family's data names, or a layer rule maps a layer type to, is priced by its
    construct: none falls through to a stage's own branch."""
    schemas = PKG.parents[1] / "schemas"
    named = set().union(
        *(_data_mixers(json.loads(p.read_text(encoding="utf-8"))) for p in schemas.rglob("*.json"))
    )
    tree = ast.parse((PKG / "schema" / "layer_rules.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "mixer" and isinstance(v, ast.Constant):
                    named.add(v.value)
    named.discard(None)
    assert {"attention", "mla", "mamba2"} <= named  # the scan reads the data
    assert named <= set(CONSTRUCTS), sorted(named - set(CONSTRUCTS))
