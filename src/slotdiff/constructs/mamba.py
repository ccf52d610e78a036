"""Mamba (selective state space) mixers, version 1 (per-channel state: Mamba, Jamba, Falcon-
Mamba) and 2 (per-head scalar decay: Mamba-2, Nemotron-H, Zamba2, Falcon-H1, Granite 4): a
fixed state per sequence (inner × ssm_state) and the convolution's last inputs, no KV; what
vLLM keeps in one mamba page; the tensors transformers builds.
"""

from __future__ import annotations

from ..core.errors import SlotdiffError
from ..schema.arch import Architecture, LayerSpec
from .base import Construct
from .tensor import Builder, Unsupported, need_int


class Mamba(Construct):
    """A Mamba mixer of ``version`` 1 or 2."""

    softmax = False
    ssm = True
    vllm_kind = "mamba"

    def __init__(self, name: str, version: int, label: str) -> None:
        self.name, self.version, self.label = name, version, label
        self.recurrent_heads = version == 2  # Mamba-2's ssm_n_heads split over TP

    def mixer_state(self, arch: Architecture, variant: str | None) -> tuple[int, int]:
        """(the SSM state, in the state dtype; the convolution window, in the model dtype)."""
        d = arch.get("d_model") or 0
        state, kernel = arch.get("ssm_state") or 0, arch.get("ssm_conv_kernel") or 0
        inner = arch.get("ssm_inner") or int((arch.get("ssm_expand") or 2) * d)
        if self.version == 1:
            return inner * state, inner * kernel
        groups = arch.get("ssm_n_groups") or 0
        return inner * state, (inner + 2 * groups * state) * kernel

    def vllm_state_page(
        self, arch: Architecture, layer: LayerSpec, tp: int, conv_bytes: float, state_bytes: float
    ) -> float:
        """The convolution's kernel − 1 inputs per channel and inner × state, on a TP rank, as
        vLLM's ``MambaStateShapeCalculator`` shapes them: Mamba-2's channels are x and the B
        and C groups, all split over TP, a group count TP does not divide first raised to TP
        (``extra_groups_for_head_shards``: each rank keeps the groups its heads read)."""
        d = arch.get("d_model") or 0
        inner = arch.get("ssm_inner") or int((arch.get("ssm_expand") or 2) * d)
        n, kernel = arch.get("ssm_state") or 0, arch.get("ssm_conv_kernel") or 0
        groups = (arch.get("ssm_n_groups") or 0) if self.version == 2 else 0
        if groups % tp:
            groups = tp  # groups + (tp − groups)
        conv = (inner + 2 * groups * n) // tp * max(0, kernel - 1)
        return conv * conv_bytes + inner // tp * n * state_bytes

    def vllm_checkpoint_blocks(
        self, arch: Architecture, layer: LayerSpec, version: tuple[int, ...]
    ) -> int | None:
        """Mamba-2 exports its block-boundary state from inside a prefill from vLLM 0.32
        (``MambaMixer2.get_kv_cache_spec``: one checkpoint block, whatever the kernel)."""
        return 1 if self.version == 2 and version >= (0, 32) else 0

    def sglang_state(self, arch: Architecture, layer: LayerSpec, tp: int) -> tuple[int, int] | None:
        """Mamba-2 as SGLang's ``Mamba2StateShape`` (inner = heads × head_dim; Falcon-H1's
        ``mamba_d_ssm``); SGLang serves no Mamba-1 model, so None."""
        if self.version != 2:
            return None
        d = arch.get("d_model") or 0
        inner = arch.get("ssm_inner") or int((arch.get("ssm_expand") or 2) * d)
        heads = arch.get("ssm_n_heads") or 0
        head_dim = arch.get("ssm_head_dim") or (inner // heads if heads else 0)
        groups, state = arch.get("ssm_n_groups") or 0, arch.get("ssm_state") or 0
        kernel = arch.get("ssm_conv_kernel") or 0
        return sglang_mamba2_shape(arch, tp, inner, groups, heads, head_dim, state, kernel)

    def tensors(self, b: Builder, n: int, layer: LayerSpec) -> None:
        """in_proj, the depthwise conv, the scan's parameters, out_proj."""
        mamba(b, n, self.version)


def sglang_mamba2_shape(
    arch: Architecture, tp: int, inner: int, groups: int, heads: int, head_dim: int, state: int, kernel: int
) -> tuple[int, int]:
    """SGLang's ``Mamba2StateShape.create`` on a TP rank (``configs/mamba_utils.py``, 0.5.4-0.5.6):
    groups that TP does not divide become ``tp`` groups; conv = (inner + 2 × groups × state) / tp
    channels × (kernel − 1), temporal = heads / tp × head_dim × state. SGLang's ``divide``
    asserts, so an uneven split is refused, not rounded."""
    if groups % tp:
        groups = tp  # extra_groups_for_head_shards: groups + (tp − groups)
    conv_dim = inner + 2 * groups * state
    for what, n in (("the convolution's channels", conv_dim), ("the recurrent heads", heads)):
        if n % tp:
            raise SlotdiffError(
                arch.name,
                f"not supported: SGLang shards {what} ({n}) over TP {tp}, which does not divide them",
                key=arch.key("model_type"),
            )
    return conv_dim // tp * max(0, kernel - 1), heads // tp * head_dim * state


MAMBA = Mamba("mamba", 1, "Mamba")
MAMBA2 = Mamba("mamba2", 2, "Mamba-2")


def mamba(b: Builder, n: int, version: int) -> None:
    """Mamba-1 (selective scan, per-channel state) or Mamba-2 (per-head scalar decay)."""
    a = b.arch
    d = need_int(a, "d_model")
    mod = "model.layers.0.mixer"
    kernel = need_int(a, "ssm_conv_kernel")
    state = need_int(a, "ssm_state")
    inner = need_int(a, "ssm_inner")
    conv_bias = bool(a.get("ssm_conv_bias"))
    proj_bias = bool(a.get("ssm_proj_bias"))
    out_bias = bool(a.get("ssm_out_bias"))
    if version == 2:
        heads, groups = need_int(a, "ssm_n_heads"), need_int(a, "ssm_n_groups")
        conv_dim = inner + 2 * groups * state
        width = inner + conv_dim + heads  # z, x/B/C, dt
        b.add("attention/ssm.in_proj", width, d, n, "linear", f"{mod}.in_proj")
        if proj_bias:
            b.add("attention/ssm.in_proj.bias", width, 1, n, "vector", f"{mod}.in_proj")
        b.add("attention/ssm.conv", conv_dim, kernel, n, "conv", f"{mod}.conv1d")
        if conv_bias:
            b.add("attention/ssm.conv.bias", conv_dim, 1, n, "vector", f"{mod}.conv1d")
        for name in ("dt_bias", "A_log", "D"):
            b.add(f"attention/ssm.{name}", heads, 1, n, "vector", f"{mod}.{name}")
        if a.get("ssm_norm", True):
            b.add("attention/ssm.norm", inner, 1, n, "vector", f"{mod}.norm")
        b.add("attention/ssm.out_proj", d, inner, n, "linear", f"{mod}.out_proj")
        if out_bias:
            b.add("attention/ssm.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
        return
    dt_rank = a.get("ssm_dt_rank")
    if dt_rank in (None, "auto"):
        dt_rank = -(-d // 16)
    if not isinstance(dt_rank, int):
        raise Unsupported(a.name, f"cannot read Δ rank {dt_rank!r}", key=a.key("ssm_dt_rank"))
    b.add("attention/ssm.in_proj", 2 * inner, d, n, "linear", f"{mod}.in_proj")
    if proj_bias:
        b.add("attention/ssm.in_proj.bias", 2 * inner, 1, n, "vector", f"{mod}.in_proj")
    b.add("attention/ssm.conv", inner, kernel, n, "conv", f"{mod}.conv1d")
    if conv_bias:
        b.add("attention/ssm.conv.bias", inner, 1, n, "vector", f"{mod}.conv1d")
    b.add("attention/ssm.x_proj", dt_rank + 2 * state, inner, n, "linear", f"{mod}.x_proj")
    b.add("attention/ssm.dt_proj", inner, dt_rank, n, "linear", f"{mod}.dt_proj")
    b.add("attention/ssm.dt_proj.bias", inner, 1, n, "vector", f"{mod}.dt_proj")
    b.add("attention/ssm.A_log", inner, state, n, "vector", f"{mod}.A_log")
    b.add("attention/ssm.D", inner, 1, n, "vector", f"{mod}.D")
    b.add("attention/ssm.out_proj", d, inner, n, "linear", f"{mod}.out_proj")
    if out_bias:
        b.add("attention/ssm.out_proj.bias", d, 1, n, "vector", f"{mod}.out_proj")
    if a.get("ssm_inner_norms"):
        b.add("attention/ssm.dt_norm", dt_rank, 1, n, "vector", f"{mod}.dt_layernorm")
        b.add("attention/ssm.bc_norm", state, 1, 2 * n, "vector", f"{mod}.b_layernorm")
