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
   exponent, or THC's norm). The choice is the lossless codec when ``n * m`` is within its
   peeling capacity (so peeling always completes: the result is exact, never a silently
   truncated sum) and its bytes on the wire are fewer than THC's; THC otherwise.
3. the chosen codec's lanes (and its follow-up rounds, if any); decode is the chosen codec's.

The choice depends only on agreed values and the configuration, so it is the same on every
worker. :attr:`last_choice` says what each bucket used (the demo prints it).
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
        columns: the lossless sketch's cells per row (its capacity: ``PEELING_LOAD_THRESHOLD *
            3 * columns`` nonzeros in the union of the workers' supports).
        sketch_seed: the lossless sketch's hash seed.

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
                 sketch_seed: int = 0) -> None:
        super().__init__(n_workers)
        thc_kwargs: Dict[str, Any] = {"rank": rank, "seed": seed}
        if table is not None:
            thc_kwargs["table"] = table
        if granularity:
            thc_kwargs["granularity"] = granularity
        self.dense = ThcCodec(n_workers, **thc_kwargs)
        self.sparse = LosslessSketchCodec(n_workers, columns=columns, seed=sketch_seed)
        #: bucket key -> "lossless" or "thc": what its last call used
        self.last_choice: Dict[Hashable, str] = {}
        #: bucket key -> the largest nonzero count over the workers in its last call
        self.last_nonzeros: Dict[Hashable, int] = {}
        self.log_config()

    @property
    def table(self) -> tuple:
        """The THC table of the dense buckets: the job must install it in the switch's LUT, as
        for the ``thc`` codec."""
        return self.dense.table

    # ------------------------------------------------------------------ the choice
    @property
    def capacity(self) -> int:
        """Union support the lossless sketch peels for sure."""
        return int(PEELING_LOAD_THRESHOLD * LOSSLESS_ROWS * self.sparse.cs.columns)

    def lossless_bytes(self, numel: int) -> int:
        """Bytes the lossless codec moves for ``numel`` coordinates (up; down is the same)."""
        return 4 * (-(-numel // BITMAP_WORD_BITS)) + 4 * LOSSLESS_ROWS * self.sparse.cs.columns

    def choose(self, numel: int, max_nonzeros: int) -> str:
        """``"lossless"`` or ``"thc"`` for a bucket of ``numel`` values whose workers have at
        most ``max_nonzeros`` nonzeros each (the same answer on every worker)."""
        fits = self.n_workers * max_nonzeros <= self.capacity
        cheaper = 2 * self.lossless_bytes(numel) < THC_BYTES_PER_COORD * numel
        return "lossless" if fits and cheaper else "thc"

    def _sub(self, choice: str) -> Codec:
        return self.sparse if choice == "lossless" else self.dense

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
        choice = self.choose(numel, max_nonzeros)
        self.last_choice[key], self.last_nonzeros[key] = choice, max_nonzeros
        sub_agreement = self._sub(choice).agreement(grad, key).reshape(-1)
        self.states[key] = {"grad": grad}
        return EncodedLanes([LaneStream(LaneOp.MAX, sub_agreement, sub_agreement.numel(),
                                        name=f"{choice}_agreement")],
                            {"choice": choice, "phase": "agree"})

    def followup(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
                 meta: Optional[Dict[str, Any]] = None) -> Optional[EncodedLanes]:
        if meta is None or "choice" not in meta:
            raise CodecError("meta: pass the meta of the previous round")
        sub = self._sub(meta["choice"])
        if meta["phase"] == "agree":
            if len(aggregated) != 1:
                raise CodecError(f"got {len(aggregated)} aggregated streams, expected 1 "
                                 "(the chosen codec's agreement)")
            state = self.states.get(key)
            if state is None:
                raise CodecError(f"bucket {key!r}: no gradient pending (encode first)")
            sub_agreed = aggregated[0]
            lanes = sub.encode(state["grad"], sub_agreed, key)
            return EncodedLanes(lanes.streams, {"choice": meta["choice"], "phase": "lanes",
                                                "sub_agreed": sub_agreed, "sub_meta": lanes.meta})
        more = sub.followup(aggregated, meta["sub_agreed"], key, meta["sub_meta"])
        if more is None:
            return None
        return EncodedLanes(more.streams, dict(meta, sub_meta=more.meta))

    def decode(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
               meta: Optional[Dict[str, Any]] = None) -> torch.Tensor:
        if meta is None or meta.get("phase") != "lanes":
            raise CodecError("decode: pass the meta of the last round (the chosen codec's lanes)")
        self.states.pop(key, None)
        return self._sub(meta["choice"]).decode(aggregated, meta["sub_agreed"], key,
                                                meta["sub_meta"])

    # ------------------------------------------------------------------ state
    def snapshot(self, key: Hashable = 0) -> Any:
        return (self.dense.snapshot(key), self.sparse.snapshot(key), self.states.get(key),
                self.last_choice.get(key), self.last_nonzeros.get(key))

    def restore(self, key: Hashable, snapshot: Any) -> None:
        dense, sparse, state, choice, nonzeros = snapshot
        self.dense.restore(key, dense)
        self.sparse.restore(key, sparse)
        for table, value in ((self.states, state), (self.last_choice, choice),
                             (self.last_nonzeros, nonzeros)):
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value

    def release(self, key: Hashable, snapshot: Any) -> None:
        self.dense.release(key, snapshot[0])
        self.sparse.release(key, snapshot[1])

    def reset(self, key: Optional[Hashable] = None) -> None:
        super().reset(key)
        self.dense.reset(key)
        self.sparse.reset(key)
        for table in (self.last_choice, self.last_nonzeros):
            if key is None:
                table.clear()
            else:
                table.pop(key, None)
