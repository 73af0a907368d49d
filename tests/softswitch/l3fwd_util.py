"""Shared by the port, CLI, netns and fuzz tests: the l3fwd program, its routes and frames.

``programs/l3fwd.p4`` routes IPv4 by longest prefix (``MyIngress.ipv4_lpm``): the action
``MyIngress.ipv4_forward(dstAddr, port)`` rewrites the MACs, decrements the TTL and sends the frame
out of ``port``. Everything else is dropped.
"""
from __future__ import annotations

import functools
import ipaddress
import socket
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from hina.softswitch.api import ActionCall, Lpm, TableEntry

PROGRAM = Path(__file__).parent / "programs" / "l3fwd.p4"
TABLE = "MyIngress.ipv4_lpm"
FORWARD = "MyIngress.ipv4_forward"

ROUTER_MAC = "00:00:00:00:00:fe"     # the MAC hosts send to (the switch's, in their view)
H1_MAC, H1_IP = "00:00:00:00:01:01", "10.0.1.1"
H2_MAC, H2_IP = "00:00:00:00:02:02", "10.0.2.2"
IPV4_BITS = 32
UDP_TEST_PORT = 4321
DEFAULT_TTL = 64


def mac_to_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


@functools.lru_cache(maxsize=None)
def compile_l3fwd():
    """The compiled l3fwd program (compiled once per test session)."""
    from hina.softswitch.compiler import compile_file
    return compile_file(str(PROGRAM))


def route(prefix: str, mac: str, port: int) -> TableEntry:
    """An ``ipv4_lpm`` entry: ``prefix`` (``a.b.c.d/len``) goes to ``mac`` out of ``port``."""
    net = ipaddress.ip_network(prefix)
    return TableEntry(TABLE, (Lpm(int(net.network_address), net.prefixlen),),
                      ActionCall(FORWARD, (mac_to_int(mac), port)))


def add_host_routes(dataplane) -> None:
    """h1 (10.0.1.1) behind port 1, h2 (10.0.2.2) behind port 2."""
    dataplane.table_insert(route(f"{H1_IP}/{IPV4_BITS}", H1_MAC, 1))
    dataplane.table_insert(route(f"{H2_IP}/{IPV4_BITS}", H2_MAC, 2))


def ipv4_frame(dst: str = H2_IP, src: str = H1_IP, payload: bytes = b"hina",
               ttl: int = DEFAULT_TTL) -> bytes:
    """A UDP/IPv4 frame from h1 to the router, checksums filled."""
    return bytes(Ether(dst=ROUTER_MAC, src=H1_MAC) / IP(src=src, dst=dst, ttl=ttl)
                 / UDP(sport=UDP_TEST_PORT, dport=UDP_TEST_PORT) / payload)


def forwarded(frame: bytes, next_hop_mac: str) -> bytes:
    """What l3fwd makes of ``frame``: MACs rewritten, TTL - 1, IPv4 checksum recomputed."""
    pkt = Ether(frame)
    pkt[Ether].src, pkt[Ether].dst = pkt[Ether].dst, next_hop_mac
    pkt[IP].ttl -= 1
    del pkt[IP].chksum
    return bytes(pkt)


def free_tcp_port() -> int:
    """A TCP port that was free a moment ago (for servers that cannot report theirs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def udp_endpoint(timeout: float = 2.0) -> socket.socket:
    """A UDP socket on 127.0.0.1, any free port, with a receive timeout."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(timeout)
    return sock
