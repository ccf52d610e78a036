"""Stage 1, reading a config: a local file, the Hub or the bundled catalog, parsed with key
positions into a RawConfig."""
