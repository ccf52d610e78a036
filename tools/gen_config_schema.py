"""Regenerate schemas/config.schema.json from the key map and schemas/config.constraints.json.

Run after changing schemas/keymap.json, a schemas/model_types file, the layer kinds in
src/slotdiff/schema/layer_rules.py, or the constraints file (tests/test_lint_data.py fails until you do):

    PYTHONPATH=src python tools/gen_config_schema.py
"""

from __future__ import annotations

import os

from slotdiff.core.files import atomic_write_text
from slotdiff.core.resources import data_dir
from slotdiff.lint.configschema import SCHEMA_FILE, render

os.environ["SLOTDIFF_NO_BUNDLE"] = "1"  # a generator reads the sources, never a bundle made before them


def main() -> int:
    path = data_dir("schemas") / SCHEMA_FILE
    atomic_write_text(path, render())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
