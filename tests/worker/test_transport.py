"""The worker transport end to end through the embedded target running p4/hina.p4.

The switch runs in-process (``switchjob.LocalJob``: softswitch Switch + compiled hina.p4) with one
loopback UDP port per worker; every worker is a thread with its own FrameLink.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from hina import pipeline
from hina import protocol as P
from hina.testing.switchjob import WORDS, LocalJob, run_workers
from hina.worker.collective import allreduce
from hina.worker.transport import OverflowFlagged, TransportTimeout


@pytest.mark.parametrize("n_workers", [2, 4, 8])
def test_sum_is_exact(program, n_workers):
    job = LocalJob(program, n_workers)
    rng = np.random.default_rng(n_workers)
    data = [rng.integers(-2**20, 2**20, size=5 * WORDS + 17, dtype=np.int32)
            for _ in range(n_workers)]
    try:
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data[w]), job.transports())
    finally:
        job.close()
    assert errors == [None] * n_workers
    expected = np.sum(np.stack(data).astype(np.int64), axis=0)
    for r in results:
        np.testing.assert_array_equal(r, expected)


def test_max_or_and_lut_sum(program):
    n = 3
    job = LocalJob(program, n)
    rng = np.random.default_rng(7)
    u = [rng.integers(0, 2**32, size=WORDS + 3, dtype=np.uint32) for _ in range(n)]
    idx = [rng.integers(0, 16, size=2 * WORDS + 10, dtype=np.uint8) for _ in range(n)]
    packed = [((i[0::2] << 4) | i[1::2]).astype(np.uint8) for i in idx]

    def body(w, t):
        return t.reduce(P.Op.MAX, u[w]), t.reduce(P.Op.OR, u[w]), t.reduce(P.Op.LUT_SUM, packed[w])

    try:
        results, errors = run_workers(body, job.transports())
    finally:
        job.close()
    assert errors == [None] * n
    table = np.array(pipeline.THC_DEFAULT_TABLE)
    lut_sum = sum(table[i] for i in idx)
    for mx, orr, ls in results:
        np.testing.assert_array_equal(mx, np.max(np.stack(u), axis=0))
        np.testing.assert_array_equal(orr, np.bitwise_or.reduce(np.stack(u), axis=0))
        np.testing.assert_array_equal(ls, lut_sum)


def test_loss_gives_identical_results(program):
    n = 4
    job = LocalJob(program, n, n_slots=4, loss=0.05)
    rng = np.random.default_rng(11)
    data = [rng.integers(-1000, 1000, size=12 * WORDS, dtype=np.int32) for _ in range(n)]
    try:
        transports = job.transports(min_rto=0.05)
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data[w]), transports)
    finally:
        job.close()
    assert errors == [None] * n
    expected = np.sum(np.stack(data), axis=0)
    for r in results:
        np.testing.assert_array_equal(r, expected)
    assert sum(t.total.retransmissions for t in transports) > 0, "5% loss must cost retransmissions"


def test_missing_worker_fails_fast_with_clear_error(program):
    job = LocalJob(program, 3)
    transports = job.transports(min_rto=0.02, max_rto=0.2, give_up_s=1.0)
    data = np.arange(WORDS, dtype=np.int32)
    started = time.monotonic()
    try:
        # worker 2 never contributes
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data), transports[:2])
    finally:
        job.close()
    assert all(isinstance(e, TransportTimeout) for e in errors)
    assert "stopped contributing" in str(errors[0])
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("batched", [True, False])
def test_an_overflowed_sum_raises_on_every_worker(program, batched):
    """A SUM whose lane overflows int32 in the switch comes back flagged, and the call fails
    with OverflowFlagged naming the chunk, on the batched path (whose in-order results take the
    fast matching) as on the per-message one; chunks before it come back fine."""
    n = 2
    job = LocalJob(program, n)
    if not batched:
        for link in job.links:
            link.batch = None
    data = np.zeros(40 * WORDS, dtype=np.int32)
    data[30 * WORDS + 5] = 2**31 - 1                   # chunk 30 overflows: (2**31 - 1) * 2
    try:
        _, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data), job.transports())
    finally:
        job.close()
    assert all(isinstance(e, OverflowFlagged) for e in errors), errors
    assert "seq=30" in str(errors[0])


class _SlowPath:
    """A worker's link whose results arrive ``delay`` seconds late (a slow link or a slow
    switch with a queue in front of it): a thread holds each received frame until it is due."""

    def __init__(self, inner, delay: float):
        import collections
        import threading
        self.inner, self.delay = inner, delay
        self.held = collections.deque()
        self.ready = threading.Condition()
        self.stopping = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while not self.stopping:
            message = self.inner.recv(0.02)
            if message is not None:
                with self.ready:
                    self.held.append((time.monotonic() + self.delay, message))
                    self.ready.notify()

    def send(self, message: bytes) -> None:
        self.inner.send(message)

    def recv(self, timeout: float):
        end = time.monotonic() + timeout
        with self.ready:
            while True:
                now = time.monotonic()
                if self.held and self.held[0][0] <= now:
                    return self.held.popleft()[1]
                due = self.held[0][0] if self.held else end
                if now >= end:
                    return None
                self.ready.wait(min(due, end) - now)

    def close(self) -> None:
        self.stopping = True
        self.reader.join()
        self.inner.close()


def test_retransmission_timer_follows_a_round_trip_longer_than_max_rto():
    """RFC 6298's timer with two additions: max_rto caps the backoff, not the measured round
    trip (up to give_up_s / 2); an expiry backs off the timer of later chunks too, up to the
    ceiling before the first sample and up to max(max_rto, 2 srtt) after it."""
    from hina.worker.transport_types import _Timers
    timers = _Timers(min_rto=0.05, max_rto=0.2, initial_rto=0.25, ceiling=5.0)
    assert timers.rto == 0.2
    for _ in range(3):
        timers.expired()                     # nothing measured yet: doubles to the ceiling
    assert timers.rto == pytest.approx(1.6)
    timers.sample(0.6)
    assert timers.rto == pytest.approx(0.6 + 4 * 0.3)       # not held at max_rto
    assert float(timers.backoff(1)) == pytest.approx(timers.rto)
    assert float(timers.backoff(7)) == pytest.approx(timers.rto)   # capped at max(max_rto, rto)
    for _ in range(30):
        timers.sample(100.0)
    assert timers.rto == 5.0                                 # the ceiling
    fast = _Timers(min_rto=0.05, max_rto=0.2, initial_rto=0.25, ceiling=5.0)
    for _ in range(20):
        fast.sample(0.01)
    assert fast.rto == 0.05
    assert list(fast.backoff(np.array([1, 2, 3, 8]))) == pytest.approx([0.05, 0.1, 0.2, 0.2])
    for _ in range(10):
        fast.expired()                       # a switch gone quiet is still probed every 0.2 s
    assert fast.rto == 0.2


def test_a_path_slower_than_max_rto_is_not_resent_chunk_after_chunk(program):
    """Results 0.4 s late with max_rto 0.1 s: the timer learns the round trip instead of
    resending every chunk that is still on its way (and the resends queueing behind them)."""
    n, chunks = 2, 24
    job = LocalJob(program, n, n_slots=4)
    job.links = [_SlowPath(link, 0.4) for link in job.links]
    data = [np.arange(chunks * WORDS, dtype=np.int32) * (w + 1) for w in range(n)]
    try:
        transports = job.transports(min_rto=0.02, max_rto=0.1, initial_rto=0.1, give_up_s=10.0)
        results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data[w]), transports)
    finally:
        job.close()
    assert errors == [None] * n
    for r in results:
        np.testing.assert_array_equal(r, data[0] + data[1])
    resent = [t.total.retransmissions for t in transports]
    # the first windows go out before the timer has backed off past the round trip (0.1, 0.2,
    # 0.4 s: 12 resends measured); after the first clean sample, none. A timer held at max_rto
    # resends every chunk again and again (82 and 77 measured before the change).
    assert max(resent) <= 16, resent


def test_allreduce_thc_mean_within_bound(program):
    from hina.worker.codecs.thc import ThcCodec
    n = 4
    codecs = [ThcCodec(n_workers=n, rank=w) for w in range(n)]
    job = LocalJob(program, n, n_slots=16, table=codecs[0].table)
    torch.manual_seed(0)
    grads = [torch.randn(3000) for _ in range(n)]
    try:
        results, errors = run_workers(lambda w, t: allreduce(grads[w], codecs[w], t),
                                      job.transports())
    finally:
        job.close()
    assert errors == [None] * n
    mean = torch.stack(grads).mean(0)
    for r in results:
        assert torch.equal(r, results[0])           # every worker decodes the same sums
        nmse = float(((r - mean) ** 2).sum() / (mean ** 2).sum())
        assert nmse < 0.5, nmse


def test_workers_speak_the_tofino1_builds_32_words():
    """32 words per packet (the TNA program's Tofino 1 build) besides the v1model program's
    64/128/256: the packetizer chunks by it (a THC result: 64 sums per packet) and a job takes
    it; any other count is refused saying which work."""
    from hina.worker.packetizer import build_aggregates, layout_for
    from hina.worker.transport import JobParams
    layout = layout_for(P.Op.LUT_SUM, 100, P.TNA_TOFINO1_WORDS)
    assert (layout.chunks, layout.per_chunk, layout.result_per_chunk) == (4, 32, 64)
    assert (layout.up_bytes, layout.down_bytes) == (32, 128)
    msgs = build_aggregates(layout, np.zeros(100, np.uint8), job_id=1, first_seq=0, n_slots=4)
    assert msgs.shape == (4, P.HEADER_BYTES + 32)
    assert JobParams(job_id=1, n_workers=2, n_slots=4, words=32).words == 32
    for bad in (16, 48):
        with pytest.raises(ValueError, match="workers speak 32, 64, 128 or 256 words per packet"):
            layout_for(P.Op.SUM, 100, bad)
        with pytest.raises(ValueError, match="TNA program's Tofino 1 build, TNA_LANES=16"):
            JobParams(job_id=1, n_workers=2, n_slots=4, words=bad)


def test_lanes_number_their_chunks_on_their_own_slots_alternating_pools():
    """A lane's chunk k goes to one of its own slots; each slot's uses get increasing sequence
    numbers whose pool copies alternate (the protocol's rule); results of other lanes' slots are
    no chunk of the lane's calls."""
    from hina.worker.transport import JobParams, Transport
    whole = Transport(None, JobParams(job_id=1, n_workers=2, n_slots=8))
    lanes = whole.lanes(2)
    assert [t.slots for t in lanes] == [range(0, 4), range(4, 8)] and lanes[0].window == 4
    for lane in lanes:
        seqs = lane._wire_seqs(0, 40)
        assert [lane.wire_seq(k) for k in range(40)] == seqs.tolist()
        for slot in lane.slots:
            uses = seqs[seqs % 8 == slot]
            assert len(uses) == 10 and np.all(np.diff(uses) == 8), uses
            pools = [P.slot_and_pool(int(s), 8)[1] for s in uses]
            assert pools == [k % 2 for k in range(10)]
        assert np.all(np.isin(seqs % 8, list(lane.slots)))
        np.testing.assert_array_equal(lane._chunk_index(seqs, 0), np.arange(40))
        other = lanes[1 - lanes.index(lane)]
        assert np.all(lane._chunk_index(other._wire_seqs(0, 40), 0) >= lane.seq_space)
    with pytest.raises(ValueError, match="must divide"):
        whole.lanes(3)
    with pytest.raises(ValueError, match="power of two"):
        Transport(None, JobParams(job_id=1, n_workers=2, n_slots=12)).lanes(2)


def test_lanes_carry_calls_at_once_through_one_link_under_loss(program):
    """Two lanes per worker, each on a thread of its own over the worker's one link: a dense SUM
    on one and a block-sparse SUM on the other at the same time, 5 % loss: both exact."""
    n = 2
    job = LocalJob(program, n, n_slots=8, loss=0.05)
    rng = np.random.default_rng(5)
    dense = [rng.integers(-1000, 1000, size=9 * WORDS, dtype=np.int32) for _ in range(n)]
    sparse = [np.zeros(12 * WORDS, dtype=np.int32) for _ in range(n)]
    for w in range(n):
        sparse[w][w * WORDS:(w + 3) * WORDS] = rng.integers(-9, 9, size=3 * WORDS)
    lanes = [t.lanes(2) for t in job.transports(min_rto=0.05)]

    def body(i, t):
        w, lane = divmod(i, 2)
        if lane == 0:
            return t.reduce(P.Op.SUM, dense[w])
        return t.reduce(P.Op.BLOCK_SUM, sparse[w])

    try:
        results, errors = run_workers(body, [t for pair in lanes for t in pair])
    finally:
        job.close()
    assert errors == [None] * (2 * n)
    for w in range(n):
        np.testing.assert_array_equal(results[2 * w], dense[0] + dense[1])
        np.testing.assert_array_equal(results[2 * w + 1], sparse[0] + sparse[1])
    assert sum(t.total.retransmissions for pair in lanes for t in pair) > 0
