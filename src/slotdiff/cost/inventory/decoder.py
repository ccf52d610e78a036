"""Every parameter tensor of the text decoder transformers would build from a config:
embedding, position table, each layer's mixer and FFN by kind, shared blocks, norms and
head."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from ...constructs import PLAIN, construct
from ...schema.arch import Architecture, LayerSpec
from .compressed import hyper_connections
from .ffn import altup_laurel, dense_ffn, moe, per_layer_inputs
from .tensor import Builder, Tensor, Unsupported, group_runs, need_int


def _mixer(b: Builder, n: int, kind: str | None, layer: LayerSpec) -> None:
    """The tensors of ``n`` sequence mixers of ``kind`` shaped like ``layer``."""
    mech = construct(kind)
    if mech:
        mech.tensors(b, n, layer)
    elif kind is not None:
        raise Unsupported(
            b.arch.name,
            f"cannot count parameters of {kind} layers yet",
            key=b.arch.key("layer_types"),
        )


def _shared_blocks(b: Builder, layers: tuple[LayerSpec, ...]) -> None:
    """Weight-shared attention+MLP blocks (Zamba2), counted once per distinct block.

    Each block: softmax attention whose input is ``attn_in_width`` wide (Zamba2 feeds the
    hidden state concatenated with the original embeddings), a gated MLP, an input norm of
    that width and a pre-FFN norm. Every use of a block adds its own LoRA-style adapters of
    rank ``shared_adapter_rank`` (on the MLP's gate/up projection, and on q/k/v when
    ``shared_attn_adapters``) and a d×d linear mapping the block's output into the layer.
    The adapters are sized by ``shared_block_users`` when the config lists it (transformers
    keeps a config's hybrid_layer_ids over the computed one).
    """
    users = [s for s in layers if s.shared_block is not None]
    if not users:
        return
    a = b.arch
    d = need_int(a, "d_model")
    din = a.get("attn_in_width") or d
    h, g = need_int(a, "n_heads"), need_int(a, "n_kv_heads")
    hd = users[0].head_dim or need_int(a, "head_dim")
    ff = need_int(a, "d_ff")
    blocks = len({s.shared_block for s in users})
    mod = "model.layers.0.shared_transformer"
    slot = "attention"
    b.add("attention/shared.q", h * hd, din, blocks, "linear", f"{mod}.self_attn.q_proj", slot)
    b.add("attention/shared.k", g * hd, din, blocks, "linear", f"{mod}.self_attn.k_proj", slot)
    b.add("attention/shared.v", g * hd, din, blocks, "linear", f"{mod}.self_attn.v_proj", slot)
    b.add("attention/shared.o", d, h * hd, blocks, "linear", f"{mod}.self_attn.o_proj", slot)
    dense_ffn(b, blocks, ff, "ffn", "shared_transformer.feed_forward")
    b.norm("norms/shared.input", din, blocks, f"{mod}.input_layernorm")
    b.norm("norms/shared.pre_ff", d, blocks, f"{mod}.pre_ff_layernorm")
    rank = a.get("shared_adapter_rank") or 0
    if rank:
        # The k-th user builds its block with block_id k % M, which keeps adapters for the
        # slots i of the users list with i % M == block_id; a block built once (tied) counts
        # its first user's adapters only.
        period = a.get("n_shared_blocks") or 1
        listed = a.get("shared_block_users")
        slots = len(listed) if isinstance(listed, list) else len(users)
        owners: dict[int, int] = {}
        for k, s in enumerate(users):
            owners.setdefault(s.shared_block, k % period)
        adapters = sum(1 for i in range(slots) for owner in owners.values() if i % period == owner)
        up = ff * (2 if a.get("ffn_gated") else 1)
        amod = f"{mod}.feed_forward.gate_up_proj_adapter_list.0"
        b.add("ffn/shared.adapter_a", rank, d, adapters, "linear", f"{amod}.0", "ffn")
        b.add("ffn/shared.adapter_b", up, rank, adapters, "linear", f"{amod}.1", "ffn")
        if a.get("shared_attn_adapters"):
            for x in ("q", "k", "v"):
                amod = f"{mod}.self_attn.linear_{x}_adapter_list.0"
                b.add(f"attention/shared.{x}_adapter_a", rank, din, adapters, "linear", f"{amod}.0")
                b.add(f"attention/shared.{x}_adapter_b", din, rank, adapters, "linear", f"{amod}.1")
    b.add("attention/shared.linear", d, d, len(users), "linear", "model.layers.0.linear", slot)


def _grouped(
    b: Builder, runs: tuple[tuple[LayerSpec, int], ...], key: Callable[[LayerSpec], Any]
) -> Iterator[tuple[Any, int, LayerSpec]]:
    """``group_runs``, with ``b.layers`` set to each group's layer positions while the caller
    adds its rows (every row then says which layers it stands for)."""
    where = b.where
    if where is None:  # once per build: every group of every sublayer reads it
        where = b.where = {
            id(spec): at for (spec, _), at in zip(b.arch.layer_runs, b.arch.run_layers, strict=True)
        }
    members: dict[Any, list[int]] = {}
    for spec, _ in runs:
        members.setdefault(key(spec), []).extend(where.get(id(spec), ()))
    try:
        for k, n, first in group_runs(runs, key):
            at = members[k]
            b.layers = tuple(sorted(at)) if len(at) == n else ()
            yield k, n, first
    finally:
        b.layers = ()


def _layer_tensors(b: Builder, runs: tuple[tuple[LayerSpec, int], ...]) -> None:
    """The mixers, FFNs and norms of the layers in ``runs``."""

    def shape(s: LayerSpec) -> tuple[Any, ...]:
        return (
            s.mixer,
            s.variant,
            s.window,
            s.sparse,
            s.index_shared,
            s.n_kv_heads,
            s.head_dim,
            s.kv_shared,
            s.n_heads,
            s.compress,
            s.sizes,
            s.rope,  # a NoPE MLA layer has no RoPE key
        )

    for key, n, first in _grouped(b, runs, shape):
        _mixer(b, n, key[0], first)
    for kind, n, first in _grouped(b, runs, lambda s: s.parallel):
        _mixer(b, n, kind, first)
    for (ffn, width), n, _ in _grouped(b, runs, lambda s: (s.ffn, s.d_ff)):
        if ffn == "dense":
            dense_ffn(b, n, width or need_int(b.arch, "d_ff"))
            scales = b.arch.get("ffn_channel_scales") or 0  # per-channel scales (Dory suv_gate, suv_up)
            b.add("ffn/channel_scales", width or need_int(b.arch, "d_ff"), 1, scales * n, "vector", "mlp.suv")
        elif ffn == "moe":
            moe(b, n)
    hidden = b.arch.get("router_hidden") or 0
    if hidden:  # each router MLP but the first layer's adds the previous router's state, scaled
        moes = sum(n for s, n in runs if s.ffn == "moe")
        later = moes - any(s.index == 0 and s.ffn == "moe" for s, _ in runs)
        b.add("router/states_scale", hidden, 1, later, "vector", "mlp.gate.router_states_scale")
    convs = b.arch.get("residual_short_convs") or 0
    if convs:  # d-wide depthwise causal convolutions on each layer's sublayer inputs (Inkling)
        kernel = need_int(b.arch, "short_conv_kernel")
        d = need_int(b.arch, "d_model")
        b.add("norms/residual_conv", d, kernel, convs * sum(n for _, n in runs), "conv", "attn_sconv.conv1d")
    if b.arch.get("full_qkv_inputs"):
        _attention_residuals(b, runs)
    if b.arch.get("sublayer_global_scale"):  # a learned scalar on each MoE router and dense MLP
        scaled = sum(n for s, n in runs if s.ffn in ("moe", "dense"))
        b.add("ffn/global_scale", 1, 1, scaled, "vector", "mlp.global_scale")
    for ffn2, n, _ in _grouped(b, runs, lambda s: s.ffn2):
        if ffn2 == "dense":
            dense_ffn(b, n, need_int(b.arch, "d_ff"), module="mlps.1")
        elif ffn2 == "moe":
            moe(b, n)
    _norms(b, runs)


def _attention_residuals(b: Builder, runs: tuple[tuple[LayerSpec, int], ...]) -> None:
    """Block attention residuals (Inkling 2): each sublayer reads a learned-query mix of the
    earlier blocks' outputs; a d-wide query before every FFN, before every attention but the
    first layer's (three on full-attention layers: queries, keys and values each read their
    own mix, each with its own input norm, so two norms more), and one before the final norm."""
    d = need_int(b.arch, "d_model")
    n_layers = sum(n for _, n in runs)
    full = sum(n for s, n in runs if construct(s.mixer) is PLAIN and s.window is None)
    first_full = any(s.index == 0 and s.window is None for s, _ in runs)
    queries = n_layers + (n_layers - 1) + 2 * (full - first_full) + 1
    b.add("norms/attn_res.query", d, 1, queries, "vector", "model.layers.0.mlp_input.query")
    b.norm("norms/qkv_input", d, 2 * full, "model.layers.0.k_input_layernorm")


def _message_gates(b: Builder) -> None:
    """A looped span's message gates (Inkling 2 Loop): each of the ``loop_end - loop_start``
    looped layers mixes a message into its q, k, v and MLP inputs through a gate of rank
    ``loop_gate_rank`` (down from [state, message], forget and message projections back),
    the messages read by learned queries (one per gate, model-wide)."""
    rank = b.arch.get("loop_gate_rank") or 0
    if not rank:
        return
    d = need_int(b.arch, "d_model")
    start, end = need_int(b.arch, "loop_start"), need_int(b.arch, "loop_end")
    looped = max(0, min(end, need_int(b.arch, "n_layers")) - start)  # layers[start:end] exist
    mod = "model.layers.0.q_message_gate"
    b.add("norms/message_gate.down", rank, 2 * d, 4 * looped, "linear", f"{mod}.down_proj")
    b.add("norms/message_gate.up", d, rank, 8 * looped, "linear", f"{mod}.forget_gate_proj")
    b.add("norms/message_gate.query", d, 1, 4 * (end - start), "vector", "model.message_input.query")


def _norms(b: Builder, runs: tuple[tuple[LayerSpec, int], ...]) -> None:
    a = b.arch
    d = need_int(a, "d_model")
    placement = a.get("norm_placement") or "pre"
    per_sublayer = {"pre": 1, "post": 1, "sandwich": 2, "parallel": 0, "parallel2": 1}[placement]
    count = 0
    for spec, n in runs:
        sub = (spec.mixer is not None) + (spec.ffn is not None)
        if placement == "parallel":
            count += n
        else:
            count += per_sublayer * sub * n
        if spec.ffn2 is not None:
            count += (a.get("ffn2_norms") or 0) * n
        if spec.ffn == "moe":
            count += (a.get("moe_norms") or 0) * n
        if spec.mixer is not None:
            count -= (a.get("scaleless_norms") or 0) * n  # placement norms without a scale
    first = runs[0][0] if runs else None
    if a.get("first_attn_norm") is False and placement != "parallel" and first and first.index == 0:
        count -= 1 if first.mixer else 0  # ModernBERT-decoder: layer 0's attention norm is an identity
    b.norm("norms/layers", d, count, "model.layers.0.input_layernorm")
    rank = a.get("norm_gate_rank") or 0
    if rank:
        # A low-rank sigmoid gate after the norm (A.X-K2's GatedRMSNorm: d → rank → d) on
        # every layer's input norm and on the pre-FFN norm of MoE layers.
        gates = sum(n * ((spec.mixer is not None) + (spec.ffn == "moe")) for spec, n in runs)
        gmod = "model.layers.0.input_layernorm.mlp"
        b.add("norms/gate.fc1", rank, d, gates, "linear", f"{gmod}.fc1")
        b.add("norms/gate.fc2", d, rank, gates, "linear", f"{gmod}.fc2")
    scales = a.get("layer_scales") or 0
    per_sublayer = a.get("sublayer_scales") or 0
    if scales or per_sublayer:
        # Learned residual scales outside the norms (Doge per layer, Dory per attention or MLP
        # block), kept whatever norm_affine says.
        count = scales * sum(n for _, n in runs)
        count += per_sublayer * sum(n * ((s.mixer is not None) + (s.ffn is not None)) for s, n in runs)
        b.add("norms/layer_scales", d, 1, count, "vector", "model.layers.0.input_residual")


# The last few architectures' tensors, by identity (each entry holds its Architecture, so an
# id is never reused while cached): the parameter count and every memory plan of one cost
# pass ask for the same model's tensors.
_BUILT: dict[int, tuple[Architecture, tuple[Tensor, ...]]] = {}
_KEEP = 16


def tensors(arch: Architecture, keep: bool = True) -> tuple[Tensor, ...]:
    """Every parameter tensor of the model transformers would build from this config
    (``keep=False``: not remembered, for a throwaway one-layer copy that would only push the
    models themselves out of the cache)."""
    if not keep:
        return _build(arch)
    hit = _BUILT.get(id(arch))
    if hit is not None and hit[0] is arch:
        return hit[1]
    out = _build(arch)
    if len(_BUILT) >= _KEEP:
        _BUILT.clear()  # (a whole-cache drop: safe while another thread reads or adds)
    _BUILT[id(arch)] = (arch, out)
    return out


def _build(arch: Architecture) -> tuple[Tensor, ...]:
    b = Builder(arch)
    d, vocab = need_int(arch, "d_model"), need_int(arch, "vocab")
    rows = vocab + (arch.get("embed_extra_rows") or 0)  # Mllama: vocab_size + 8
    d_embed = arch.get("d_embed") or d
    b.add("embedding/tokens", rows, d_embed, 1, "embedding", "model.embed_tokens")
    if d_embed != d:
        b.add("embedding/project_in", d, d_embed, 1, "linear", "model.project_in")
    types = arch.get("type_vocab") or 0
    if types:  # a token-type (segment) table added to the token embeddings (CPM-Ant)
        b.add("embedding/types", types, d, 1, "embedding", "model.segment_embedding")
    if arch.get("embed_norm"):
        b.norm("norms/embedding", d, 1, "model.embed_layernorm")
    if arch.get("position") == "learned":
        rows = need_int(arch, "max_positions") + (arch.get("position_offset") or 0)
        b.add("position/table", rows, d, 1, "embedding", "model.embed_positions")
    if arch.get("rope_learned_scale"):  # a learned log-scale per rotary frequency (Mistral Large 4)
        rotary = arch.get("qk_rope_head_dim") or need_int(arch, "head_dim")
        b.add("position/rope_scale", rotary // 2, 1, 1, "vector", "model.rotary_emb.alpha")
    rel = arch.get("rel_bias_rows") or 0
    if rel:  # a learned bias per head and relative-position bucket, shared by every layer
        b.add("position/rel_bias", rel, need_int(arch, "n_heads"), 1, "embedding", "model.position_bias")
    vectors = arch.get("model_vectors") or 0
    if vectors:  # d-wide learned vectors outside the layers (HRM z_L_init, XLNet mask_emb)
        b.add("embedding/vectors", d, 1, vectors, "vector", "model.z_L_init")
    layers = arch.layers
    runs = tuple(r for r in arch.layer_runs if not r[0].tied)
    _layer_tensors(b, runs)
    tied = tuple(r for r in arch.layer_runs if r[0].tied)
    if tied:  # layers running weights held by earlier ones: computed, not stored
        reused = Builder(arch)
        _layer_tensors(reused, tied)
        b.out.extend(replace(t, reused=True) for t in reused.out)
    _shared_blocks(b, layers)
    if arch.get("last_o_bias"):  # GPT-NeoX-Japanese: dense_bias on the last layer only
        b.add("attention/o.bias", d, 1, 1, "vector", "model.layers.0.attention.dense_bias", "attention")
    own = sum(n for _, n in runs)
    per_layer_inputs(b, own)
    altup_laurel(b, own)
    hyper_connections(b, own)
    _message_gates(b)
    if arch.get("final_norm", True):
        no_bias = arch.get("final_norm_no_bias")
        b.norm("norms/final", d, 1, "model.norm", bias=False if no_bias else None)
    if d_embed != d:
        b.add("head/project_out", d_embed, d, 1, "linear", "model.project_out")
    if arch.get("head_transform"):  # BERT-style prediction head: dense, activation, norm
        b.add("head/transform", d, d, 1, "linear", "lm_head.dense")
        if arch.get("head_transform_bias"):
            b.add("head/transform.bias", d, 1, 1, "vector", "lm_head.dense")
        b.norm("norms/head_transform", d, 1, "lm_head.norm")
    backbone = arch.get("backbone_width") or 0
    if backbone:  # a draft model reading two target-model states and writing one back
        b.add("embedding/backbone_in", d, 2 * backbone, 1, "linear", "pre_projection")
        b.add("head/backbone_out", backbone, d, 1, "linear", "post_projection")
    if arch.get("ordered_embeddings") and arch.get("head_centroids"):
        centroids = need_int(arch, "head_centroids")
        b.add("head/centroids", centroids, d, 1, "linear", "masked_embedding.centroids")
    head_rows = arch.get("head_vocab") or vocab  # Apertus 1.5: a pruned output vocabulary
    if not arch.get("tie_embeddings"):
        b.add("head/weight", head_rows, d_embed, 1, "linear", "lm_head")
    if arch.get("head_scale"):  # a learned per-token logit scale (Dory logit_scale)
        b.add("head/logit_scale", head_rows, 1, 1, "vector", "lm_head.logit_scale")
    if arch.get("head_bias"):
        b.add("head/bias", head_rows, 1, 1, "vector", "lm_head")
    return tuple(b.out)
