"""Tensors of the feed-forward sublayers: dense (gated or 2-matrix) FFNs, MoE routers with
routed and shared experts, and per-layer input projections."""

from __future__ import annotations

from .tensor import Builder, need_int


def dense_ffn(
    b: Builder,
    n: int,
    width: int,
    part: str = "ffn",
    module: str = "mlp",
    routed: bool = False,
    experts: int = 1,
    slot: str | None = None,
) -> None:
    a = b.arch
    d = need_int(a, "d_model")
    gated = bool(a.get("ffn_gated"))
    mod = f"model.layers.0.{module}"
    count = n * experts
    if gated:
        b.add(f"{part}/gate", width, d, count, "linear", f"{mod}.gate_proj", slot, routed)
    b.add(f"{part}/up", width, d, count, "linear", f"{mod}.up_proj", slot, routed)
    b.add(f"{part}/down", d, width, count, "linear", f"{mod}.down_proj", slot, routed)
    if a.get("ffn_inner_norm"):  # normed hidden activations before down (BitNet ffn_sub_norm)
        b.norm(f"{part}/inner_norm", width, count, f"{mod}.ffn_sub_norm", slot or part)
    if a.get("ffn_out_gate"):
        # RWKV's channel mix: sigmoid(receptance(x)) gates the output; token-shift mixes for
        # the key and the receptance inputs.
        b.add(f"{part}/out_gate", d, d, count, "linear", f"{mod}.receptance", slot, routed)
        b.add(f"{part}/shift_mix", d, 1, 2 * count, "vector", f"{mod}.time_mix_key", slot, routed)
    act = a.get("ffn_act_params") or 0
    if act:  # learned scalars of the activation itself (xIELU's alpha_p, alpha_n: Apertus)
        b.add(f"{part}/act", act, 1, count, "vector", f"{mod}.act_fn", slot, routed)
    bias = a.get("expert_bias") if part == "experts" else a.get("ffn_bias")
    if bias:
        b.add(
            f"{part}/up.bias",
            width * (2 if gated else 1),
            1,
            count,
            "vector",
            f"{mod}.up_proj",
            slot,
            routed,
        )
        b.add(f"{part}/down.bias", d, 1, count, "vector", f"{mod}.down_proj", slot, routed)


def moe(b: Builder, n: int) -> None:
    a = b.arch
    d = need_int(a, "d_model")
    e = need_int(a, "n_experts")
    width = need_int(a, "d_ff_expert")
    zero = a.get("n_zero_experts") or 0
    mod = "model.layers.0.mlp"
    rows = a.get("router_width") or e + zero
    hidden = a.get("router_hidden") or 0
    if hidden:
        # A router MLP (ZAYA): down to router_hidden (with bias), an RMSNorm, two biased
        # hidden layers and an output over the experts plus router_width's extra classes.
        rmod = f"{mod}.gate.router_mlp"
        b.add("router/down", hidden, d, n, "linear", f"{mod}.gate.down_proj")
        b.add("router/mlp", hidden, hidden, 2 * n, "linear", f"{rmod}.fc1")
        b.add("router/mlp.bias", 3 * hidden, 1, n, "vector", f"{rmod}.fc1")
        b.add("router/norm", hidden, 1, n, "vector", f"{rmod}.norm")
        b.add("router/out", rows, hidden, n, "linear", f"{rmod}.out_proj")
    else:
        b.add("router/weight", rows, d, n, "linear", f"{mod}.gate")
    if a.get("router_bias"):
        b.add("router/bias", rows, 1, n, "vector", f"{mod}.gate")
    if a.get("router_score_bias"):
        b.add("router/score_bias", e, 1, n, "vector", f"{mod}.gate")
    if a.get("router_scales"):
        # A learned input scale before the router projection and a scale per expert.
        b.add("router/scale", d, 1, n, "vector", f"{mod}.router.scale")
        b.add("router/expert_scale", e, 1, n, "vector", f"{mod}.router.per_expert_scale")
    if a.get("moe_output_bias"):
        b.add("experts/out_bias", d, 1, n, "vector", f"{mod}.bias", "ffn")
    latent = a.get("moe_latent") or 0
    if latent:
        # Experts run in a narrower latent space: one down/up projection around them.
        bias = bool(a.get("ffn_bias"))
        b.add("experts/latent_in", latent, d, n, "linear", f"{mod}.fc1_latent_proj")
        b.add("experts/latent_out", d, latent, n, "linear", f"{mod}.fc2_latent_proj")
        if bias:
            b.add("experts/latent_in.bias", latent, 1, n, "vector", f"{mod}.fc1_latent_proj")
            b.add("experts/latent_out.bias", d, 1, n, "vector", f"{mod}.fc2_latent_proj")
        if a.get("moe_latent_norms"):
            # Norms of the latent width around the experts (Muse Spark: pre_/post_expert_norm).
            b.norm("norms/moe_latent", latent, n * a.get("moe_latent_norms"), f"{mod}.pre_expert_norm")
    # transformers' LongCat-Flash allocates gate/up rows for the zero (identity) experts too.
    allocated = zero if a.get("zero_experts_allocated") else 0
    expert_bank(b, n, width, e, latent or d, extra_in=allocated)
    modal = a.get("modal_expert_width")
    if modal:
        # A second, modality-isolated bank (ERNIE-4.5-VL's vision experts): its own router
        # (and score bias) over n_experts experts of this width, reached only by image tokens.
        vmod = "model.layers.0.mlp.vision_moe"
        b.add("router/modal.weight", e, d, n, "linear", f"{vmod}.gate")
        if a.get("router_score_bias"):
            b.add("router/modal.score_bias", e, 1, n, "vector", f"{vmod}.gate")
        gated = bool(a.get("experts_gated", a.get("ffn_gated")))
        if gated:
            b.add("experts/modal.gate", modal, d, n * e, "linear", f"{vmod}.experts.gate_proj", None, True)
        b.add("experts/modal.up", modal, d, n * e, "linear", f"{vmod}.experts.up_proj", None, True)
        b.add("experts/modal.down", d, modal, n * e, "linear", f"{vmod}.experts.down_proj", None, True)
    shared = a.get("n_shared_experts") or 0
    shared_width = a.get("d_ff_shared")
    if shared_width is not None:  # a width of 0 is a shared expert with no weights
        dense_ffn(b, n, shared_width, "shared_experts", "mlp.shared_experts")
    elif shared:
        dense_ffn(b, n, shared * width, "shared_experts", "mlp.shared_experts")
    # The gate is built whenever the family builds its shared expert, even one of width 0
    # (Qwen2-MoE with shared_expert_intermediate_size 0 keeps the [1, d] gate).
    if a.get("shared_expert_gate") and (shared or shared_width is not None):
        b.add("shared_experts/gate", 1, d, n, "linear", "model.layers.0.mlp.shared_expert_gate")


def expert_bank(b: Builder, n: int, width: int, e: int, d_in: int, extra_in: int = 0) -> None:
    """``e`` routed experts of hidden ``width`` reading and writing ``d_in``-wide vectors;
    ``extra_in`` more experts' worth of gate/up rows (allocated, never computed)."""
    a = b.arch
    gated = bool(a.get("experts_gated", a.get("ffn_gated")))
    mod = "model.layers.0.mlp.experts.0"
    up_count = n * (e + extra_in)
    if gated:
        b.add("experts/gate", width, d_in, up_count, "linear", f"{mod}.gate_proj", None, True)
    b.add("experts/up", width, d_in, up_count, "linear", f"{mod}.up_proj", None, True)
    b.add("experts/down", d_in, width, n * e, "linear", f"{mod}.down_proj", None, True)
    if a.get("expert_bias"):
        rows = width * (2 if gated else 1)
        b.add("experts/up.bias", rows, 1, up_count, "vector", f"{mod}.up_proj", None, True)
        b.add("experts/down.bias", d_in, 1, n * e, "vector", f"{mod}.down_proj", None, True)


def per_layer_inputs(b: Builder, n_layers: int) -> None:
    """Per-layer input embeddings (Gemma 3n/4): a packed table of ``per_layer_input`` dims
    per layer, a projection of the hidden state into it, and per layer a gate, a projection
    back to d and a norm."""
    a = b.arch
    p = a.get("per_layer_input") or 0
    if not p:
        return
    d = need_int(a, "d_model")
    rows = a.get("per_layer_vocab") or need_int(a, "vocab")
    total = n_layers * p
    b.add("embedding/per_layer", rows, total, 1, "embedding", "model.embed_tokens_per_layer")
    b.add(
        "embedding/per_layer_proj",
        total,
        d,
        1,
        "linear",
        "model.per_layer_model_projection",
    )
    b.norm("norms/per_layer_proj", p, 1, "model.per_layer_projection_norm")
    mod = "model.layers.0"
    b.add("ffn/per_layer.gate", p, d, n_layers, "linear", f"{mod}.per_layer_input_gate")
    b.add("ffn/per_layer.proj", d, p, n_layers, "linear", f"{mod}.per_layer_projection")
    b.norm("norms/per_layer_input", d, n_layers, f"{mod}.post_per_layer_input_norm")


def altup_laurel(b: Builder, n_layers: int) -> None:
    """AltUp streams and LAuReL residuals (Gemma 3n): ``altup_inputs`` k d-wide streams made
    from the embedding by k - 1 d×d projections and merged back by k - 1 more, and per layer
    an output scale, a k×k correction and k×k² prediction mix, a d→k router with its norm;
    ``laurel_rank`` r: per layer a d→r→d low-rank branch and its norm."""
    a = b.arch
    d = need_int(a, "d_model")
    k = a.get("altup_inputs") or 0
    mod = "model.layers.0"
    if k:
        b.add("embedding/altup_proj", d, d, k - 1, "linear", "model.altup_projections.0")
        b.add("head/altup_unembed", d, d, k - 1, "linear", "model.altup_unembed_projections.0")
        b.add("ffn/altup.scale", d, 1, n_layers, "vector", f"{mod}.altup.correct_output_scale")
        b.add("ffn/altup.correct", k, k, n_layers, "linear", f"{mod}.altup.correction_coefs")
        b.add("ffn/altup.predict", k * k, k, n_layers, "linear", f"{mod}.altup.prediction_coefs")
        b.add("ffn/altup.router", k, d, n_layers, "linear", f"{mod}.altup.modality_router")
        b.norm("norms/altup.router", d, n_layers, f"{mod}.altup.router_norm")
    r = a.get("laurel_rank") or 0
    if r:
        b.add("ffn/laurel.left", r, d, n_layers, "linear", f"{mod}.laurel.linear_left")
        b.add("ffn/laurel.right", d, r, n_layers, "linear", f"{mod}.laurel.linear_right")
        b.norm("norms/laurel", d, n_layers, f"{mod}.laurel.post_laurel_norm")
