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
from hina.worker.transport import TransportTimeout, allreduce


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
