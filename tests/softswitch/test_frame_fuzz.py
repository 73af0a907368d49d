"""Malformed frames thrown at a running switch through UDP ports: it never stops forwarding.

Each example sends a burst of hostile frames (random bytes, truncated and bit-flipped IPv4, bad
header lengths, empty datagrams) into port 1, then one valid frame that must still come out of
port 2 intact. No delivery may raise (the port counts those as ``rx_errors``), and the receive
thread must stay alive.
"""
from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from l3fwd_util import (H2_MAC, add_host_routes, compile_l3fwd, forwarded, ipv4_frame,
                        udp_endpoint)
from hina.softswitch.ports import UdpPort
from hina.softswitch.switch import Switch

RECV_TIMEOUT_S = 5.0
ETH_HEADER = 14
IPV4_OFFSET_VERSION_IHL = ETH_HEADER
IPV4_OFFSET_TOTAL_LEN = ETH_HEADER + 2
MAX_BURST = 40
EXAMPLES = 25

VALID = ipv4_frame(payload=b"template payload")


def _truncated(length: int) -> bytes:
    return VALID[:length]


def _flipped(positions: list[int]) -> bytes:
    frame = bytearray(VALID)
    for pos in positions:
        frame[pos % len(frame)] ^= 0xFF
    return bytes(frame)


def _patched(offset: int, value: bytes) -> bytes:
    return VALID[:offset] + value + VALID[offset + len(value):]


hostile_frames = st.one_of(
    st.binary(max_size=128),
    st.integers(0, len(VALID)).map(_truncated),
    st.lists(st.integers(0, len(VALID) - 1), min_size=1, max_size=6).map(_flipped),
    st.integers(0, 0xFF).map(lambda b: _patched(IPV4_OFFSET_VERSION_IHL, bytes([b]))),
    st.integers(0, 0xFFFF).map(lambda n: _patched(IPV4_OFFSET_TOTAL_LEN, n.to_bytes(2, "big"))),
    st.binary(min_size=1, max_size=64).map(lambda tail: VALID + tail),
)


@pytest.fixture(scope="module")
def fuzz_target():
    """A running l3fwd switch on two UDP ports, and the hosts' sockets."""
    h1, h2 = udp_endpoint(RECV_TIMEOUT_S), udp_endpoint(RECV_TIMEOUT_S)
    switch = Switch(device_id=0)
    switch.load(compile_l3fwd())
    add_host_routes(switch.dataplane)
    p1 = UdpPort(1, ("127.0.0.1", 0))
    p2 = UdpPort(2, ("127.0.0.1", 0), peer=h2.getsockname())
    switch.add_port(p1)
    switch.add_port(p2)
    try:
        yield switch, p1, h1, h2
    finally:
        switch.close()
        h1.close()
        h2.close()


_markers = itertools.count()


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(burst=st.lists(hostile_frames, min_size=1, max_size=MAX_BURST))
def test_valid_traffic_still_flows_after_malformed_frames(fuzz_target, burst):
    switch, p1, h1, h2 = fuzz_target
    rx_before = p1.stats["rx"]
    for frame in burst:
        h1.sendto(frame, p1.local_address)
    marker = ipv4_frame(payload=b"marker %d" % next(_markers))
    h1.sendto(marker, p1.local_address)

    expected = forwarded(marker, H2_MAC)
    deadline = time.monotonic() + RECV_TIMEOUT_S
    while True:            # forwarded hostile frames may come first; the marker must follow
        assert time.monotonic() < deadline, "the valid frame was not forwarded"
        if h2.recvfrom(65535)[0] == expected:
            break
    assert p1.stats["rx"] - rx_before == len(burst) + 1
    assert p1.stats["rx_errors"] == 0, "processing a frame raised (see the log)"
    assert p1._thread.is_alive()
