"""Which linears a quantized checkpoint leaves unquantized: its exclusion list
(``modules_to_not_convert``, ``ignore``, ``exclude_modules``) matched against HF-style module
names, layer by layer where the list names layers (ModelOpt's ``model.layers.0*``, a
compressed-tensors list of one layer's projections).

Two pattern kinds: ``re:<regex>`` (compressed-tensors) must match a whole name; any other
pattern matches a run of whole dotted components, ``*`` and ``?`` within one component, so
``gate`` excludes a router named ``mlp.gate`` but not ``mlp.gate_proj``, and
``model.layers.1*`` the layers 1 and 10-19 (as vLLM's ModelOpt reading does). A composite
checkpoint's prefix (``model.language_model.``, ``language_model.model.``) is read as the text
model's own ``model.``, the name slotdiff's tensors carry.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Composite checkpoints' names for the text model, and slotdiff's (the text model's own).
_PREFIXES = (
    ("model.language_model.", "model."),
    ("language_model.model.", "model."),
    ("language_model.lm_head", "lm_head"),
)
_MEMO = 65536  # module names remembered per list (a list meets a few thousand)


def text_pattern(pattern: str) -> str:
    """``pattern`` with a composite checkpoint's text-model prefix read as slotdiff's."""
    if pattern.startswith("re:"):
        return pattern
    for prefix, ours in _PREFIXES:
        if pattern.startswith(prefix):
            return ours + pattern[len(prefix) :]
    return pattern


def _component(glob: str) -> str:
    """A regex for one dotted component matched as ``fnmatch.fnmatchcase`` matches it."""
    out, i = [], 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append(r"[^.]*")
        elif ch == "?":
            out.append(r"[^.]")
        elif ch == "[":
            j = i + 1
            if j < len(glob) and glob[j] == "!":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            while j < len(glob) and glob[j] != "]":
                j += 1
            if j >= len(glob):  # no closing bracket: a literal [
                out.append(re.escape(ch))
            else:
                body = glob[i + 1 : j].replace("\\", "\\\\")
                body = "^" + body[1:] if body.startswith("!") else body
                out.append(r"(?!\.)[" + body + "]")
                i = j
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _run(pattern: str) -> str:
    """A regex that finds ``pattern``'s components as a run of whole components of a name."""
    return r"(?:^|\.)" + r"\.".join(_component(c) for c in pattern.split(".")) + r"(?=\.|$)"


class Matcher:
    """One exclusion list, compiled: ``matcher(name)`` says whether ``name`` is excluded;
    ``excluded_layers`` how many of a per-layer row's layers are."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        runs = [_run(text_pattern(p)) for p in patterns if not p.startswith("re:")]
        self._runs = re.compile("|".join(runs)).search if runs else None
        self._regexes = [re.compile(p[3:]).fullmatch for p in patterns if p.startswith("re:")]
        # A list that can tell layers apart: a regex, or a pattern with a digit or a class.
        self.by_layer = any(p.startswith("re:") or re.search(r"[\d\[]", p) for p in patterns)
        self._memo: dict[str, bool] = {}
        self._layers: dict[tuple[str, tuple[int, ...]], int] = {}

    def __call__(self, name: str) -> bool:
        hit = self._memo.get(name)
        if hit is None:
            hit = bool(self._runs and self._runs(name)) or any(full(name) for full in self._regexes)
            if len(self._memo) >= _MEMO:
                self._memo.clear()
            self._memo[name] = hit
        return hit

    def excluded_layers(self, module: str, layers: tuple[int, ...]) -> int:
        """How many of ``layers`` have ``module`` (named for the first as layer 0: its first
        number is the layer's) excluded."""
        if not self.by_layer:
            return len(layers) if self(module) else 0
        key = (module, layers)
        hit = self._layers.get(key)
        if hit is None:
            parts = module.split(".")
            at = next((i for i, p in enumerate(parts) if p.isdigit()), None)
            if at is None:
                hit = len(layers) if self(module) else 0
            else:
                head, tail = parts[:at], parts[at + 1 :]
                hit = sum(1 for i in layers if self(".".join([*head, str(i), *tail])))
            if len(self._layers) >= _MEMO:
                self._layers.clear()
            self._layers[key] = hit
        return hit


@lru_cache(maxsize=64)
def matcher(patterns: tuple[str, ...]) -> Matcher:
    """The compiled matcher of an exclusion list (one per list, kept across pricings)."""
    return Matcher(patterns)
