"""Derivatives grouped under their base model (from each model card's ``base_model``).

``lineage_groups`` is the report's summary: every base that some model of the scan names,
whether the base itself is in the scan, and its derivatives counted by relation. ``fold``
is what the Markdown and HTML reports do inside one verdict section: a derivative with the
same verdict and design as its base is shown under it, and derivatives of one base outside
the scan that share a design are shown once, so a design seen only in derivatives is one
entry with a count, not a page of copies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Model = Mapping[str, Any]


def base_of(m: Model) -> str | None:
    lin = m.get("lineage") or {}
    bases = lin.get("bases") or ()
    return bases[0] if bases else None


def relation_of(m: Model) -> str | None:
    return (m.get("lineage") or {}).get("relation")


def slim(m: Model) -> dict[str, Any]:
    """What :func:`fold` and :func:`derivatives_line` read of a model: enough to fold a
    section of 50,000 models without holding them."""
    return {"repo_id": m["repo_id"], "fingerprint": m.get("fingerprint"), "lineage": m.get("lineage")}


def lineage_groups(models: Iterable[Model], verdicts: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each base named by some model's card, with its derivatives (most derivatives first).

    ``models`` need only be those whose card names a base (others are passed over);
    ``verdicts`` is every reported model's verdict, by repo id (is the base in the scan?)."""
    groups: dict[str, list[Model]] = {}
    for m in models:
        base = base_of(m)
        if base is not None and base != m["repo_id"]:
            groups.setdefault(base, []).append(m)
    out = []
    for base, derivs in groups.items():
        rel = Counter(relation_of(d) or "unknown" for d in derivs)
        out.append(
            {
                "base": base,
                "in_scan": base in verdicts,
                "verdict": verdicts.get(base),
                "count": len(derivs),
                "by_relation": dict(sorted(rel.items())),
                "derivatives": [
                    {"repo_id": d["repo_id"], "relation": relation_of(d), "verdict": d["verdict"]}
                    for d in derivs
                ],
            }
        )
    out.sort(key=lambda g: (-g["count"], g["base"]))
    return out


def fold(section: Sequence[Model]) -> list[tuple[Model, list[Model]]]:
    """``section``'s models (one verdict) as (shown, folded derivatives), in the section's order.

    A base takes the derivatives that share its section (its verdict) and its design."""
    here = {m["repo_id"]: m for m in section}
    leads: dict[str, tuple[Model, list[Model]]] = {}
    by_shared: dict[tuple[str, Any], str] = {}
    order: list[str] = []
    for m in section:
        base = base_of(m)
        if base is not None and base != m["repo_id"]:
            if base in here and here[base].get("fingerprint") == m.get("fingerprint"):
                if base not in leads:
                    leads[base] = (here[base], [])
                    order.append(base)
                leads[base][1].append(m)
                continue
            if base not in here:
                key = (base, m.get("fingerprint"))
                lead = by_shared.get(key)
                if lead is not None:
                    leads[lead][1].append(m)
                    continue
                by_shared[key] = m["repo_id"]
        if m["repo_id"] not in leads:
            leads[m["repo_id"]] = (m, [])
            order.append(m["repo_id"])
    return [leads[r] for r in order]


def derivatives_line(derivs: Sequence[Model]) -> str:
    """``4 derivatives (3 quantized, 1 finetune)``."""
    rel = Counter(relation_of(d) or "unknown" for d in derivs)
    parts = ", ".join(f"{n} {r}" for r, n in sorted(rel.items(), key=lambda x: (-x[1], x[0])))
    return f"{len(derivs)} derivative{'s' if len(derivs) != 1 else ''} ({parts})"
