"""Regenerate schemas/routers.json: how each MoE family's router scores and picks experts.

A config rarely says how its router works (DeepSeek's ``scoring_func`` is descriptive; the
family's implementation decides), so the router facet falls back on what transformers'
implementation of the model_type does. This script reads each model_type's modeling file as
text (nothing is imported or run) and, in its router class (a class whose name ends in
Router, Gate or MoEGate and that picks the top-k), records:

- ``score``: ``sigmoid`` or ``softmax``, the function applied to the router logits, or
  ``config`` when the class chooses by a config key;
- ``aux_free``: selection through a per-expert correction bias (``e_score_correction_bias``),
  DeepSeek-V3's auxiliary-loss-free balancing;
- ``grouped``: group-limited routing (``topk_group``);
- ``renormalize``: the top-k weights scaled to sum to one (``config``: by a config key);
- ``class`` and ``source``: where it was read.

Run it (transformers installed) after upgrading transformers or adding a model_type:

    python tools/gen_routers.py > schemas/routers.json
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUTER_CLASS = re.compile(r"(Router|Gate|MoEGate|MoeGate|TopKGate|TopkGate)$")


def modeling_file(models: Path, model_type: str) -> Path | None:
    """transformers' modeling file for ``model_type`` (a nested text type: its composite's)."""
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    names = [model_type_to_module_name(model_type)]
    for suffix in ("_text", "_text_model"):
        if model_type.endswith(suffix):
            names.append(model_type_to_module_name(model_type[: -len(suffix)]))
    for name in names:
        path = models / name / f"modeling_{name}.py"
        if path.exists():
            return path
    return None


def first(source: str, *words: str) -> str | None:
    """The word of ``words`` that occurs first in ``source`` (None when none does)."""
    hits = [(source.find(w), w) for w in words if w in source]
    return min(hits)[1] if hits else None


def router_facts(path: Path) -> dict[str, object] | None:
    """The router class of one modeling file and what it does, or None when it has none."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    classes = {n.name: ast.unparse(n) for n in tree.body if isinstance(n, ast.ClassDef)}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or not ROUTER_CLASS.search(node.name):
            continue
        src = classes[node.name]  # unparsed: comments ("sigmoid, not softmax") are gone
        if "topk" not in src.lower():
            continue
        forward = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        body = ast.unparse(forward) if forward is not None else src
        # the correction bias may live in a helper module the router builds (ERNIE's MoeStatics)
        used = [classes[name] for name in classes if name != node.name and name in src]
        if re.search(r"scoring_func|score_func|router_activation|activation ==|scoring ==", src):
            score = "config"
        else:
            score = first(body or src, "sigmoid", "softmax") or first(src, "sigmoid", "softmax")
        if score is None:
            continue
        if re.search(r"norm_topk_prob|renormalize|moe_renorm", src):
            renorm: object = "config"
        else:
            # top-k weights divided by their sum, or a softmax taken over the top-k logits only
            renorm = bool(
                re.search(r"/=?\s*\(?\s*\w*\.sum\(|/=\s*\w+\.sum\(|/ \w+\.sum\(", body or "")
                or re.search(r"softmax\(\s*\w*top\w*", body or "")
            )
        return {
            "score": score,
            "renormalize": renorm,
            "aux_free": any("e_score_correction_bias" in c for c in (src, *used)),
            "grouped": "topk_group" in src,
            "class": node.name,
            "source": str(path.relative_to(path.parents[2])),
        }
    return None


def main() -> int:
    import transformers

    models = Path(transformers.__file__).parent / "models"
    out: dict[str, object] = {
        "about": (
            "How each MoE family's router scores and selects experts in transformers "
            f"{transformers.__version__}, read from its router class by tools/gen_routers.py "
            "(never typed by hand). score: the function on the router logits (config: chosen by "
            "a config key); aux_free: selection through a per-expert correction bias "
            "(auxiliary-loss-free balancing); grouped: group-limited top-k; renormalize: the top-k "
            "weights scaled to sum to one (config: by a config key)."
        ),
        "transformers_version": transformers.__version__,
        "model_types": {},
    }
    for spec_path in sorted((ROOT / "schemas" / "model_types").glob("*.json")):
        model_type = json.loads(spec_path.read_text())["model_type"]
        path = modeling_file(models, model_type)
        facts = router_facts(path) if path else None
        if facts:
            out["model_types"][model_type] = facts  # type: ignore[index]
    json.dump(out, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
