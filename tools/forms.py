"""Published shapes of every conformance row: the same models written as people write them.

A registry row (tests/fixtures/conformance/reference.json) is a config transformers serialized:
every key present, every derived field filled in. Published configs leave keys to their class
default and derived fields out. For every row this builds, with transformers' own config
classes, the forms such a file takes (issue 25, point 1):

* ``minimal``: every key whose absence the config class makes up for dropped (keys equal to the
  class default, fields ``__post_init__`` derives), one at a time while the class still gives
  the same config;
* ``lists``: every per-layer list (one entry per layer) dropped at once: the per-layer fields in
  the scalar form the class derives them from (the serialized row is the list form);
* ``drop:KEY`` (default rows): each structural key dropped on its own;
* ``pattern:KEY``: a per-layer list written as the pattern string its class also accepts
  (:data:`PATTERNS`: Nemotron-H's ``hybrid_override_pattern``, GLM-5's ``index_topk_pattern``);
* ``int:KEY``: a per-layer list written as the integer its class derives it from
  (:data:`INT_KEYS`: ``full_attention_interval``, ``sliding_window_pattern`` ...).

A form's truth is transformers': the config class turns the form into a config; when that
config equals a stored row's, that row's reference (meta-device build, real-cache KV) is the
form's. A form that equals no stored row (dropping the key made another model) is measured on
its own: transformers' meta-device build gives its parameters (``reference``; no KV figures). A
form the class rejects is counted, not compared (``rejected``: transformers' reason). KV
figures are compared only where the same edit of the row's tiny KV copy gives the same tiny
config.

    python tools/forms.py refresh [TYPES...]   # transformers: the forms of each row (cached by digest)
    python tools/forms.py report               # slotdiff on every form -> forms.json statuses

(also ``python tools/conformance.py forms refresh|report``). ``tests/test_forms.py`` holds
slotdiff to the stored statuses and recomputes a sample on both sides.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import inspect
import json
import multiprocessing
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

ROOT = harness.ROOT
FORMS = harness.FIXTURES / "forms.json"
KNOWN = harness.FIXTURES / "forms_known.json"
#: Keys kept in every form: what a file always names.
KEPT = frozenset({"model_type", "architectures"})
#: Serialization bookkeeping transformers adds to every config dict: never part of the model.
VOLATILE = frozenset({"transformers_version", "_name_or_path", "dtype", "torch_dtype"})
#: Refusal texts that name the part slotdiff cannot count: a documented refusal.
DOCUMENTED = ("cannot count", "partial: excludes")
#: Per-layer lists a config class of transformers 5.24 also accepts as a pattern string, one
#: character per layer: (list key, pattern key, list entry -> character). Found by reading every
#: configuration_*.py for a string turned into a per-layer list: NemotronHConfig._pattern_to_list
#: (hybrid_override_pattern, mtp_hybrid_override_pattern), and index_topk_pattern of
#: GlmMoeDsaConfig, Glm5NextTextConfig and MistralLarge4TextConfig. (Exaone4's
#: sliding_window_pattern is documented as a string but used as a period: ``(i + 1) % pattern``.)
_NEMOTRON = {"linear_attention": "M", "moe": "E", "full_attention": "*", "mlp": "-"}
PATTERNS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("layers_block_type", "hybrid_override_pattern", _NEMOTRON),
    ("mtp_layers_block_type", "mtp_hybrid_override_pattern", _NEMOTRON),
    ("indexer_types", "index_topk_pattern", {"full": "F", "shared": "S"}),
)
Path_ = tuple[str, ...]


# --------------------------------------------------------------------------------------------
# Forms of one config (transformers' side)
# --------------------------------------------------------------------------------------------


def digest(config: Any) -> str:
    """SHA-256 of a config's canonical JSON."""
    text = json.dumps(harness._encode(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: Bumped when the forms a row gets change (a new family, a new field): stored forms of an
#: older generation are stale, and ``refresh`` recomputes them.
GENERATION = 3


def row_digest(row: harness.Row) -> str:
    """What a row's stored forms were computed for: its configs and :data:`GENERATION`."""
    return digest([row.config, row.kv_config, GENERATION])


def paths(config: Mapping[str, Any]) -> list[Path_]:
    """Top-level keys, and the keys of nested sub-configs (dicts with a model_type), in order."""
    out: list[Path_] = []
    for key, value in config.items():
        if key in KEPT:
            continue
        out.append((key,))
        if isinstance(value, Mapping) and "model_type" in value:
            out.extend((key, sub) for sub in value if sub not in KEPT)
    return out


def drop(config: Mapping[str, Any], gone: Iterable[Path_]) -> dict[str, Any]:
    """``config`` without the keys at ``gone`` (a new dict)."""
    out = copy.deepcopy(dict(config))
    for path in gone:
        node = out
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return out


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in VOLATILE}
    return value


def normalized(config: Mapping[str, Any], unused: Iterable[str] = ()) -> str | None:
    """The config transformers' class makes of ``config``, as canonical JSON (None: rejected);
    ``unused``: dotted keys the class keeps as plain attributes after reading them (GLM-5 reads
    ``index_topk_pattern`` from its kwargs without popping it), left out of the comparison."""
    harness._registry()  # puts tests/ on the path
    from oracle import hf_oracle

    try:
        built = hf_oracle._config_object(harness._decode(config)).to_dict()
    except Exception:
        return None
    built = drop(built, [tuple(k.split(".")) for k in unused])
    return json.dumps(harness._encode(_strip(built)), sort_keys=True, default=str)


def minimal(config: Mapping[str, Any], same: str, keep: Iterable[Path_] = ()) -> list[Path_]:
    """The keys dropped one at a time while the class still makes ``same`` of the rest."""
    gone: list[Path_] = []
    kept = set(keep)
    for path in paths(config):
        if path in kept or any(path[: len(g)] == g for g in gone):
            continue
        if normalized(drop(config, [*gone, path])) == same:
            gone.append(path)
    return gone


def per_layer_lists(config: Mapping[str, Any]) -> list[Path_]:
    """The per-layer lists (one entry per layer) at the top level and in a text sub-config."""
    out: list[Path_] = []
    for prefix, node in [((), config), *(((k,), v) for k, v in config.items() if isinstance(v, Mapping))]:
        n = node.get("num_hidden_layers") or node.get("num_layers") or node.get("n_layer")
        if not isinstance(n, int):
            continue
        out += [(*prefix, k) for k, v in node.items() if isinstance(v, list) and len(v) == n and n > 1]
    return out


#: Integer kwargs a config class of transformers 5.24 pops in ``__post_init__`` to derive a
#: per-layer list it is not given (``kwargs.pop("full_attention_interval", 4)``: Qwen3-Next,
#: Qwen3.5; ``sliding_window_pattern``: Cohere2, Cohere-Compass; ``no_rope_layer_interval``:
#: Mistral Large 4; ``moe_layer_freq``: A.X-K1/K2, Dots3 Note, Step-3.7; ``index_topk_freq``:
#: GLM-5, GLM5-Next, Mistral Large 4). A per-layer list the class rebuilds from one of them is
#: also published as that integer.
INT_KEYS: tuple[str, ...] = (
    "full_attention_interval",
    "sliding_window_pattern",
    "no_rope_layer_interval",
    "moe_layer_freq",
    "index_topk_freq",
)
#: The integers tried for such a key.
INT_VALUES = range(1, 9)


def int_forms(config: Mapping[str, Any], same: str) -> list[tuple[Path_, Path_, int]]:
    """(list key, int key, value) where the config class, given that integer instead of the
    per-layer list, makes ``same`` of it again, and another value makes something else (the
    integer decides the list). Only keys the node's class names in its ``__post_init__``."""
    out: list[tuple[Path_, Path_, int]] = []
    for path in per_layer_lists(config):
        prefix = path[:-1]
        node = config[prefix[0]] if prefix else config
        for key in _int_keys(str(node.get("model_type") or config.get("model_type") or "")):
            if key in node:
                continue
            put = (*prefix, key)
            dotted = ".".join(put)
            hits = [v for v in INT_VALUES if normalized(edit(config, [path], {dotted: v}), [dotted]) == same]
            if len(hits) == 1:  # one value restores the list: the integer decides it
                out.append((path, put, hits[0]))
    return out


@cache  # one source read per class, not per row
def _int_keys(model_type: str) -> tuple[str, ...]:
    """The :data:`INT_KEYS` the config class of ``model_type`` reads in ``__post_init__``."""
    from transformers import CONFIG_MAPPING

    try:
        source = inspect.getsource(CONFIG_MAPPING[model_type].__post_init__)
    except (KeyError, OSError, TypeError):
        return ()
    return tuple(k for k in INT_KEYS if f'"{k}"' in source)


def pattern_forms(config: Mapping[str, Any]) -> list[tuple[Path_, Path_, str]]:
    """(list key, pattern key, pattern string) for each per-layer list of :data:`PATTERNS` the
    config holds (top level or a sub-config) whose every entry has a pattern character."""
    out: list[tuple[Path_, Path_, str]] = []
    nodes = [((), config), *(((k,), v) for k, v in config.items() if isinstance(v, Mapping))]
    for prefix, node in nodes:
        for list_key, pattern_key, chars in PATTERNS:
            value = node.get(list_key)
            if isinstance(value, list) and value and all(isinstance(v, str) and v in chars for v in value):
                out.append(((*prefix, list_key), (*prefix, pattern_key), "".join(chars[v] for v in value)))
    return out


def edit(
    config: Mapping[str, Any], gone: Iterable[Path_], put: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``config`` without the keys at ``gone`` and with ``put`` (dotted key -> value) set."""
    out = drop(config, gone)
    for dotted, value in (put or {}).items():
        *parents, last = dotted.split(".")
        node = out
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = copy.deepcopy(value)
    return out


def structural(path: Path_, ignored: frozenset[str]) -> bool:
    """A key whose absence may change the model (the key map's structure-free keys are not)."""
    return path[-1] not in ignored and path[-1] not in VOLATILE and path[-1] not in KEPT


def forms_of_type(entry: Mapping[str, Any], model_type: str, ignored: frozenset[str]) -> dict[str, Any]:
    """Every form of every row of one type: ``{row_id: {"digest", "forms": {name: spec}}}``.

    A spec is ``{"drop": [dotted keys], "truth": row_id or None, "kv_drop": [dotted keys] or
    None}`` (None: KV figures not compared), with ``"set"`` / ``"kv_set"`` (dotted key -> value)
    for a pattern form, and for a form equal to no stored row ``"reference"`` (transformers'
    parameters of the form) or ``"rejected"`` (why the class refuses it)."""
    rows = harness.rows({"types": {model_type: entry}})
    by_norm: dict[str, str] = {}
    norms: dict[str, str | None] = {}
    for row in rows:
        norms[row.id] = n = normalized(row.config)
        if n is not None:
            by_norm.setdefault(n, row.id)
    out: dict[str, Any] = {}
    for row in rows:
        same = norms[row.id]
        if same is not None:
            forms = _row_forms(row, same, by_norm, ignored)
            out[row.id] = {"digest": row_digest(row), "forms": forms}
    return out


def _row_forms(
    row: harness.Row, same: str, by_norm: Mapping[str, str], ignored: frozenset[str]
) -> dict[str, Any]:
    """The forms of one row (see :func:`forms_of_type`)."""
    kv_same = normalized(row.kv_config) if row.kv_config is not None else None
    specs: dict[str, Any] = {}

    def add(
        name: str,
        gone: list[Path_],
        kv_gone: list[Path_] | None = None,
        put: dict[str, Any] | None = None,
        kv_put: dict[str, Any] | None = None,
    ) -> None:
        """A form; its KV form edits the tiny copy the same way (``kv_gone`` / ``kv_put`` where
        it differs), compared only where the class makes the same tiny config of it."""
        form = edit(row.config, gone, put)
        got = normalized(form, put or ())
        truth = row.id if got == same else by_norm.get(got or "")
        kv_gone = gone if kv_gone is None else kv_gone
        kv_put = put if kv_put is None else kv_put
        kv_ok = truth == row.id and kv_same is not None and row.kv_config is not None
        kv_ok = kv_ok and normalized(edit(row.kv_config or {}, kv_gone, kv_put), kv_put or ()) == kv_same
        spec: dict[str, Any] = {
            "drop": [".".join(p) for p in gone],
            "truth": truth,
            "kv_drop": [".".join(p) for p in kv_gone] if kv_ok else None,
        }
        if put:
            spec["set"] = put
            spec["kv_set"] = kv_put if kv_ok else None
        if truth is None:
            spec.update(measured(form) if got is not None else {"rejected": rejection(form)})
        specs[name] = spec

    kv_minimal = minimal(row.kv_config, kv_same) if row.kv_config is not None and kv_same else []
    add("minimal", minimal(row.config, same), kv_minimal)
    lists = per_layer_lists(row.config)
    if lists:
        add("lists", lists)
    kv_patterns = {p[0]: p for p in pattern_forms(row.kv_config or {})}
    for list_path, pattern_path, text in pattern_forms(row.config):
        kv = kv_patterns.get(list_path)
        kv_put = {".".join(kv[1]): kv[2]} if kv else {}
        add("pattern:" + ".".join(list_path), [list_path], None, {".".join(pattern_path): text}, kv_put)
    for list_path, int_path, value in int_forms(row.config, same):
        kv = [f for f in int_forms(row.kv_config, kv_same) if f[0] == list_path] if kv_same else []
        kv_put = {".".join(kv[0][1]): kv[0][2]} if kv else {}
        add("int:" + ".".join(list_path), [list_path], None, {".".join(int_path): value}, kv_put)
    if row.variant == "default":
        for path in paths(row.config):
            if structural(path, ignored):
                add("drop:" + ".".join(path), [path])
    return specs


def measured(form: Mapping[str, Any]) -> dict[str, Any]:
    """transformers' parameters of a form equal to no stored row (its meta-device build), or
    why it builds no model."""
    try:
        params = harness._registry().measure_params(form)
    except Exception as err:  # transformers' own failure to build: the form is not compared
        return {"rejected": f"{type(err).__name__}: {err}"[:300]}
    keep = ("total", "active", "parts", "unread_expert_params", "active_note")
    return {"reference": {"params": {k: params[k] for k in keep if k in params}}}


def rejection(form: Mapping[str, Any]) -> str:
    """Why transformers' config class refuses a form (its error, first line)."""
    harness._registry()  # puts tests/ on the path
    from oracle import hf_oracle

    try:
        hf_oracle._config_object(harness._decode(form))
    except Exception as err:
        return " ".join(f"{type(err).__name__}: {err}".split())[:300]
    return "the config class's to_dict fails"


# --------------------------------------------------------------------------------------------
# Stored forms and their statuses
# --------------------------------------------------------------------------------------------


def read() -> dict[str, Any]:
    """The stored forms (``rows``), statuses (``results``) and versions."""
    if not FORMS.exists():
        return {"versions": {}, "rows": {}, "results": {}}
    return harness.read_json(FORMS)


def form_rows(stored: Mapping[str, Any], reference: Mapping[str, Any]) -> list[harness.Row]:
    """Every stored form as a harness row, with its truth row's reference."""
    base = {r.id: r for r in harness.rows(reference)}
    out: list[harness.Row] = []
    for row_id, entry in sorted(stored["rows"].items()):
        row = base.get(row_id)
        if row is None:
            continue
        for name, spec in entry["forms"].items():
            truth = base.get(spec["truth"] or "")
            if truth is not None:
                reference = truth.reference
            elif "reference" in spec:  # equal to no stored row: its own meta-device build
                reference = {**spec["reference"], "figures": harness.reference_figures(spec["reference"])}
            else:
                continue
            gone = [tuple(p.split(".")) for p in spec["drop"]]
            config = edit(row.config, gone, spec.get("set"))
            kv_gone = spec["kv_drop"]
            kv_config = None
            if kv_gone is not None and row.kv_config is not None:
                kv_config = edit(row.kv_config, [tuple(p.split(".")) for p in kv_gone], spec.get("kv_set"))
            figures = {k: v for k, v in reference["figures"].items() if kv_config or k.startswith("params")}
            ref = {**reference, "figures": figures}
            out.append(harness.Row(f"{row_id}|{name}", row.model_type, name, config, kv_config, ref))
    return out


def compared(spec: Mapping[str, Any]) -> bool:
    """Whether a form is compared: it has a stored row's reference or its own."""
    return bool(spec["truth"]) or "reference" in spec


def _status(result: harness.Result) -> dict[str, Any]:
    """A form's stored outcome: status, wrong figures, refusal reason (not the trust level, which
    the conformance table this file feeds decides: :func:`wrong_and_verified` reads it live)."""
    out: dict[str, Any] = {"status": result.status}
    if result.wrong():
        out["wrong"] = result.wrong()
    if result.reason:
        out["reason"] = result.reason[:300]
    return out


def outcome(row: harness.Row) -> dict[str, Any]:
    """slotdiff on one form, compared with its truth (slotdiff only)."""
    return _status(harness.compare(row))


def _outcome_task(rows: list[harness.Row]) -> list[tuple[str, dict[str, Any]]]:
    return [(row.id, outcome(row)) for row in rows]


def wrong_and_verified(stored: Mapping[str, Any]) -> list[str]:
    """The wrong forms slotdiff reports as verified today (slotdiff on each wrong form)."""
    wrong = {k for k, r in stored.get("results", {}).items() if r["status"] == "wrong"}
    if not wrong:
        return []
    rows = form_rows(stored, harness.read_json(harness.REFERENCE))
    return [
        r.id for r in rows if r.id in wrong and harness.slotdiff_figures(r.config).get("trust") == "verified"
    ]


def kind(name: str) -> str:
    """The form family of a form name: minimal, lists, pattern, int or dropped."""
    return {"drop": "dropped", "pattern": "pattern", "int": "int"}.get(name.split(":")[0], name)


def documented(result: Mapping[str, Any]) -> bool:
    return result["status"] == "refused" and any(p in result.get("reason", "") for p in DOCUMENTED)


def failing(results: Mapping[str, Any], known: Mapping[str, Any]) -> dict[str, str]:
    """Forms that fail the suite: not exact, not a documented refusal, not a listed known failure."""
    return {
        form_id: f"{r['status']} {r.get('wrong', '')} {r.get('reason', '')}".strip()
        for form_id, r in results.items()
        if r["status"] != "exact" and not documented(r) and form_id not in known.get("forms", {})
    }


def per_type(stored: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Per model_type and form family: "exact", or "N of M exact" (a documented refusal counts)."""
    counts: dict[str, Counter[tuple[str, bool]]] = {}
    for form_id, r in stored["results"].items():
        row_id, name = form_id.split("|", 1)
        model_type = row_id.split(":")[0]
        ok = r["status"] == "exact" or documented(r)
        counts.setdefault(model_type, Counter())[(kind(name), ok)] += 1
    out: dict[str, dict[str, str]] = {}
    for model_type, c in sorted(counts.items()):
        out[model_type] = {}
        for family, _label in FAMILIES:
            good, bad = c[(family, True)], c[(family, False)]
            if good or bad:
                out[model_type][family] = "exact" if not bad else f"{good} of {good + bad} exact"
    return out


# --------------------------------------------------------------------------------------------
# COVERAGE.md section
# --------------------------------------------------------------------------------------------

FAMILIES = (
    ("minimal", "minimal"),
    ("dropped", "one key dropped"),
    ("lists", "per-layer lists as scalars"),
    ("pattern", "per-layer lists as pattern strings"),
    ("int", "per-layer lists as the integer they derive from"),
)


def section(stored: Mapping[str, Any], published: Iterable[Any] = ()) -> list[str]:
    """The "Published shapes" section of docs/COVERAGE.md: the forms per family and per type,
    with the type's real published configs (``published``: tools/published.py verdicts)."""
    results = stored.get("results", {})
    table = per_type(stored)
    pub: dict[str, Counter[str]] = {}
    for v in published:
        pub.setdefault(v.model_type, Counter())[v.status] += 1
    verified_wrong = set(wrong_and_verified(stored))
    specs = [s for e in stored.get("rows", {}).values() for s in e["forms"].values()]
    own = sum(1 for s in specs if not s["truth"] and "reference" in s)
    rejected = [s["rejected"] for s in specs if "rejected" in s]
    lines = [
        "",
        "## Published shapes",
        "",
        "Each row above as a published file writes it (`python tools/forms.py refresh|report`, "
        "`tests/fixtures/conformance/forms.json`): *minimal* drops every key whose absence transformers' "
        "config class makes up for (class defaults, `__post_init__` derivations, absent sub-configs); "
        "*per-layer lists as scalars* drops every per-layer list at once (the serialized row is the list "
        "form); *per-layer lists as pattern strings* writes a per-layer list as the pattern string its "
        "class also accepts (Nemotron-H's `hybrid_override_pattern`, the DSA `index_topk_pattern`); "
        "*per-layer lists as the integer they derive from* drops a list and writes the one integer its "
        "class rebuilds it from (`full_attention_interval`, `sliding_window_pattern`, "
        "`no_rope_layer_interval`, `moe_layer_freq`, `index_topk_freq`), where exactly one value does; *one "
        "key dropped* drops each structural key of a default row on its own. A form's truth is the stored "
        "reference of the row whose config the class makes of it; a form equal to no stored row (the key's "
        f"absence makes another model: {own}) is compared with transformers' meta-device build of the form "
        f"itself, parameters only. KV figures are compared where the tiny KV copy takes the same form. "
        f"Not compared: {len(rejected)} forms transformers refuses to build "
        f"({rejection_summary(rejected)}).",
        "",
        "| form | types all exact | forms | exact | documented refusal | wrong (marked verified) | other |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for family, label in FAMILIES:
        mine = [r for k, r in results.items() if kind(k.split("|", 1)[1]) == family]
        counts = Counter(r["status"] for r in mine)
        docs = sum(documented(r) for r in mine)
        wrong_verified = sum(
            k in verified_wrong for k, r in results.items() if kind(k.split("|", 1)[1]) == family
        )
        types = [t for t in table.values() if family in t]
        exact_types = sum(t[family] == "exact" for t in types)
        share = f" ({100 * exact_types / len(types):.1f} %)" if types else ""
        other = len(mine) - counts["exact"] - docs - counts["wrong"]
        lines.append(
            f"| {label} | {exact_types} of {len(types)}{share} | {len(mine)} | {counts['exact']} | {docs} | "
            f"{counts['wrong']} ({wrong_verified}) | {other} |"
        )
    lines += [
        "",
        "| model_type | minimal | one key dropped | per-layer lists | pattern strings | integers "
        "| published configs exact |",
        "|---|---|---|---|---|---|---|",
    ]
    for model_type, fams in table.items():
        p = pub.get(model_type)
        shown = f"{p['exact']} of {sum(p.values())}" if p else ""
        cells = [fams.get(f, "") for f, _ in FAMILIES]
        lines.append(f"| `{model_type}` | " + " | ".join(cells) + f" | {shown} |")
    refused_forms = [
        (f"{row_id}|{name}", spec["rejected"])
        for row_id, entry in stored.get("rows", {}).items()
        for name, spec in entry["forms"].items()
        if "rejected" in spec
    ]
    if refused_forms:
        lines += [
            "",
            "Forms transformers refuses to build (not compared):",
            "",
            "| form | transformers |",
            "|---|---|",
        ]
        lines += [f"| `{form_id}` | {harness._cell(why[:200])} |" for form_id, why in refused_forms]
    bad = [(k, r) for k, r in results.items() if r["status"] != "exact" and not documented(r)]
    if bad:
        lines += ["", "Forms not exact:", "", "| form | result | marked verified |", "|---|---|---|"]
        for form_id, r in bad:
            text = f"{r['status']} {', '.join(r.get('wrong', []))} {r.get('reason', '')}".strip()
            mark = "yes" if form_id in verified_wrong else "no"
            lines.append(f"| `{form_id}` | {harness._cell(text)} | {mark} |")
    return lines


def rejection_summary(reasons: Iterable[str]) -> str:
    """The reasons transformers refuses forms, by kind: "N validate_architecture, ..."."""
    kinds: Counter[str] = Counter()
    for reason in reasons:
        found = re.search(r"validator '(\w+)'|field '(\w+)'|(fails in transformers)", reason)
        if found is None:
            kinds[reason.split(":")[0]] += 1
        else:
            kinds[
                found.group(1) or (f"field {found.group(2)}" if found.group(2) else "model build fails")
            ] += 1
    return ", ".join(f"{n} {k}" for k, n in kinds.most_common()) or "none"


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------


def _forms_task(model_type: str, entry: dict[str, Any], ignored: list[str]) -> tuple[str, dict[str, Any]]:
    harness._worker_init()
    return model_type, forms_of_type(entry, model_type, frozenset(ignored))


def refresh(types: list[str] | None = None, workers: int = 2, force: bool = False) -> int:
    """Recompute the forms of every row whose config changed (transformers; cached by digest)."""
    reference = harness.read_json(harness.REFERENCE)
    stored = read()
    if stored.get("versions") != reference["versions"]:
        stored = {"versions": reference["versions"], "rows": {}, "results": {}}
    ignored = sorted(json.loads((ROOT / "schemas" / "keymap.json").read_text())["ignored"])
    todo = []
    for model_type, entry in sorted(reference["types"].items()):
        if entry.get("status") != "built" or (types and model_type not in types):
            continue
        rows = harness.rows({"types": {model_type: entry}})
        current = {r.id: row_digest(r) for r in rows}
        cached = all(stored["rows"].get(i, {}).get("digest") == d for i, d in current.items())
        if force or not cached:
            todo.append((model_type, entry))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, context) as pool:
        futures = [pool.submit(_forms_task, mt, entry, ignored) for mt, entry in todo]
        for done, future in enumerate(as_completed(futures), 1):
            model_type, rows = future.result()
            stored["rows"] = {k: v for k, v in stored["rows"].items() if k.split(":")[0] != model_type}
            stored["rows"].update(rows)
            write({**stored, "rows": dict(sorted(stored["rows"].items()))})  # resumable
            count = sum(len(r["forms"]) for r in rows.values())
            print(f"[{done}/{len(todo)}] {model_type}: {count} forms", flush=True)
    stored["rows"] = dict(sorted(stored["rows"].items()))
    write(stored)
    return 0


def evaluate(stored: Mapping[str, Any], workers: int = 2) -> dict[str, Any]:
    """slotdiff on every stored form (in ``workers`` processes)."""
    reference = harness.read_json(harness.REFERENCE)
    todo = form_rows(stored, reference)
    chunks = [todo[i::workers] for i in range(workers)]
    results: dict[str, Any] = {}
    with ProcessPoolExecutor(workers, multiprocessing.get_context("spawn")) as pool:
        for part in pool.map(_outcome_task, chunks):
            results.update(part)
    return dict(sorted(results.items()))


def write(stored: Mapping[str, Any]) -> None:
    """forms.json: one row per line, so a change shows as a small diff."""
    about = (
        "Published shapes of each conformance row (tools/forms.py): the keys each form drops, the "
        "row whose transformers reference is its truth (null: it equals no stored row), whether its "
        "KV figures are compared, and slotdiff's result on it. Generated; do not edit by hand."
    )
    lines = ["{", f' "about": {json.dumps(about)},', f' "versions": {json.dumps(stored["versions"])},']
    for part in ("rows", "results"):
        items = list(stored.get(part, {}).items())
        lines.append(f' "{part}": {{')
        lines += [
            f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" + ("," if i < len(items) - 1 else "")
            for i, (k, v) in enumerate(items)
        ]
        lines.append(" }," if part == "rows" else " }")
    lines.append("}")
    FORMS.write_text("\n".join(lines) + "\n", encoding="utf-8")


def report(workers: int = 2) -> int:
    """Evaluate every form, store the results, print the counts and the failures."""
    stored = read()
    stored["results"] = evaluate(stored, workers)
    write(stored)
    known = harness.read_json(KNOWN) if KNOWN.exists() else {}
    bad = failing(stored["results"], known)
    for form_id, why in sorted(bad.items()):
        print(f"FAIL {form_id}: {why}")
    counts = Counter((kind(k.split("|", 1)[1]), r["status"]) for k, r in stored["results"].items())
    for family, _label in FAMILIES:
        print(
            family
            + ": "
            + ", ".join(f"{s} {counts[(family, s)]}" for s in harness.STATUSES if counts[(family, s)])
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("refresh", "report"))
    parser.add_argument("types", nargs="*")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    if args.action == "refresh":
        return refresh(args.types or None, args.workers, args.force)
    return report(args.workers)


if __name__ == "__main__":
    sys.exit(main())
