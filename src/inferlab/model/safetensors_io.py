"""Read safetensors files tensor by tensor as float32, bf16 included, with no torch.

The format (huggingface/safetensors README): 8 bytes little-endian header length N, N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data,
offsets relative to its start, row-major, little-endian. numpy has no bfloat16, so the safetensors
library's numpy API refuses bf16 files; bf16 is the top 16 bits of a float32, so widening is a
shift. Each tensor is read into memory, converted, and its raw buffer dropped before the next, so
loading a bf16 model peaks at one float32 copy of the weights plus the largest tensor's raw bytes.

A sharded checkpoint (model.safetensors.index.json: {"weight_map": {name: shard file}}) is read
shard after shard.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from inferlab.errors import InferlabError
from inferlab.jsonfile import loads, read_json_object
from inferlab.nesting import pointer_token

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F64": np.dtype("<f8")}
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a Hugging Face model folder: one file, or the shards its index names."""
    if (folder / SINGLE).is_file():
        return [folder / SINGLE]
    index = folder / INDEX
    if not index.is_file():
        raise InferlabError(f"{folder}: neither {SINGLE} nor {INDEX} found")
    weight_map = read_json_object(index).get("weight_map")   # (nesting, NaN, bad UTF-8: one line)
    if not isinstance(weight_map, dict):
        raise InferlabError(f"{index}: /weight_map must be an object")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard or "/" in shard:
            raise InferlabError(f"{index}: /weight_map/{pointer_token(name)} must be the "
                                f"file name of a shard in the folder, got {json.dumps(shard)[:40]}")
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        if not (folder / shard).is_file():
            raise InferlabError(f"{index}: shard {shard} not found in {folder}")
    return [folder / shard for shard in shards]


def read_header(path: Path) -> tuple[dict, int]:
    """(tensor entries by name, byte offset of the data section)."""
    try:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = loads(f.read(n).decode("utf-8"), f"{path} (header)")
    except FileNotFoundError:
        raise InferlabError(f"{path} not found") from None
    except (struct.error, json.JSONDecodeError, UnicodeDecodeError, MemoryError, OverflowError):
        raise InferlabError(f"{path}: not a safetensors file (bad header)") from None
    if not isinstance(header, dict):
        raise InferlabError(f"{path}: not a safetensors file (its header is not a JSON object)")
    header.pop("__metadata__", None)
    for name, entry in header.items():
        _check_entry(name, entry, path)
    return header, 8 + n


def _check_entry(name: str, entry, path: Path) -> None:
    """A tensor's header entry: {"dtype": str, "shape": [n >= 0, ...], "data_offsets": [begin <= end]}."""
    def whole(x) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0
    ok = (isinstance(entry, dict) and isinstance(entry.get("dtype"), str)
          and isinstance(entry.get("shape"), list) and all(whole(d) for d in entry["shape"])
          and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2
          and all(whole(o) for o in entry["data_offsets"]) and entry["data_offsets"][0] <= entry["data_offsets"][1])
    if not ok:
        raise InferlabError(f"{path}: tensor {name!r}'s header entry is not {{dtype, shape of whole numbers, "
                            "data_offsets [begin, end]}")


def iter_float32(path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """(name, float32 array) for every tensor of one file, in file order, one at a time."""
    header, base = read_header(path)
    entries = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])
    with open(path, "rb") as f:
        for name, entry in entries:
            dtype = _DTYPES.get(entry.get("dtype"))
            if dtype is None:
                raise InferlabError(f"{path}: tensor {name!r} has dtype {entry.get('dtype')!r}; "
                                    f"supported: {', '.join(_DTYPES)}")
            begin, end = entry["data_offsets"]
            shape = tuple(entry["shape"])
            count = int(np.prod(shape, dtype=np.int64))
            if end - begin != count * dtype.itemsize:
                raise InferlabError(f"{path}: tensor {name!r} has {end - begin} bytes for shape {shape}")
            f.seek(base + begin)
            raw = np.fromfile(f, dtype=dtype, count=count)
            if raw.size != count:
                raise InferlabError(f"{path}: truncated at tensor {name!r}")
            yield name, _to_float32(raw, entry["dtype"]).reshape(shape)


def _to_float32(raw: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        wide = raw.astype(np.uint32)                            # the one float32-sized buffer
        wide <<= 16                                             # bf16 bits are a float32's top half
        return wide.view(np.float32)
    return raw if raw.dtype == np.float32 else raw.astype(np.float32)
