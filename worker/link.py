"""How a worker's HINA messages reach the switch.

Two links with one interface (``send(message)``, ``recv(timeout) -> message | None``, ``close()``,
and the batched ``send_batch(messages)``, ``recv_batch(timeout) -> (messages, lengths)``):

* :class:`UdpLink`: an ordinary UDP socket. The kernel builds Ethernet/IPv4/UDP; use it where
  the worker's interface is wired to the switch (Mininet hosts, BMv2 on veths, Tofino).
* :class:`FrameLink`: the worker builds the whole Ethernet/IPv4/UDP frame itself and tunnels it,
  one frame per datagram, to a loopback UDP port of the embedded target
  (``softswitch -i N@udp:127.0.0.1:PORT``). No root, no interfaces: the default for the demo and
  the tests. The worker still has a MAC, IPv4 address and UDP port: the switch admits and
  addresses it by them exactly as on a real network.

The batched calls move a whole window in one system call each way (``sendmmsg``/``recvmmsg``,
:mod:`worker.batchio`), with frames built and checked as numpy columns (:mod:`hina.framing`);
where the C library lacks them, or with ``batched=False``, they loop over the per-message calls.
"""
from __future__ import annotations

import socket
import struct
from typing import Optional, Union

import numpy as np

from hina import protocol as P
from hina.framing import (FRAME_HEADER_BYTES, SMALL_BATCH, Endpoint, build_frame, build_frames,
                          checksum_of, intact_for, ones_sum, parse_frame, udp_header_residue)

from . import batchio

__all__ = ["Endpoint", "UdpLink", "FrameLink"]

Buffer = Union[bytes, bytearray, memoryview]

_SOCKET_BUFFER = 8 << 20   # room for a full window of results arriving in a burst
_NO_ROWS = (np.zeros((0, 0), dtype=np.uint8), np.zeros(0, dtype=np.int64))


def _batch_socket(sock: socket.socket, peer: tuple[str, int], batched: bool):
    """A :class:`~worker.batchio.BatchSocket` on ``sock``, or None: per-message fallback."""
    if not batched or batchio.available():
        return None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _SOCKET_BUFFER)
    return batchio.BatchSocket(sock, peer)


def rows_of(messages: list) -> tuple[np.ndarray, np.ndarray]:
    """Messages (bytes) as (rows of a 2-D uint8 array, lengths): the batched calls' form."""
    if not messages:
        return _NO_ROWS
    lengths = np.fromiter(map(len, messages), dtype=np.int64, count=len(messages))
    rows = np.zeros((len(messages), int(lengths.max())), dtype=np.uint8)
    for i, m in enumerate(messages):
        rows[i, :len(m)] = np.frombuffer(m, dtype=np.uint8)
    return rows, lengths


class _PerMessageBatches:
    """``send_batch``/``recv_batch`` over ``send``/``recv``: the fallback path."""

    def _send_each(self, messages: np.ndarray) -> None:
        for row in messages:
            self.send(row.tobytes())

    def _recv_some(self, timeout: float) -> tuple[np.ndarray, np.ndarray]:
        """What has arrived: the first message waits up to ``timeout``, the rest not at all."""
        got = []
        message = self.recv(timeout)
        while message is not None and len(got) < batchio.MAX_BATCH:
            got.append(message)
            message = self.recv(0.0)
        if message is not None:
            got.append(message)
        return rows_of(got)


class UdpLink(_PerMessageBatches):
    """HINA messages over a kernel UDP socket bound to ``local`` and sent to ``switch``.

    Args:
        local: (host, port) to bind; the port is the worker's UDP source port.
        switch: (host, port) of the switch (a HINA port).
        batched: use ``sendmmsg``/``recvmmsg`` for the batched calls where available.
    """

    def __init__(self, local: tuple[str, int], switch: tuple[str, int], batched: bool = True):
        self.switch = switch
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        self.sock.bind(local)
        self.batch = _batch_socket(self.sock, switch, batched)

    def send_batch(self, messages: np.ndarray) -> None:
        """Send each row of ``messages`` (2-D uint8, C-contiguous) as one message."""
        if self.batch is None:
            return self._send_each(messages)
        self.batch.send(messages, np.full(len(messages), messages.shape[1], dtype=np.int64))

    def recv_batch(self, timeout: float, linger: float = 0.0,
                   enough: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The messages that have arrived, waiting up to ``timeout`` for the first (and up to
        ``linger`` more while fewer than ``enough`` are in): (rows, lengths); the rows stay
        valid until the next call."""
        if self.batch is None:
            return self._recv_some(timeout)
        return self.batch.recv(timeout, linger, enough)

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


class FrameLink(_PerMessageBatches):
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
        batched: use ``sendmmsg``/``recvmmsg`` for the batched calls where available.
    """

    def __init__(self, me: Endpoint, switch: Endpoint, tunnel_local: tuple[str, int],
                 tunnel_switch: tuple[str, int], batched: bool = True):
        if not P.UDP_PORT_BASE <= switch.udp_port < P.UDP_PORT_BASE + P.UDP_PORT_COUNT:
            raise ValueError(f"switch.udp_port={switch.udp_port}: HINA ports are "
                             f"[{P.UDP_PORT_BASE}, {P.UDP_PORT_BASE + P.UDP_PORT_COUNT})")
        self.me, self.switch = me, switch
        self._tunnel_switch = tunnel_switch
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        self.sock.bind(tunnel_local)
        # message length -> (headers up to the UDP checksum, ones' sum of pseudo and UDP header)
        self._headers: dict[int, tuple[bytes, int]] = {}
        self.dropped_foreign = 0                 # frames that were not HINA for this worker
        self.dropped_corrupt = 0                 # frames for this worker with a bad checksum
        self.batch = _batch_socket(self.sock, tunnel_switch, batched)
        self._frames: Optional[np.ndarray] = None    # the batched send's frame buffer

    @property
    def tunnel_switch(self) -> tuple[str, int]:
        """(host, port) of the switch's UDP port (settable: a port bound after the link)."""
        return self._tunnel_switch

    @tunnel_switch.setter
    def tunnel_switch(self, address: tuple[str, int]) -> None:
        self._tunnel_switch = address
        if self.batch is not None:
            self.batch.peer = address

    def send_batch(self, messages: np.ndarray) -> None:
        """Send each row of ``messages`` (2-D uint8, all one even length) in its own frame."""
        if self.batch is None or len(messages) < SMALL_BATCH:
            return self._send_each(messages)   # a few: numpy's fixed costs would dominate
        self._frames = frames = build_frames(self.me, self.switch, messages, out=self._frames)
        self.batch.send(frames, np.full(len(frames), frames.shape[1], dtype=np.int64))

    def recv_batch(self, timeout: float, linger: float = 0.0,
                   enough: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The HINA messages for this worker that have arrived intact, waiting up to
        ``timeout`` for the first frame (and up to ``linger`` more while fewer than ``enough``
        are in): (rows, lengths). Frames for others and corrupt frames are dropped and counted
        as :meth:`unwrap` does."""
        if self.batch is None:
            return self._recv_some(timeout)
        rows, lengths = self.batch.recv(timeout, linger, enough)
        if len(lengths) < SMALL_BATCH:          # a few: each checked as recv does
            got = [self.unwrap(rows[i, :lengths[i]].tobytes()) for i in range(len(lengths))]
            return rows_of([m for m in got if m is not None])
        to_me, ok = intact_for(rows, lengths, self.me)
        self.dropped_foreign += int(np.count_nonzero(~to_me))
        self.dropped_corrupt += int(np.count_nonzero(to_me & ~ok))
        frames = rows[ok, :int(lengths.max())]
        udp_len = frames[:, 38:40].view(">u2")[:, 0].astype(np.int64)
        return frames[:, FRAME_HEADER_BYTES:], udp_len - P.UDP_BYTES

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
