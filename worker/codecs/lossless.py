"""The lossless sketch codec and the in-switch sketch's sparse pairs.

* :class:`LosslessSketchCodec` -- after Li et al. (arXiv 2402.07529): a nonzero-index bitmap (OR
  lanes) plus a 3-row signed sketch of fixed-point values (SUM lanes). Knowing the support, the
  decoder peels: a cell holding a single unresolved index gives its value exactly; subtract it
  everywhere, repeat. Peeling succeeds w.h.p. while the support is below about 0.81 of the cells
  (3-uniform hypergraph 2-core threshold); anything left gets the median estimate of the residual.
* :func:`encode_sparse_pairs` -- (index, value) pairs for the switch to hash into its own sketch.

The count sketch itself (the switch's hashes) is :class:`.sketch.CountSketch`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Hashable, Optional, Sequence, Tuple

import torch

from .base import Codec, EncodedLanes, LaneOp, LaneStream, check_aggregated, check_gradient, to_u32_lanes
from .errors import CodecError
from .fixedpoint import (agreement_codes, exponents_from_codes, from_fixed, headroom_bits, shifts,
                         to_fixed)
from .sketch import BITMAP_WORD_BITS, LOSSLESS_ROWS, CountSketch, median_of_rows

__all__ = ["LosslessSketchCodec", "PeelResult", "SparsePairs", "bitmap_from_indices",
           "encode_sparse_pairs", "indices_from_bitmap", "peel"]


def bitmap_from_indices(indices: torch.Tensor, numel: int) -> torch.Tensor:
    """uint32 words, bit ``i % 32`` of word ``i // 32`` set for each index (LSB first)."""
    words = -(-numel // BITMAP_WORD_BITS)
    bits = torch.zeros(words * BITMAP_WORD_BITS, dtype=torch.int64, device=indices.device)
    bits[indices.to(torch.int64)] = 1
    weights = torch.ones(BITMAP_WORD_BITS, dtype=torch.int64, device=indices.device) << torch.arange(
        BITMAP_WORD_BITS, device=indices.device)
    return (bits.view(words, BITMAP_WORD_BITS) * weights).sum(dim=1).to(torch.uint32)


def indices_from_bitmap(words: torch.Tensor, numel: int) -> torch.Tensor:
    """Sorted int64 indices of the set bits (below ``numel``) of uint32 bitmap words."""
    w = to_u32_lanes(words).view(torch.int32).to(torch.int64) & ((1 << 32) - 1)
    shifts_ = torch.arange(BITMAP_WORD_BITS, device=w.device)
    bits = ((w[:, None] >> shifts_) & 1).reshape(-1)[:numel]
    return bits.nonzero().reshape(-1)


@dataclass
class PeelResult:
    """Result of :func:`peel`.

    Attributes:
        values: int64 value per support index (exact where ``resolved``).
        resolved: bool per support index: recovered exactly by peeling.
    """

    values: torch.Tensor
    resolved: torch.Tensor

    @property
    def complete(self) -> bool:
        """Every support value was recovered exactly."""
        return bool(self.resolved.all())


def peel(cs: CountSketch, table: torch.Tensor, support: torch.Tensor) -> PeelResult:
    """Recover integer values on a known support from a signed sketch by peeling.

    Args:
        cs: the sketch (its hashes).
        table: int64 ``(rows, columns)`` sketch of a vector whose nonzeros lie in ``support``.
        support: int64 indices (distinct).

    Returns:
        :class:`PeelResult`; unresolved indices get the median of their residual cells.
    """
    cs._check_table(table)
    m = support.numel()
    device = table.device
    residual = table.reshape(-1).to(torch.int64).clone()
    cells, signs = cs.hashes(support)
    signs64 = signs.to(torch.int64)
    ncells = residual.numel()
    pos = torch.arange(m, device=device, dtype=torch.int64)
    count = torch.zeros(ncells, dtype=torch.int64, device=device)
    possum = torch.zeros(ncells, dtype=torch.int64, device=device)
    for r in range(cs.rows):
        count.index_add_(0, cells[r], torch.ones_like(pos))
        possum.index_add_(0, cells[r], pos)
    values = torch.zeros(m, dtype=torch.int64, device=device)
    resolved = torch.zeros(m, dtype=torch.bool, device=device)
    while True:
        pure = (count == 1).nonzero().reshape(-1)
        if pure.numel() == 0:
            break
        who = possum[pure]
        who, first = _unique_first(who)
        pure = pure[first]
        row = pure // cs.columns
        val = residual[pure] * signs64[row, who]
        values[who], resolved[who] = val, True
        for r in range(cs.rows):
            residual.index_add_(0, cells[r, who], -val * signs64[r, who])
            count.index_add_(0, cells[r, who], -torch.ones_like(who))
            possum.index_add_(0, cells[r, who], -who)
    left = (~resolved).nonzero().reshape(-1)
    if left.numel():
        values[left] = median_of_rows(residual[cells[:, left]] * signs64[:, left])
    return PeelResult(values, resolved)


def _unique_first(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Distinct values of ``x`` and the position of one occurrence of each."""
    uniq, inverse = torch.unique(x, return_inverse=True)
    first = torch.full((uniq.numel(),), x.numel(), dtype=torch.int64, device=x.device)
    first.scatter_reduce_(0, inverse, torch.arange(x.numel(), device=x.device), reduce="amin")
    return uniq, first


class LosslessSketchCodec(Codec):
    """Lossless homomorphic compression of sparse gradients: OR bitmap + 3-row sketch, peeling.

    Wire: ``ceil(numel / 32)`` uint32 OR lanes (nonzero bitmap) and ``3 * columns`` int32 SUM
    lanes. Values are fixed point with one exponent agreed by MAX over the largest bucket mass
    ``max_cell sum |x_i|`` so no cell can overflow: with ``s = 29 - E - ceil(log2 n)`` a cell of
    one worker holds at most ``2**(29 - c) + m/2`` (``m`` nonzeros in the cell, rounding), and
    the ``n``-worker sum at most ``2**29 + n m / 2 < 2**31`` while ``n * numel <= 2**31``.

    Args:
        n_workers: workers summed by the switch.
        columns: cells per row (power of two); peeling needs the union support below
            ``PEELING_LOAD_THRESHOLD * 3 * columns``.
        seed: job sketch seed.
    """

    name = "lossless"
    _MASS_MARGIN_BITS = 1

    def __init__(self, n_workers: int, columns: int = 1 << 12, seed: int = 0) -> None:
        super().__init__(n_workers)
        self.cs = CountSketch(LOSSLESS_ROWS, columns, seed)
        self.last_peel: Optional[PeelResult] = None
        #: decodes whose peeling left values unresolved (median estimates, not exact sums): the
        #: union support was above the sketch's capacity; see :class:`~.adaptive.AdaptiveCodec`
        self.incomplete_peels = 0
        self.log_config()

    def _check_size(self, numel: int) -> None:
        if self.n_workers * numel > 1 << 31:
            raise ValueError(f"numel={numel}: n_workers * numel must be <= 2**31 for the no-overflow "
                             "guarantee of the sketch cells")

    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """``[code(E)]`` with ``max cell mass < 2**E`` (one uint32)."""
        x = check_gradient(grad)
        self._check_size(x.numel())
        mass = self.cs.sketch(x.abs()) if x.numel() else self.cs.empty()
        return agreement_codes(mass.amax().reshape(1), 1, key)

    def _shift(self, agreed: torch.Tensor, key: Hashable, device: torch.device) -> torch.Tensor:
        if agreed.numel() != 1:
            raise CodecError(f"agreed has {agreed.numel()} values: expected 1 exponent")
        return shifts(exponents_from_codes(agreed, key).to(device), self.n_workers) - self._MASS_MARGIN_BITS

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """Bitmap (OR) and sketch (SUM) streams of the fixed-point gradient."""
        x = check_gradient(grad)
        self._check_size(x.numel())
        shift = self._shift(agreed, key, x.device)
        q = to_fixed(x, shift.expand(1), max(1, x.numel()))
        nz = q.nonzero().reshape(-1)
        table = self.cs.sketch_sparse(nz, q[nz].to(torch.int64))
        meta = {"numel": x.numel(), "shape": tuple(grad.shape), "dtype": grad.dtype}
        return EncodedLanes([
            LaneStream(LaneOp.OR, bitmap_from_indices(nz, x.numel()), -(-x.numel() // BITMAP_WORD_BITS),
                       name="nonzero_bitmap"),
            LaneStream(LaneOp.SUM, table.reshape(-1).to(torch.int32), self.cs.rows * self.cs.columns,
                       name="sketch_table"),
        ], meta)

    def decode(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
               meta: Optional[Dict[str, Any]] = None) -> torch.Tensor:
        """Peel the summed sketch on the OR-ed support; mean gradient (exact if peeling completes)."""
        if meta is None:
            raise CodecError("meta: pass the meta returned with encode()")
        numel = meta["numel"]
        words = -(-numel // BITMAP_WORD_BITS)
        check_aggregated(aggregated, [(words, (torch.uint32, torch.int64)),
                                      (self.cs.rows * self.cs.columns, (torch.int32, torch.int64))], self.name)
        support = indices_from_bitmap(aggregated[0], numel)
        table = aggregated[1].to(torch.int64).view(self.cs.rows, self.cs.columns)
        result = peel(self.cs, table, support)
        self.last_peel = result
        if not result.complete:
            self.incomplete_peels += 1
        shift = self._shift(agreed, key, table.device)
        out = torch.zeros(numel, dtype=torch.float32, device=table.device)
        out[support] = from_fixed(result.values, shift.expand(1), max(1, result.values.numel()),
                                  float(self.n_workers))
        return out.reshape(meta["shape"]).to(meta["dtype"])


# --------------------------------------------------------------------------- in-switch sketching
@dataclass
class SparsePairs:
    """(index, value) pairs for the switch to hash into its sketch.

    Attributes:
        indices: uint32 coordinate indices (the P4 ``bit<32> index``).
        values: int32 fixed-point values (``round(x * 2**shift)``).
        shift: the fixed-point shift used (from the agreed exponent).
    """

    indices: torch.Tensor
    values: torch.Tensor
    shift: int


def encode_sparse_pairs(grad: torch.Tensor, k: int, agreed: torch.Tensor, n_workers: int,
                        key: Hashable = 0) -> SparsePairs:
    """Top-``k`` (by magnitude) coordinates of ``grad`` as fixed-point (index, value) pairs.

    Every value satisfies ``|q| <= 2**(30 - ceil(log2(n_workers * k)))`` (the fixed-point bound of
    :mod:`worker.codecs.fixedpoint` with ``n * k`` addends), so even if all ``n * k`` pairs land
    in one switch cell its int32 sum cannot overflow.

    Args:
        grad: the gradient.
        k: pairs to send (<= numel).
        agreed: MAX-agreed exponent code (``agreement_codes(grad, grad.numel())``).
        n_workers: workers whose pairs the switch sketches.
        key: bucket id for error messages.

    Returns:
        :class:`SparsePairs`.

    Example::
        >>> from worker.codecs.fixedpoint import agreement_codes
        >>> g = torch.tensor([0.0, -3.0, 0.5, 1.0])
        >>> p = encode_sparse_pairs(g, 2, agreement_codes(g, 4), n_workers=2)
        >>> p.indices.tolist(), p.values.tolist()
        ([1, 3], [-201326592, 67108864])
    """
    x = check_gradient(grad)
    if not 0 <= k <= x.numel():
        raise ValueError(f"k={k!r}: must be in [0, numel={x.numel()}]")
    idx = x.abs().topk(k, sorted=True).indices if k else torch.zeros(0, dtype=torch.int64, device=x.device)
    shift = int(exponents_from_codes(agreed, key).reshape(-1)[0])
    s = 30 - shift - headroom_bits(max(1, n_workers * max(k, 1)))
    vals = torch.round(x[idx].double() * 2.0 ** s).to(torch.int32)
    return SparsePairs(idx.to(torch.uint32), vals, s)


# --------------------------------------------------------------------------- Sketched SGD (two rounds)
