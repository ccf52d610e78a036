"""Stage 2, the schema layer: a RawConfig through the key map (expr, keymap), the layer layout, the
towers and the weight format into one frozen Architecture (``build``)."""
