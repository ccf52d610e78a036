"""Foundations every stage uses: the one error type, data-folder lookup, safe file writes,
printable text."""
