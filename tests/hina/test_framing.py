"""hina.framing: Ethernet/IPv4/UDP frames of HINA messages with their UDP checksum (protocol v3),
checked against scapy's own checksums, and the worker's frame tunnel dropping corrupt frames."""
from __future__ import annotations

import socket

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from hina import framing as F
from hina import protocol as P
from hina.worker.link import FrameLink

endpoints = st.builds(F.Endpoint, st.integers(0, (1 << 48) - 1), st.integers(0, (1 << 32) - 1),
                      st.integers(1, (1 << 16) - 1))
messages = st.one_of(st.binary(max_size=700), st.integers(0, 700).map(bytes))


@settings(max_examples=400, deadline=None)
@given(endpoints, endpoints, messages)
def test_frames_are_what_scapy_builds_and_parse_back(src, dst, message):
    frame = F.build_frame(src, dst, message)
    again = Ether(frame)
    del again[IP].chksum, again[UDP].chksum          # scapy computes both anew
    assert bytes(again) == frame
    parsed = F.parse_frame(frame)
    assert (parsed.src, parsed.dst, parsed.message) == (src, dst, message)
    assert parsed.ip_ok and parsed.udp_length_ok and parsed.checksum_ok
    assert parsed.checksum != P.UDP_NO_CHECKSUM


@settings(max_examples=300, deadline=None)
@given(endpoints, endpoints, st.binary(min_size=1, max_size=600), st.data())
def test_every_bit_flip_in_the_checksummed_part_is_caught(src, dst, message, data):
    """One flipped bit anywhere from the IPv4 addresses to the end of the message: the frame
    parses as something else or its checksum is wrong (the Internet checksum catches every
    single-bit error)."""
    frame = bytearray(F.build_frame(src, dst, message))
    first = P.ETHERNET_BYTES + 12                   # the IPv4 source address
    bit = data.draw(st.integers(8 * first, 8 * len(frame) - 1))
    frame[bit // 8] ^= 0x80 >> (bit % 8)
    parsed = F.parse_frame(bytes(frame))
    assert parsed is None or not (parsed.checksum_ok and parsed.udp_length_ok)


def _message_whose_checksum_is_zero(src: F.Endpoint, dst: F.Endpoint) -> bytes:
    """A 2-byte message for which the computed checksum is 0 (sent as 0xFFFF)."""
    residue = F.udp_header_residue(src, dst, P.UDP_BYTES + 2)
    word = (0xFFFF - residue) % 0xFFFF                   # residue + word = 0 mod 0xFFFF
    return word.to_bytes(2, "big")


def test_a_computed_zero_is_sent_as_0xffff_and_accepted():
    src = F.Endpoint.make("02:00:00:00:01:00", "10.0.1.0", 40000)
    dst = F.Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", P.UDP_PORT_BASE)
    message = _message_whose_checksum_is_zero(src, dst)
    frame = F.build_frame(src, dst, message)
    assert frame[40:42] == b"\xff\xff"
    assert F.parse_frame(frame).checksum_ok
    ref = Ether(frame)
    del ref[UDP].chksum
    assert bytes(ref) == frame                        # scapy also sends 0xFFFF for it


def test_a_missing_checksum_is_not_ok():
    src = F.Endpoint.make("02:00:00:00:01:00", "10.0.1.0", 40000)
    dst = F.Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", P.UDP_PORT_BASE)
    frame = F.build_frame(src, dst, b"hina", checksum=P.UDP_NO_CHECKSUM)
    parsed = F.parse_frame(frame)
    assert parsed.message == b"hina" and parsed.checksum == 0 and not parsed.checksum_ok


def test_lengths_that_do_not_fit_are_reported():
    src = F.Endpoint(1, 2, 3)
    dst = F.Endpoint(4, 5, P.UDP_PORT_BASE)
    assert not F.parse_frame(F.build_frame(src, dst, b"abcd", udp_len=100)).udp_length_ok
    assert not F.parse_frame(F.build_frame(src, dst, b"abcd", ip_len=20)).udp_length_ok
    assert F.parse_frame(b"\x00" * 41) is None
    assert F.parse_frame(F.build_frame(src, dst, b"abcd")[:12] + b"\x86\xdd" + bytes(40)) is None


@pytest.fixture
def tunnel():
    """A FrameLink on loopback and a socket that plays the switch port it talks to."""
    switch_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    switch_sock.bind(("127.0.0.1", 0))
    me = F.Endpoint.make("02:00:00:00:01:00", "10.0.1.0", 40000)
    switch = F.Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", P.UDP_PORT_BASE)
    link = FrameLink(me, switch, ("127.0.0.1", 0), switch_sock.getsockname())
    try:
        yield link, switch_sock, me, switch
    finally:
        link.close()
        switch_sock.close()


def test_frame_link_sends_checksummed_frames_and_drops_corrupt_ones(tunnel):
    link, switch_sock, me, switch = tunnel
    link.send(b"\x31" + bytes(15) + b"payload!")
    frame, peer = switch_sock.recvfrom(1 << 16)
    assert frame == F.build_frame(me, switch, b"\x31" + bytes(15) + b"payload!")

    good = F.build_frame(switch, me, b"result")
    corrupt = bytearray(good)
    corrupt[-1] ^= 0x10                                   # a payload bit flipped past the FCS
    missing = F.build_frame(switch, me, b"result", checksum=P.UDP_NO_CHECKSUM)
    other = F.build_frame(switch, F.Endpoint(me.mac, me.ip, me.udp_port + 1), b"result")
    for f in (bytes(corrupt), missing, other, good):
        switch_sock.sendto(f, peer)
    assert link.recv(2.0) == b"result"
    assert (link.dropped_corrupt, link.dropped_foreign) == (2, 1)
    assert link.recv(0.05) is None


frames_in = st.lists(st.tuples(endpoints, st.binary(max_size=80), st.integers(0, 6),
                               st.integers(0, 1 << 20), st.integers(0, 3)),
                     min_size=1, max_size=24)


@settings(max_examples=150, deadline=None)
@given(endpoints, frames_in)
def test_batch_verdicts_are_parse_frame_verdicts(me, drawn):
    """intact_for (numpy columns, a whole batch) says what parse_frame says of each frame:
    for this destination, and intact."""
    sender = F.Endpoint(0x0200000000FE, 0x0A0000FE, P.UDP_PORT_BASE)
    rows = np.full((len(drawn), 256), 0xA5, dtype=np.uint8)     # stale bytes past each frame
    lengths = np.zeros(len(drawn), dtype=np.int64)
    want = []
    for i, (other, message, how, where, pad) in enumerate(drawn):
        frame = bytearray(F.build_frame(sender, me if how != 1 else other, message))
        if how == 2:                                   # a bit flipped anywhere
            frame[where % len(frame)] ^= 1 << (where % 8)
        elif how == 3:
            frame = frame[:where % (len(frame) + 1)]   # cut
        elif how == 4:                                 # no checksum
            frame[40:42] = b"\0\0"
        frame += bytes(pad)                            # Ethernet padding
        rows[i, :len(frame)] = np.frombuffer(bytes(frame), dtype=np.uint8)
        lengths[i] = len(frame)
        p = F.parse_frame(bytes(frame))
        to_me = p is not None and (p.dst.ip, p.dst.udp_port) == (me.ip, me.udp_port)
        want.append((to_me, to_me and p.ip_ok and p.udp_length_ok and p.checksum_ok))
    to_me, ok = F.intact_for(rows, lengths, me)
    assert list(zip(to_me.tolist(), ok.tolist())) == want


@settings(max_examples=100, deadline=None)
@given(endpoints, endpoints, st.integers(1, 20), st.integers(0, 300), st.data())
def test_batch_frames_are_the_single_frames(src, dst, n, half_length, data):
    messages = np.frombuffer(data.draw(st.binary(min_size=n * 2 * half_length,
                                                 max_size=n * 2 * half_length)),
                             dtype=np.uint8).reshape(n, 2 * half_length)
    frames = F.build_frames(src, dst, messages)
    assert [bytes(r) for r in frames] == [F.build_frame(src, dst, m.tobytes()) for m in messages]
