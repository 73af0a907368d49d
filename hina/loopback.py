"""Loopback ports for what a local deployment, a benchmark or a test starts: the switch's gRPC
and UDP ports, a job service, gloo's rendezvous. A port found free here is released before
it is handed out, so a bind may still race with another process; the callers start servers
that fail loudly on a taken port.

Example::

    >>> port = free_tcp_port()
    >>> 0 < port < 65536
    True
"""
from __future__ import annotations

import socket

__all__ = ["free_port", "free_tcp_port", "free_udp_ports"]


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port of 127.0.0.1 of socket type ``kind`` that nobody is bound to now."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_tcp_port() -> int:
    """A TCP port of 127.0.0.1 that nobody listens on now."""
    return free_port(socket.SOCK_STREAM)


def free_udp_ports(n: int) -> list[int]:
    """``n`` distinct free UDP ports of 127.0.0.1 (all bound at once, then released)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
