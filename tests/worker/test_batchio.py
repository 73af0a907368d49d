"""Batched packet I/O (worker.batchio, the links' send_batch/recv_batch) and the transport on top
of it: many datagrams per system call, the same bytes as the per-message path, corrupt frames
dropped and counted, and the per-message fallback giving the same results."""
from __future__ import annotations

import socket

import numpy as np
import pytest

from hina import framing as F
from hina import protocol as P
from hina.testing.switchjob import LocalJob, run_workers
from hina.worker import batchio
from hina.worker.link import FrameLink, UdpLink

pytestmark = pytest.mark.skipif(batchio.available() is not None,
                                reason=f"batched I/O unavailable: {batchio.available()}")


@pytest.fixture
def pair():
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for s in (a, b):
        s.bind(("127.0.0.1", 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_many_datagrams_per_system_call(pair):
    a, b = pair
    sa, sb = batchio.BatchSocket(a, b.getsockname()), batchio.BatchSocket(b, a.getsockname())
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, size=(600, 100), dtype=np.uint8)
    lengths = rng.integers(1, 101, size=600)
    assert sa.send(frames, lengths) == 600
    assert sa.syscalls == 3                      # 256 + 256 + 88
    got = []
    while len(got) < 600:
        rows, n = sb.recv(1.0)
        assert len(n), "datagrams lost on loopback"
        got += [bytes(rows[i, :n[i]]) for i in range(len(n))]
    assert got == [bytes(frames[i, :lengths[i]]) for i in range(600)]
    assert sb.syscalls <= 600 // 16, sb.syscalls    # at most one call per 16 datagrams
    rows, n = sb.recv(0.05)                          # nothing more: empty, after the wait
    assert rows.shape[0] == 0 and n.size == 0


def test_a_refused_peer_loses_datagrams_but_never_raises(pair):
    a, b = pair
    gone = b.getsockname()
    b.close()                                        # the peer's port is closed: ECONNREFUSED
    sa = batchio.BatchSocket(a, gone)
    for _ in range(3):
        sa.send(np.zeros((4, 8), dtype=np.uint8), np.full(4, 8))
        sa.recv(0.01)


def _frame_link(batched: bool, peer_sock: socket.socket) -> FrameLink:
    me = F.Endpoint.make("02:00:00:00:01:00", "10.0.1.0", 40000)
    switch = F.Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", P.UDP_PORT_BASE)
    return FrameLink(me, switch, ("127.0.0.1", 0), peer_sock.getsockname(), batched=batched)


@pytest.mark.parametrize("batched", [True, False])
def test_frame_link_batches_are_the_per_message_frames(pair, batched):
    _, switch_sock = pair
    link = _frame_link(batched, switch_sock)
    try:
        assert (link.batch is not None) == batched
        rng = np.random.default_rng(2)
        messages = rng.integers(0, 256, size=(40, 272), dtype=np.uint8)
        link.send_batch(messages)
        got = [switch_sock.recv(4096) for _ in range(40)]
        assert got == [F.build_frame(link.me, link.switch, m.tobytes()) for m in messages]

        # back: intact results, one corrupt, one for another worker, one without a checksum
        peer = link.sock.getsockname()
        good = [F.build_frame(link.switch, link.me, m.tobytes()) for m in messages[:5]]
        bad = bytearray(good[0])
        bad[-1] ^= 0x01
        other = F.build_frame(link.switch, F.Endpoint(link.me.mac, link.me.ip, 40001),
                              messages[1].tobytes())
        none = F.build_frame(link.switch, link.me, messages[2].tobytes(),
                             checksum=P.UDP_NO_CHECKSUM)
        for f in [bytes(bad), other, none] + good:
            switch_sock.sendto(f, peer)
        received = []
        while len(received) < 5:
            rows, lengths = link.recv_batch(1.0)
            assert len(lengths), "results lost on loopback"
            received += [bytes(rows[i, :lengths[i]]) for i in range(len(lengths))]
        assert received == [m.tobytes() for m in messages[:5]]
        assert (link.dropped_corrupt, link.dropped_foreign) == (2, 1)
    finally:
        link.close()


def test_udp_link_batches(pair):
    _, peer = pair
    link = UdpLink(("127.0.0.1", 0), peer.getsockname())
    try:
        messages = np.arange(64 * 20, dtype=np.uint32).view(np.uint8).reshape(64, 80)
        link.send_batch(messages)
        assert [peer.recv(100) for _ in range(64)] == [m.tobytes() for m in messages]
        for m in messages[:3]:
            peer.sendto(m.tobytes(), link.sock.getsockname())
        rows, lengths = link.recv_batch(1.0)
        while len(lengths) < 3:
            more_rows, more = link.recv_batch(1.0)
            rows, lengths = np.concatenate([rows[:, :80], more_rows[:, :80]]), np.concatenate(
                [lengths, more])
        assert [bytes(rows[i, :lengths[i]]) for i in range(3)] == [m.tobytes() for m in messages[:3]]
    finally:
        link.close()


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_transport_gives_the_same_sums_batched_and_per_message(program, loss):
    """The same job through the embedded switch, once with batched links and once with the
    per-message fallback: bit-identical sums, loss or not."""
    rng = np.random.default_rng(3)
    data = [rng.integers(-(1 << 20), 1 << 20, size=20_000, dtype=np.int32) for _ in range(3)]
    want = np.sum(np.stack(data).astype(np.int64), axis=0).astype(np.int32)
    for batched in (True, False):
        job = LocalJob(program, 3, n_slots=16, loss=loss)
        try:
            for link in job.links:
                if not batched:
                    link.batch = None
            results, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data[w]),
                                          job.transports())
        finally:
            job.close()
        assert errors == [None] * 3
        for r in results:
            np.testing.assert_array_equal(r, want)
