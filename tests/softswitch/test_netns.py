"""AF_PACKET ports on veth pairs between two network namespaces (needs root and iproute2).

Topology (the switch runs in this process, in the host namespace)::

    ns h1: h1 eth (10.0.1.1) <-veth-> swp1 = port 1 [l3fwd] port 2 = swp2 <-veth-> h2 eth (10.0.2.2) :ns h2

Each host routes everything through a gateway whose MAC is a static neighbour entry, so no ARP is
needed (l3fwd answers none). h1 sends a UDP datagram to h2 with the kernel's own stack; h2 echoes
it back; both cross the switch. Also checked: a frame another program of the host transmits on a
switch interface is not taken as received, and an 802.1Q tag the kernel strips is restored.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from typing import NamedTuple

import pytest
from scapy.utils import rdpcap

from l3fwd_util import (H1_IP, H1_MAC, H2_IP, H2_MAC, ROUTER_MAC, UDP_TEST_PORT,
                        add_host_routes, compile_l3fwd, ipv4_frame)
from hina.softswitch.ports import PortError, parse_port_spec
from hina.softswitch.switch import Switch

pytestmark = pytest.mark.root

CMD_TIMEOUT_S = 20
PREFIX_LEN = 24
SO_NO_CHECK = 11     # Linux: send UDP without checksum. veth leaves checksums to "hardware"
                     # (CHECKSUM_PARTIAL), so a frame read from an AF_PACKET socket would carry an
                     # unfinished UDP checksum; 0 (no checksum) is valid for UDP over IPv4.
MESSAGE = b"hello through the switch"
HOST_SENT = b"sent by the host, not received"
VLAN_PAYLOAD = b"tagged frame for VLAN 10"
SETTLE_S = 0.5       # time the switch would need to pick up and forward a frame

ECHO_SERVER = textwrap.dedent(f"""
    import socket, sys
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, {SO_NO_CHECK}, 1)
    s.bind(("{H2_IP}", {UDP_TEST_PORT}))
    s.settimeout({CMD_TIMEOUT_S})
    print("ready", flush=True)
    data, peer = s.recvfrom(65535)
    s.sendto(data.upper(), peer)
    print(data.decode(), flush=True)
""")

CLIENT = textwrap.dedent(f"""
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, {SO_NO_CHECK}, 1)
    s.bind(("{H1_IP}", {UDP_TEST_PORT}))
    s.settimeout(5)
    s.sendto({MESSAGE!r}, ("{H2_IP}", {UDP_TEST_PORT}))
    print(s.recvfrom(65535)[0].decode(), flush=True)
""")


class Host(NamedTuple):
    namespace: str
    switch_side: str      # the veth end in the host namespace: a switch port
    host_side: str        # the veth end inside the namespace


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces and open raw sockets"
    if shutil.which("ip") is None:
        return "needs the 'ip' command (iproute2)"
    return None


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=CMD_TIMEOUT_S)


@pytest.fixture
def two_hosts():
    """Two namespaces, each linked to the host by a veth pair; yields their :class:`Host`."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    tag = os.getpid() % 100000
    hosts = [  # (namespace, host-side veth, namespace-side veth, ip, mac, gateway)
        (f"hina-h1-{tag}", f"sw{tag}p1", f"h{tag}p1", H1_IP, H1_MAC, "10.0.1.254"),
        (f"hina-h2-{tag}", f"sw{tag}p2", f"h{tag}p2", H2_IP, H2_MAC, "10.0.2.254"),
    ]
    try:
        try:
            ip("netns", "add", hosts[0][0])
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot create network namespaces here: {exc.stderr.strip()}")
        ip("netns", "add", hosts[1][0])
        for ns, outside, inside, addr, mac, gateway in hosts:
            ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            ip("link", "set", inside, "netns", ns)
            ip("link", "set", outside, "up")
            run = ("-n", ns)
            ip(*run, "link", "set", inside, "address", mac)
            ip(*run, "link", "set", "lo", "up")
            ip(*run, "link", "set", inside, "up")
            ip(*run, "addr", "add", f"{addr}/{PREFIX_LEN}", "dev", inside)
            ip(*run, "route", "add", "default", "via", gateway, "dev", inside)
            ip(*run, "neigh", "add", gateway, "lladdr", ROUTER_MAC, "dev", inside,
               "nud", "permanent")
        yield [Host(ns, outside, inside) for ns, outside, inside, *_ in hosts]
    finally:
        for ns, outside, *_ in hosts:
            ip("link", "del", outside, check=False)
            ip("netns", "del", ns, check=False)


def test_udp_round_trip_between_namespaces_through_af_packet_ports(two_hosts, tmp_path):
    (ns1, if1, _), (ns2, if2, _) = two_hosts
    switch = Switch(device_id=0)
    server = None
    try:
        switch.load(compile_l3fwd())
        add_host_routes(switch.dataplane)
        switch.add_port(parse_port_spec(f"1@{if1}", pcap_dir=str(tmp_path)))
        switch.add_port(parse_port_spec(f"2@{if2}", pcap_dir=str(tmp_path)))

        server = subprocess.Popen(["ip", "netns", "exec", ns2, sys.executable, "-c", ECHO_SERVER],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "ready", server.stderr.read()
        client = subprocess.run(["ip", "netns", "exec", ns1, sys.executable, "-c", CLIENT],
                                capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
        assert client.returncode == 0, client.stderr
        assert client.stdout.strip() == MESSAGE.decode().upper()
        assert server.stdout.readline().strip() == MESSAGE.decode()

        # A frame another socket of this host transmits on swp1 leaves by swp1 (PACKET_OUTGOING):
        # the switch must not take it for one received from h1.
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as raw:
            raw.bind((if1, 0))
            raw.send(ipv4_frame(payload=HOST_SENT))
        time.sleep(SETTLE_S)
    finally:
        if server is not None:
            server.kill()
            server.wait()
            server.stdout.close()
            server.stderr.close()
        switch.close()

    def payload_count(name: str, payload: bytes = MESSAGE) -> int:
        return sum(payload in bytes(p) for p in rdpcap(str(tmp_path / name)))

    assert payload_count(f"{if2}_out.pcap") == 1
    # the request the switch sent out of port 2 is not received back on port 2
    assert payload_count(f"{if2}_in.pcap") == 0
    assert payload_count(f"{if1}_in.pcap") == 1
    assert payload_count(f"{if1}_in.pcap", HOST_SENT) == 0
    assert payload_count(f"{if2}_out.pcap", HOST_SENT) == 0


def test_vlan_tag_reaches_the_switch_as_sent(two_hosts, tmp_path):
    """Linux moves a received 802.1Q tag into packet metadata; the port must put it back."""
    (ns1, if1, inside), _ = two_hosts
    tagged = (bytes.fromhex(ROUTER_MAC.replace(":", "") + H1_MAC.replace(":", ""))
              + bytes.fromhex("8100 000A 88B5".replace(" ", "")) + VLAN_PAYLOAD)
    sender = textwrap.dedent(f"""
        import socket
        with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as raw:
            raw.bind(({inside!r}, 0))
            raw.send({tagged!r})
    """)
    switch = Switch(device_id=0)
    try:
        switch.load(compile_l3fwd())
        port = parse_port_spec(f"1@{if1}", pcap_dir=str(tmp_path))
        switch.add_port(port)
        result = subprocess.run(["ip", "netns", "exec", ns1, sys.executable, "-c", sender],
                                capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
        assert result.returncode == 0, result.stderr
        deadline = time.monotonic() + SETTLE_S * 4
        while time.monotonic() < deadline and not any(
                VLAN_PAYLOAD in bytes(p) for p in rdpcap(str(tmp_path / f"{if1}_in.pcap"))):
            time.sleep(0.05)
    finally:
        switch.close()
    received = [bytes(p) for p in rdpcap(str(tmp_path / f"{if1}_in.pcap"))
                if VLAN_PAYLOAD in bytes(p)]
    assert received == [tagged]


def test_af_packet_port_needs_root_or_a_real_interface():
    if os.geteuid() == 0:
        with pytest.raises(PortError, match="no network interface"):
            parse_port_spec("1@hina-missing0")
    else:
        with pytest.raises(PortError, match="root|no network interface"):
            parse_port_spec("1@lo")
