"""Batched packet I/O (worker.batchio, the links' send_batch/recv_batch) and the transport on top
of it: many datagrams per system call, the same bytes as the per-message path, corrupt frames
dropped and counted, and the per-message fallback giving the same results."""
from __future__ import annotations

import socket

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hina import framing as F
from hina import protocol as P
from hina.testing.switchjob import LocalJob, run_workers
from hina.worker import batchio
from hina.worker.link import FrameLink, UdpLink
from hina.worker.transport import CallStats, JobParams, Transport, _ResultMatcher

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


@pytest.mark.parametrize("refused", [False, True])
def test_runs_of_equal_datagrams_go_segmented_or_by_sendmmsg(pair, refused):
    """Whole rows of one width go out with UDP GSO (a call per 64), arriving as the same
    datagrams; where the kernel refuses GSO (here: a socket without UDP checksums,
    SO_NO_CHECK) the socket falls back to sendmmsg for good, losing nothing."""
    a, b = pair
    if refused:
        a.setsockopt(socket.SOL_SOCKET, 11, 1)              # SO_NO_CHECK
    sa, sb = batchio.BatchSocket(a, b.getsockname()), batchio.BatchSocket(b, a.getsockname())
    frames = np.random.default_rng(4).integers(0, 256, size=(200, 570), dtype=np.uint8)
    assert sa.send(frames, 570, range(10, 150)) == 140
    assert sa.send(frames, 570) == 200
    got = []
    while len(got) < 340:
        rows, n = sb.recv(1.0)
        assert len(n), "datagrams lost on loopback"
        got += [bytes(rows[i, :n[i]]) for i in range(len(n))]
    assert got == [f.tobytes() for f in frames[10:150]] + [f.tobytes() for f in frames]
    if refused:
        assert not sa.gso
    elif sa.gso:                                         # (a Linux before 4.18 has no GSO)
        assert sa.syscalls == 3 + 4                      # 64 + 64 + 12, 64 + 64 + 64 + 8
    with pytest.raises(IndexError):
        sa.send(frames, 570, range(150, 201))


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


# --------------------------------------------------------------------------------------------
# The fast paths of a batch (FrameLink's check of frames whose headers it has seen intact, the
# transport's matching of results whose header is the call's) answer as the general paths do
# --------------------------------------------------------------------------------------------
# faults that keep a frame's length and its headers up to the UDP checksum, and the others
_SAME_HEAD_FAULTS = ["good", "payload_bit", "checksum_bit", "no_checksum", "zero_for_ffff"]
_FRAME_FAULTS = _SAME_HEAD_FAULTS + ["other_port", "other_ip", "ip_header", "shorter",
                                     "longer_frame", "udp_length"]


def _faulty_frame(link: FrameLink, message: bytes, fault: str, rng) -> bytes:
    me, switch = link.me, link.switch
    if fault == "other_port":
        return F.build_frame(switch, F.Endpoint(me.mac, me.ip, me.udp_port + 1), message)
    if fault == "other_ip":
        return F.build_frame(switch, F.Endpoint(me.mac, me.ip + 1, me.udp_port), message)
    if fault == "no_checksum":
        return F.build_frame(switch, me, message, checksum=P.UDP_NO_CHECKSUM)
    if fault == "zero_for_ffff":       # a checksum of 0xFFFF sent as 0: the sum alone passes
        residue = (F.udp_header_residue(switch, me, P.UDP_BYTES + len(message))
                   + F.ones_sum(message)) % 0xFFFF
        last = (int.from_bytes(message[-2:], "big") - residue) % 0xFFFF
        message = message[:-2] + last.to_bytes(2, "big")
        assert F.build_frame(switch, me, message)[F.FRAME_HEADER_BYTES - 2:][:2] == b"\xff\xff"
        return F.build_frame(switch, me, message, checksum=P.UDP_NO_CHECKSUM)
    if fault == "shorter":
        return F.build_frame(switch, me, message[:-4])
    if fault == "udp_length":
        return F.build_frame(switch, me, message, udp_len=P.UDP_BYTES + len(message) - 2)
    frame = bytearray(F.build_frame(switch, me, message))
    if fault == "payload_bit":
        frame[int(rng.integers(F.FRAME_HEADER_BYTES, len(frame)))] ^= 1 << int(rng.integers(8))
    elif fault == "checksum_bit":
        frame[F.FRAME_HEADER_BYTES - 1 - int(rng.integers(2))] ^= 1 << int(rng.integers(8))
    elif fault == "ip_header":
        frame[int(rng.integers(14, 34))] ^= 1 << int(rng.integers(8))
    elif fault == "longer_frame":                     # trailing bytes past the UDP datagram
        frame += bytes(4)
    return bytes(frame)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_SAME_HEAD_FAULTS), min_size=1, max_size=40)
                | st.lists(st.sampled_from(_FRAME_FAULTS), min_size=1, max_size=40),
                min_size=1, max_size=2), st.integers(0, 2**32 - 1))
def test_frame_link_fast_check_says_what_the_per_frame_check_says(batches, seed):
    """After intact frames teach the link its results' headers, every batch (of any mix of
    intact and damaged frames: some that keep the headers, which the one-sum check takes,
    and others, which send the batch the general way) gives the messages, and counts the
    drops, that FrameLink.unwrap gives frame by frame."""
    rng = np.random.default_rng(seed)
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    link = _frame_link(True, a)
    reference = _frame_link(False, a)
    try:
        messages = [rng.integers(0, 256, 16 + 4 * 32, dtype=np.uint8).tobytes()
                    for _ in range(max(map(len, batches)))]
        peer = link.sock.getsockname()

        def drain() -> list[bytes]:
            got = []
            while True:                               # loopback queues a datagram at once
                rows, lengths = link.recv_batch(0.0)
                if not len(lengths):
                    return got
                got += [bytes(rows[i, :lengths[i]]) for i in range(len(lengths))]

        for m in messages[:F.SMALL_BATCH]:           # intact frames: their headers are learnt
            a.sendto(F.build_frame(link.switch, link.me, m), peer)
        assert drain() == messages[:F.SMALL_BATCH]
        assert link._known, "intact frames must teach the link their headers"
        for faults in batches:
            frames = [_faulty_frame(link, m, f, rng) for m, f in zip(messages, faults)]
            want = [m for m in map(reference.unwrap, frames) if m is not None]
            for f in frames:
                a.sendto(f, peer)
            assert drain() == want
            assert (link.dropped_foreign, link.dropped_corrupt) == (reference.dropped_foreign,
                                                                    reference.dropped_corrupt)
    finally:
        link.close()
        reference.close()
        a.close()


WORDS_UP = 32          # 32-bit words per SUM message in the matching test
_RESULT_FAULTS = ["good", "good", "version", "type", "op", "count", "job", "generation",
                  "seq_outside", "seq_other_lane", "length", "notice", "overflow", "reserved"]


# a batch: results of the call with one kind of fault among them, or any mix
_RESULT_BATCHES = (st.sampled_from(_RESULT_FAULTS).flatmap(lambda fault: st.lists(
    st.sampled_from(["good", "overflow", "reserved", fault]), min_size=1, max_size=40))
    | st.lists(st.sampled_from(_RESULT_FAULTS), min_size=1, max_size=40))


@settings(max_examples=60, deadline=None)
@given(_RESULT_BATCHES, st.booleans(), st.integers(0, 2**32 - 1), st.sampled_from([1, 7]))
@example(["good", "length"], False, 0, 7)
@example(["good"] * 5, False, 2**32 - 2, 1)           # sequence numbers wrap
@example(["good"] * 5, True, 2**32 - 2, 1)
@example(["good", "generation", "count"], False, 2**32 - 3, 1)
@example(["overflow", "seq_outside"], False, 5, 1)
@example(["good", "overflow", "good"], False, 5, 1)
@example(["good", "seq_other_lane", "reserved"], True, 2**32 - 1, 7)
def test_transport_fast_match_says_what_the_general_match_says(faults, lane, first, stride):
    """The transport's matching of a batch of results by one masked header compare
    (_ResultMatcher) gives the chunks, rows and counts of the general matching
    (Transport._match_batch) for any mix of results of the call and messages that are not,
    and says when the chunks are consecutive."""
    job = JobParams(job_id=5, n_workers=3, n_slots=8, generation=7)
    link = UdpLink(("127.0.0.1", 0), ("127.0.0.1", 9))
    try:
        t = Transport(link, job, first_seq=first)
        if lane:
            t = t.lanes(2)[1]                         # slots 4..7: chunk numbers of a lane
        n, op = 20, P.Op.SUM
        expected_len = P.HEADER_BYTES + 4 * WORDS_UP
        rows = np.zeros((len(faults), expected_len), dtype=np.uint8)
        lengths = np.full(len(faults), expected_len)
        for i, fault in enumerate(faults):
            k = (3 + i * stride) % n                  # stride 1: consecutive chunks
            seq = t.wire_seq(t.next_seq + k)
            fields = dict(op=op, count=job.n_workers, job_id=job.job_id, seq=seq,
                          generation=job.generation, flags=0, reserved=0)
            msg_type, version = P.MsgType.RESULT, P.VERSION
            if fault == "version":
                version = (P.VERSION + 1) % 16
            elif fault == "type":
                msg_type = P.MsgType.AGGREGATE
            elif fault in ("op", "count", "job", "generation"):
                key = {"op": "op", "count": "count", "job": "job_id",
                       "generation": "generation"}[fault]
                fields[key] = (fields[key] + 1) % (1 << 8)
            elif fault == "seq_outside":
                fields["seq"] = t.wire_seq(t.next_seq + n + k)
            elif fault == "seq_other_lane":
                fields["seq"] = (seq - 4) % (1 << 32)     # slots 0..3: another lane's
            elif fault == "overflow":
                fields["flags"] = int(P.Flag.OVERFLOW)
            elif fault == "reserved":
                fields["reserved"] = 0xBEEF
            elif fault == "length":
                lengths[i] = expected_len - 4
            if fault == "notice":
                msg_type, lengths[i] = P.MsgType.NOTICE, P.HEADER_BYTES
                fields.update(op=int(P.DropReason.STALE_GENERATION), count=0)
            header = P.pack_header(msg_type, version=version, **fields)
            rows[i, :P.HEADER_BYTES] = np.frombuffer(header, dtype=np.uint8)
            rows[i, P.HEADER_BYTES:] = i
        first_chunk = t.next_seq
        fast, general = CallStats(), CallStats()
        ks, got, run = _ResultMatcher(t, first_chunk, n, op, expected_len).match(rows, lengths,
                                                                                fast)
        if run is not None:                               # consecutive chunks, in order
            np.testing.assert_array_equal(ks, np.arange(n)[run])
        ks_ref, got_ref = t._match_batch(rows, lengths, first_chunk, n, op, expected_len,
                                         general)
        np.testing.assert_array_equal(ks, ks_ref)
        np.testing.assert_array_equal(got, got_ref)
        assert fast == general
    finally:
        link.close()
