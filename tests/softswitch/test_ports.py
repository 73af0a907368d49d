"""Ports: UDP end to end through a running switch, loss statistics, pcap capture, errors."""
from __future__ import annotations

import math
import socket
import threading
import time

import pytest
from scapy.utils import rdpcap

from l3fwd_util import (H2_MAC, add_host_routes, compile_l3fwd, forwarded, ipv4_frame,
                        udp_endpoint)
from hina.softswitch.ports import (InProcessPort, PortError, PortLoss, PortSpec, UdpPort,
                             parse_loss_spec, parse_port_spec, pcap_stem)
from hina.softswitch.switch import Switch

RECV_TIMEOUT_S = 2.0
LOSS_TRIALS = 4000
LOSS_SIGMAS = 5          # binomial tolerance: a correct implementation fails ~1 run in 10^6


@pytest.fixture
def switch():
    sw = Switch(device_id=0)
    sw.load(compile_l3fwd())
    add_host_routes(sw.dataplane)
    yield sw
    sw.close()


def wait_for(predicate, timeout=RECV_TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# -- UDP end to end ----------------------------------------------------------------------------
def test_udp_frame_is_forwarded_to_the_explicit_peer(switch):
    h1, h2 = udp_endpoint(), udp_endpoint()
    try:
        p1 = parse_port_spec("1@udp:127.0.0.1:0")
        p2 = parse_port_spec(f"2@udp:127.0.0.1:0@127.0.0.1:{h2.getsockname()[1]}")
        switch.add_port(p1)
        switch.add_port(p2)
        frame = ipv4_frame()
        h1.sendto(frame, p1.local_address)
        got, sender = h2.recvfrom(65535)
        assert got == forwarded(frame, H2_MAC)
        assert sender == p2.local_address       # the switch sends from port 2's own socket
    finally:
        h1.close()
        h2.close()


def test_udp_port_without_peer_locks_to_its_first_sender(switch):
    h1, h2, h3 = udp_endpoint(), udp_endpoint(), udp_endpoint()
    try:
        p1, p2 = UdpPort(1, ("127.0.0.1", 0)), UdpPort(2, ("127.0.0.1", 0))
        switch.add_port(p1)
        switch.add_port(p2)
        h1.sendto(ipv4_frame(), p1.local_address)       # port 2 has no peer yet: dropped
        assert wait_for(lambda: p2.stats["tx_no_peer"] == 1)
        h2.sendto(b"\x00" * 14, p2.local_address)       # not IPv4: l3fwd drops it, port learns
        assert wait_for(lambda: p2.peer == h2.getsockname())
        h3.sendto(b"\x00" * 14, p2.local_address)       # a second sender does not take over
        assert wait_for(lambda: p2.stats["rx_foreign_peer"] == 1)
        assert p2.peer == h2.getsockname() and p2.stats["rx"] == 1
        frame = ipv4_frame(payload=b"second")
        h1.sendto(frame, p1.local_address)
        assert h2.recvfrom(65535)[0] == forwarded(frame, H2_MAC)
    finally:
        h1.close()
        h2.close()
        h3.close()


def test_udp_port_takes_frames_from_its_peer_only(caplog):
    """A datagram from any address but the configured peer is dropped before the switch (and
    the port's capture) sees it, counted as ``rx_foreign_peer``; the first one of a port is
    logged at warning level, the next ones within the rate limit are not."""
    peer, stranger = udp_endpoint(), udp_endpoint()
    port = UdpPort(1, ("127.0.0.1", 0), peer=("localhost", peer.getsockname()[1]))
    delivered = []
    try:
        port.start(delivered.append)
        with caplog.at_level("WARNING", logger="softswitch.ports"):
            for i in range(3):
                stranger.sendto(b"forged %d" % i, port.local_address)
            assert wait_for(lambda: port.stats["rx_foreign_peer"] == 3)
        peer.sendto(b"honest", port.local_address)
        assert wait_for(lambda: delivered == [b"honest"])
        assert port.stats["rx"] == 1 and port.peer == peer.getsockname()
        warnings = [r for r in caplog.records if "not its peer" in r.getMessage()]
        assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
        assert str(stranger.getsockname()[1]) in warnings[0].getMessage()
    finally:
        port.close()
        peer.close()
        stranger.close()


def test_receive_thread_survives_a_failing_delivery():
    port = UdpPort(1, ("127.0.0.1", 0))
    delivered = []
    first = threading.Event()

    def deliver(frame):
        if not first.is_set():
            first.set()
            raise RuntimeError("boom")
        delivered.append(frame)

    sender = udp_endpoint()
    try:
        port.start(deliver)
        sender.sendto(b"bad", port.local_address)
        assert first.wait(RECV_TIMEOUT_S)
        sender.sendto(b"good", port.local_address)
        assert wait_for(lambda: delivered == [b"good"])
        assert port.stats["rx_errors"] == 1
    finally:
        port.close()
        sender.close()
    assert not port._thread.is_alive()


# -- loss --------------------------------------------------------------------------------------
def _binomial_bounds(n: int, p: float) -> range:
    sigma = math.sqrt(n * p * (1 - p))
    return range(math.floor(n * p - LOSS_SIGMAS * sigma), math.ceil(n * p + LOSS_SIGMAS * sigma))


def _count_delivered(loss: PortLoss, trials: int) -> tuple[int, list[bytes]]:
    port = InProcessPort(1, loss=loss)
    delivered = []
    port.start(delivered.append)
    for i in range(trials):
        port.inject(i.to_bytes(4, "big"))
    return len(delivered), delivered


@pytest.mark.parametrize("prob", [0.1, 0.5])
def test_receive_loss_rate_matches_probability(prob):
    kept, _ = _count_delivered(PortLoss(rx=prob, seed=1234), LOSS_TRIALS)
    assert LOSS_TRIALS - kept in _binomial_bounds(LOSS_TRIALS, prob)


def test_loss_is_reproducible_with_a_seed_and_differs_without():
    _, first = _count_delivered(PortLoss(rx=0.3, seed=7), 500)
    _, again = _count_delivered(PortLoss(rx=0.3, seed=7), 500)
    _, other = _count_delivered(PortLoss(rx=0.3, seed=8), 500)
    assert first == again
    assert first != other


def test_transmit_loss_drops_sent_frames_only():
    port = InProcessPort(1, loss=PortLoss(tx=0.25, seed=99))
    received = []
    port.start(received.append)
    for i in range(LOSS_TRIALS):
        port.inject(b"x")
        port.send(i.to_bytes(4, "big"))
    assert len(received) == LOSS_TRIALS
    sent = port.drain()
    assert port.stats["tx_dropped_loss"] == LOSS_TRIALS - len(sent)
    assert LOSS_TRIALS - len(sent) in _binomial_bounds(LOSS_TRIALS, 0.25)


@pytest.mark.parametrize("text, expected", [
    ("2:0.1", (2, 0.1, 0.1)), ("3:0.2:rx", (3, 0.2, 0.0)), ("4:1:tx", (4, 0.0, 1.0)),
])
def test_parse_loss_spec(text, expected):
    number, loss = parse_loss_spec(text, seed=1)
    assert (number, loss.rx, loss.tx) == expected


@pytest.mark.parametrize("text", ["2", "x:0.1", "2:abc", "2:1.5", "2:0.1:up", "2:0.1:rx:1"])
def test_parse_loss_spec_rejects(text):
    with pytest.raises(PortError, match="loss"):
        parse_loss_spec(text)


def test_port_loss_rejects_bad_probability():
    with pytest.raises(ValueError, match="between 0 and 1"):
        PortLoss(rx=-0.1)


# -- pcap --------------------------------------------------------------------------------------
def test_pcap_files_hold_both_directions_and_are_readable_by_scapy(switch, tmp_path):
    p1 = InProcessPort(1, pcap_dir=str(tmp_path))
    p2 = InProcessPort(2, pcap_dir=str(tmp_path))
    switch.add_port(p1)
    switch.add_port(p2)
    frames = [ipv4_frame(payload=bytes([i]) * 10) for i in range(3)]
    for frame in frames:
        p1.inject(frame)
    p1.inject(b"\x01" * 20)                           # not IPv4: captured in, dropped
    expected_out = [forwarded(f, H2_MAC) for f in frames]
    assert p2.drain() == expected_out
    switch.close()                                    # flush and close the captures

    assert [bytes(p) for p in rdpcap(str(tmp_path / "inproc1_in.pcap"))] == frames + [b"\x01" * 20]
    assert [bytes(p) for p in rdpcap(str(tmp_path / "inproc2_out.pcap"))] == expected_out
    assert len(rdpcap(str(tmp_path / "inproc1_out.pcap"))) == 0
    assert len(rdpcap(str(tmp_path / "inproc2_in.pcap"))) == 0


def test_pcap_stem_is_a_safe_file_name():
    assert pcap_stem("udp:127.0.0.1:9002") == "udp_127.0.0.1_9002"
    assert pcap_stem("s1-eth1") == "s1-eth1"


# -- specifications and errors ---------------------------------------------------------------
def test_port_spec_parses_every_kind():
    assert PortSpec.parse("1@s1-eth1").ifname == "s1-eth1"
    udp = PortSpec.parse("2@udp:127.0.0.1:9002")
    assert (udp.number, udp.kind, udp.local, udp.peer) == (2, "udp", ("127.0.0.1", 9002), None)
    assert PortSpec.parse("3@udp:127.0.0.1:9003@127.0.0.1:19003").peer == ("127.0.0.1", 19003)


@pytest.mark.parametrize("text, message", [
    ("eth0", "expected N@"), ("1@", "expected N@"), ("-1@eth0", "port number"),
    ("1@udp:127.0.0.1", "HOST:PORT"), ("1@udp:127.0.0.1:70000", "HOST:PORT"),
    ("1@udp:127.0.0.1:9000@127.0.0.1:0", "must not be 0"), ("1@a:b", "neither"),
])
def test_port_spec_errors_name_the_problem(text, message):
    with pytest.raises(PortError, match=message):
        PortSpec.parse(text)


def test_missing_interface_is_a_clear_error():
    with pytest.raises(PortError, match="no network interface named 'nosuchif0'"):
        parse_port_spec("1@nosuchif0")


def test_udp_address_in_use_is_a_clear_error():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        with pytest.raises(PortError, match="cannot bind UDP"):
            parse_port_spec(f"1@udp:127.0.0.1:{taken.getsockname()[1]}")


def test_in_process_port_recv_times_out_and_drains_in_order():
    port = InProcessPort(5)
    port.start(lambda frame: None)
    assert port.recv(timeout=0.01) is None
    for frame in (b"a", b"b", b"c"):
        port.send(frame)
    assert port.recv(timeout=0.1) == b"a"
    assert port.drain() == [b"b", b"c"]
    assert port.drain() == []


def test_raw_socket_without_privilege_is_a_clear_error(monkeypatch):
    real_socket = socket.socket

    def unprivileged(family=-1, *args, **kwargs):
        if family == socket.AF_PACKET:
            raise PermissionError(1, "Operation not permitted")
        return real_socket(family, *args, **kwargs)

    monkeypatch.setattr(socket, "socket", unprivileged)
    with pytest.raises(PortError, match="needs root"):
        parse_port_spec("1@lo")
