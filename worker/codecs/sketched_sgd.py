"""Sketched SGD (Ivkin et al., NeurIPS'19), two rounds: the summed sketch of the workers' local
error accumulators picks ``k`` candidates (the same on every worker: no index is sent), then the
exact sums of those ``k`` coordinates; error accumulation and momentum stay on each worker in
gradient space. The training default (docs/codecs.md).
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Optional, Sequence, Tuple

import torch

from .base import Codec, EncodedLanes, LaneOp, LaneStream, check_aggregated, check_gradient
from .errors import CodecError
from .subword import from_subword, lanes_for, magnitude_bits, to_subword
from .fixedpoint import agreement_codes, exponents_from_codes
from .sketch import CountSketch, largest_first_index

__all__ = ["SketchedSgdCodec", "SketchedSgdState"]


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
        return largest_first_index(est, self._k(numel))

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
