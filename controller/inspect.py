"""Reading aggregation state back: a slot's registers decoded per codec, counters per reason.

The register layout is the dataplane's (``docs/dataplane.md``): per slot copy ``c = (reg_base +
slot) * 2 + pool``, ``slot_seq[c]`` holds ``seq + 1`` of the copy's current use (0: unused),
``slot_count[c]`` its contributors, ``slot_bitmap[c]`` which workers they are, ``slot_flags[c]``
its sticky OVERFLOW, ``slot_generation[c]`` the job generation of that use (a copy of another
generation than the job's is left over from an earlier run, reclaimed by its next packet),
``lanes_<w>[c]`` word ``w`` of the aggregate (one 32-bit array per word,
:func:`hina.pipeline.lane_register`). A job with block-sparse rounds (``JobConfig.uses_blocks``)
also has, per copy, ``block_index[c]`` (the block the copy's round sums) and ``block_next[c]``
(the smallest next block announced in the round so far; ``BLOCK_END``: none).

Lane words decode by the job's lane operation: SUM as signed 32-bit, LUT_SUM as two unsigned
16-bit sums (first coordinate in the upper half), MAX and OR as unsigned 32-bit.

The TNA program (:class:`hina.pipeline.TnaLayout`) keeps the same state otherwise: no
``slot_count`` and no ``slot_flags``; ``slot_bitmap`` is one register of pairs per slot (index
``reg_base + slot``; member 0 the bitmap of pool 0, member 1 of pool 1), a copy is complete when
its bitmap holds every worker, and its count is the bitmap's population; lanes saturate instead
of flagging, so a SUM copy's overflow is a lane word at a bound (known only where the lanes are
read: None otherwise); lane words sit where :meth:`~hina.pipeline.Layout.lane_cell` says.
"""
from __future__ import annotations

from typing import Optional, Sequence

from hina import pipeline
from hina import protocol as P

from .config import JobConfig
from .p4runtime_client import SwitchConnection
from .target import RegisterAccess

__all__ = ["decode_lanes", "slot_state", "job_progress", "job_packets", "reason_counts"]

_BITMAP_BITS = 32
_MASK32 = (1 << 32) - 1
_MASK16 = (1 << 16) - 1
#: lane words (unsigned) where a saturating program's SUM sticks: its overflow signal
_SATURATED_WORDS = frozenset(b & _MASK32 for b in P.SATURATED_SUM)


def decode_lanes(words: Sequence[int], lane_op: str) -> list[int]:
    """Lane register words as the values they hold under ``lane_op``.

    Example::

        >>> decode_lanes([0xFFFFFFFF, 5], "SUM")
        [-1, 5]
        >>> decode_lanes([0x00030005], "LUT_SUM")
        [3, 5]
    """
    if lane_op in ("SUM", "BLOCK_SUM"):
        return [w - (1 << 32) if w >> 31 else w for w in words]
    if lane_op == "LUT_SUM":
        return [v for w in words for v in ((w >> P.THC_SUM_BITS) & _MASK16, w & _MASK16)]
    if lane_op in ("MAX", "OR"):
        return [w & _MASK32 for w in words]
    raise ValueError(f"lane op {lane_op!r}: expected SUM, BLOCK_SUM, LUT_SUM, MAX or OR")


def _members(bitmap: int) -> list[int]:
    return [w for w in range(_BITMAP_BITS) if bitmap >> w & 1]


def slot_state(registers: RegisterAccess, job: JobConfig, slot: int,
               lanes: Optional[int] = None, layout: Optional[pipeline.Layout] = None) -> dict:
    """Both pool copies of one slot of ``job``, decoded.

    Args:
        registers: the target's register path.
        job: the job (its reg_base, words and codec).
        slot: slot index within the job.
        lanes: decode only the first ``lanes`` words (default all).
        layout: the pushed program's (default: p4/hina.p4's).

    Returns:
        ``{"job", "slot", "lane_op", "pools": [{"pool", "seq", "in_use", "generation",
        "current", "count", "contributors", "overflow", "lanes"}, ...]}``; ``current`` is
        whether the copy's generation is the job's. For a job with block-sparse rounds
        (``job.uses_blocks``) each pool also has ``"block"`` and ``"block_next"`` (``None``
        for ``BLOCK_END``: no further nonzero block announced).

    Raises:
        ValueError: ``slot`` is not a slot of the job.
    """
    if not 0 <= slot < job.n_slots:
        raise ValueError(f"slot {slot}: job {job.job_id} has slots 0..{job.n_slots - 1}")
    words = job.words if lanes is None else max(0, min(lanes, job.words))
    if isinstance(layout, pipeline.TnaLayout):
        return _tna_slot_state(registers, job, slot, words, layout)
    base = job.reg_base or 0
    cells: list[tuple[str, int]] = []
    for pool in (0, 1):
        c = (base + slot) * 2 + pool
        cells += [(pipeline.SLOT_BITMAP, c), (pipeline.SLOT_SEQ, c), (pipeline.SLOT_COUNT, c),
                  (pipeline.SLOT_FLAGS, c), (pipeline.SLOT_GENERATION, c)]
        if job.uses_blocks:
            cells += [(pipeline.BLOCK_INDEX, c), (pipeline.BLOCK_NEXT, c)]
        cells += [(pipeline.lane_register(w), c) for w in range(words)]
    values = registers.read(cells)
    n_blocks = 2 if job.uses_blocks else 0
    per_pool = 5 + n_blocks + words
    pools = []
    for pool in (0, 1):
        pool_bitmap, seq1, count, flags, generation, *rest = \
            values[pool * per_pool:(pool + 1) * per_pool]
        blocks, cells_of_words = rest[:n_blocks], rest[n_blocks:]
        lane_words = [pipeline.lane_word(v, w) for w, v in enumerate(cells_of_words)]
        pools.append(_pool(job, pool, seq1, generation, count, count == len(job.workers),
                           pool_bitmap, bool(flags & P.Flag.OVERFLOW), lane_words, blocks))
    return {"job": job.job_id, "slot": slot, "lane_op": job.lane_op,
            "n_workers": len(job.workers), "pools": pools}


def _pool(job: JobConfig, pool: int, seq1: int, generation: int, count: int, complete: bool,
          bitmap: int, overflow: Optional[bool], lane_words: Sequence[int],
          blocks: Sequence[int]) -> dict:
    """One slot copy of :func:`slot_state`, decoded."""
    out = {
        "pool": pool,
        "in_use": seq1 != 0,
        "seq": (seq1 - 1) & _MASK32 if seq1 else None,
        "generation": generation,
        "current": generation == job.generation,
        "count": count,
        "complete": complete,
        "bitmap": bitmap,
        "contributors": _members(bitmap),
        "overflow": overflow,
        "lanes": decode_lanes(lane_words, job.lane_op),
    }
    if blocks:
        out["block"] = blocks[0]
        out["block_next"] = None if blocks[1] == P.BLOCK_END else blocks[1]
    return out


def job_progress(registers: RegisterAccess, job: JobConfig,
                 layout: Optional[pipeline.Layout] = None) -> dict:
    """Chunks the job's current generation has started (highest sequence number seen + 1) and
    copies complete now.

    Read from ``slot_seq``, ``slot_count`` and ``slot_generation`` (one Read of ``6 * n_slots``
    cells; on the TNA program ``slot_bitmap`` instead of ``slot_count``); copies left over from
    an earlier generation do not count.
    """
    base = job.reg_base or 0
    copies = range(2 * base, 2 * (base + job.n_slots))
    n = len(copies)
    tna = isinstance(layout, pipeline.TnaLayout)
    name = (layout or pipeline.V1MODEL).register
    counted = ([(name(pipeline.SLOT_BITMAP), base + s) for s in range(job.n_slots)] if tna
               else [(pipeline.SLOT_COUNT, c) for c in copies])
    values = registers.read([(name(pipeline.SLOT_SEQ), c) for c in copies] + counted +
                            [(name(pipeline.SLOT_GENERATION), c) for c in copies])
    generations = values[n + len(counted):]
    current = [g == job.generation for g in generations]
    seqs = [s if ok else 0 for s, ok in zip(values[:n], current)]
    if tna:   # per slot a pair (pool 0, pool 1): a copy's count is its bitmap's population
        # (an unused copy's bits are left over from an earlier use: its seq is 0, so it counts
        # neither as complete nor as filling below)
        counts = [_popcount(pair[pool] & _all_workers(job)) for pair in values[n:n + len(counted)]
                  for pool in (0, 1)]
    else:
        counts = values[n:2 * n]
    started = max(seqs, default=0)          # seq + 1 of the newest use: chunks 0..seq
    complete = sum(1 for s, n in zip(seqs, counts) if s and n == len(job.workers))
    return {"job": job.job_id, "chunks": started, "complete_copies": complete,
            "filling_copies": sum(1 for s, n in zip(seqs, counts) if s and n < len(job.workers))}


def job_packets(switch: SwitchConnection, job_id: int,
                layout: Optional[pipeline.Layout] = None) -> dict[str, int]:
    """Packets and bytes the switch admitted for ``job_id`` (``HinaIngress.job_counter``, or
    the program's name for it in ``layout``; the controller zeroes the cell when it creates or
    resets the job)."""
    name = layout.counter(P.JOB_COUNTER) if layout is not None else P.JOB_COUNTER
    byte_count, packet_count = switch.read_counter(name, job_id).get(job_id, (0, 0))
    return {"packets": packet_count, "bytes": byte_count}


def reason_counts(switch: SwitchConnection,
                  layout: Optional[pipeline.Layout] = None) -> dict[str, int]:
    """Packets per drop/exception reason (``HinaIngress.reason_counter``, or the program's name
    for it in ``layout``)."""
    name = layout.counter(P.REASON_COUNTER) if layout is not None else P.REASON_COUNTER
    counts = switch.read_counter(name)
    return {reason.name: counts.get(int(reason), (0, 0))[1] for reason in P.DropReason}


def _popcount(value: int) -> int:
    return bin(value).count("1")


def _all_workers(job: JobConfig) -> int:
    return (1 << len(job.workers)) - 1


def _tna_slot_state(registers: RegisterAccess, job: JobConfig, slot: int, words: int,
                    layout: pipeline.TnaLayout) -> dict:
    """:func:`slot_state` on the TNA program (module docstring): the bitmap pair of the slot,
    then per copy its seq, generation, block registers (block-sparse jobs) and lanes."""
    base = job.reg_base or 0
    blocks = job.uses_blocks and layout.block_sparse
    cells: list[tuple[str, int]] = [(layout.register(pipeline.SLOT_BITMAP), base + slot)]
    for pool in (0, 1):
        c = (base + slot) * 2 + pool
        cells += [(layout.register(pipeline.SLOT_SEQ), c),
                  (layout.register(pipeline.SLOT_GENERATION), c)]
        if blocks:
            cells += [(layout.register(pipeline.BLOCK_INDEX), c),
                      (layout.register(pipeline.BLOCK_NEXT), c)]
        cells += [layout.lane_cell(w, c) for w in range(words)]
    values = registers.read(cells)
    pair, per_pool = values[0], 2 + 2 * blocks + words
    if not (isinstance(pair, tuple) and len(pair) == 2):
        raise ValueError(f"{cells[0][0]}[{cells[0][1]}] = {pair!r}: expected a pair of bitmaps")
    everyone = _all_workers(job)
    saturates = job.lane_op in ("SUM", "BLOCK_SUM")
    pools = []
    for pool in (0, 1):
        seq1, generation, *rest = values[1 + pool * per_pool:1 + (pool + 1) * per_pool]
        block_values, cells_of_words = rest[:2 * blocks], rest[2 * blocks:]
        lane_words = [v & _MASK32 for v in cells_of_words]
        # a copy's bits are only reset by its next use (reset and job create leave the pair
        # register alone), so an unused copy's are left over: none count
        bitmap = pair[pool] & everyone if seq1 else 0
        overflow = None       # the lanes were not read
        if words:
            overflow = saturates and any(w in _SATURATED_WORDS for w in lane_words)
        pools.append(_pool(job, pool, seq1, generation, _popcount(bitmap), bitmap == everyone,
                           bitmap, overflow, lane_words, block_values))
    return {"job": job.job_id, "slot": slot, "lane_op": job.lane_op,
            "n_workers": len(job.workers), "pools": pools}
