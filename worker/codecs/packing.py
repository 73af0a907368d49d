"""Nibble packing of 4-bit THC indices: two indices per byte, exact round trip.

Wire order (shared with the switch's LUT-SUM parser): coordinate ``2j`` goes to the HIGH
nibble of byte ``j`` and coordinate ``2j + 1`` to the LOW nibble (:data:`EVEN_COORD_IN_HIGH_NIBBLE`),
i.e. the bits read left to right on the wire are the coordinates in order. An odd count is padded
with a zero low nibble in the last byte; the unpacker is told the true count.
"""
from __future__ import annotations

import torch

__all__ = ["EVEN_COORD_IN_HIGH_NIBBLE", "NIBBLE_BITS", "NIBBLE_MAX", "pack_nibbles", "unpack_nibbles"]

#: Coordinate 2j sits in bits [7:4] of byte j, coordinate 2j+1 in bits [3:0].
EVEN_COORD_IN_HIGH_NIBBLE = True
NIBBLE_BITS = 4
NIBBLE_MAX = (1 << NIBBLE_BITS) - 1


def pack_nibbles(indices: torch.Tensor) -> torch.Tensor:
    """Pack 4-bit values two per byte.

    Args:
        indices: uint8 tensor (any shape, flattened) with values in [0, 15].

    Returns:
        uint8 tensor of ``ceil(n / 2)`` bytes, even coordinates in the high nibble.

    Example::
        >>> pack_nibbles(torch.tensor([1, 2, 3], dtype=torch.uint8)).tolist()
        [18, 48]
    """
    if indices.dtype != torch.uint8:
        raise ValueError(f"indices.dtype={indices.dtype}: must be torch.uint8 (4-bit values)")
    flat = indices.reshape(-1)
    if flat.numel() % 2:
        flat = torch.cat([flat, flat.new_zeros(1)])
    pairs = flat.view(-1, 2)
    return (pairs[:, 0] << NIBBLE_BITS) | pairs[:, 1]


def unpack_nibbles(packed: torch.Tensor, count: int) -> torch.Tensor:
    """Inverse of :func:`pack_nibbles`.

    Args:
        packed: uint8 tensor of ``ceil(count / 2)`` bytes.
        count: number of 4-bit values to return.

    Returns:
        uint8 tensor of ``count`` values in [0, 15].
    """
    if packed.dtype != torch.uint8:
        raise ValueError(f"packed.dtype={packed.dtype}: must be torch.uint8")
    if count < 0 or packed.numel() != (count + 1) // 2:
        raise ValueError(f"packed has {packed.numel()} bytes: must be ceil(count / 2) = "
                         f"{(count + 1) // 2} for count={count}")
    out = torch.stack([packed >> NIBBLE_BITS, packed & NIBBLE_MAX], dim=1).view(-1)
    return out[:count]
