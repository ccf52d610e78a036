"""The pipeline: source → Architecture → fills → diff against baselines (+ class, cost).

``analyze`` is what the CLI and the Python API both call. Baselines (GPT-2 small and
Llama-3-8B) are read from the bundled catalog through the same pipeline, not hard-coded;
their fills, all a run compares with, are precomputed in the knowledge bundle
(tools/bundle.py; tests/test_bundle.py fails when they are stale).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..core.bundle import bundled
from ..core.errors import SlotdiffError
from ..cost.context import context_limit
from ..cost.counterfactual import Change
from ..cost.kv import kv_cost
from ..cost.price import CostReport, cost_of, price
from ..read.jsonpos import JSONInputError, Rendered, parse
from ..read.source import RawConfig, from_catalog, resolve
from ..schema.arch import Architecture
from ..schema.build import build
from ..slots.classify import classify
from ..slots.differ import facet_status
from ..slots.fill import Fills, slot_table
from ..slots.fills import fill_slots
from ..slots.stored import fills_from_data
from .coverage import coverage, with_checkpoint
from .donor import choose_donor
from .reconcile import Checkpoint, reconcile
from .report import FacetReport, Report, Shape, SourceInfo
from .weights_source import checkpoint_lookup

BASELINES = {"gpt2": "openai-community/gpt2", "llama": "meta-llama/Meta-Llama-3-8B"}
# The baselines' fills as tools/bundle.py stores them in the knowledge bundle (slots/stored.py).
BASELINE_FILLS = "derived/baseline_fills.json"


@dataclass(frozen=True)
class Model:
    """A config read through the schema layer, with its fills."""

    raw: RawConfig
    arch: Architecture
    fills: Fills


def from_mapping(data: Mapping[str, Any], name: str = "<config>") -> RawConfig:
    """Wrap an in-memory config dict as a RawConfig: read back from its compact JSON under a
    file's caps (size, depth, key count), positions from its indented rendering when asked."""
    if not isinstance(data, Mapping):
        raise SlotdiffError(name, f"top level is a {type(data).__name__}, not an object")
    try:
        text = json.dumps(data, allow_nan=True, default=str)
    except (ValueError, RecursionError) as err:  # a circular or absurdly deep structure
        raise SlotdiffError(name, f"cannot be written as JSON: {err}") from err
    try:
        parsed = Rendered(parse(text, with_positions=False).value, text)
    except JSONInputError as err:
        raise SlotdiffError(name, err.message) from err
    return RawConfig(name=name, data=parsed.value, parsed=parsed, origin="memory", location=name)


def load(source: str | Path | Mapping[str, Any] | RawConfig, revision: str | None = None) -> Model:
    """Read ``source`` (path, repo id, dict or RawConfig) into a Model."""
    if isinstance(source, RawConfig):
        raw = source
    elif isinstance(source, Mapping):
        raw = from_mapping(source)
    else:
        raw = resolve(str(source), revision)
    arch = build(raw)
    if not arch.known_model_type:
        arch = choose_donor(raw, arch) or arch
    return Model(raw, arch, fill_slots(arch))


@cache
def baseline(which: str) -> Model:
    """GPT-2 small or Llama-3-8B, from the bundled catalog."""
    raw = from_catalog(BASELINES[which])
    arch = build(raw)
    return Model(raw, arch, fill_slots(arch))


def stored_baseline_fills(which: str) -> Fills | None:
    """GPT-2's or Llama-3-8B's fills as the knowledge bundle keeps them (None: the bundle is off)."""
    try:
        return fills_from_data(bundled(BASELINE_FILLS)[which])
    except KeyError:
        return None


@cache
def baseline_fills(which: str) -> Fills:
    """GPT-2's or Llama-3-8B's fills: the bundle's, else built as ``baseline`` builds them."""
    stored = stored_baseline_fills(which)
    return baseline(which).fills if stored is None else stored


def facet_reports(model: Model, against: Model | None = None) -> tuple[FacetReport, ...]:
    """Each facet of ``model`` with GPT-2's, Llama's (and ``against``'s) fill and status."""
    gpt2, llama = baseline_fills("gpt2"), baseline_fills("llama")
    out = []
    for info, fill, g, ll in zip(slot_table(), model.fills, gpt2, llama, strict=True):
        other = against.fills[fill.id] if against else None
        out.append(
            FacetReport(
                info=info,
                fill=fill,
                gpt2=g,
                llama=ll,
                vs_gpt2=facet_status(fill, g),
                vs_llama=facet_status(fill, ll),
                against=other,
                vs_against=facet_status(fill, other) if other else None,
            )
        )
    return tuple(out)


def shape_of(arch: Architecture, cost: CostReport | None) -> Shape | None:
    """Layers, the longest context the config declares and the KV cache there (one sequence,
    at the workload's KV dtype), or None when the config's limit cannot be read."""
    try:
        limit = context_limit(arch)
    except SlotdiffError:
        return None
    kv = None
    if cost is not None and limit.tokens:
        try:
            kv = kv_cost(arch, limit.tokens, cost.workload.kv_dtype).bytes_at_context
        except SlotdiffError:
            kv = None
    state = cost.kv.state_bytes_per_sequence if cost is not None else 0
    return Shape(arch.n_layers, limit.tokens, limit.source, kv, state)


def source_info(raw: RawConfig) -> SourceInfo:
    return SourceInfo(raw.name, raw.origin, raw.location, raw.repo_id, raw.revision, raw.note)


def analyze(
    source: str | Path | Mapping[str, Any] | RawConfig | Model,
    *,
    revision: str | None = None,
    against: str | Path | Mapping[str, Any] | Model | None = None,
    workload: Any = None,
    cost: bool = True,
    counterfactuals: bool = True,
    classification: bool = True,
    weights: bool = True,
    bounds: bool = True,
) -> Report:
    """Analyze one model: slots vs GPT-2 and Llama-3-8B (and ``against``), class, and cost.

    ``workload`` is a :class:`slotdiff.cost.workload.Workload` (default: H100 SXM, bf16,
    batch 1, context 8192); ``cost=False`` skips the cost pass; ``counterfactuals=False``
    prices the model alone, without the price of each slot change; ``classification=False``
    leaves out the family match (a scan matches against its own knowledge): what a scan needs,
    the same figures at a fraction of the work. ``source`` may be a :class:`Model` already loaded.
    ``weights=False`` leaves the checkpoint beside the config unread (``--no-weights``).
    ``bounds=False`` leaves out the decode step's compute-bound batch searches and its
    at-peak bound (a scan reads neither).
    """
    model = source if isinstance(source, Model) else load(source, revision)
    other = against if isinstance(against, Model) or against is None else load(against)

    cost_report, changes = None, ()
    if cost and not counterfactuals:
        try:
            cost_report = cost_of(model.arch, workload, bounds=bounds)
        except SlotdiffError as err:
            changes = (Change("*", "02", "", "", None, {}, note=err.reason),)
    elif cost:
        cost_report, changes = price(
            model.arch,
            workload,
            model.fills,
            baseline_arch=other.arch if other else None,
            baseline_fills=other.fills if other else baseline_fills("gpt2"),
        )
    refused = next((c.note for c in changes if c.facet == "*"), None) if cost_report is None else None
    trust = coverage(
        model.arch,
        cost_report.params if cost_report else None,
        refused if cost else None,
        model.fills.unplaced,
    )
    checkpoint: Checkpoint | None = None
    if weights and cost:
        lookup = checkpoint_lookup(model.raw)
        if lookup is not False:
            weights_given = cost_report is not None and cost_report.weights.supported
            checkpoint = reconcile(
                model.arch,
                cost_report.params if cost_report else None,
                lookup,
                cost_report.weights.bytes if weights_given else None,
            )
            trust = with_checkpoint(trust, checkpoint)
    return Report(
        model=model.raw.name,
        source=source_info(model.raw),
        arch=model.arch,
        facets=facet_reports(model, other),
        baselines={**BASELINES, "against": other.raw.name if other else None},
        classification=classify(model.arch, model.fills) if classification else None,
        cost=cost_report,
        changes=changes,
        coverage=trust,
        shape=shape_of(model.arch, cost_report),
        checkpoint=checkpoint,
    )
