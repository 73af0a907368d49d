"""Count sketches with the switch's hashes, and the FetchSGD codec.

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
The other sketch codecs: :class:`~.sketched_sgd.SketchedSgdCodec` (two rounds, exact candidate
values) in :mod:`.sketched_sgd`; :class:`~.lossless.LosslessSketchCodec` (bitmap + peeling) and
the in-switch sketch's sparse pairs in :mod:`.lossless`.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Optional, Sequence, Tuple

import torch

from hina.hashing import check_columns, sketch_hash_torch

from .base import Codec, EncodedLanes, LaneOp, LaneStream, check_aggregated, check_gradient
from .errors import CodecError
from .fixedpoint import agreement_codes, exponents_from_codes, from_fixed, shifts, to_fixed

__all__ = ["BITMAP_WORD_BITS", "LOSSLESS_ROWS", "PEELING_LOAD_THRESHOLD", "CountSketch",
           "FetchSgdState", "SketchCodec", "median_of_rows"]

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
        """Accumulate ``(index, value)`` pairs (what the switch does per pair).

        Integers accumulate in int64 (exact). Floats accumulate in float64 and are rounded to
        float32 once, at the end: pairs that meet in a cell then give the same float32 bits in
        any order (the float64 sums are exact while the values meeting in a cell are fewer than
        2**9 and within 2**20 of each other in magnitude), where float32 sums depended on the
        order, which CUDA's ``index_add_`` does not fix. FetchSGD's aggregator state is
        replicated on every worker and must stay the same bits everywhere
        (:meth:`SketchCodec.step`)."""
        cells, signs = self.hashes(indices.to(torch.int64))
        if not values.is_floating_point():
            table = self.empty(torch.int64, values.device) if out is None else out
            for r in range(self.rows):
                table.view(-1).index_add_(0, cells[r], values.to(torch.int64) * signs[r])
            return table
        acc = torch.zeros(self.rows * self.columns, dtype=torch.float64, device=values.device)
        for r in range(self.rows):
            acc.index_add_(0, cells[r], values.to(torch.float64) * signs[r])
        if out is None:
            return acc.to(torch.float32).view(self.rows, self.columns)
        out.view(-1).add_(acc.to(out.dtype))
        return out

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
        idx = largest_first_index(est.abs(), k)
        return idx, est[idx]

    def _check_table(self, table: torch.Tensor) -> None:
        if tuple(table.shape) != (self.rows, self.columns):
            raise CodecError(f"sketch table has shape {tuple(table.shape)}: expected "
                             f"(rows={self.rows}, columns={self.columns})")


def largest_first_index(magnitude: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the ``k`` largest values of ``magnitude`` (1-D), ascending, ties at the
    ``k``-th value broken by the lowest index: the same set on every device and run, where
    ``topk`` leaves the choice among equal values to its implementation (CPU and CUDA differ),
    and workers that pick different coordinates from the same sketch diverge."""
    n = magnitude.numel()
    if k >= n:
        return torch.arange(n, device=magnitude.device)
    if k <= 0:
        return torch.zeros(0, dtype=torch.int64, device=magnitude.device)
    kth = magnitude.topk(k, sorted=False).values.min()
    above = (magnitude > kth).nonzero().reshape(-1)
    tied = (magnitude == kth).nonzero().reshape(-1)[: k - above.numel()]
    return torch.cat([above, tied]).sort().values


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
