"""Count-sketch hash functions shared bit-for-bit by the workers and the P4 switch.

This module is the single definition of the sketch hashes. For row ``r`` of a sketch whose
job seed is ``S`` (32-bit), coordinate ``i`` (32-bit) hashes to::

    seed_r = (S + r) mod 2**32
    off_r  = (seed_r * 0x9E3779B1) mod 2**32                     # per-row constant
    F_r(x) = crc32(be32(seed_r) ++ be32((x + off_r) mod 2**32))  # zlib / IEEE 802.3 CRC-32
    h      = F_r(F_r(i))                                         # the row hash, applied twice
    bucket = h & (c - 1)                                         # c: columns, a power of two
    sign   = +1 if bit 31 of h is 0 else -1

The P4 program computes it with two v1model hash calls per row, ``off_r`` being a per-row
constant (installed by the controller, or ``seed_r * 32w0x9E3779B1`` in P4)::

    hash(h1, HashAlgorithm.crc32, 32w0, { seed_r, index + off_r }, 64w0x100000000);
    hash(h,  HashAlgorithm.crc32, 32w0, { seed_r, h1 + off_r },    64w0x100000000);

Why not the single ``crc32(be32(seed_r) ++ be32(i))``: a CRC is affine over GF(2), so that
equals ``L(i) xor K(seed_r)`` with ``L`` the same for every row. All rows would be one hash up to
an xor constant: identical collisions and signs in every row, so the median of rows gains
nothing and peeling never completes (tests/worker/test_hashing.py checks this). Adding the
per-row offset (carries are not GF(2)-linear) helps but still leaves pairs that collide in all
rows (peeling at load 0.7 failed in 6 of 30 trials); applying the row hash twice made peeling
match ideal random hashing in our trials (0 failures in 30, loads 0.7-0.78, random and
contiguous supports).

Three implementations agree bit for bit (tests check them against each other and against the
reference vectors in ``hina/testdata/sketch_hash_vectors.json``, which the P4 side also checks):

* :func:`sketch_hash_scalar` -- the reference, with :func:`zlib.crc32`;
* :func:`sketch_hash_torch` -- table-driven CRC over the 4 index bytes, int64 arithmetic, any
  device; the 4 seed bytes are folded into a per-row starting register on the host;
* :func:`sketch_hash_numpy` -- the same algorithm in numpy.

Regenerate the vector file with ``python -m hina.hashing --write``.
"""
from __future__ import annotations

import argparse
import json
import struct
import zlib
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
import torch

__all__ = [
    "CRC32_POLY_REFLECTED",
    "HASH_BITS",
    "SIGN_BIT",
    "VECTORS_PATH",
    "bucket_of",
    "HASH_PASSES",
    "ROW_OFFSET_MULTIPLIER",
    "check_columns",
    "row_offset",
    "crc32_table",
    "generate_vectors",
    "sign_of",
    "sketch_hash_numpy",
    "sketch_hash_scalar",
    "sketch_hash_torch",
]

#: Odd multiplier (2**32 / golden ratio) that spreads seed_r into the per-row index offset.
ROW_OFFSET_MULTIPLIER = 0x9E3779B1
#: The row hash F_r is applied this many times (see the module docstring).
HASH_PASSES = 2
#: Reflected IEEE 802.3 polynomial used by zlib and by BMv2's ``crc32``.
CRC32_POLY_REFLECTED = 0xEDB88320
#: Width of the hash value and of the seed/index fields.
HASH_BITS = 32
_MASK32 = (1 << HASH_BITS) - 1
#: Bit of ``h`` that selects the sign (set -> -1).
SIGN_BIT = 31
#: The reference vector file the P4 tests read.
VECTORS_PATH = Path(__file__).resolve().parent / "testdata" / "sketch_hash_vectors.json"
_BYTE_MASK = 0xFF
_BITS_PER_BYTE = 8
_INDEX_BYTES = 4


def check_columns(columns: int) -> None:
    """Refuse a column count the switch cannot mask with.

    Args:
        columns: sketch width ``c``.

    Raises:
        ValueError: unless ``columns`` is a power of two in [1, 2**32].
    """
    if not isinstance(columns, int) or columns < 1 or columns > (1 << HASH_BITS) or columns & (columns - 1):
        raise ValueError(
            f"columns={columns!r}: must be a power of two in [1, 2**32] so the switch can use "
            "a mask (h & (c - 1)) instead of a modulo")


def _check_u32(name: str, value: int) -> None:
    if not 0 <= int(value) <= _MASK32:
        raise ValueError(f"{name}={value!r}: must be an unsigned 32-bit integer")


def row_offset(seed_r: int) -> int:
    """Per-row index offset ``(seed_r * ROW_OFFSET_MULTIPLIER) mod 2**32``."""
    _check_u32("seed_r", seed_r)
    return (seed_r * ROW_OFFSET_MULTIPLIER) & _MASK32


def crc32_table() -> List[int]:
    """The 256-entry byte table of the reflected CRC-32 (zlib's ``crc_table``)."""
    table = []
    for byte in range(256):
        reg = byte
        for _ in range(_BITS_PER_BYTE):
            reg = (reg >> 1) ^ CRC32_POLY_REFLECTED if reg & 1 else reg >> 1
        table.append(reg)
    return table


_TABLE = crc32_table()


def sketch_hash_scalar(seed: int, row: int, index: int) -> int:
    """Reference hash ``h`` of one coordinate (zlib).

    Args:
        seed: the job's 32-bit sketch seed ``S``.
        row: sketch row ``r`` (>= 0).
        index: coordinate index ``i`` (unsigned 32-bit).

    Returns:
        ``F_r(F_r(i))`` with ``F_r(x) = zlib.crc32(be32(seed_r) ++ be32(x + off_r))``,
        in [0, 2**32).

    Example::
        >>> sketch_hash_scalar(0, 0, 0) == zlib.crc32(struct.pack(">II", 0, zlib.crc32(bytes(8))))
        True
    """
    _check_u32("seed", seed)
    _check_u32("index", index)
    if row < 0:
        raise ValueError(f"row={row!r}: must be >= 0")
    seed_r = (seed + row) & _MASK32
    off = row_offset(seed_r)
    h = index
    for _ in range(HASH_PASSES):
        h = zlib.crc32(struct.pack(">II", seed_r, (h + off) & _MASK32)) & _MASK32
    return h


def bucket_of(h, columns: int):
    """Bucket of hash value(s) ``h`` for a sketch of ``columns`` (a power of two) columns."""
    check_columns(columns)
    return h & (columns - 1)


def sign_of(h):
    """Sign(s) of hash value(s) ``h``: +1 when bit 31 is clear, -1 when set (same type as ``h``)."""
    return 1 - 2 * ((h >> SIGN_BIT) & 1)


def _row_register(seed: int, row: int) -> int:
    """CRC register (before the final xor) after the 4 big-endian bytes of ``seed + row``."""
    return zlib.crc32(struct.pack(">I", (seed + row) & _MASK32)) ^ _MASK32


_TORCH_TABLES: Dict[torch.device, torch.Tensor] = {}


def _torch_table(device: torch.device) -> torch.Tensor:
    table = _TORCH_TABLES.get(device)
    if table is None:
        table = torch.tensor(_TABLE, dtype=torch.int64, device=device)
        _TORCH_TABLES[device] = table
    return table


def sketch_hash_torch(seed: int, row: int, indices: torch.Tensor) -> torch.Tensor:
    """Vectorized ``h`` for many coordinates of one row, on the device of ``indices``.

    Table-driven CRC over the four big-endian bytes of each index, continuing from the
    register left by the row's seed bytes (computed once on the host).

    Args:
        seed: the job's 32-bit sketch seed.
        row: sketch row (>= 0).
        indices: integer tensor of coordinate indices in [0, 2**32), any shape.

    Returns:
        int64 tensor of the same shape with values in [0, 2**32).

    Example::
        >>> int(sketch_hash_torch(7, 1, torch.tensor([5]))) == sketch_hash_scalar(7, 1, 5)
        True
    """
    _check_u32("seed", seed)
    if row < 0:
        raise ValueError(f"row={row!r}: must be >= 0")
    if indices.dtype.is_floating_point or indices.dtype == torch.bool:
        raise ValueError(f"indices.dtype={indices.dtype}: must be an integer dtype")
    table = _torch_table(indices.device)
    off = row_offset((seed + row) & _MASK32)
    start = _row_register(seed, row)
    h = indices.to(torch.int64)
    for _ in range(HASH_PASSES):
        key = (h + off) & _MASK32
        reg = torch.full_like(key, start)
        for byte_pos in reversed(range(_INDEX_BYTES)):  # big endian: most significant byte first
            byte = (key >> (_BITS_PER_BYTE * byte_pos)) & _BYTE_MASK
            reg = table[(reg ^ byte) & _BYTE_MASK] ^ (reg >> _BITS_PER_BYTE)
        h = reg ^ _MASK32
    return h


def sketch_hash_numpy(seed: int, row: int, indices: np.ndarray) -> np.ndarray:
    """numpy twin of :func:`sketch_hash_torch` (uint64 result in [0, 2**32))."""
    _check_u32("seed", seed)
    table = np.asarray(_TABLE, dtype=np.uint64)
    off, mask = np.uint64(row_offset((seed + row) & _MASK32)), np.uint64(_MASK32)
    h = np.asarray(indices).astype(np.uint64)
    for _ in range(HASH_PASSES):
        key = (h + off) & mask
        reg = np.full(key.shape, _row_register(seed, row), dtype=np.uint64)
        for byte_pos in reversed(range(_INDEX_BYTES)):
            byte = (key >> np.uint64(_BITS_PER_BYTE * byte_pos)) & np.uint64(_BYTE_MASK)
            reg = table[(reg ^ byte) & np.uint64(_BYTE_MASK)] ^ (reg >> np.uint64(_BITS_PER_BYTE))
        h = reg ^ mask
    return h


#: Inputs of the reference vector file: edge seeds (wrap-around of S + r included) and indices.
VECTOR_SEEDS = (0, 1, 0x12345678, 0xDEADBEEF, 0xFFFFFFFE)
VECTOR_ROWS = (0, 1, 2, 4)
VECTOR_INDICES = (0, 1, 2, 255, 256, 1023, 65535, 65536, 1_000_003, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)
VECTOR_COLUMNS = (1 << 10, 1 << 16, 1 << 20)


def generate_vectors(seeds: Sequence[int] = VECTOR_SEEDS, rows: Sequence[int] = VECTOR_ROWS,
                     indices: Sequence[int] = VECTOR_INDICES,
                     columns: Sequence[int] = VECTOR_COLUMNS) -> dict:
    """Build the reference vector set (with zlib) as a JSON-ready dict.

    Returns:
        ``{"definition": str, "columns": [...], "vectors": [{"seed", "row", "seed_r", "index",
        "h", "sign", "bucket": {str(c): int}}, ...]}``.
    """
    for c in columns:
        check_columns(c)
    vectors = []
    for seed in seeds:
        for row in rows:
            for index in indices:
                h = sketch_hash_scalar(seed, row, index)
                seed_r = (seed + row) & _MASK32
                h1 = zlib.crc32(struct.pack(">II", seed_r, (index + row_offset(seed_r)) & _MASK32))
                vectors.append({
                    "seed": seed, "row": row, "seed_r": (seed + row) & _MASK32,
                    "row_offset": row_offset(seed_r), "index": index, "h1": h1,
                    "h": h, "sign": sign_of(h), "bucket": {str(c): bucket_of(h, c) for c in columns},
                })
    return {
        "definition": "seed_r = (seed + row) mod 2^32; row_offset = (seed_r * 0x9E3779B1) mod 2^32; "
                      "h1 = crc32(be32(seed_r) ++ be32((index + row_offset) mod 2^32)); "
                      "h = crc32(be32(seed_r) ++ be32((h1 + row_offset) mod 2^32)) [zlib CRC-32]; "
                      "bucket = h & (columns - 1); sign = +1 if bit 31 of h is 0 else -1",
        "p4": ["hash(h1, HashAlgorithm.crc32, 32w0, { seed_r, index + row_offset }, 64w0x100000000);",
               "hash(h, HashAlgorithm.crc32, 32w0, { seed_r, h1 + row_offset }, 64w0x100000000);"],
        "columns": list(columns),
        "vectors": vectors,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: print the vector set, or ``--write`` it to :data:`VECTORS_PATH`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {VECTORS_PATH}")
    args = parser.parse_args(argv)
    text = json.dumps(generate_vectors(), indent=1) + "\n"
    if args.write:
        VECTORS_PATH.parent.mkdir(parents=True, exist_ok=True)
        VECTORS_PATH.write_text(text)
        print(f"wrote {VECTORS_PATH}")
    else:
        print(text)


if __name__ == "__main__":
    main()
