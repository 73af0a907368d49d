"""Block-sparse aggregation, worker side: which block each slot aggregates, round by round.

The protocol (docs/protocol.md, "Block-sparse aggregation"), OmniReduce-style: a tensor of
int32 fixed-point values is cut into blocks of ``words`` lanes; slot ``s`` of the job aggregates
the blocks ``s, s + n_slots, s + 2 n_slots, ...`` (its *stream*), one block per round. Round
``k`` of slot ``s`` is chunk ``seq = k * n_slots + s`` (so pool copies alternate as in the dense
path). Round 0 aggregates the stream's first block. In every round every worker sends one
message for the round's block ``B``:

* ``BLOCK_SUM`` (block header + lanes) if its block ``B`` is nonzero, else ``BLOCK_SKIP`` (the
  block header alone);
* both announce ``next``: the worker's first nonzero block of the stream after ``B``
  (:data:`hina.protocol.BLOCK_END` if none).

The switch sums the lanes and keeps the smallest ``next``; the RESULT of the complete round
carries the sum, ``B`` and that minimum: the block of the next round, or ``BLOCK_END`` (the
stream is done). Blocks that are zero at every worker are never sent.

This module is pure Python/numpy: the worker transport and the dataplane tests share it, and
:func:`reference_rounds` / :func:`reference_sum` are the references the tests check against.

Example::

    >>> import numpy as np
    >>> q = np.zeros(8, dtype=np.int32); q[5] = 3
    >>> s = StreamState(nonzero_blocks(q, 2), slot=0, n_slots=2, n_blocks=4)
    >>> s.block, s.message()[:3]
    (0, (<Op.BLOCK_SKIP: 6>, 0, 2))
"""
from __future__ import annotations

import struct
from typing import Iterable, Optional, Sequence

import numpy as np

from . import protocol as P

_BLOCK_HEADER = struct.Struct("!II")
assert _BLOCK_HEADER.size == P.BLOCK_HEADER_BYTES


def block_count(length: int, words: int) -> int:
    """Blocks of ``words`` lanes that hold ``length`` values (the last one zero-padded)."""
    if words <= 0:
        raise ValueError(f"words={words!r}: must be positive")
    if length < 0:
        raise ValueError(f"length={length!r}: must be >= 0")
    return -(-length // words)


def as_blocks(q: np.ndarray, words: int) -> np.ndarray:
    """``q`` (1-D int32) as a (blocks, words) array, zero-padded to whole blocks."""
    q = np.asarray(q)
    if q.ndim != 1 or q.dtype != np.int32:
        raise ValueError(f"as_blocks: want a 1-D int32 array, got {q.dtype} of shape {q.shape}")
    n = block_count(q.size, words)
    out = np.zeros(n * words, dtype=np.int32)
    out[:q.size] = q
    return out.reshape(n, words)


def nonzero_blocks(q: np.ndarray, words: int) -> np.ndarray:
    """Sorted indices of the blocks of ``q`` (int32) that hold a nonzero value."""
    return np.flatnonzero(as_blocks(q, words).any(axis=1))


def pack_block_header(block: int, next_block: int) -> bytes:
    """The 8-byte block header; ``next_block`` must lie beyond ``block`` (the switch drops
    anything else as MALFORMED)."""
    if not 0 <= block < next_block <= P.BLOCK_END:
        raise ValueError(f"block header ({block}, {next_block}): need 0 <= block < next <= "
                         f"BLOCK_END (0x{P.BLOCK_END:08X})")
    return _BLOCK_HEADER.pack(block, next_block)


def unpack_block_header(payload: bytes) -> tuple[int, int]:
    """(block, next) from the start of a block-sparse payload."""
    if len(payload) < P.BLOCK_HEADER_BYTES:
        raise ValueError(f"block-sparse payload of {len(payload)} bytes is shorter than the "
                         f"{P.BLOCK_HEADER_BYTES}-byte block header")
    return _BLOCK_HEADER.unpack_from(payload)


class StreamState:
    """One worker's position in one slot's stream of blocks.

    Args:
        nonzero: sorted indices of the worker's nonzero blocks (any stream; others are ignored).
        slot: the slot (and stream) index.
        n_slots: slots of the job.
        n_blocks: blocks of the tensor (the stream is empty when ``slot >= n_blocks``).

    Attributes:
        block: the block of the current round (``None`` once the stream is done).
        round: the current round (0 first).
    """

    __slots__ = ("slot", "n_slots", "nonzero", "block", "round")

    def __init__(self, nonzero: Sequence[int], slot: int, n_slots: int, n_blocks: int):
        if not 0 <= slot < n_slots:
            raise ValueError(f"slot={slot!r}: must be in [0, n_slots={n_slots})")
        nz = np.asarray(nonzero, dtype=np.int64)
        self.slot, self.n_slots = slot, n_slots
        self.nonzero = nz[(nz % n_slots == slot) & (nz < n_blocks)]
        self.block: Optional[int] = slot if slot < n_blocks else None
        self.round = 0

    @property
    def done(self) -> bool:
        return self.block is None

    @property
    def seq(self) -> int:
        """The chunk number of the current round (``round * n_slots + slot``)."""
        return self.round * self.n_slots + self.slot

    def next_after(self, block: int) -> int:
        """The worker's first nonzero block of the stream after ``block``, or BLOCK_END."""
        i = np.searchsorted(self.nonzero, block, side="right")
        return int(self.nonzero[i]) if i < self.nonzero.size else P.BLOCK_END

    def contributes(self) -> bool:
        """Whether the worker's block of the current round is nonzero."""
        i = np.searchsorted(self.nonzero, self.block)
        return bool(i < self.nonzero.size and self.nonzero[i] == self.block)

    def message(self) -> tuple[P.Op, int, int]:
        """(op, block, next) of the worker's message in the current round."""
        if self.done:
            raise ValueError(f"slot {self.slot}: the stream is done")
        op = P.Op.BLOCK_SUM if self.contributes() else P.Op.BLOCK_SKIP
        return op, self.block, self.next_after(self.block)

    def advance(self, result_block: int, result_next: int) -> None:
        """Take the RESULT of the current round: on to the next block (or done).

        Raises:
            ValueError: the result is for another block, or names a next block that is not
                beyond it or not in this stream (a switch or peer out of step).
        """
        if result_block != self.block:
            raise ValueError(f"slot {self.slot} round {self.round}: result for block "
                             f"{result_block}, expected block {self.block}")
        if result_next != P.BLOCK_END and (result_next <= result_block
                                           or result_next % self.n_slots != self.slot):
            raise ValueError(f"slot {self.slot}: result names next block {result_next}, not a "
                             f"later block of this stream")
        mine = self.next_after(self.block)
        if result_next > mine:
            raise ValueError(f"slot {self.slot}: result's next block {result_next} skips this "
                             f"worker's nonzero block {mine}")
        self.block = None if result_next == P.BLOCK_END else int(result_next)
        self.round += 1


def reference_rounds(nonzero_per_worker: Iterable[Sequence[int]], n_blocks: int,
                     n_slots: int) -> dict[int, list[int]]:
    """The blocks each slot aggregates, in order: its stream's first block, then every block
    of the stream that is nonzero at some worker."""
    union = set()
    for nz in nonzero_per_worker:
        union.update(int(b) for b in nz)
    return {s: [s] + sorted(b for b in union if b % n_slots == s and b != s)
            for s in range(min(n_slots, n_blocks))}


def reference_sum(quantised: Sequence[np.ndarray]) -> np.ndarray:
    """The fixed-point sum the switch must return (int32; ValueError if it overflows int32)."""
    total = np.sum([np.asarray(q, dtype=np.int64) for q in quantised], axis=0)
    if total.size and (total.max() > np.iinfo(np.int32).max
                       or total.min() < np.iinfo(np.int32).min):
        raise ValueError("reference_sum: the sum overflows int32 (the switch flags OVERFLOW)")
    return total.astype(np.int32)
