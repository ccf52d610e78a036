"""``python -m slotdiff``: the same as the ``slotdiff`` console script."""

from .cli import entry

entry()
