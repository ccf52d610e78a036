"""Lineage: what a model is derived from, read from its model card (README.md front matter).

The card's ``base_model`` (one repo id or several) and ``base_model_relation`` (``adapter``,
``merge``, ``quantized``, ``finetune``) are read with huggingface_hub's ``ModelCard`` (its
YAML is parsed safely; a malformed header is no lineage, never an error). The card is
fetched by the scan's own bounded, retried GET (``read.hub.fetch_file``), pinned to the
commit the config came from. Where the card names bases but no relation, the relation is
inferred as the Hub does: several bases are a ``merge``; a ``base_model:<relation>:<base>``
listing tag names it; a repo with ``adapter_config.json`` (PEFT's file; the listing's
``peft`` library or tag says so without a request) is an ``adapter``; a config with a
``quantization_config`` is ``quantized``; otherwise ``finetune``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..read.hub import fetch_file
from ..read.hub_errors import HubFailure, looks_like_repo_id
from ..read.retry import Retrier
from .unread import parse_object

RELATIONS = ("quantized", "finetune", "adapter", "merge")
CARD = "README.md"
CARD_CAP = 1024 * 1024  # a card's front matter is at the top; a bigger README is not read
MAX_BASES = 16
_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Lineage:
    """A model's bases and how it derives from them (empty bases: an original model)."""

    bases: tuple[str, ...] = ()
    relation: str | None = None  # one of RELATIONS, when there are bases
    relation_from: str | None = None  # card | tags | files | config | inferred
    note: str | None = None  # why the card could not be read, if it could not

    @property
    def base(self) -> str | None:
        return self.bases[0] if self.bases else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "bases": list(self.bases),
            "relation": self.relation,
            "relation_from": self.relation_from,
            "note": self.note,
        }


def _bases(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else [value]
    out = [s.strip() for s in items if isinstance(s, str) and looks_like_repo_id(s.strip())]
    return tuple(dict.fromkeys(out))[:MAX_BASES]


def _from_tags(tags: Sequence[str], bases: Sequence[str]) -> str | None:
    """The relation a ``base_model:<relation>:<base>`` listing tag gives one of ``bases``."""
    for tag in tags:
        parts = tag.split(":", 2)
        if len(parts) == 3 and parts[0] == "base_model" and parts[1] in RELATIONS and parts[2] in bases:
            return parts[1]
    return None


Config = Callable[[], Mapping[str, Any] | None]  # the model's config, parsed only when needed
Probe = Callable[[], bool]  # whether the repo holds adapter_config.json, asked only when needed
ADAPTER_FILE = "adapter_config.json"
ADAPTER_CAP = 256 * 1024


def parse_card(
    text: str, tags: Sequence[str] = (), config: Config | None = None, adapter: Probe | None = None
) -> Lineage:
    """The lineage a model card's metadata gives (``tags``, ``config``, ``adapter`` help infer
    the relation)."""
    from huggingface_hub import ModelCard

    try:
        data = ModelCard(text, ignore_metadata_errors=True).data.to_dict()
    except Exception as err:  # a hostile or broken header is no lineage
        return Lineage(note=f"model card metadata unreadable: {type(err).__name__}")
    bases = _bases(data.get("base_model"))
    if not bases:
        return Lineage()
    declared = data.get("base_model_relation")
    if isinstance(declared, str) and declared in RELATIONS:
        return Lineage(bases, declared, "card")
    if len(bases) > 1:
        return Lineage(bases, "merge", "inferred")
    if (tagged := _from_tags(tags, bases)) is not None:
        return Lineage(bases, tagged, "tags")
    if adapter is not None and adapter():
        return Lineage(bases, "adapter", "files")
    cfg = config() if config is not None else None
    if cfg is not None and isinstance(cfg.get("quantization_config"), Mapping):
        return Lineage(bases, "quantized", "config")
    return Lineage(bases, "finetune", "inferred")


def wants_card(rec: Any) -> bool:
    """A card is read for every classified model and for a repo without config.json (an
    adapter's); skipped and unchanged models cost no further request."""
    return rec.verdict not in ("skipped", "unchanged") or rec.reason == "no_config"


def read_lineage(
    repo_id: str,
    *,
    revision: str | None,
    tags: Sequence[str],
    config: Config | None,
    timeout: float,
    endpoint: str | None,
    token: str | bool | None,
    retrier: Retrier,
    library: str | None = None,
) -> Lineage:
    """Fetch and read one model's card; a missing or unreachable card is a note, never a failure."""

    def get(name: str, cap: int) -> bytes:
        return fetch_file(
            repo_id,
            name,
            revision=revision,
            timeout=timeout,
            endpoint=endpoint,
            token=token,
            retrier=retrier,
            cap=cap,
        )

    def adapter() -> bool:
        if library == "peft" or "peft" in tags:
            return True
        if config is not None:  # a repo with its own config.json holds a model, not an adapter
            return False
        try:
            get(ADAPTER_FILE, ADAPTER_CAP)
        except HubFailure as fail:
            return fail.kind == "too_large"  # it is there (404 is no_config; anything else: unknown)
        return True

    try:
        data = get(CARD, CARD_CAP)
    except HubFailure as fail:
        if fail.kind == "no_config":
            return Lineage(note="no model card")
        return Lineage(note=f"model card not read: {fail.kind} ({' '.join(fail.reason.split())[:160]})")
    return parse_card(data.decode("utf-8", errors="replace"), tags, config, adapter)


def with_lineage(rec: Any, config: bytes | None, opts: Any, retrier: Retrier) -> Any:
    """``rec`` (a verdict Record) with the lineage its model card gives; ``config`` is the
    config.json it was judged on (to tell a quantized copy), ``opts`` the scan's options."""
    listed = rec.listed
    lineage = read_lineage(
        listed.repo_id,
        revision=rec.commit if rec.commit and _SHA.fullmatch(rec.commit) else listed.sha,
        tags=listed.tags,
        config=(lambda: parse_object(config)) if config else None,
        library=listed.library,
        timeout=opts.timeout,
        endpoint=opts.endpoint,
        token=opts.token,
        retrier=retrier,
    )
    return replace(rec, lineage=lineage.to_dict())
