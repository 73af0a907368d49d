"""Sparse-aware codec choice per bucket: block-sparse streaming, the lossless sketch or THC of the
touched rows for sparse buckets, THC for dense.

Embedding and MoE gradients are zero outside the rows a batch touched; the rest of a model is
dense. :class:`AdaptiveCodec` chooses, for every bucket and step, between a codec for sparse
data (:class:`~.lossless.LosslessSketchCodec`: exact, bytes set by the sketch size) and one for
dense data (:class:`~.thc.ThcCodec`: about 2.5 bytes per coordinate up and down), and every
worker chooses the same way without extra coordination beyond one small switch round.

Rounds of one bucket (the transport's multi-round protocol, :meth:`Codec.followup`):

1. agreement: three MAX lanes, this worker's count of nonzero values, of nonzero wire blocks
   (``words`` values, the switch's block) and of nonzero rows (``granule`` values,
   :class:`~.sparse_thc.SparseThcCodec`'s). Every worker gets the largest counts ``m``, ``b``
   and ``r``; ``n * m`` bounds the size of the union support, ``n * b`` the block-sparse
   rounds, ``n * r`` the union's rows.
2. the chosen codec's own agreement round, sent as MAX lanes (the lossless codec's mass
   exponent, or THC's norm). The lossless sketch is sized for the bucket: the smallest power of
   two ``c`` of columns (``min_columns`` to ``columns``) that holds ``n * m`` at load
   :data:`ADAPTIVE_LOAD`, well below peeling's threshold (a rare peel that does not finish is
   counted in ``incomplete_peels``: the result is exact otherwise). The
   choice is the allowed codec (``choices``: a job's declared set) with the fewest bytes on
   the wire, up and down, by the model in :meth:`AdaptiveCodec.wire_bytes`: the lossless
   sketch only when one fits, block-sparse (exact, ``fixed``'s quantisation) bounded by
   ``n * b`` rounds, THC at its 2.5 bytes per coordinate, THC of the touched rows at that
   for ``min(rows, n * r)`` rows plus the row bitmap up and down. An exact codec wins when it
   costs no more than THC of the whole bucket; otherwise the cheaper lossy one. A small sparse bucket (an embedding
   table in a DDP bucket of its own) gets a small sketch, so it goes exact where one sketch
   for every bucket would have cost more than THC.
3. the chosen codec's lanes (and its follow-up rounds, if any); decode is the chosen codec's.

The choice depends only on agreed values and the configuration, so it is the same on every
worker. :attr:`last_choice` says what each bucket used (the demo prints it), and
:attr:`last_columns` the lossless sketch's size.
"""
from __future__ import annotations

from typing import Any, Dict, Hashable, Optional, Sequence

import torch

from hina import protocol as P
from hina.codecs import ADAPTIVE_CHOICES, check_adaptive_choices

from .base import Codec, EncodedLanes, LaneOp, LaneStream, check_gradient, nonzero_groups
from .block_sparse import BlockSparseCodec
from .errors import CodecError, NonFiniteGradientError
from .lossless import LosslessSketchCodec
from .sketch import BITMAP_WORD_BITS, LOSSLESS_ROWS
from .sparse_thc import DEFAULT_GRANULE, SparseThcCodec
from .thc import ThcCodec

__all__ = ["AdaptiveCodec"]

#: bytes per coordinate THC moves up (4-bit indices) and down (16-bit sums), headers aside
THC_BYTES_PER_COORD = 0.5 + 2.0
#: the largest load (union support / sketch cells) the codec gives a lossless sketch. Peeling's
#: threshold, 0.818, holds as sketches grow; a small sketch near it still fails now and then (a
#: hypothesis example: 292 values in a 3 x 128 sketch, load 0.76, did not peel;
#: ``bench/bench_peel_load.py`` counts failures by load). At 0.5 the
#: failures left are mostly two values hashed to the same three cells, about
#: ``(load * 3 c)**2 / (2 c**3)`` per bucket: 0.4 % at 256 columns, 0.1 % at 1024. They are
#: counted (``incomplete_peels``), their values left to the sketch's estimate.
ADAPTIVE_LOAD = 0.5
#: the codecs :class:`AdaptiveCodec` chooses from (hina.codecs.ADAPTIVE_CHOICES)
CHOICES = ADAPTIVE_CHOICES
#: a block-sparse message's bytes beyond its lanes: Ethernet, IPv4, UDP, HINA and block headers
#: (every worker sends one per round, a skip when its block is zero; each result has as many)
_BLOCK_MESSAGE_BYTES = (P.ETHERNET_BYTES + P.IPV4_BYTES + P.UDP_BYTES + P.HEADER_BYTES
                        + P.BLOCK_HEADER_BYTES)


class AdaptiveCodec(Codec):
    """Per bucket, the cheapest of block-sparse streaming, the lossless sketch (when sure to
    peel), THC of the touched rows and THC.

    Args:
        n_workers: workers summed by the switch.
        rank: this worker's index (THC's rounding stream).
        seed: THC's shared rotation seed.
        table, granularity: THC's table (the switch's LUT) and its g.
        columns: the largest lossless sketch's cells per row, a power of two (its capacity:
            ``ADAPTIVE_LOAD * 3 * columns`` nonzeros in the union of the workers' supports).
        sketch_seed: the lossless sketches' hash seed.
        min_columns: the smallest lossless sketch tried, a power of two <= ``columns``.
        choices: the codecs buckets may use (a job's declared set), a subset of
            ``("block_sparse", "lossless", "sparse_thc", "thc")`` with ``thc``,
            ``sparse_thc`` or ``block_sparse`` in it (a dense bucket needs one of them).
        words: values per block of the switch's block-sparse rounds (the job's ``HINA_WORDS``).
        granule: values per row of ``sparse_thc``'s bitmap.

    Example::

        >>> import torch
        >>> codecs = [AdaptiveCodec(2, rank=r, columns=256) for r in range(2)]
        >>> from hina.worker.codecs import reference_allreduce
        >>> sparse = [torch.zeros(4096) for _ in range(2)]
        >>> for r, g in enumerate(sparse):
        ...     g[r * 7:r * 7 + 20] = 1.0
        >>> out = reference_allreduce(codecs, sparse)
        >>> codecs[0].last_choice[0], bool(torch.allclose(out[0], sum(sparse) / 2, atol=1e-6))
        ('block_sparse', True)
    """

    name = "adaptive"

    def __init__(self, n_workers: int, rank: int = 0, seed: int = 0, table=None,
                 granularity: Optional[int] = None, columns: int = 1 << 12,
                 sketch_seed: int = 0, min_columns: int = 256,
                 choices: Sequence[str] = CHOICES, words: int = P.WORDS,
                 granule: int = DEFAULT_GRANULE) -> None:
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
        choices = check_adaptive_choices(choices)
        if not isinstance(words, int) or words < 1:
            raise ValueError(f"words={words!r}: must be an int >= 1")
        self.choices, self.words = choices, words
        self.block = BlockSparseCodec(n_workers, rank=rank)
        self.dense = ThcCodec(n_workers, **thc_kwargs)
        self.rows = SparseThcCodec(n_workers, granule=granule, **thc_kwargs)
        self.granule = granule
        self.columns, self.min_columns, self.sketch_seed = columns, min_columns, sketch_seed
        #: columns -> the lossless codec of that size (made on first use; the same seed)
        self._sparse: Dict[int, LosslessSketchCodec] = {}
        #: the largest lossless codec (``columns``)
        self.sparse = self._lossless(columns)
        #: bucket key -> the codec its last call used (a name of ``choices``)
        self.last_choice: Dict[Hashable, str] = {}
        #: bucket key -> the largest nonzero count over the workers in its last call
        self.last_nonzeros: Dict[Hashable, int] = {}
        #: bucket key -> the lossless sketch's columns in its last call (0: THC)
        self.last_columns: Dict[Hashable, int] = {}
        #: codec name -> how many bucket calls chose it (every encode: retried calls count again)
        self.choice_counts: Dict[str, int] = {}
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
        """Union support the codec gives a lossless sketch of ``columns`` columns (load
        :data:`ADAPTIVE_LOAD`)."""
        return int(ADAPTIVE_LOAD * LOSSLESS_ROWS * columns)

    @property
    def capacity(self) -> int:
        """Union support the codec gives its largest lossless sketch."""
        return self.capacity_of(self.columns)

    def sketch_columns(self, max_nonzeros: int) -> Optional[int]:
        """The smallest sketch (power-of-two columns, ``min_columns`` to ``columns``) holding the
        union of the workers' supports, at most ``n * max_nonzeros``, at load
        :data:`ADAPTIVE_LOAD`; None if none."""
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

    def wire_bytes(self, numel: int, max_nonzeros: int, max_blocks: int,
                   max_rows: Optional[int] = None) -> dict:
        """Bytes one worker moves, up and down, for a bucket of ``numel`` values whose workers
        have at most ``max_nonzeros`` nonzeros, ``max_blocks`` nonzero blocks and ``max_rows``
        nonzero rows (default: as many as the nonzeros allow) each, per allowed codec that can
        carry it: ``{name: (bytes, lossless columns or 0)}``."""
        out = {}
        if "thc" in self.choices:
            out["thc"] = (THC_BYTES_PER_COORD * numel, 0)
        if "sparse_thc" in self.choices:
            rows = -(-numel // self.granule)
            max_rows = min(max_nonzeros, rows) if max_rows is None else max_rows
            union = min(rows, self.n_workers * max_rows) * self.granule
            bitmap = 4 * -(-rows // BITMAP_WORD_BITS)
            out["sparse_thc"] = (THC_BYTES_PER_COORD * min(union, numel) + 2 * bitmap, 0)
        columns = self.sketch_columns(max_nonzeros)
        if "lossless" in self.choices and columns is not None:
            out["lossless"] = (2 * self.lossless_bytes(numel, columns), columns)
        if "block_sparse" in self.choices:
            rounds = min(-(-numel // self.words), self.n_workers * max_blocks)
            lanes = 4 * self.words
            # up: this worker's nonzero blocks with lanes, a skip in every other round;
            # down: every round's result
            up = max_blocks * lanes + rounds * _BLOCK_MESSAGE_BYTES
            out["block_sparse"] = (up + rounds * (lanes + _BLOCK_MESSAGE_BYTES), 0)
        return out

    def plan(self, numel: int, max_nonzeros: int, max_blocks: Optional[int] = None,
             max_rows: Optional[int] = None) -> tuple:
        """``(name, lossless columns or 0)`` for a bucket of ``numel`` values whose workers
        have at most ``max_nonzeros`` nonzeros, ``max_blocks`` nonzero blocks and ``max_rows``
        nonzero rows each (default: as many as the nonzeros allow); the same on every worker.

        An exact codec (block-sparse, lossless) when the cheaper one moves no more bytes than
        THC of the whole bucket would; otherwise the cheaper of the lossy ones (THC of the
        touched rows, THC); an exact one if the allowed choices have no lossy one. Ties go to
        block-sparse, then lossless, then THC of the touched rows."""
        if max_blocks is None:
            max_blocks = min(max_nonzeros, -(-numel // self.words))
        costs = self.wire_bytes(numel, max_nonzeros, max_blocks, max_rows)
        rank = {"block_sparse": 0, "lossless": 1, "sparse_thc": 2, "thc": 3}
        exact = [c for c in ("block_sparse", "lossless") if c in costs]
        lossy = [c for c in ("sparse_thc", "thc") if c in costs]
        cheapest = lambda names: min(names, key=lambda c: (costs[c][0], rank[c]))  # noqa: E731
        if exact and (not lossy or costs[cheapest(exact)][0] <= THC_BYTES_PER_COORD * numel):
            name = cheapest(exact)
        else:
            name = cheapest(lossy)
        return name, costs[name][1]

    def choose(self, numel: int, max_nonzeros: int, max_blocks: Optional[int] = None,
               max_rows: Optional[int] = None) -> str:
        """The codec's name (see :meth:`plan`)."""
        return self.plan(numel, max_nonzeros, max_blocks, max_rows)[0]

    def _sub(self, choice: str, columns: int = 0) -> Codec:
        if choice == "lossless":
            return self._lossless(columns)
        return {"block_sparse": self.block, "sparse_thc": self.rows}.get(choice, self.dense)

    # ------------------------------------------------------------------ Codec API
    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """``[nonzero count, nonzero blocks of words values, nonzero rows of granule values]``
        (three uint32 lanes, MAX round)."""
        x = check_gradient(grad, float32=False)
        if x.numel() and not bool(torch.isfinite(x).all()):
            raise NonFiniteGradientError(key, "local")
        if x.numel() >= 1 << 32:
            raise CodecError(f"bucket {key!r}: {x.numel()} values do not fit a 32-bit count")
        self.states[key] = {"grad": grad}
        nonzero = x.reshape(-1) != 0
        counts = [int(nonzero.sum())]
        for size in (self.words, self.granule):     # nonzero blocks, then nonzero rows
            counts.append(int(nonzero_groups(nonzero, size).sum()))
        return torch.tensor(counts, dtype=torch.int64).to(torch.uint32)

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """The chosen codec's agreement, as a round of MAX lanes."""
        if agreed.numel() != 3:
            raise CodecError(f"agreed has {agreed.numel()} values: expected 3 (nonzero count, "
                             "nonzero blocks, nonzero rows)")
        max_nonzeros, max_blocks, max_rows = (int(v) for v in
                                              agreed.reshape(-1).to(torch.int64).tolist())
        if (1 << 32) - 1 in (max_nonzeros, max_blocks, max_rows):  # poisoned: a worker's NaN/Inf
            raise NonFiniteGradientError(key, "agreed")
        numel = check_gradient(grad, float32=False).numel()
        if (max_nonzeros > numel or max_blocks > -(-numel // self.words)
                or max_rows > -(-numel // self.granule)):
            raise CodecError(f"bucket {key!r}: agreed nonzero count {max_nonzeros}, blocks "
                             f"{max_blocks} or rows {max_rows} exceeds the bucket's {numel} "
                             "values (workers with different buckets?)")
        choice, columns = self.plan(numel, max_nonzeros, max_blocks, max_rows)
        self.last_choice[key], self.last_nonzeros[key] = choice, max_nonzeros
        self.choice_counts[choice] = self.choice_counts.get(choice, 0) + 1
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
                self.last_columns.get(key), self.block.snapshot(key), self.rows.snapshot(key))

    def restore(self, key: Hashable, snapshot: Any) -> None:
        dense, sparse, state, choice, nonzeros, columns, block, rows = snapshot
        self.dense.restore(key, dense)
        self.block.restore(key, block)
        self.rows.restore(key, rows)
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
        self.block.release(key, snapshot[6])
        self.rows.release(key, snapshot[7])
        for c, snap in snapshot[1].items():
            self._sparse[c].release(key, snap)

    def reset(self, key: Optional[Hashable] = None) -> None:
        super().reset(key)
        self.dense.reset(key)
        self.block.reset(key)
        self.rows.reset(key)
        for codec in self._sparse.values():
            codec.reset(key)
        for table in (self.last_choice, self.last_nonzeros, self.last_columns):
            if key is None:
                table.clear()
            else:
                table.pop(key, None)
