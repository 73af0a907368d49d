"""Several narrow fixed-point fields per int32 SUM lane (offset binary, guard bits per field).

The switch adds int32 lanes. If each worker puts ``f`` non-negative fields of ``w`` bits side by
side in one lane, and every worker's field is below ``2**(w - c)`` with ``c = ceil(log2 n)``, the
sum of ``n`` workers stays below ``2**w`` in every field: no carry crosses a field, so the lane sum
IS the ``f`` field sums side by side (plain integer addition; nothing new in the switch). With
``f * w <= 31`` the lane stays in ``[0, 2**31)``: the switch's overflow flag never fires.

A signed value ``q`` in ``[-2**m, 2**m - 1]`` with ``m = w - c - 1`` is sent as ``q + 2**m``; the
decoder subtracts ``n * 2**m`` per field. ``w = 31`` is one 28-bit (n <= 4) value per lane; ``w = 15``
two 12-bit values; ``w = 10`` three 7-bit values. Values are scaled by a block exponent ``E``
(``max |x| < 2**E``, agreed by MAX) with shift ``s = m - E``; rounding to nearest can reach
``2**m``, so ``q`` is clamped to the range: a clamped or rounded value's remainder is the caller's
to keep (error feedback): :func:`to_subword` returns what was actually sent.

Layout: value ``i`` goes to lane ``i // f``, field ``i % f`` (bits ``[w*(i%f), w*(i%f) + w)``).
"""
from __future__ import annotations

from typing import Tuple

import torch

from .errors import CodecError
from .fixedpoint import MAX_SHIFT, headroom_bits

__all__ = ["fields_per_lane", "from_subword", "lanes_for", "magnitude_bits", "to_subword"]


def magnitude_bits(width: int, n_workers: int) -> int:
    """``m = width - ceil(log2 n) - 1``: a worker's values lie in ``[-2**m, 2**m - 1]``."""
    m = width - headroom_bits(n_workers) - 1
    if not isinstance(width, int) or not 2 <= width <= 31 or m < 1:
        raise ValueError(f"width={width!r}: need an int in [2, 31] leaving >= 1 magnitude bit "
                         f"for {n_workers} workers")
    return m


def fields_per_lane(width: int) -> int:
    """Fields of ``width`` bits in one int32 lane (kept below ``2**31``)."""
    return 31 // width


def lanes_for(count: int, width: int) -> int:
    """int32 lanes that carry ``count`` values of ``width`` bits."""
    return -(-count // fields_per_lane(width))


def _shift(exponents: torch.Tensor, m: int) -> torch.Tensor:
    return (m - exponents.to(torch.int64)).clamp(max=MAX_SHIFT)


def _per_value(t: torch.Tensor, block: int, count: int) -> torch.Tensor:
    return t.repeat_interleave(block)[:count]


def to_subword(x: torch.Tensor, exponents: torch.Tensor, block: int, width: int,
               n_workers: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Quantise and pack ``x`` (flat float) into int32 lanes.

    Args:
        x: flat float values; block ``b`` (values ``b*block .. b*block+block-1``) has exponent
            ``exponents[b]`` agreed by the workers (``max |x| < 2**E`` over all workers).
        exponents: int64 per block.
        block: values per exponent.
        width: field width in bits (guard bits included).
        n_workers: workers whose lanes the switch adds.

    Returns:
        ``(lanes, sent)``: the int32 lanes, and the float32 values they carry (``x`` rounded and
        clamped), for error feedback.
    """
    m = magnitude_bits(width, n_workers)
    f = fields_per_lane(width)
    count = x.numel()
    if exponents.numel() != -(-count // block):
        raise CodecError(f"{exponents.numel()} exponents for {count} values in blocks of {block}")
    shift = _per_value(_shift(exponents, m).to(x.device), block, count)
    scale = torch.ldexp(torch.ones_like(shift, dtype=torch.float64), shift)
    q = (x.to(torch.float64) * scale).round().clamp(-(1 << m), (1 << m) - 1).to(torch.int64)
    sent = (q.to(torch.float64) / scale).to(torch.float32)
    u = q + (1 << m)
    pad = -count % f
    if pad:
        u = torch.cat([u, u.new_full((pad,), 1 << m)])
    weights = torch.tensor([1 << (width * j) for j in range(f)], dtype=torch.int64, device=u.device)
    lanes = (u.view(-1, f) * weights).sum(dim=1)
    return lanes.to(torch.int32), sent


def from_subword(lanes: torch.Tensor, exponents: torch.Tensor, block: int, width: int,
                 n_workers: int, count: int) -> torch.Tensor:
    """The MEAN over the workers of the values packed by :func:`to_subword` (float32)."""
    m = magnitude_bits(width, n_workers)
    f = fields_per_lane(width)
    if lanes.numel() != lanes_for(count, width):
        raise CodecError(f"{lanes.numel()} lanes: {count} values of {width} bits need "
                         f"{lanes_for(count, width)}")
    total = lanes.to(torch.int64) & ((1 << 32) - 1)
    if total.numel() and int(total.max()) >= 1 << (f * width):
        raise CodecError("a packed lane sum exceeds its fields: not the sum of n_workers lanes")
    shifts_ = torch.arange(f, device=total.device, dtype=torch.int64) * width
    fields = (total[:, None] >> shifts_) & ((1 << width) - 1)
    sums = fields.reshape(-1)[:count] - n_workers * (1 << m)
    shift = _per_value(_shift(exponents, m).to(total.device), block, count)
    scale = torch.ldexp(torch.ones_like(shift, dtype=torch.float64), -shift) / n_workers
    return (sums.to(torch.float64) * scale).to(torch.float32)
