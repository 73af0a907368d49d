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

The batched calls move a whole window in one system call each way (UDP GSO or ``sendmmsg``,
``recvmmsg``: :mod:`worker.batchio`), with frames built and checked as numpy columns
(:mod:`hina.framing`); where the C library lacks them, or with ``batched=False``, they loop over
the per-message calls. On the batched hot path nothing is done per packet in Python:

* ``prepare(messages)`` builds a whole call's frames once, into one array, and
  ``send_prepared(prepared, rows)`` sends rows of it with no copy (a window's new chunks are
  consecutive rows: one GSO call);
* :class:`FrameLink` remembers, per frame length, the 40 header bytes (up to the UDP checksum)
  of a frame it found intact; a received batch of that length whose frames all carry those
  bytes needs only its UDP checksums checked, one sum for the batch, since those bytes and the
  length settle every other check of :func:`~hina.framing.parse_frame`. Any other batch is
  checked the general way (:func:`~hina.framing.intact_for`, or frame by frame when small), so
  what is dropped and counted never depends on the path.
"""
from __future__ import annotations

import socket
import struct
from typing import Optional, Union

import numpy as np

from hina import protocol as P
from hina.framing import (FRAME_HEADER_BYTES, IP_PROTO_UDP, SMALL_BATCH, Endpoint, build_frame,
                          build_frames, checksum_of, intact_for, ones_sum, parse_frame,
                          udp_header_residue)

from . import batchio

__all__ = ["Endpoint", "UdpLink", "FrameLink"]

Buffer = Union[bytes, bytearray, memoryview]

_SOCKET_BUFFER = 8 << 20   # room for a full window of results arriving in a burst
_NO_ROWS = (np.zeros((0, 0), dtype=np.uint8), np.zeros(0, dtype=np.int64))
_HEAD = FRAME_HEADER_BYTES - 2        # a frame's bytes before the UDP checksum field
_UDP_AT = P.ETHERNET_BYTES + P.IPV4_BYTES
_KNOWN_HEADS = 16                     # frame lengths whose headers FrameLink remembers


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
        self.batch.send(messages, messages.shape[1])

    def prepare(self, messages: np.ndarray) -> Optional[np.ndarray]:
        """What :meth:`send_prepared` sends rows of: ``messages`` themselves (C-contiguous 2-D
        uint8), or None where this link sends one message per call (use ``send_batch``)."""
        if self.batch is None:
            return None
        return np.ascontiguousarray(messages, dtype=np.uint8)

    def send_prepared(self, prepared: np.ndarray, rows) -> None:
        """Send the messages ``rows`` (a range, or an array of row numbers) of
        :meth:`prepare`'s array, in one call."""
        self.batch.send(prepared, prepared.shape[1], rows)

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
        # frame length -> (first 40 bytes of a frame found intact as 5 u64, its pseudo-header
        # residue in little-endian words, where its UDP datagram ends, message lengths):
        # _intact_as_before
        self._known: dict[int, tuple[np.ndarray, int, int, np.ndarray]] = {}

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
        self.batch.send(frames, frames.shape[1])

    def prepare(self, messages: np.ndarray) -> Optional[np.ndarray]:
        """The frames of ``messages`` (2-D uint8, all one even length), built at once into one
        array for :meth:`send_prepared` to send rows of; None where this link sends one frame
        per call, or for odd-length messages (use ``send_batch``)."""
        if self.batch is None or messages.shape[1] % 2:
            return None
        return build_frames(self.me, self.switch, messages)

    def send_prepared(self, prepared: np.ndarray, rows) -> None:
        """Send the frames ``rows`` (a range, or an array of row numbers) of :meth:`prepare`'s
        array straight from that array: consecutive rows in one UDP GSO call per 64 frames,
        others in one ``sendmmsg`` (:class:`~worker.batchio.BatchSocket`)."""
        self.batch.send(prepared, prepared.shape[1], rows)

    def recv_batch(self, timeout: float, linger: float = 0.0,
                   enough: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The HINA messages for this worker that have arrived intact, waiting up to
        ``timeout`` for the first frame (and up to ``linger`` more while fewer than ``enough``
        are in): (rows, lengths). Frames for others and corrupt frames are dropped and counted
        as :meth:`unwrap` does."""
        if self.batch is None:
            return self._recv_some(timeout)
        rows, lengths = self.batch.recv(timeout, linger, enough)
        fast = self._intact_as_before(rows, lengths)
        if fast is not None:
            return fast
        if len(lengths) < SMALL_BATCH:          # a few: each checked as recv does
            got = [self.unwrap(rows[i, :lengths[i]].tobytes()) for i in range(len(lengths))]
            self._learn(rows, lengths, np.array([m is not None for m in got], dtype=bool))
            return rows_of([m for m in got if m is not None])
        to_me, ok = intact_for(rows, lengths, self.me)
        self.dropped_foreign += int(np.count_nonzero(~to_me))
        self.dropped_corrupt += int(np.count_nonzero(to_me & ~ok))
        self._learn(rows, lengths, ok)
        frames = rows[ok, :int(lengths.max())]
        udp_len = frames[:, 38:40].view(">u2")[:, 0].astype(np.int64)
        return frames[:, FRAME_HEADER_BYTES:], udp_len - P.UDP_BYTES

    def _learn(self, rows: np.ndarray, lengths: np.ndarray, ok: np.ndarray) -> None:
        """Remember the first 40 bytes (Ethernet, IPv4 and UDP headers but the checksum) of a
        frame found intact, per frame length, for :meth:`_intact_as_before`."""
        picked = np.flatnonzero(ok)
        if not len(picked):
            return
        i = int(picked[0])
        length = int(lengths[i])
        udp_len = int(rows[i, 38]) << 8 | int(rows[i, 39])
        if length in self._known or udp_len % 2 or len(self._known) >= _KNOWN_HEADS:
            return
        head = rows[i, :_HEAD].copy()
        src_ip, dst_ip = int.from_bytes(head[26:30], "big"), int.from_bytes(head[30:34], "big")
        # the pseudo-header's words that the UDP header's own words (summed with the message)
        # do not hold: the two addresses, the protocol and the UDP length
        pseudo = (src_ip >> 16) + (src_ip & 0xFFFF) + (dst_ip >> 16) + (dst_ip & 0xFFFF)
        pseudo = (pseudo + IP_PROTO_UDP + udp_len) * 256 % 0xFFFF      # little-endian: x 256
        self._known[length] = (head.view("<u8"), pseudo,
                               P.ETHERNET_BYTES + P.IPV4_BYTES + udp_len,
                               np.full(batchio.MAX_BATCH, udp_len - P.UDP_BYTES, dtype=np.int64))

    def _intact_as_before(self, rows: np.ndarray,
                          lengths: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray]]:
        """:meth:`recv_batch`'s answer for a batch whose frames are all of one length and all
        carry, up to the UDP checksum, the very headers of an earlier frame of that length found
        intact (:meth:`_learn`): those 40 bytes and the length settle every check of
        :func:`~hina.framing.parse_frame` but the UDP checksum, which is checked here for the
        whole batch at once (one sum). None (check it the general way) for any other batch."""
        n = len(lengths)
        if not n:
            return None
        length = int(lengths[0])
        known = self._known.get(length)
        if known is None or (n > 1 and not (lengths == length).all()):
            return None
        head, pseudo, end, message_lengths = known
        if not (rows[:n, :_HEAD].view("<u8") == head).all():
            return None
        # The UDP header (its checksum too) and the message, summed as little-endian words: a
        # byte-swapped word is the word times 256 mod 0xFFFF (2**16 = 1), so the little-endian
        # sum is 256 times the big-endian one, and is 0 mod 0xFFFF exactly when it is (256 is
        # invertible mod 0xFFFF); it needs no byte swap. (32-bit sums: a UDP datagram has
        # under 2**15 words, each below 2**16.)
        words = rows[:n, _UDP_AT:end].view("<u2")
        ok = (words.sum(axis=1, dtype=np.uint32) + np.uint32(pseudo)) % np.uint32(0xFFFF) == 0
        ok &= words[:, 3] != P.UDP_NO_CHECKSUM
        if ok.all():
            return rows[:n, FRAME_HEADER_BYTES:end], message_lengths[:n]
        self.dropped_corrupt += n - int(np.count_nonzero(ok))
        kept = rows[:n][ok, FRAME_HEADER_BYTES:end]
        return kept, message_lengths[:len(kept)]

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
