"""The worker transport end to end through the embedded target running p4/hina.p4.

The switch runs in-process (softswitch Switch + compiled hina.p4) with one loopback UDP port per
worker; every worker is a thread with its own FrameLink, exactly as separate processes would be.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from hina import pipeline
from hina import protocol as P
from softswitch.compiler import compile_file
from softswitch.ports import PortLoss, UdpPort
from softswitch.switch import Switch
from worker.link import Endpoint, FrameLink
from worker.transport import JobParams, Transport, TransportTimeout, allreduce

ROOT = Path(__file__).resolve().parents[2]
WORDS = 64                       # small packets keep the embedded target quick in tests
SWITCH = Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", P.UDP_PORT_BASE)


@pytest.fixture(scope="module")
def program():
    return compile_file(str(ROOT / "p4" / "hina.p4"), defines={"HINA_WORDS": str(WORDS)})


def _worker(index: int) -> pipeline.WorkerAddress:
    return pipeline.WorkerAddress(port=index + 1, mac=0x020000000100 + index,
                                  ip=0x0A000100 + index, udp_port=40000 + index)


class LocalJob:
    """An embedded switch with one UDP port per worker and one job installed."""

    def __init__(self, program, n_workers: int, n_slots: int = 8, loss: float = 0.0,
                 lut_id: int = 1, table=pipeline.THC_DEFAULT_TABLE):
        self.switch = Switch()
        self.switch.load(program)
        dp = self.switch.dataplane
        self.spec = pipeline.JobSpec(job_id=3, workers=tuple(_worker(w) for w in range(n_workers)),
                                     n_slots=n_slots, reg_base=0, lut_id=lut_id, words=WORDS)
        for entry in pipeline.job_entries(self.spec) + pipeline.lut_entries(lut_id, table, words=WORDS):
            dp.table_insert(entry)
        group, replicas = pipeline.multicast_group(self.spec)
        dp.mcast_group_set(group, replicas)
        self.links = []
        for w, addr in enumerate(self.spec.workers):
            link_sock = FrameLink(Endpoint(addr.mac, addr.ip, addr.udp_port), SWITCH,
                                  ("127.0.0.1", 0), ("127.0.0.1", 0))
            port = UdpPort(addr.port, ("127.0.0.1", 0), peer=link_sock.sock.getsockname(),
                           loss=PortLoss(rx=loss, tx=loss, seed=w) if loss else None)
            link_sock.tunnel_switch = port.local_address
            self.switch.add_port(port)
            self.links.append(link_sock)
        self.params = JobParams(job_id=self.spec.job_id, n_workers=n_workers, n_slots=n_slots,
                                words=WORDS, thc_table=tuple(table))

    def transports(self, **kwargs):
        return [Transport(link, self.params, **kwargs) for link in self.links]

    def close(self):
        for link in self.links:
            link.close()
        self.switch.close()


def run_workers(fn, transports):
    """Run fn(worker_index, transport) on one thread per worker; return results or raise."""
    results, errors = [None] * len(transports), [None] * len(transports)

    def body(w):
        try:
            results[w] = fn(w, transports[w])
        except BaseException as exc:   # surfaced to the test below
            errors[w] = exc

    threads = [threading.Thread(target=body, args=(w,)) for w in range(len(transports))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results, errors


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
    from worker.codecs.thc import ThcCodec
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
