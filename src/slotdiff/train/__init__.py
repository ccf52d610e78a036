"""Training memory: what one step of training a model needs per GPU, from its config alone.

A stage above ``cost/`` (it prices parameters with ``cost.params.count`` and reads the GPU
presets of ``cost.workload``); docs/TRAINING.md has the accounting.
"""

from .memory import TrainMemory, train_memory
from .setup import Dropout, TrainSetup

__all__ = ["Dropout", "TrainMemory", "TrainSetup", "train_memory"]
