"""How a worker's HINA messages reach the switch.

Two links with one interface (``send(message)``, ``recv(timeout) -> message | None``, ``close()``):

* :class:`UdpLink`: an ordinary UDP socket. The kernel builds Ethernet/IPv4/UDP; use it where
  the worker's interface is wired to the switch (Mininet hosts, BMv2 on veths, Tofino).
* :class:`FrameLink`: the worker builds the whole Ethernet/IPv4/UDP frame itself and tunnels it,
  one frame per datagram, to a loopback UDP port of the embedded target
  (``softswitch -i N@udp:127.0.0.1:PORT``). No root, no interfaces: the default for the demo and
  the tests. The worker still has a MAC, IPv4 address and UDP port: the switch admits and
  addresses it by them exactly as on a real network.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Optional, Union

from hina import protocol as P
from hina.protocol import ipv4_checksum

__all__ = ["Endpoint", "UdpLink", "FrameLink", "ipv4_checksum"]

Buffer = Union[bytes, bytearray, memoryview]

_ETH_IPV4 = 0x0800
_IP_PROTO_UDP = 17
_IP_VERSION_IHL = 0x45     # IPv4, 5 words of header: the switch parses no options
_IP_TTL = 64
_IP_DONT_FRAGMENT = 0x4000
_HEADERS = P.ETHERNET_BYTES + P.IPV4_BYTES + P.UDP_BYTES
_SOCKET_BUFFER = 8 << 20   # room for a full window of results arriving in a burst


def _ip_int(address: Union[str, int]) -> int:
    if isinstance(address, int):
        return address
    return struct.unpack("!I", socket.inet_aton(address))[0]


def _mac_int(address: Union[str, int]) -> int:
    if isinstance(address, int):
        return address
    parts = address.split(":")
    if len(parts) != 6:
        raise ValueError(f"MAC address {address!r}: expected six hex bytes separated by ':'")
    return int("".join(parts), 16)


@dataclass(frozen=True)
class Endpoint:
    """A station on the aggregation network: MAC, IPv4 address, UDP port."""
    mac: int
    ip: int
    udp_port: int

    @classmethod
    def make(cls, mac: Union[str, int], ip: Union[str, int], udp_port: int) -> "Endpoint":
        if not 0 < udp_port < 1 << 16:
            raise ValueError(f"udp_port={udp_port}: must be in [1, 65535]")
        return cls(_mac_int(mac), _ip_int(ip), udp_port)

    @property
    def ip_str(self) -> str:
        return socket.inet_ntoa(struct.pack("!I", self.ip))


class UdpLink:
    """HINA messages over a kernel UDP socket bound to ``local`` and sent to ``switch``.

    Args:
        local: (host, port) to bind; the port is the worker's UDP source port.
        switch: (host, port) of the switch (a HINA port).
    """

    def __init__(self, local: tuple[str, int], switch: tuple[str, int]):
        self.switch = switch
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        self.sock.bind(local)

    def send(self, message: Buffer) -> None:
        self.sock.sendto(message, self.switch)

    def recv(self, timeout: float) -> Optional[bytes]:
        self.sock.settimeout(max(timeout, 0.0))
        try:
            return self.sock.recv(1 << 16)
        except (socket.timeout, BlockingIOError):
            return None

    def close(self) -> None:
        self.sock.close()


class FrameLink:
    """HINA messages in Ethernet/IPv4/UDP frames tunnelled to an embedded-target UDP port.

    Args:
        me: this worker's MAC, IPv4 address and UDP port (what admission knows it by).
        switch: the switch's MAC, IPv4 address and HINA UDP port (the destination of requests).
        tunnel_local: (host, port) this worker's tunnel socket binds (the switch port's peer).
        tunnel_switch: (host, port) of the switch's UDP port.
    """

    def __init__(self, me: Endpoint, switch: Endpoint, tunnel_local: tuple[str, int],
                 tunnel_switch: tuple[str, int]):
        if not P.UDP_PORT_BASE <= switch.udp_port < P.UDP_PORT_BASE + P.UDP_PORT_COUNT:
            raise ValueError(f"switch.udp_port={switch.udp_port}: HINA ports are "
                             f"[{P.UDP_PORT_BASE}, {P.UDP_PORT_BASE + P.UDP_PORT_COUNT})")
        self.me, self.switch = me, switch
        self.tunnel_switch = tunnel_switch
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        self.sock.bind(tunnel_local)
        self._headers: dict[int, bytes] = {}     # message length -> Ethernet/IPv4/UDP bytes
        self.dropped_foreign = 0                 # frames that were not HINA for this worker

    def _frame_headers(self, length: int) -> bytes:
        """Headers for a message of ``length`` bytes; messages have few distinct lengths."""
        head = self._headers.get(length)
        if head is None:
            eth = struct.pack("!6s6sH", self.switch.mac.to_bytes(6, "big"),
                              self.me.mac.to_bytes(6, "big"), _ETH_IPV4)
            ip = bytearray(struct.pack("!BBHHHBBHII", _IP_VERSION_IHL, 0,
                                       P.IPV4_BYTES + P.UDP_BYTES + length, 0, _IP_DONT_FRAGMENT,
                                       _IP_TTL, _IP_PROTO_UDP, 0, self.me.ip, self.switch.ip))
            struct.pack_into("!H", ip, 10, ipv4_checksum(bytes(ip)))
            udp = struct.pack("!HHHH", self.me.udp_port, self.switch.udp_port,
                              P.UDP_BYTES + length, 0)
            head = self._headers[length] = eth + bytes(ip) + udp
        return head

    def frame(self, message: Buffer) -> bytes:
        """The Ethernet/IPv4/UDP frame that :meth:`send` tunnels for ``message``."""
        return self._frame_headers(len(message)) + bytes(message)

    def send_frame(self, frame: Buffer) -> None:
        """Tunnel a whole frame as it is (fault injection: :mod:`hina.faults`)."""
        self.sock.sendto(bytes(frame), self.tunnel_switch)

    def send(self, message: Buffer) -> None:
        self.sock.sendto(self._frame_headers(len(message)) + bytes(message), self.tunnel_switch)

    def recv(self, timeout: float) -> Optional[bytes]:
        """The next HINA message addressed to this worker, or None after ``timeout`` seconds."""
        self.sock.settimeout(max(timeout, 0.0))
        while True:
            try:
                frame = self.sock.recv(1 << 16)
            except (socket.timeout, BlockingIOError):
                return None
            message = self._unwrap(frame)
            if message is not None:
                return message
            self.dropped_foreign += 1
            self.sock.settimeout(0.0)       # look at what is queued, but do not wait again

    def _unwrap(self, frame: bytes) -> Optional[bytes]:
        if len(frame) < _HEADERS:
            return None
        ether_type, = struct.unpack_from("!H", frame, 12)
        if ether_type != _ETH_IPV4 or frame[14] != _IP_VERSION_IHL or frame[23] != _IP_PROTO_UDP:
            return None
        dst_ip, = struct.unpack_from("!I", frame, 30)
        dport, length = struct.unpack_from("!HH", frame, 36)
        if dst_ip != self.me.ip or dport != self.me.udp_port or length < P.UDP_BYTES:
            return None
        return frame[_HEADERS:_HEADERS + length - P.UDP_BYTES]

    def close(self) -> None:
        self.sock.close()
