"""slotdiff's version, in one place below every stage (the SARIF report and ``--version`` read it)."""

__version__ = "0.1.0"
