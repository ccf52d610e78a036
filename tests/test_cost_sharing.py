"""The cost pass's shortcuts give what the long way gives: copies of an Architecture made
without ``__post_init__`` equal ``dataclasses.replace``'s, and a counterfactual's price is
the same whether or not its model's plans were built before."""

from __future__ import annotations

from dataclasses import replace

from slotdiff.analysis.analyze import baseline, load
from slotdiff.cost.counterfactual import with_fields
from slotdiff.cost.inventory.decoder import tensors
from slotdiff.cost.price import cost_of, price
from slotdiff.schema.arch import Value, evolve, with_layers

from conftest import raw


def test_with_layers_equals_replace_and_rereads_changed_fields() -> None:
    arch = load(raw("meta-llama/Meta-Llama-3-8B")).arch
    runs = arch.layer_runs
    same = with_layers(arch, arch.layers)
    assert same == replace(arch, layers=arch.layers)
    assert same.layer_runs is runs  # the same layers: the same runs
    one = with_layers(arch, (evolve(arch.layers[0], index=0),))
    assert one == replace(arch, layers=(arch.layers[0],))
    assert one.n_layers == 1 and one.layer_runs[0][1] == 1  # recomputed, not Llama's 32
    changed = with_layers(arch, arch.layers, n_kv_heads=Value(32, "derived", (), "counterfactual"))
    fields = dict(arch.fields)
    fields["n_kv_heads"] = Value(32, "derived", (), "counterfactual")
    assert changed == replace(arch, fields=fields)
    assert changed.get("n_kv_heads") == 32 and arch.get("n_kv_heads") == 8  # Llama-3-8B: GQA 32/8


def test_a_counterfactual_priced_alone_equals_it_priced_in_the_pass() -> None:
    model = load(raw("Qwen/Qwen3-30B-A3B"))
    gpt2 = baseline("gpt2")
    _, changes = price(model.arch, None, model.fills, gpt2.arch, gpt2.fills)
    by = {c.facet: c for c in changes}
    # attention.kv set back to MHA: n_kv_heads = n_heads, priced from a fresh copy with no caches
    counter = with_fields(
        model.arch, tuple(evolve(s, n_kv_heads=None) for s in model.arch.layers), n_kv_heads=32
    )
    fresh = replace(counter, layers=tuple(counter.layers))  # a new object: no cached tensors or plans
    assert tensors(fresh, keep=False) == tensors(counter)
    this, other = cost_of(model.arch), cost_of(fresh, searches=False)
    assert (
        by["attention.kv"].deltas["kv_bytes_per_token"] == this.kv.bytes_per_token - other.kv.bytes_per_token
    )
    assert by["attention.kv"].deltas["decode_step_ms"] == this.decode.step_ms - other.decode.step_ms
    # Qwen3-30B-A3B: 48 layers × 2 (K, V) × 128 head_dim × (32 − 4) KV heads × 2 bytes (bf16)
    assert by["attention.kv"].deltas["kv_bytes_per_token"] == -(48 * 2 * 128 * 28 * 2)


def test_a_scan_prices_without_the_bounds_and_gets_the_same_figures() -> None:
    from slotdiff.analysis.analyze import analyze
    from slotdiff.scan.figures import figures_of

    for repo in ("Qwen/Qwen3-30B-A3B", "openai-community/gpt2", "deepseek-ai/DeepSeek-V3"):
        model = load(raw(repo))
        lean = analyze(model, counterfactuals=False, classification=False, weights=False, bounds=False)
        full = analyze(model, counterfactuals=False, classification=False, weights=False)
        assert lean.cost is not None and full.cost is not None
        assert lean.cost.decode.compute_bound_batch is None and lean.cost.decode_bound is None
        assert figures_of(lean) == figures_of(full)
        assert lean.cost.decode.step_ms == full.cost.decode.step_ms
