"""Exactly-once aggregation under loss, duplication and reordering, with workers that follow the
protocol (docs/protocol.md): a self-clocked window of n_slots chunks, chunk seq in slot
seq mod n_slots and pool (seq div n_slots) mod 2, retransmission of unanswered chunks."""
from __future__ import annotations

import numpy as np
import pytest

from hina import protocol as P
from bmv2_tests.conftest import TEST_WORDS
from hina.testing.frames import contribution, install, make_job, reason_count, send


class SimWorker:
    def __init__(self, index, n_slots, chunks):
        self.index, self.n_slots, self.chunks = index, n_slots, chunks
        self.next_seq = 0
        self.results: dict[int, np.ndarray] = {}

    def oldest_missing(self):
        return min((s for s in range(self.chunks) if s not in self.results), default=self.chunks)

    def can_send_new(self):
        return self.next_seq < self.chunks and self.next_seq < self.oldest_missing() + self.n_slots

    def unanswered(self):
        return [s for s in range(self.next_seq) if s not in self.results]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("loss", [0.0, 0.2])
def test_random_loss_duplication_reordering(target, seed, loss):
    n, n_slots, chunks = 3, 2, 10
    job = make_job(1, n, n_slots=n_slots)
    install(target, job)
    rng = np.random.default_rng(seed)
    values = rng.integers(-1000, 1000, (chunks, n, TEST_WORDS))
    expected = values.sum(axis=1)
    workers = [SimWorker(w, n_slots, chunks) for w in range(n)]
    port_to_worker = {a.port: w for w, a in enumerate(job.workers)}
    sent = 0
    while any(len(w.results) < chunks for w in workers):
        sent += 1
        assert sent < 5000, "no progress: the protocol deadlocked"
        w = workers[rng.integers(n)]
        if w.can_send_new() and rng.random() < 0.7:
            seq, flags = w.next_seq, 0
            w.next_seq += 1
        elif w.unanswered():
            seq, flags = int(rng.choice(w.unanswered())), P.Flag.RETRANSMIT   # timeout
        else:
            continue
        slot, pool = P.slot_and_pool(seq, n_slots)
        data = contribution(job, w.index, P.Op.SUM, values[seq, w.index], slot=slot, pool=pool,
                            seq=seq, flags=flags)
        copies = 2 if rng.random() < 0.1 else 1                   # network duplication
        for _ in range(copies):
            if rng.random() < loss:                               # uplink loss
                continue
            for reply in send(target, job, w.index, data):
                if rng.random() < loss:                           # downlink loss
                    continue
                dest = workers[port_to_worker[reply.port]]
                assert reply.msg_type == P.MsgType.RESULT and reply.flags & P.Flag.OVERFLOW == 0
                got = reply.words()
                np.testing.assert_array_equal(got, expected[reply.seq],
                                              err_msg=f"result of chunk {reply.seq}")
                dest.results.setdefault(reply.seq, got)
    for w in workers:
        for seq in range(chunks):
            np.testing.assert_array_equal(w.results[seq], expected[seq])


@pytest.mark.parametrize("flags", [0, P.Flag.RETRANSMIT])
def test_late_copy_after_the_worker_moved_on_is_stale(target, flags):
    """A worker's copy of chunk u reordered behind its contribution to chunk u + n_slots (the
    other copy of the slot) is an old duplicate, also while another worker has not moved on
    yet: not a second contribution to u (which would count the worker twice and clear its bit in
    u + n_slots, so that the retransmissions of u + n_slots are then dropped as stale)."""
    job = make_job(1, 2, n_slots=1)
    install(target, job)
    v = np.arange(2 * 3 * TEST_WORDS).reshape(2, 3, TEST_WORDS)       # [seq][worker][word]

    def chunk(w, seq, extra=0):
        slot, pool = P.slot_and_pool(seq, job.n_slots)
        return contribution(job, w, P.Op.SUM, v[seq, w], slot=slot, pool=pool, seq=seq,
                            flags=extra)

    late = chunk(0, 0, flags)
    assert send(target, job, 0, chunk(0, 0)) == []
    done = send(target, job, 1, chunk(1, 0), expected=2)               # chunk 0 complete
    assert sorted(r.port for r in done) == [1, 2]
    assert send(target, job, 0, chunk(0, 1)) == []                     # worker 0 moves on
    stale_before = reason_count(target, P.DropReason.STALE_POOL)
    assert send(target, job, 0, late) == []                            # the late copy of 0
    assert reason_count(target, P.DropReason.STALE_POOL) == stale_before + 1
    # Worker 1 completes chunk 1: one contribution each, exact; worker 0 retransmitting chunk 1
    # then gets the stored result (its bit in chunk 1's copy is still set).
    out = send(target, job, 1, chunk(1, 1), expected=2)
    assert sorted(r.port for r in out) == [1, 2]
    for r in out:
        assert r.seq == 1 and r.count == 2
        np.testing.assert_array_equal(r.words(), v[1, 0] + v[1, 1])
    again = send(target, job, 0, chunk(0, 1, P.Flag.RETRANSMIT), expected=1)
    assert [(r.port, r.seq, r.count) for r in again] == [(1, 1, 2)]
    np.testing.assert_array_equal(again[0].words(), v[1, 0] + v[1, 1])
