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
from typing import Optional, Union

from hina import protocol as P
from hina.framing import (FRAME_HEADER_BYTES, Endpoint, build_frame, checksum_of, ones_sum,
                          parse_frame, udp_header_residue)

__all__ = ["Endpoint", "UdpLink", "FrameLink"]

Buffer = Union[bytes, bytearray, memoryview]

_SOCKET_BUFFER = 8 << 20   # room for a full window of results arriving in a burst


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

    Frames are built and checked as :mod:`hina.framing` says: every frame sent carries its UDP
    checksum, and a received frame whose UDP checksum is missing or wrong is dropped (counted in
    ``dropped_corrupt``) as the kernel drops it on a real interface, so that a result corrupted
    on its way is retransmitted, never decoded.

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
        # message length -> (headers up to the UDP checksum, ones' sum of pseudo and UDP header)
        self._headers: dict[int, tuple[bytes, int]] = {}
        self.dropped_foreign = 0                 # frames that were not HINA for this worker
        self.dropped_corrupt = 0                 # frames for this worker with a bad checksum

    def _frame_headers(self, length: int) -> tuple[bytes, int]:
        """Headers for a message of ``length`` bytes (messages have few distinct lengths) up to
        the UDP checksum field, and the ones' sum of the pseudo-header and UDP header."""
        cached = self._headers.get(length)
        if cached is None:
            head = build_frame(self.me, self.switch, bytes(length))[:FRAME_HEADER_BYTES - 2]
            residue = udp_header_residue(self.me, self.switch, P.UDP_BYTES + length)
            cached = self._headers[length] = (head, residue)
        return cached

    def frame(self, message: Buffer) -> bytes:
        """The Ethernet/IPv4/UDP frame that :meth:`send` tunnels for ``message``."""
        head, residue = self._frame_headers(len(message))
        return head + struct.pack("!H", checksum_of(residue + ones_sum(message))) + bytes(message)

    def send_frame(self, frame: Buffer) -> None:
        """Tunnel a whole frame as it is (fault injection: :mod:`hina.faults`)."""
        self.sock.sendto(bytes(frame), self.tunnel_switch)

    def send(self, message: Buffer) -> None:
        self.sock.sendto(self.frame(message), self.tunnel_switch)

    def recv(self, timeout: float) -> Optional[bytes]:
        """The next HINA message addressed to this worker, or None after ``timeout`` seconds."""
        while True:
            frame = self.recv_frame(timeout)
            if frame is None:
                return None
            message = self.unwrap(frame)
            if message is not None:
                return message
            timeout = 0.0               # look at what is queued, but do not wait again

    def recv_frame(self, timeout: float) -> Optional[bytes]:
        """The next frame the tunnel carries, whatever it holds, or None after ``timeout``."""
        self.sock.settimeout(max(timeout, 0.0))
        try:
            return self.sock.recv(1 << 16)
        except (socket.timeout, BlockingIOError):
            return None

    def unwrap(self, frame: bytes) -> Optional[bytes]:
        """The HINA message in ``frame`` if it is for this worker and intact, else None (counted
        in ``dropped_foreign`` or ``dropped_corrupt``)."""
        parsed = parse_frame(frame)
        if parsed is None or parsed.dst.ip != self.me.ip or parsed.dst.udp_port != self.me.udp_port:
            self.dropped_foreign += 1
            return None
        if not (parsed.ip_ok and parsed.udp_length_ok and parsed.checksum_ok):
            self.dropped_corrupt += 1
            return None
        return parsed.message

    def close(self) -> None:
        self.sock.close()
