"""The tensor inventory's unit, kept under its old name: the rows, the builder and the refusal
live in ``constructs/tensor.py`` so a mechanism's construct module can build its tensors."""

from __future__ import annotations

from ...constructs.tensor import PARTS, Builder, Tensor, Unsupported, fast_tensor, group_runs, need_int

__all__ = ["PARTS", "Builder", "Tensor", "Unsupported", "fast_tensor", "group_runs", "need_int"]
