"""Stage 3, slots: an Architecture's fills facet by facet, its class and family, and the diff
of two fills."""
