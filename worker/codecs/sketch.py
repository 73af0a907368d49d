"""Count sketches with the switch's hashes: FetchSGD codec, lossless codec, sparse pairs.

:class:`CountSketch` is an ``r x c`` signed count sketch whose bucket and sign for row ``r`` and
coordinate ``i`` come from :mod:`hina.hashing` (bit-identical to the P4 program's CRC-32). It is
linear: ``sketch(a + b) == sketch(a) + sketch(b)``, exactly for integer inputs, which is what
lets the switch sum workers' sketches (int32 SUM lanes) or build one from (index, value) pairs.

Codecs:

* :class:`SketchCodec` -- FetchSGD (Rothchild et al., ICML'20): each worker sketches its gradient;
  the switch sums the sketches (fixed point, block exponent agreed by MAX); every worker then
  runs the same deterministic aggregator step on the summed sketch, so the momentum ``S_u`` and
  error ``S_e`` sketches stay identical on all workers::

      S_u = rho * S_u + S          # momentum in sketch space
      S_e = S_e + S_u              # error accumulation in sketch space (lr applied by the optimizer)
      delta = top_k(unsketch(S_e)) # median estimate of every coordinate, k largest magnitudes
      S_e -= sketch(delta)         # error feedback: what was not applied stays
      S_u[nz(sketch(delta))] = 0   # momentum stopping on the buckets delta touched

  Our variant uses the sketch's own estimates for ``delta`` (no second round for exact values).
* :class:`SketchedSgdCodec` -- Sketched SGD (Ivkin et al., NeurIPS'19), two rounds: the summed
  sketch of the workers' local error accumulators picks ``k`` candidates (the same on every
  worker: no index is sent), then the exact sums of those ``k`` coordinates; error accumulation
  and momentum stay on each worker in gradient space. The training default (docs/codecs.md).
* :class:`LosslessSketchCodec` -- after Li et al. (arXiv 2402.07529): a nonzero-index bitmap (OR
  lanes) plus a 3-row signed sketch of fixed-point values (SUM lanes). Knowing the support, the
  decoder peels: a cell holding a single unresolved index gives its value exactly; subtract it
  everywhere, repeat. Peeling succeeds w.h.p. while the support is below about 0.81 of the cells
  (3-uniform hypergraph 2-core threshold); anything left gets the median estimate of the residual.
* :func:`encode_sparse_pairs` -- (index, value) pairs for the switch to hash into its own sketch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Hashable, Optional, Sequence, Tuple

import torch

from hina.hashing import check_columns, sketch_hash_torch

from .base import Codec, EncodedLanes, LaneOp, LaneStream, check_aggregated, check_gradient, to_u32_lanes
from .errors import CodecError
from .subword import from_subword, lanes_for, magnitude_bits, to_subword
from .fixedpoint import (agreement_codes, exponents_from_codes, from_fixed, headroom_bits, shifts,
                         to_fixed)

__all__ = ["BITMAP_WORD_BITS", "LOSSLESS_ROWS", "PEELING_LOAD_THRESHOLD", "CountSketch",
           "FetchSgdState", "LosslessSketchCodec", "PeelResult", "SketchCodec", "SketchedSgdCodec",
           "SketchedSgdState", "SparsePairs",
           "bitmap_from_indices", "encode_sparse_pairs", "indices_from_bitmap", "median_of_rows", "peel"]

#: Rows (hashes per index) of the lossless sketch.
LOSSLESS_ROWS = 3
#: Peeling a 3-row sketch succeeds w.h.p. below this many support indices per cell (r * c cells):
#: the 2-core threshold of random 3-uniform hypergraphs, c*_3 ~= 0.818.
PEELING_LOAD_THRESHOLD = 0.818
#: Bits per bitmap word (one OR lane).
BITMAP_WORD_BITS = 32
#: Cached hashes cost 5 bytes per (row, coordinate) (int32 cell + int8 sign); above this many
#: bytes they are recomputed in chunks on every call instead.
_HASH_CACHE_BYTES = 2 << 30
_CACHED_BYTES_PER_HASH = 5
_CHUNK = 1 << 22


class CountSketch:
    """``rows x columns`` signed count sketch with the switch's CRC-32 hashes.

    Args:
        rows: number of rows r (independent hashes); odd is best for the median.
        columns: c, a power of two (the switch masks).
        seed: job sketch seed S (row r hashes with seed S + r).

    Example::
        >>> cs = CountSketch(3, 64, seed=1)
        >>> x = torch.zeros(1000); x[7] = 5.0
        >>> float(cs.query(cs.sketch(x), torch.tensor([7])))
        5.0
    """

    def __init__(self, rows: int, columns: int, seed: int = 0) -> None:
        if not isinstance(rows, int) or rows < 1:
            raise ValueError(f"rows={rows!r}: must be an int >= 1")
        check_columns(columns)
        if rows * columns >= 1 << 31:
            raise ValueError(f"rows * columns = {rows * columns}: must be < 2**31 (int32 cell ids)")
        self.rows, self.columns, self.seed = rows, columns, seed
        self._cache: Dict[Tuple[int, torch.device], Tuple[torch.Tensor, torch.Tensor]] = {}

    def hashes(self, indices: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Flat cell (``row * c + bucket``, int64) and sign (int8) per row, shape ``(rows, n)``.

        Dense queries cache these per (numel, device) as int32 cells: 5 bytes per row and
        coordinate, up to 2 GiB; bigger vectors recompute them in chunks on every call.
        """
        cells, signs = [], []
        for r in range(self.rows):
            h = sketch_hash_torch(self.seed, r, indices)
            cells.append((h & (self.columns - 1)) + r * self.columns)
            signs.append((1 - 2 * ((h >> 31) & 1)).to(torch.int8))
        return torch.stack(cells), torch.stack(signs)

    def _dense_hashes(self, numel: int, device: torch.device, start: int = 0):
        key = (numel, device)
        if start == 0 and key in self._cache:
            return self._cache[key]
        cells, signs = self.hashes(torch.arange(start, start + numel, device=device))
        out = (cells.to(torch.int32), signs)  # rows * columns < 2**31 cells (see __init__)
        if start == 0 and self._cacheable(numel):
            self._cache[key] = out
        return out

    def _cacheable(self, numel: int) -> bool:
        return self.rows * numel * _CACHED_BYTES_PER_HASH <= _HASH_CACHE_BYTES

    def _chunks(self, numel: int, device: torch.device):
        if self._cacheable(numel):
            yield 0, numel, self._dense_hashes(numel, device)
            return
        for start in range(0, numel, _CHUNK):
            stop = min(numel, start + _CHUNK)
            yield start, stop, self._dense_hashes(stop - start, device, start)

    def empty(self, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> torch.Tensor:
        """An all-zero sketch table ``(rows, columns)``."""
        return torch.zeros(self.rows, self.columns, dtype=dtype, device=device)

    def sketch(self, x: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Accumulate the dense vector ``x`` (flattened) into ``out`` (a new table by default).

        Integer inputs accumulate in int64 (exact); floats in float32.
        """
        flat = x.reshape(-1)
        acc_dtype = torch.float32 if flat.is_floating_point() else torch.int64
        table = self.empty(acc_dtype, flat.device) if out is None else out
        view = table.view(-1)
        for start, stop, (cells, signs) in self._chunks(flat.numel(), flat.device):
            vals = flat[start:stop].to(acc_dtype)
            for r in range(self.rows):
                view.index_add_(0, cells[r], vals * signs[r])
        return table

    def sketch_sparse(self, indices: torch.Tensor, values: torch.Tensor,
                      out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Accumulate ``(index, value)`` pairs (what the switch does per pair)."""
        acc_dtype = torch.float32 if values.is_floating_point() else torch.int64
        table = self.empty(acc_dtype, values.device) if out is None else out
        cells, signs = self.hashes(indices.to(torch.int64))
        for r in range(self.rows):
            table.view(-1).index_add_(0, cells[r], values.to(acc_dtype) * signs[r])
        return table

    def query(self, table: torch.Tensor, indices: Optional[torch.Tensor] = None,
              numel: Optional[int] = None) -> torch.Tensor:
        """Median-of-rows estimate of the coordinates ``indices`` (or of ``0..numel-1``)."""
        self._check_table(table)
        if indices is None:
            if numel is None:
                raise ValueError("query: give indices or numel")
            parts = [self._estimate(table, cells, signs) for _, _, (cells, signs) in self._chunks(numel, table.device)]
            return torch.cat(parts) if parts else table.new_zeros(0)
        cells, signs = self.hashes(indices.to(torch.int64))
        return self._estimate(table, cells, signs)

    def _estimate(self, table: torch.Tensor, cells: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
        return median_of_rows(table.reshape(-1)[cells] * signs.to(table.dtype))

    def heavy_hitters(self, table: torch.Tensor, numel: int, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """The ``k`` coordinates with the largest estimated magnitude: (indices, estimates)."""
        if not 0 <= k <= numel:
            raise ValueError(f"k={k!r}: must be in [0, numel={numel}]")
        est = self.query(table, numel=numel)
        idx = est.abs().topk(k, sorted=False).indices
        return idx, est[idx]

    def _check_table(self, table: torch.Tensor) -> None:
        if tuple(table.shape) != (self.rows, self.columns):
            raise CodecError(f"sketch table has shape {tuple(table.shape)}: expected "
                             f"(rows={self.rows}, columns={self.columns})")


def median_of_rows(per_row: torch.Tensor) -> torch.Tensor:
    """Median over dim 0 (``torch.median``'s lower median for even counts).

    3 and 5 rows use min/max networks (element-wise, ~20x faster than ``torch.median`` on CPU).
    """
    rows = per_row.shape[0]
    if rows == 1:
        return per_row[0]
    if rows == 3:
        a, b, c = per_row.unbind(0)
        return _median3(a, b, c)
    if rows == 5:
        a, b, c, d, e = per_row.unbind(0)
        lo_ab, hi_ab = torch.minimum(a, b), torch.maximum(a, b)
        lo_cd, hi_cd = torch.minimum(c, d), torch.maximum(c, d)
        # the smaller of the pair minima and the larger of the pair maxima cannot be the median
        return _median3(torch.maximum(lo_ab, lo_cd), torch.minimum(hi_ab, hi_cd), e)
    return per_row.median(dim=0).values


def _median3(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.maximum(torch.minimum(a, b), torch.minimum(torch.maximum(a, b), c))


# --------------------------------------------------------------------------- FetchSGD codec
class FetchSgdState:
    """Per-bucket FetchSGD state (identical on every worker: it evolves from aggregated sketches).

    Attributes:
        momentum: S_u, float32 ``(rows, columns)``.
        error: S_e, float32 ``(rows, columns)``.
        pending: this worker's sketch between ``agreement`` and ``encode``.
        steps: decoded steps.
    """

    __slots__ = ("momentum", "error", "pending", "steps")

    def __init__(self) -> None:
        self.momentum: Optional[torch.Tensor] = None
        self.error: Optional[torch.Tensor] = None
        self.pending: Optional[torch.Tensor] = None
        self.steps = 0


class SketchCodec(Codec):
    """FetchSGD count-sketch codec: r*c int32 SUM lanes, top-k unsketch with sketch-space state.

    Args:
        n_workers: workers summed by the switch.
        rows, columns: sketch shape (columns a power of two).
        k: coordinates kept per step (int) or fraction of the bucket (float in (0, 1]).
        momentum: rho (0 disables momentum).
        error_feedback: accumulate and feed back the unsent part in sketch space.
        seed: job sketch seed (the switch's, when it sketches pairs itself).

    Returns from ``decode``: the sparse update ``delta`` (k nonzeros), dense, gradient-shaped.
    """

    name = "fetchsgd"

    def __init__(self, n_workers: int, rows: int = 5, columns: int = 1 << 16, k: float = 0.01,
                 momentum: float = 0.9, error_feedback: bool = True, seed: int = 0) -> None:
        super().__init__(n_workers)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum={momentum!r}: must be in [0, 1)")
        if (isinstance(k, float) and not 0.0 < k <= 1.0) or (isinstance(k, int) and k < 1):
            raise ValueError(f"k={k!r}: must be an int >= 1 or a fraction in (0, 1]")
        self.cs = CountSketch(rows, columns, seed)
        self.k, self.momentum, self.error_feedback = k, momentum, error_feedback
        self.log_config()

    def _k(self, numel: int) -> int:
        return min(numel, self.k if isinstance(self.k, int) else max(1, int(self.k * numel)))

    def _state(self, key: Hashable) -> FetchSgdState:
        return self.states.setdefault(key, FetchSgdState())

    def snapshot(self, key: Hashable = 0) -> Optional[Tuple[Optional[torch.Tensor], Optional[torch.Tensor], int]]:
        """Bucket ``key``'s momentum and error sketches (by reference: :meth:`step` replaces
        them, never writes them in place) and step count (see :meth:`Codec.snapshot`)."""
        state = self.states.get(key)
        return None if state is None else (state.momentum, state.error, state.steps)

    def restore(self, key: Hashable, snapshot) -> None:
        """Bucket ``key`` as :meth:`snapshot` found it (nothing pending)."""
        if snapshot is None:
            self.states.pop(key, None)
            return
        state = self.states[key] = FetchSgdState()
        state.momentum, state.error, state.steps = snapshot

    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """Sketch ``grad``; return the exponent codes of the table (one per row)."""
        x = check_gradient(grad)
        table = self.cs.sketch(x)
        self._state(key).pending = table
        return agreement_codes(table, self.cs.columns, key)

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """The sketch table as ``rows * columns`` int32 SUM lanes."""
        state = self._state(key)
        if state.pending is None:
            self.agreement(grad, key)
        table, state.pending = state.pending, None
        shift = self._shift(agreed, key, table.device)
        q = to_fixed(table.reshape(-1), shift, self.cs.columns)
        meta = {"numel": grad.numel(), "shape": tuple(grad.shape), "dtype": grad.dtype}
        return EncodedLanes([LaneStream(LaneOp.SUM, q, q.numel(), name="sketch_table")], meta)

    def _shift(self, agreed: torch.Tensor, key: Hashable, device: torch.device) -> torch.Tensor:
        if agreed.numel() != self.cs.rows:
            raise CodecError(f"agreed has {agreed.numel()} values: need one exponent per row ({self.cs.rows})")
        return shifts(exponents_from_codes(agreed, key).to(device), self.n_workers)

    def decode(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
               meta: Optional[Dict[str, Any]] = None) -> torch.Tensor:
        """Run the FetchSGD aggregator step on the summed sketch; return the sparse update."""
        if meta is None:
            raise CodecError("meta: pass the meta returned with encode()")
        cells = self.cs.rows * self.cs.columns
        check_aggregated(aggregated, [(cells, (torch.int32, torch.int64))], self.name)
        shift = self._shift(agreed, key, aggregated[0].device)
        mean = from_fixed(aggregated[0], shift, self.cs.columns, float(self.n_workers)).view(self.cs.rows, -1)
        return self.step(mean, key, meta)

    def step(self, mean_sketch: torch.Tensor, key: Hashable, meta: Dict[str, Any]) -> torch.Tensor:
        """FetchSGD aggregator step on the mean sketch (see the module docstring)."""
        state = self._state(key)
        numel = meta["numel"]
        if state.momentum is None or state.momentum.device != mean_sketch.device:
            state.momentum = torch.zeros_like(mean_sketch)
            state.error = torch.zeros_like(mean_sketch)
        # new tensors, not in place: a snapshot (retry, fp32 fallback) keeps the old ones
        state.momentum = state.momentum.mul(self.momentum).add_(mean_sketch)
        if self.error_feedback:
            state.error = state.error.add(state.momentum)
            source = state.error
        else:
            source = state.momentum
        idx, vals = self.cs.heavy_hitters(source, numel, self._k(numel))
        delta = torch.zeros(numel, dtype=torch.float32, device=mean_sketch.device)
        delta[idx] = vals
        sent = self.cs.sketch_sparse(idx, vals)
        if self.error_feedback:
            state.error.sub_(sent)
        if self.momentum:
            state.momentum.masked_fill_(sent != 0, 0.0)
        state.steps += 1
        return delta.reshape(meta["shape"]).to(meta["dtype"])


# --------------------------------------------------------------------------- lossless mode
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
class SketchedSgdState:
    """Per-bucket state of :class:`SketchedSgdCodec` on ONE worker (local, not shared).

    Attributes:
        error: this worker's error accumulator ``e`` (float32, bucket-sized): everything it
            accumulated and has not yet sent.
        velocity: this worker's momentum ``u`` (None without momentum).
        pending: ``(e', u', table)`` from ``agreement`` to ``decode``: the step's new error and
            velocity (committed at ``decode``) and the sketch of ``e'``.
        sent: round 2's candidates and the values this worker sent for them (after rounding).
        started: all-reduces begun (``agreement`` calls): picks the rotating hash seed.
        steps: decoded steps.
    """

    __slots__ = ("error", "velocity", "pending", "sent", "started", "steps")

    def __init__(self) -> None:
        self.error: Optional[torch.Tensor] = None
        self.velocity: Optional[torch.Tensor] = None
        self.pending: Optional[Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor]] = None
        self.sent: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
        self.started = 0
        self.steps = 0


class SketchedSgdCodec(Codec):
    """Sketched SGD (Ivkin et al., NeurIPS'19): sketch round for candidates, exact round for values.

    Each worker keeps its own error accumulator ``e`` (and momentum ``u``) in gradient space::

        u = rho * u + g ; e = e + u           # local (e = e + g without momentum)
        round 1: SUM lanes <- sketch(e)        # r*c int32 lanes; the switch sums the sketches
                 C = top_k(unsketch(sum))      # same summed sketch on every worker -> same C,
                                               # no index is ever sent
        round 2: SUM lanes <- e[C]             # k int32 lanes: the EXACT sum of e over C
        delta = (sum of e[C]) / n on C, 0 elsewhere      (returned by decode)
        e[C] -= what was sent ; u[C] = 0       # error feedback, momentum factor masking

    One agreement round (MAX) serves both rounds: one exponent per sketch row and one per block
    of coordinates for ``max |e|`` in the block, which bounds every candidate value of round 2.
    Sum over steps of ``n * delta`` plus the workers' final ``e`` equals the sum of everything
    accumulated (telescoping), exactly: the fixed-point rounding residue stays in ``e``.

    ``e`` (and ``u``) are committed only at ``decode``: a step whose rounds fail on every worker
    (the DDP hook then falls back to an fp32 all-reduce of the gradient) leaves them as they were.

    Unlike FetchSGD (:class:`SketchCodec`), the update applies exact values; the sketch only
    chooses which coordinates, so its collisions cost selection quality, never wrong values.

    Args:
        n_workers: workers summed by the switch.
        rows, columns: sketch shape (columns a power of two).
        k: candidates per step whose exact sums round 2 carries (int, or fraction of the bucket).
        momentum: local momentum rho with factor masking (0: none; use the optimiser's).
        seed: job sketch seed.
        sketch_bits, value_bits: field width (guard bits included) of a sketch cell / a candidate
            value in the int32 SUM lanes (:mod:`worker.codecs.subword`): 31 is one value per lane,
            15 two, 10 three. Narrow values cost precision only: what rounding leaves stays in ``e``.
        value_blocks: the bucket is cut into this many blocks of coordinates, each with its own
            agreed exponent (max |e| in the block over the workers) for the candidate values;
            the agreement round carries ``rows + value_blocks`` MAX lanes.
        rotate: cycle through this many hash seeds, one per step (step t uses seed
            ``seed + (t mod rotate) * rows``), so two heavy coordinates that cancel in one cell do
            not stay hidden step after step. Steps are counted at ``agreement``, which every
            worker calls once per all-reduce of the bucket, failed or not, unless the failed
            call is undone with :meth:`restore` (as ``allreduce_following`` and the DDP hook's
            fallback do on every worker).

    Wire per bucket and step: ``rows + value_blocks`` MAX lanes, then
    ``lanes_for(rows * columns, sketch_bits)`` and ``lanes_for(k, value_bits)`` int32 SUM lanes.
    """

    name = "sketched_sgd"

    def __init__(self, n_workers: int, rows: int = 3, columns: int = 128, k: float = 256,
                 momentum: float = 0.0, seed: int = 0, rotate: int = 1, sketch_bits: int = 31,
                 value_bits: int = 31, value_blocks: int = 1) -> None:
        super().__init__(n_workers)
        magnitude_bits(sketch_bits, n_workers), magnitude_bits(value_bits, n_workers)  # validate
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum={momentum!r}: must be in [0, 1)")
        if not isinstance(rotate, int) or rotate < 1:
            raise ValueError(f"rotate={rotate!r}: must be an int >= 1")
        if isinstance(k, bool) or not isinstance(k, (int, float)) or (
                isinstance(k, float) and not 0.0 < k <= 1.0) or (isinstance(k, int) and k < 1):
            raise ValueError(f"k={k!r}: must be an int >= 1 or a fraction in (0, 1]")
        self.sketches = [CountSketch(rows, columns, seed + j * rows) for j in range(rotate)]
        self.cs = self.sketches[0]
        self.k, self.momentum, self.rotate = k, momentum, rotate
        if not isinstance(value_blocks, int) or value_blocks < 1:
            raise ValueError(f"value_blocks={value_blocks!r}: must be an int >= 1")
        self.sketch_bits, self.value_bits, self.value_blocks = sketch_bits, value_bits, value_blocks
        self.log_config()

    def _k(self, numel: int) -> int:
        return min(numel, self.k if isinstance(self.k, int) else max(1, int(self.k * numel)))

    def _value_block(self, numel: int) -> int:
        """Coordinates per value exponent: ``value_blocks`` blocks cover the bucket."""
        return max(1, -(-numel // self.value_blocks))

    def _candidate_exponents(self, exps: torch.Tensor, cand: torch.Tensor, numel: int) -> torch.Tensor:
        blocks = exps[self.cs.rows:]
        want = -(-numel // self._value_block(numel)) if numel else 0
        if blocks.numel() != want:
            raise CodecError(f"agreed has {blocks.numel()} value exponents: need {want}")
        return blocks[cand // self._value_block(numel)]

    def sketch_for(self, key: Hashable) -> CountSketch:
        """The count sketch (hash seed) of bucket ``key``'s current all-reduce."""
        return self.sketches[max(0, self._state(key).started - 1) % self.rotate]

    def _state(self, key: Hashable) -> SketchedSgdState:
        return self.states.setdefault(key, SketchedSgdState())

    def snapshot(self, key: Hashable = 0):
        """Bucket ``key``'s error accumulator and velocity (by reference: a step makes new ones
        and commits them at ``decode``) and its counters (see :meth:`Codec.snapshot`): restored,
        a failed step is not counted, so the retry uses the same hash seed as a clean call."""
        state = self.states.get(key)
        return None if state is None else (state.error, state.velocity, state.started, state.steps)

    def restore(self, key: Hashable, snapshot) -> None:
        """Bucket ``key`` as :meth:`snapshot` found it (nothing pending)."""
        if snapshot is None:
            self.states.pop(key, None)
            return
        state = self.states[key] = SketchedSgdState()
        state.error, state.velocity, state.started, state.steps = snapshot

    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """Accumulate ``grad`` (pending) and sketch ``e``; codes: per-row exponents, per-block ones."""
        x = check_gradient(grad)
        state = self._state(key)
        if state.error is None or state.error.numel() != x.numel() or state.error.device != x.device:
            state.error = torch.zeros_like(x)
            state.velocity = torch.zeros_like(x) if self.momentum else None
        velocity = None
        if self.momentum:
            velocity = state.velocity * self.momentum + x
            error = state.error + velocity
        else:
            error = state.error + x
        codes = agreement_codes(error, self._value_block(error.numel()), key)  # raises on NaN/Inf
        state.started += 1
        table = self.sketch_for(key).sketch(error)
        state.pending = (error, velocity, table)
        state.sent = None
        return torch.cat([agreement_codes(table, self.cs.columns, key), codes])

    def _exponents(self, agreed: torch.Tensor, key: Hashable, device: torch.device) -> torch.Tensor:
        if agreed.numel() <= self.cs.rows:
            raise CodecError(f"agreed has {agreed.numel()} values: need one exponent per row "
                             f"({self.cs.rows}) and the value blocks' exponents")
        return exponents_from_codes(agreed, key).to(device)

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """Round 1: the sketch of ``e`` as int32 SUM lanes (``sketch_bits`` fields)."""
        state = self._state(key)
        if state.pending is None:
            self.agreement(grad, key)
        table = state.pending[2]
        exps = self._exponents(agreed, key, table.device)[:self.cs.rows]
        q, _ = to_subword(table.reshape(-1), exps, self.cs.columns, self.sketch_bits, self.n_workers)
        meta = {"round": 1, "numel": grad.numel(), "shape": tuple(grad.shape), "dtype": grad.dtype}
        return EncodedLanes([LaneStream(LaneOp.SUM, q, q.numel(), name="sketch_table")], meta)

    def candidates(self, summed_table: torch.Tensor, numel: int, key: Hashable = 0) -> torch.Tensor:
        """The ``k`` coordinates of largest estimated magnitude, ascending.

        Computed from the switch's summed sketch (the same integers on every worker; the float
        steps are exact scalings and element-wise), ties broken by index, so every worker gets
        the same set.
        """
        cs = self.sketch_for(key)
        cs._check_table(summed_table)
        est = cs.query(summed_table, numel=numel).abs()
        order = torch.sort(-est, stable=True).indices[:self._k(numel)]
        return order.sort().values

    def followup(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
                 meta: Optional[Dict[str, Any]] = None) -> Optional[EncodedLanes]:
        """After round 1: round 2's lanes, this worker's exact ``e`` on the agreed candidates."""
        if meta is None:
            raise CodecError("meta: pass the meta returned with encode()")
        if meta.get("round") != 1:
            return None
        state = self._state(key)
        if state.pending is None:
            raise CodecError(f"bucket {key!r}: round 2 without round 1")
        error = state.pending[0]
        cells = self.cs.rows * self.cs.columns
        check_aggregated(aggregated, [(lanes_for(cells, self.sketch_bits), (torch.int32, torch.int64))],
                         self.name)
        numel = meta["numel"]
        device = error.device
        exps = self._exponents(agreed, key, device)
        summed = from_subword(aggregated[0].to(device), exps[:self.cs.rows], self.cs.columns,
                              self.sketch_bits, self.n_workers, cells).view(self.cs.rows, self.cs.columns)
        cand = self.candidates(summed, numel, key)
        q, sent = to_subword(error[cand], self._candidate_exponents(exps, cand, numel), 1,
                             self.value_bits, self.n_workers)
        state.sent = (cand, sent)
        meta2 = dict(meta, round=2, candidates=cand)
        return EncodedLanes([LaneStream(LaneOp.SUM, q, q.numel(), name="candidate_values")], meta2)

    def decode(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
               meta: Optional[Dict[str, Any]] = None) -> torch.Tensor:
        """After round 2: the mean of the workers' ``e`` on the candidates; commits ``e``, ``u``."""
        if meta is None:
            raise CodecError("meta: pass the meta returned with encode()")
        if meta.get("round") != 2:
            raise CodecError(f"{self.name}: decode needs round 2's sums (call followup(); "
                             f"got round {meta.get('round')})")
        state = self._state(key)
        cand = meta["candidates"]
        if (state.pending is None or state.sent is None
                or not torch.equal(state.sent[0], cand.to(state.sent[0].device))):
            raise CodecError(f"bucket {key!r}: round 2 sums do not match this worker's candidates")
        check_aggregated(aggregated, [(lanes_for(cand.numel(), self.value_bits),
                                       (torch.int32, torch.int64))], self.name)
        error, velocity, _ = state.pending
        device = error.device
        exps = self._candidate_exponents(self._exponents(agreed, key, device), cand.to(device),
                                         meta["numel"])
        mean = from_subword(aggregated[0].to(device), exps, 1, self.value_bits, self.n_workers,
                            cand.numel())
        delta = torch.zeros(meta["numel"], dtype=torch.float32, device=device)
        delta[cand] = mean
        sent_cand, sent_vals = state.sent
        error[sent_cand] -= sent_vals                # error feedback: the rounding residue stays
        state.error = error
        if self.momentum:
            velocity[sent_cand] = 0.0                # momentum factor masking (Sketched SGD, DGC)
            state.velocity = velocity
        state.pending, state.sent = None, None
        state.steps += 1
        return delta.reshape(meta["shape"]).to(meta["dtype"])
