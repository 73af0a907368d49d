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
