"""Drive block-sparse rounds through a switch, frame by frame, and check every RESULT.

:func:`run_block_sparse` plays a job's workers in lock step against anything that takes a frame
into a port and returns what came out (a :class:`hina.testing.targets.Target`'s ``send``, or
:class:`bmv2_tests.differential.Differential`'s), with optional loss of results (the worker
retransmits and must get the kept result by unicast), duplicates of contributions into a round
still filling (absorbed: no reply) and a random order of workers and slots. The expected blocks
and sums come from :mod:`hina.blocksparse` alone (pure numpy), never from the switch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from hina import blocksparse as B
from hina import protocol as P
from hina.pipeline import JobSpec
from hina.testing import frames as J

#: (port, frame) -> [(port, frame), ...]
SendFn = Callable[[int, bytes], Sequence[tuple[int, bytes]]]


@dataclass
class BlockRun:
    """What a run did: the summed tensor as the workers got it, and counts."""
    result: np.ndarray                      # int32, the padded tensor (blocks * words)
    rounds: dict = field(default_factory=dict)   # slot -> [blocks aggregated, in order]
    frames_sent: int = 0
    lane_frames: int = 0                    # BLOCK_SUM frames (the rest are BLOCK_SKIP)
    retransmissions: int = 0
    duplicates: int = 0
    overflow: bool = False


def run_block_sparse(send: SendFn, job: JobSpec, quantised: Sequence[np.ndarray], words: int,
                     rng: Optional[np.random.Generator] = None, lose: float = 0.0,
                     duplicate: float = 0.0) -> BlockRun:
    """Aggregate ``quantised`` (one int32 vector per worker of ``job``) block-sparsely.

    Args:
        send: frame into a port -> the frames that came out.
        job: the installed job (its ``n_slots`` streams are run interleaved).
        quantised: the workers' int32 vectors, all of one length.
        words: lanes per block (the program's HINA_WORDS).
        rng: randomness for the order, loss and duplicates (None: fixed order, no faults).
        lose: probability that a worker loses a round's RESULT (it retransmits its message).
        duplicate: probability that a worker's message is sent twice before the round completes.

    Returns:
        A :class:`BlockRun`; the caller compares ``result`` with
        :func:`hina.blocksparse.reference_sum`.

    Raises:
        AssertionError: the switch answered differently from the protocol (a reply where none
            is due, a RESULT missing, the workers' copies disagreeing, a wrong block or next).
    """
    n = len(job.workers)
    if len(quantised) != n:
        raise ValueError(f"{len(quantised)} vectors for a job of {n} workers")
    blocks = [B.as_blocks(q, words) for q in quantised]
    n_blocks = blocks[0].shape[0]
    states = [[B.StreamState(B.nonzero_blocks(q, words), s, job.n_slots, n_blocks)
               for s in range(job.n_slots)] for q in quantised]
    run = BlockRun(result=np.zeros((n_blocks, words), dtype=np.int32))

    def message(w: int, s: int, flags: int = 0) -> bytes:
        st = states[w][s]
        op, block, nxt = st.message()
        values = blocks[w][block] if op == P.Op.BLOCK_SUM else None
        slot, pool = P.slot_and_pool(st.seq, job.n_slots)
        return J.block_contribution(job, w, block, nxt, values, slot=slot, pool=pool,
                                    seq=st.seq, flags=flags)

    def deliver(w: int, data: bytes) -> list[J.Reply]:
        run.frames_sent += 1
        out = send(job.workers[w].port, data)
        replies = [J.parse(p, f) for p, f in out]
        assert all(r.checksum_ok and r.ip_ok for r in replies), replies
        return replies

    live = [s for s in range(job.n_slots) if not states[0][s].done]
    while live:
        s = live[rng.integers(len(live))] if rng is not None else live[0]
        st0 = states[0][s]
        block, seq = st0.block, st0.seq
        order = list(rng.permutation(n)) if rng is not None else list(range(n))
        replies: list[J.Reply] = []
        for i, w in enumerate(order):
            data = message(w, s)
            run.lane_frames += states[w][s].contributes()
            got = deliver(w, data)
            if i < n - 1:
                assert got == [], f"slot {s} block {block}: reply before the round is complete"
                if rng is not None and rng.random() < duplicate:
                    run.duplicates += 1
                    assert deliver(w, data) == [], "a duplicate into a filling round answered"
            else:
                replies = got
        assert sorted(r.port for r in replies) == sorted(a.port for a in job.workers), \
            f"slot {s} block {block}: RESULT multicast reached ports {[r.port for r in replies]}"
        first = replies[0]
        result_block, result_next = first.block()
        for r in replies:
            assert (r.msg_type, r.op, r.seq, r.count) == (P.MsgType.RESULT, P.Op.BLOCK_SUM,
                                                          seq, n), r
            assert r.block() == (result_block, result_next) and r.payload == first.payload
        # Losses: a worker that lost the RESULT retransmits its message and gets it by unicast.
        for w in range(n):
            if rng is not None and rng.random() < lose:
                run.retransmissions += 1
                again = deliver(w, message(w, s, flags=P.Flag.RETRANSMIT))
                assert len(again) == 1 and again[0].port == job.workers[w].port, again
                assert again[0].payload == first.payload and again[0].flags & P.Flag.RETRANSMIT
        run.overflow |= bool(first.flags & P.Flag.OVERFLOW)
        run.result[result_block] = first.words()
        run.rounds.setdefault(s, []).append(result_block)
        for w in range(n):
            states[w][s].advance(result_block, result_next)
        live = [s for s in range(job.n_slots) if not states[0][s].done]
    run.result = run.result.reshape(-1)
    return run


def sparse_vectors(rng: np.random.Generator, n_workers: int, n_blocks: int, words: int,
                   density: float, magnitude: int = 1 << 20) -> list[np.ndarray]:
    """Random block-sparse int32 vectors: each block nonzero with probability ``density``
    (per worker), values in ``[-magnitude, magnitude)``, a nonzero block having a few zeros."""
    out = []
    for _ in range(n_workers):
        keep = rng.random(n_blocks) < density
        v = rng.integers(-magnitude, magnitude, (n_blocks, words)).astype(np.int32)
        v[~keep] = 0
        out.append(v.reshape(-1))
    return out
