"""The checkpoint's tensor index beside a config: names, dtypes and shapes of the stored
tensors, read from safetensors headers (never tensor data) or ``model.safetensors.index.json``.

Local folders are read here; Hub repositories in ``read/hub_weights`` (range requests through
huggingface_hub). Either way the result is a ``StoredIndex`` or an ``Unavailable`` saying why,
so a checkpoint that cannot be read never stops the analysis of its config.
"""

from __future__ import annotations

import json
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

INDEX_FILE = "model.safetensors.index.json"
MAX_SHARDS = 4096  # shard files read per checkpoint (the largest public repos hold ~2,000)
MAX_TENSORS = 2_000_000  # tensors listed per checkpoint
MAX_INDEX_BYTES = 64 * 1024 * 1024  # an index JSON (DeepSeek-V3's is ~9 MB)


class StoredTensor(NamedTuple):
    """One stored tensor: its name, safetensors dtype, shape (None: only its name is known, from
    an index JSON) and byte size in the file (None with the shape). A named tuple: a 163-shard
    index holds ~45,000 of them, built in a tenth of a frozen dataclass's time."""

    name: str
    dtype: str | None
    shape: tuple[int, ...] | None
    nbytes: int | None

    @property
    def numel(self) -> int | None:
        if self.shape is None:
            return None
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class StoredIndex:
    """What a checkpoint stores: every tensor, and where the list came from."""

    tensors: tuple[StoredTensor, ...]
    source: str  # "safetensors headers" | "index JSON" (names only)
    where: str  # folder or repo id
    shards: int  # shard files the checkpoint names
    shards_read: int  # shard headers read (0 for an index JSON alone)
    total_size: int | None = None  # the index JSON's metadata.total_size, when given
    cached: bool = False  # read from the local HF cache without a request

    @property
    def shapes_known(self) -> bool:
        return self.source != "index JSON"


@dataclass(frozen=True)
class Unavailable:
    """No tensor index could be read, and why (one line)."""

    why: str


Lookup = StoredIndex | Unavailable


def weight_map_of(data: bytes | str) -> tuple[dict[str, str], int | None] | Unavailable:
    """The index JSON's tensor → shard map and ``metadata.total_size`` (capped, checked)."""
    if len(data) > MAX_INDEX_BYTES:
        return Unavailable(f"{INDEX_FILE} is over the {MAX_INDEX_BYTES:,}-byte cap")
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as err:
        return Unavailable(f"{INDEX_FILE} is not valid JSON: {_short(err)}")
    weight_map = value.get("weight_map") if isinstance(value, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        return Unavailable(f"{INDEX_FILE} has no weight_map of tensor names to shard files")
    if len(weight_map) > MAX_TENSORS:
        return Unavailable(f"{INDEX_FILE} lists {len(weight_map):,} tensors, over the {MAX_TENSORS:,} cap")
    meta = value.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    return weight_map, total if isinstance(total, int) and not isinstance(total, bool) else None


def index_json(data: bytes | str, where: str) -> StoredIndex | Unavailable:
    """Tensor names (no shapes) from a ``model.safetensors.index.json`` text."""
    read = weight_map_of(data)
    if isinstance(read, Unavailable):
        return read
    weight_map, total = read
    return StoredIndex(
        tuple(StoredTensor(name, None, None, None) for name in sorted(weight_map)),
        "index JSON",
        where,
        len(set(weight_map.values())),
        0,
        total,
    )


def _kind(path: Path) -> str:
    """What a non-regular file is, in words, for the reason a checkpoint was not read."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "a broken link"
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"))
    return next((word for test, word in kinds if test(mode)), "a device or special file")


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def local_index(folder: Path) -> Lookup | None:
    """The tensor index of the checkpoint in ``folder``; None when it holds no safetensors
    file and no index JSON (there is nothing to reconcile)."""
    try:
        found = sorted(folder.glob("*.safetensors"))
    except OSError as err:
        return Unavailable(f"cannot list {folder}: {err.strerror or err}")
    shards = [p for p in found if _regular(p)]
    index = folder / INDEX_FILE
    odd = [
        p for p in (*found, index) if p not in shards and (p.exists() or p.is_symlink()) and not _regular(p)
    ]
    if odd and not shards:  # named like a checkpoint but nothing a reader may open (a FIFO, a folder)
        return Unavailable(f"{odd[0].name} is not a regular file ({_kind(odd[0])}); nothing was read")
    named: set[str] | None = None
    if _regular(index):
        try:
            with open(index, "rb") as fh:
                text = fh.read(MAX_INDEX_BYTES + 1)
        except OSError as err:
            return Unavailable(f"cannot read {INDEX_FILE}: {err.strerror or err}")
        read = weight_map_of(text)
        if isinstance(read, Unavailable):
            return read
        named = set(read[0].values())
        if not named <= {p.name for p in shards}:  # shards missing here: the names are what we have
            return index_json(text, str(folder))
        shards = [p for p in shards if p.name in named]
    if not shards:
        return None
    if len(shards) > MAX_SHARDS:
        return Unavailable(f"{len(shards):,} safetensors files, over the {MAX_SHARDS:,} cap")
    return _headers(folder, shards, named)


def _headers(folder: Path, shards: list[Path], named: set[str] | None) -> Lookup:
    """Read each shard's header (8-byte length and JSON) through huggingface_hub's parser."""
    from huggingface_hub import parse_local_safetensors_file_metadata
    from huggingface_hub.errors import SafetensorsParsingError

    tensors: list[StoredTensor] = []
    for path in shards:
        try:
            meta = parse_local_safetensors_file_metadata(path)
        except (SafetensorsParsingError, ValueError, KeyError, TypeError) as err:
            why = str(err).rpartition("): ")[2] or str(err)  # the library's reason, without the path
            return Unavailable(f"{path.name}: not a readable safetensors header ({_short(why)})")
        except OSError as err:
            return Unavailable(f"cannot read {path.name}: {err.strerror or err}")
        try:
            tensors.extend(listed(meta))
        except (TypeError, ValueError) as err:
            return Unavailable(f"{path.name}: a tensor entry of its header is malformed ({_short(err)})")
        if len(tensors) > MAX_TENSORS:
            return Unavailable(f"over {MAX_TENSORS:,} tensors in the safetensors headers")
    return StoredIndex(
        tuple(sorted(tensors, key=lambda t: t.name)),
        "safetensors headers",
        str(folder),
        len(named) if named else len(shards),
        len(shards),
    )


def listed(file_meta: Any) -> list[StoredTensor]:
    """The tensors of one parsed header; TypeError or ValueError on a malformed entry."""
    out = []
    for name, info in file_meta.tensors.items():
        shape = tuple(info.shape)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise ValueError(f"{name}: shape {list(shape)!r} is not a list of sizes")
        begin, end = info.data_offsets
        if not isinstance(begin, int) or not isinstance(end, int) or end < begin:
            raise ValueError(f"{name}: data_offsets are not two ordered integers")
        if not isinstance(info.dtype, str):
            raise ValueError(f"{name}: dtype is not a string")
        out.append(StoredTensor(str(name), info.dtype, shape, end - begin))
    return out


def _short(err: BaseException) -> str:
    text = str(err).replace("\n", " ")
    return text if len(text) <= 160 else text[:157] + "..."
