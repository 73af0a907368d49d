"""Sparse-aware codec choice per bucket: the lossless sketch for sparse buckets, THC for dense.

Embedding and MoE gradients are zero outside the rows a batch touched; the rest of a model is
dense. :class:`AdaptiveCodec` chooses, for every bucket and step, between a codec for sparse
data (:class:`~.lossless.LosslessSketchCodec`: exact, bytes set by the sketch size) and one for
dense data (:class:`~.thc.ThcCodec`: about 2.5 bytes per coordinate up and down), and every
worker chooses the same way without extra coordination beyond one small switch round.

Rounds of one bucket (the transport's multi-round protocol, :meth:`Codec.followup`):

1. agreement: one MAX lane, this worker's count of nonzero values. Every worker gets the
   largest count ``m``; ``n * m`` bounds the size of the union support.
2. the chosen codec's own agreement round, sent as MAX lanes (the lossless codec's mass
   exponent, or THC's norm). The lossless sketch is sized for the bucket: the smallest power of
   two ``c`` of columns (``min_columns`` to ``columns``) whose peeling capacity holds ``n * m``
   (so peeling always completes: the result is exact, never a silently truncated sum). The
   choice is that sketch when one fits and its bytes on the wire are fewer than THC's; THC
   otherwise. A small sparse bucket (an embedding table in a DDP bucket of its own) gets a
   small sketch, so it goes exact where one sketch for every bucket would have cost more
   than THC.
3. the chosen codec's lanes (and its follow-up rounds, if any); decode is the chosen codec's.

The choice depends only on agreed values and the configuration, so it is the same on every
worker. :attr:`last_choice` says what each bucket used (the demo prints it), and
:attr:`last_columns` the lossless sketch's size.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Optional, Sequence

import torch

from .base import Codec, EncodedLanes, LaneOp, LaneStream, check_gradient
from .errors import CodecError, NonFiniteGradientError
from .lossless import LosslessSketchCodec
from .sketch import BITMAP_WORD_BITS, LOSSLESS_ROWS, PEELING_LOAD_THRESHOLD
from .thc import ThcCodec

__all__ = ["AdaptiveCodec"]

#: bytes per coordinate THC moves up (4-bit indices) and down (16-bit sums), headers aside
THC_BYTES_PER_COORD = 0.5 + 2.0


class AdaptiveCodec(Codec):
    """The lossless sketch for buckets sparse enough to peel, THC for the others.

    Args:
        n_workers: workers summed by the switch.
        rank: this worker's index (THC's rounding stream).
        seed: THC's shared rotation seed.
        table, granularity: THC's table (the switch's LUT) and its g.
        columns: the largest lossless sketch's cells per row, a power of two (its capacity:
            ``PEELING_LOAD_THRESHOLD * 3 * columns`` nonzeros in the union of the workers'
            supports).
        sketch_seed: the lossless sketches' hash seed.
        min_columns: the smallest lossless sketch tried, a power of two <= ``columns``.

    Example::

        >>> import torch
        >>> codecs = [AdaptiveCodec(2, rank=r, columns=256) for r in range(2)]
        >>> from hina.worker.codecs import reference_allreduce
        >>> sparse = [torch.zeros(4096) for _ in range(2)]
        >>> for r, g in enumerate(sparse):
        ...     g[r * 7:r * 7 + 20] = 1.0
        >>> out = reference_allreduce(codecs, sparse)
        >>> codecs[0].last_choice[0], bool(torch.allclose(out[0], sum(sparse) / 2, atol=1e-6))
        ('lossless', True)
    """

    name = "adaptive"

    def __init__(self, n_workers: int, rank: int = 0, seed: int = 0, table=None,
                 granularity: Optional[int] = None, columns: int = 1 << 12,
                 sketch_seed: int = 0, min_columns: int = 64) -> None:
        super().__init__(n_workers)
        thc_kwargs: Dict[str, Any] = {"rank": rank, "seed": seed}
        if table is not None:
            thc_kwargs["table"] = table
        if granularity:
            thc_kwargs["granularity"] = granularity
        for name, value in (("columns", columns), ("min_columns", min_columns)):
            if not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"{name}={value!r}: must be a power of two >= 1")
        if min_columns > columns:
            raise ValueError(f"min_columns={min_columns} exceeds columns={columns}")
        self.dense = ThcCodec(n_workers, **thc_kwargs)
        self.columns, self.min_columns, self.sketch_seed = columns, min_columns, sketch_seed
        #: columns -> the lossless codec of that size (made on first use; the same seed)
        self._sparse: Dict[int, LosslessSketchCodec] = {}
        #: the largest lossless codec (``columns``)
        self.sparse = self._lossless(columns)
        #: bucket key -> "lossless" or "thc": what its last call used
        self.last_choice: Dict[Hashable, str] = {}
        #: bucket key -> the largest nonzero count over the workers in its last call
        self.last_nonzeros: Dict[Hashable, int] = {}
        #: bucket key -> the lossless sketch's columns in its last call (0: THC)
        self.last_columns: Dict[Hashable, int] = {}
        self.log_config()

    @property
    def table(self) -> tuple:
        """The THC table of the dense buckets: the job must install it in the switch's LUT, as
        for the ``thc`` codec."""
        return self.dense.table

    # ------------------------------------------------------------------ the choice
    def _lossless(self, columns: int) -> LosslessSketchCodec:
        codec = self._sparse.get(columns)
        if codec is None:
            codec = self._sparse[columns] = LosslessSketchCodec(self.n_workers, columns=columns,
                                                                seed=self.sketch_seed)
        return codec

    @property
    def incomplete_peels(self) -> int:
        """Lossless decodes whose peeling did not finish, over every sketch size (0: the sizing
        guarantees it; counted all the same)."""
        return sum(c.incomplete_peels for c in self._sparse.values())

    @staticmethod
    def capacity_of(columns: int) -> int:
        """Union support a lossless sketch of ``columns`` columns peels for sure."""
        return int(PEELING_LOAD_THRESHOLD * LOSSLESS_ROWS * columns)

    @property
    def capacity(self) -> int:
        """Union support the largest lossless sketch peels for sure."""
        return self.capacity_of(self.columns)

    def sketch_columns(self, max_nonzeros: int) -> Optional[int]:
        """The smallest sketch (power-of-two columns, ``min_columns`` to ``columns``) sure to
        peel the union of the workers' supports, at most ``n * max_nonzeros``; None if none."""
        need, columns = self.n_workers * max_nonzeros, self.min_columns
        while columns <= self.columns:
            if need <= self.capacity_of(columns):
                return columns
            columns *= 2
        return None

    def lossless_bytes(self, numel: int, columns: Optional[int] = None) -> int:
        """Bytes the lossless codec moves for ``numel`` coordinates (up; down is the same) with
        a sketch of ``columns`` columns (default: the largest)."""
        columns = self.columns if columns is None else columns
        return 4 * (-(-numel // BITMAP_WORD_BITS)) + 4 * LOSSLESS_ROWS * columns

    def plan(self, numel: int, max_nonzeros: int) -> tuple:
        """``("lossless", columns)`` or ``("thc", 0)`` for a bucket of ``numel`` values whose
        workers have at most ``max_nonzeros`` nonzeros each (the same on every worker)."""
        columns = self.sketch_columns(max_nonzeros)
        if columns is not None and 2 * self.lossless_bytes(numel, columns) < THC_BYTES_PER_COORD * numel:
            return "lossless", columns
        return "thc", 0

    def choose(self, numel: int, max_nonzeros: int) -> str:
        """``"lossless"`` or ``"thc"`` (see :meth:`plan`)."""
        return self.plan(numel, max_nonzeros)[0]

    def _sub(self, choice: str, columns: int = 0) -> Codec:
        return self._lossless(columns) if choice == "lossless" else self.dense

    # ------------------------------------------------------------------ Codec API
    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """``[nonzero count]`` (one uint32 lane) for the MAX round."""
        x = check_gradient(grad, float32=False)
        if x.numel() and not bool(torch.isfinite(x).all()):
            raise NonFiniteGradientError(key, "local")
        if x.numel() >= 1 << 32:
            raise CodecError(f"bucket {key!r}: {x.numel()} values do not fit a 32-bit count")
        self.states[key] = {"grad": grad}
        return torch.tensor([int(torch.count_nonzero(x))], dtype=torch.int64).to(torch.uint32)

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """The chosen codec's agreement, as a round of MAX lanes."""
        if agreed.numel() != 1:
            raise CodecError(f"agreed has {agreed.numel()} values: expected 1 nonzero count")
        max_nonzeros = int(agreed.reshape(-1)[0].to(torch.int64))
        if max_nonzeros == (1 << 32) - 1:        # a poisoned agreement: some worker's NaN/Inf
            raise NonFiniteGradientError(key, "agreed")
        numel = check_gradient(grad, float32=False).numel()
        if max_nonzeros > numel:
            raise CodecError(f"bucket {key!r}: agreed nonzero count {max_nonzeros} exceeds the "
                             f"bucket's {numel} values (workers with different buckets?)")
        choice, columns = self.plan(numel, max_nonzeros)
        self.last_choice[key], self.last_nonzeros[key] = choice, max_nonzeros
        self.last_columns[key] = columns
        sub_agreement = self._sub(choice, columns).agreement(grad, key).reshape(-1)
        self.states[key] = {"grad": grad}
        return EncodedLanes([LaneStream(LaneOp.MAX, sub_agreement, sub_agreement.numel(),
                                        name=f"{choice}_agreement")],
                            {"choice": choice, "columns": columns, "phase": "agree"})

    def followup(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
                 meta: Optional[Dict[str, Any]] = None) -> Optional[EncodedLanes]:
        if meta is None or "choice" not in meta:
            raise CodecError("meta: pass the meta of the previous round")
        sub = self._sub(meta["choice"], meta.get("columns", 0))
        if meta["phase"] == "agree":
            if len(aggregated) != 1:
                raise CodecError(f"got {len(aggregated)} aggregated streams, expected 1 "
                                 "(the chosen codec's agreement)")
            state = self.states.get(key)
            if state is None:
                raise CodecError(f"bucket {key!r}: no gradient pending (encode first)")
            sub_agreed = aggregated[0]
            lanes = sub.encode(state["grad"], sub_agreed, key)
            return EncodedLanes(lanes.streams, {"choice": meta["choice"], "columns": meta.get("columns", 0),
                                                "phase": "lanes", "sub_agreed": sub_agreed,
                                                "sub_meta": lanes.meta})
        more = sub.followup(aggregated, meta["sub_agreed"], key, meta["sub_meta"])
        if more is None:
            return None
        return EncodedLanes(more.streams, dict(meta, sub_meta=more.meta))

    def decode(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
               meta: Optional[Dict[str, Any]] = None) -> torch.Tensor:
        if meta is None or meta.get("phase") != "lanes":
            raise CodecError("decode: pass the meta of the last round (the chosen codec's lanes)")
        self.states.pop(key, None)
        return self._sub(meta["choice"], meta.get("columns", 0)).decode(
            aggregated, meta["sub_agreed"], key, meta["sub_meta"])

    # ------------------------------------------------------------------ state
    def snapshot(self, key: Hashable = 0) -> Any:
        return (self.dense.snapshot(key), {c: codec.snapshot(key) for c, codec in self._sparse.items()},
                self.states.get(key), self.last_choice.get(key), self.last_nonzeros.get(key),
                self.last_columns.get(key))

    def restore(self, key: Hashable, snapshot: Any) -> None:
        dense, sparse, state, choice, nonzeros, columns = snapshot
        self.dense.restore(key, dense)
        for c, codec in self._sparse.items():
            if c in sparse:
                codec.restore(key, sparse[c])
            else:                      # made after the snapshot: as if never used for the key
                codec.reset(key)
        for table, value in ((self.states, state), (self.last_choice, choice),
                             (self.last_nonzeros, nonzeros), (self.last_columns, columns)):
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value

    def release(self, key: Hashable, snapshot: Any) -> None:
        self.dense.release(key, snapshot[0])
        for c, snap in snapshot[1].items():
            self._sparse[c].release(key, snap)

    def reset(self, key: Optional[Hashable] = None) -> None:
        super().reset(key)
        self.dense.reset(key)
        for codec in self._sparse.values():
            codec.reset(key)
        for table in (self.last_choice, self.last_nonzeros, self.last_columns):
            if key is None:
                table.clear()
            else:
                table.pop(key, None)
