"""The UDP checksum of HINA v3 (p4/include/udp_checksum.p4), on both targets: a request whose
checksum is wrong or missing is dropped as BAD_CHECKSUM and changes nothing, every reply carries
a right one (``hina.testing.frames.send`` checks each), a computed 0 travels as 0xFFFF both ways, and
frames cut inside the HINA header are counted as MALFORMED, as are requests whose IPv4 header
checksum is wrong."""
from __future__ import annotations

import numpy as np
import pytest

from hina import framing as F
from hina import protocol as P
from bmv2_tests.conftest import TEST_WORDS
from hina.testing.frames import (SWITCH_IP, SWITCH_MAC, contribution, install, make_job,
                             reason_count, send)

R = P.DropReason
_CHECKSUM = F.FRAME_HEADER_BYTES - 2          # offset of the UDP checksum field


@pytest.fixture
def job(target):
    j = make_job(1, 2, n_slots=4)
    install(target, j)
    return j


def _with_checksum(frame: bytes, checksum: int) -> bytes:
    return frame[:_CHECKSUM] + checksum.to_bytes(2, "big") + frame[_CHECKSUM + 2:]


def _switch() -> F.Endpoint:
    return F.Endpoint.make(SWITCH_MAC, SWITCH_IP, P.UDP_PORT_BASE)


def _endpoint(addr) -> F.Endpoint:
    return F.Endpoint(addr.mac, addr.ip, addr.udp_port)


def _real_contributions_sum_exactly(target, job, good: bytes, a, b) -> None:
    """Worker 0's real contribution ``good`` (of ``a``), then worker 1's of ``b``: both workers
    get ``a + b`` counted twice, with a right checksum, so nothing dropped before touched the
    slot."""
    send(target, job, 0, good)
    replies = send(target, job, 1, contribution(job, 1, P.Op.SUM, b), expected=2)
    assert len(replies) == 2
    for r in replies:
        assert r.count == 2 and r.checksum_ok
        np.testing.assert_array_equal(r.words(), a + b)


@pytest.mark.parametrize("damage", ["wrong", "missing", "payload_bit", "seq_bit"])
def test_bad_checksums_are_dropped_and_change_nothing(target, job, damage):
    a, b = np.arange(TEST_WORDS), np.full(TEST_WORDS, 5)
    good = contribution(job, 0, P.Op.SUM, a)
    right = int.from_bytes(good[_CHECKSUM:_CHECKSUM + 2], "big")
    bad = bytearray({
        "wrong": lambda: _with_checksum(good, right ^ 0x0100),
        "missing": lambda: _with_checksum(good, P.UDP_NO_CHECKSUM),
        "payload_bit": lambda: good,
        "seq_bit": lambda: good,
    }[damage]())
    if damage == "payload_bit":
        bad[-3] ^= 0x04                        # a lane bit flipped after the sender's checksum
    elif damage == "seq_bit":
        bad[F.FRAME_HEADER_BYTES + 11] ^= 0x01  # seq 0 -> 1: another chunk, if it were believed
    assert send(target, job, 0, bytes(bad)) == []
    assert reason_count(target, R.BAD_CHECKSUM) == 1
    assert reason_count(target, R.DUPLICATE) == 0
    # The slot never saw the corrupt copy: worker 0's real contribution still counts once.
    _real_contributions_sum_exactly(target, job, good, a, b)


def test_a_request_whose_checksum_is_zero_travels_as_ffff(target, job):
    """The sender writes 0xFFFF for a computed 0 (RFC 768); the switch takes it."""
    values = np.zeros(TEST_WORDS, dtype=np.int64)
    frame = contribution(job, 0, P.Op.SUM, values)
    w0 = job.workers[0]
    # choose the last lane so that the whole datagram sums to 0 (mod 0xFFFF) without it
    message = frame[F.FRAME_HEADER_BYTES:]
    residue = (F.udp_header_residue(_endpoint(w0), _switch(), len(message) + P.UDP_BYTES)
               + F.ones_sum(message)) % 0xFFFF
    values[-1] = (0xFFFF - residue) % 0xFFFF
    frame = contribution(job, 0, P.Op.SUM, values)
    assert frame[_CHECKSUM:_CHECKSUM + 2] == b"\xff\xff"
    send(target, job, 0, frame)
    replies = send(target, job, 1, contribution(job, 1, P.Op.SUM, np.ones(TEST_WORDS)),
                   expected=2)
    assert len(replies) == 2 and reason_count(target, R.BAD_CHECKSUM) == 0
    np.testing.assert_array_equal(replies[0].words(), values + 1)


def test_a_reply_whose_checksum_is_zero_is_sent_as_ffff(target, job):
    """The switch writes 0xFFFF, not 0 ("no checksum"), when the reply's sum comes to 0."""
    w0 = job.workers[0]
    values = [np.zeros(TEST_WORDS, dtype=np.int64), np.zeros(TEST_WORDS, dtype=np.int64)]
    result = P.pack_header(P.MsgType.RESULT, P.Op.SUM, count=2, job_id=job.job_id,
                           generation=job.generation)
    message = result + np.zeros(TEST_WORDS, dtype=">i4").tobytes()
    residue = (F.udp_header_residue(_switch(), _endpoint(w0), len(message) + P.UDP_BYTES)
               + F.ones_sum(message)) % 0xFFFF
    values[1][-1] = (0xFFFF - residue) % 0xFFFF           # worker 0's result now sums to 0
    send(target, job, 0, contribution(job, 0, P.Op.SUM, values[0]))
    replies = send(target, job, 1, contribution(job, 1, P.Op.SUM, values[1]), expected=2)
    to_w0 = [r for r in replies if r.dst_ip == w0.ip]
    assert len(to_w0) == 1 and to_w0[0].checksum_ok and to_w0[0].udp_checksum == 0xFFFF
    np.testing.assert_array_equal(to_w0[0].words(), values[1])


@pytest.mark.parametrize("keep", [0, 1, P.HEADER_BYTES - 1])
def test_frames_cut_inside_the_hina_header_are_counted(target, job, keep):
    good = contribution(job, 0, P.Op.SUM, np.ones(TEST_WORDS))
    message = good[F.FRAME_HEADER_BYTES:F.FRAME_HEADER_BYTES + keep]
    w0 = job.workers[0]
    cut = F.build_frame(_endpoint(w0), _switch(), message)
    assert target.send(w0.port, cut) == []
    assert reason_count(target, R.MALFORMED) == 1


_ETH = 14                                      # the IPv4 header's offset in a frame


@pytest.mark.parametrize("damage", ["checksum", "ttl", "identification"])
def test_a_wrong_ipv4_header_checksum_is_malformed_and_changes_nothing(target, job, damage):
    """An IPv4 header changed after its sender's checksum (or a wrong checksum field) is dropped
    as MALFORMED, before the UDP checksum is looked at, on both programs; the UDP checksum would
    not see a changed TTL or identification. The slot is untouched: the real contributions
    then sum exactly."""
    a, b = np.arange(TEST_WORDS), np.full(TEST_WORDS, 3)
    good = contribution(job, 0, P.Op.SUM, a)
    offset, flip = {"checksum": (_ETH + 10, 0x20), "ttl": (_ETH + 8, 0x01),
                    "identification": (_ETH + 4, 0x80)}[damage]
    bad = bytearray(good)
    bad[offset] ^= flip
    assert send(target, job, 0, bytes(bad)) == []
    assert reason_count(target, R.MALFORMED) == 1
    assert reason_count(target, R.BAD_CHECKSUM) == 0
    _real_contributions_sum_exactly(target, job, good, a, b)


def test_a_later_ip_fragment_is_not_taken_for_a_message(target, job):
    """A frame whose IPv4 fragment offset is not 0 (a later fragment: no UDP header of its own)
    is not parsed as UDP or HINA by either program, even with a HINA message where a first
    fragment's would be and right checksums: nothing answers, no drop reason counts it (it is
    not HINA), and the slot is untouched."""
    a, b = np.arange(TEST_WORDS), np.full(TEST_WORDS, 9)
    good = contribution(job, 0, P.Op.SUM, a)
    later = bytearray(contribution(job, 0, P.Op.SUM, a + 1000))   # summed, if it were taken
    later[_ETH + 6:_ETH + 8] = (185).to_bytes(2, "big")    # flags 0, offset 185 x 8 bytes
    later[_ETH + 10:_ETH + 12] = b"\0\0"
    later[_ETH + 10:_ETH + 12] = P.ipv4_checksum(bytes(later[_ETH:_ETH + 20])).to_bytes(2, "big")
    before = {r: reason_count(target, r) for r in R}
    assert send(target, job, 0, bytes(later)) == []
    assert {r: reason_count(target, r) for r in R} == before
    _real_contributions_sum_exactly(target, job, good, a, b)


#: Bits flipped by test_a_flipped_bit_of_a_contribution_is_never_summed: a seeded sample of
#: the UDP length and checksum, the HINA header and the payload (the UDP ports are left alone:
#: a flipped port sends a frame past the HINA parser, not to a drop reason).
_FLIP_BITS = 24


def test_a_flipped_bit_of_a_contribution_is_never_summed(target, job):
    """Every frame with one bit flipped after its sender's checksum (the corruption an FCS does
    not see) is dropped by some reason (BAD_CHECKSUM, or MALFORMED where the flip breaks the
    shape first), the slot is untouched, and the real contributions then sum exactly: on the
    TNA program too, whose parser verifies the checksum of the whole message."""
    a, b = np.arange(TEST_WORDS), np.full(TEST_WORDS, 7)
    good = contribution(job, 0, P.Op.SUM, a)
    start = F.FRAME_HEADER_BYTES - 4                       # the UDP length field
    rng = np.random.default_rng(11)
    bits = sorted(rng.choice((len(good) - start) * 8, size=_FLIP_BITS, replace=False))
    before = {r: reason_count(target, r) for r in (R.BAD_CHECKSUM, R.MALFORMED)}
    for bit in bits:
        bad = bytearray(good)
        bad[start + bit // 8] ^= 0x80 >> (bit % 8)
        assert send(target, job, 0, bytes(bad)) == [], bit
    counted = {r: reason_count(target, r) - n for r, n in before.items()}
    assert sum(counted.values()) == _FLIP_BITS, counted
    assert counted[R.BAD_CHECKSUM] > 0, counted
    _real_contributions_sum_exactly(target, job, good, a, b)
