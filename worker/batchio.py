"""Many UDP datagrams per system call: ``sendmmsg``/``recvmmsg`` through ctypes, straight out of
and into preallocated numpy buffers, and UDP segmentation offload for runs of equal datagrams.

A :class:`BatchSocket` wraps an ordinary (bound, unconnected) UDP socket. The kernel's message
headers, I/O vectors and the receive buffers are numpy arrays made once; a batch fills their
address and length columns with vector operations and makes one call, so no Python object is
created per datagram. Where the C library has no ``sendmmsg``/``recvmmsg`` (not Linux),
:func:`available` says why and the links keep their per-datagram path.

Consecutive rows of one array, all sent whole (the usual batch: a window of equal messages),
go out as one buffer with ``UDP_SEGMENT`` (Linux UDP GSO, 4.18 on): the kernel passes one
buffer through its UDP/IP output path and cuts it into the datagrams, each with its own UDP
header and checksum, so the receiver gets exactly the datagrams ``sendmmsg`` would have sent;
the per-datagram cost of sending falls severalfold (``bench/bench_worker_io.py``). Where the
kernel refuses it (no GSO, a path MTU below the datagram size), the socket falls back to
``sendmmsg`` for good.

Example::

    >>> import socket
    >>> a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); a.bind(("127.0.0.1", 0))
    >>> b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); b.bind(("127.0.0.1", 0))
    >>> sa, sb = BatchSocket(a, b.getsockname()), BatchSocket(b, a.getsockname())
    >>> frames = np.frombuffer(b"hello world!", dtype=np.uint8).reshape(3, 4)
    >>> sa.send(frames, np.full(3, 4))
    3
    >>> data, lengths = sb.recv(1.0)
    >>> [bytes(data[i, :lengths[i]]) for i in range(len(lengths))]
    [b'hell', b'o wo', b'rld!']
    >>> a.close(); b.close()
"""
from __future__ import annotations

import ctypes
import errno
import os
import select
import socket
import struct
import sys
import time
from typing import Optional

import numpy as np

__all__ = ["BatchSocket", "available", "MAX_BATCH", "MAX_DATAGRAM"]

#: Datagrams per system call, at most (Linux's UIO_MAXIOV is 1024; a window is far smaller).
MAX_BATCH = 256
#: Bytes per received datagram slot: an Ethernet frame (1514) rounded up; larger ones are cut.
MAX_DATAGRAM = 2048
_MSG_DONTWAIT = 0x40
_NO_WAIT_S = 20e-6             # a poll that returned sooner found data already there
_UDP_SEGMENT = 103            # linux/udp.h: setsockopt/cmsg level IPPROTO_UDP
#: Datagrams per UDP GSO send, at most (the kernel's UDP_MAX_SEGMENTS was 64 before 6.x),
#: and bytes (the buffer is one IPv4 datagram's payload before it is cut).
GSO_SEGMENTS, GSO_BYTES = 64, 65_000

# struct iovec / msghdr / mmsghdr of Linux on 64-bit machines (LP64), as numpy dtypes so that a
# whole batch's columns are set by vector operations.
_IOVEC = np.dtype([("base", np.uint64), ("len", np.uint64)])
_MMSGHDR = np.dtype([("name", np.uint64), ("namelen", np.uint32), ("pad0", np.uint32),
                     ("iov", np.uint64), ("iovlen", np.uint64),
                     ("control", np.uint64), ("controllen", np.uint64),
                     ("flags", np.int32), ("pad1", np.uint32),
                     ("len", np.uint32), ("pad2", np.uint32)])


def _libc():
    if os.name != "posix" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None, "needs a 64-bit POSIX C library"
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        send, recv = libc.sendmmsg, libc.recvmmsg
    except (OSError, AttributeError) as exc:
        return None, f"no sendmmsg/recvmmsg in the C library ({exc})"
    for fn in (send, recv):
        fn.restype = ctypes.c_int
    send.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    return (send, recv), None


_CALLS, _WHY_NOT = _libc()
assert _MMSGHDR.itemsize == 64 and _IOVEC.itemsize == 16    # the kernel's layout on LP64


def available() -> Optional[str]:
    """None when batched I/O works here, else why not."""
    return _WHY_NOT


def _sockaddr_in(address: tuple[str, int]) -> bytes:
    host, port = address
    return struct.pack("=H", socket.AF_INET) + struct.pack("!H4s8x", port,
                                                           socket.inet_aton(host))


class BatchSocket:
    """Batched send to one peer, and batched receive, on a UDP socket.

    Args:
        sock: a bound UDP (IPv4) socket; it stays usable for ordinary calls.
        peer: where :meth:`send` sends.
        max_batch: datagrams per call, at most.
        max_datagram: receive slot size in bytes.

    Attributes:
        syscalls: ``sendmmsg``/``recvmmsg``/``poll`` calls made (for the I/O benchmark).
    """

    def __init__(self, sock: socket.socket, peer: tuple[str, int], max_batch: int = MAX_BATCH,
                 max_datagram: int = MAX_DATAGRAM):
        if _WHY_NOT:
            raise OSError(f"batched I/O unavailable: {_WHY_NOT}")
        if not 1 <= max_batch <= 1024:
            raise ValueError(f"max_batch={max_batch}: must be in [1, 1024]")
        self.sock, self.fd = sock, sock.fileno()
        self.max_batch = max_batch
        self.syscalls = 0
        self._wait_first = False      # the last receive had to wait: wait before trying
        #: UDP GSO in use for runs of equal datagrams (False once the kernel refused it)
        self.gso = sys.platform.startswith("linux")
        self._gso_cmsg: dict[int, list] = {}     # datagram size -> the UDP_SEGMENT cmsg
        self._peer = ctypes.create_string_buffer(16)
        self.peer = peer
        self._poll = select.poll()
        self._poll.register(self.fd, select.POLLIN)
        # send side: message headers and one I/O vector per datagram
        self._send_iov = np.zeros(max_batch, dtype=_IOVEC)
        self._send_msgs = np.zeros(max_batch, dtype=_MMSGHDR)
        self._send_msgs["name"] = ctypes.addressof(self._peer)
        self._send_msgs["namelen"] = 16
        self._send_msgs["iov"] = (self._send_iov.ctypes.data
                                  + np.arange(max_batch, dtype=np.uint64) * _IOVEC.itemsize)
        self._send_msgs["iovlen"] = 1
        self._send_base, self._send_len = self._send_iov["base"], self._send_iov["len"]
        self._send_msgs_at = self._send_msgs.ctypes.data        # fixed arrays: fixed addresses
        self._counts = np.arange(max_batch, dtype=np.uint64)
        # receive side: fixed slots of max_datagram bytes
        self.recv_buffer = np.zeros((max_batch, max_datagram), dtype=np.uint8)
        self._recv_iov = np.zeros(max_batch, dtype=_IOVEC)
        self._recv_iov["base"] = (self.recv_buffer.ctypes.data
                                  + np.arange(max_batch, dtype=np.uint64) * max_datagram)
        self._recv_iov["len"] = max_datagram
        self._recv_msgs = np.zeros(max_batch, dtype=_MMSGHDR)
        self._recv_msgs["iov"] = (self._recv_iov.ctypes.data
                                  + np.arange(max_batch, dtype=np.uint64) * _IOVEC.itemsize)
        self._recv_msgs["iovlen"] = 1
        self._recv_msgs_at = self._recv_msgs.ctypes.data
        self._recv_len = self._recv_msgs["len"]

    @property
    def peer(self) -> tuple[str, int]:
        """Where :meth:`send` sends (settable)."""
        return self._peer_address

    @peer.setter
    def peer(self, address: tuple[str, int]) -> None:
        self._peer[:] = _sockaddr_in(address)
        self._peer_address = address

    def send(self, frames: np.ndarray, lengths, rows=None) -> int:
        """Send row ``i`` of ``frames`` (a C-contiguous 2-D uint8 array), its first
        ``lengths[i]`` bytes (or ``lengths`` bytes, one int for all), as one datagram each; with
        ``rows`` (a ``range`` of consecutive rows, or an array of row numbers), only those rows,
        in that order, straight from ``frames`` (no copy). Returns the datagrams sent: all of
        them, unless the socket's buffer is full (the rest are then lost, as a network would
        lose them) or the peer refused (ECONNREFUSED, e.g. its port closed: lost too)."""
        if not frames.flags.c_contiguous or frames.dtype != np.uint8 or frames.ndim != 2:
            raise ValueError("frames: a C-contiguous 2-D uint8 array")
        one_length = isinstance(lengths, (int, np.integer))
        if one_length and not 0 <= lengths <= frames.shape[1]:
            raise ValueError(f"lengths={lengths}: frames are {frames.shape[1]} bytes wide")
        if isinstance(rows, range):
            if rows.step != 1 or (len(rows) and (rows.start < 0 or rows.stop > len(frames))):
                raise IndexError(f"rows={rows!r}: not consecutive rows of the {len(frames)}")
            if self.gso and one_length and lengths == frames.shape[1] > 0:
                return self._send_segmented(frames[rows.start:rows.stop], int(lengths))
            rows = np.arange(rows.start, rows.stop)
        elif rows is None and self.gso and one_length and lengths == frames.shape[1] > 0:
            return self._send_segmented(frames, int(lengths))
        if rows is not None and len(rows) and (rows.min() < 0 or rows.max() >= len(frames)):
            raise IndexError(f"rows: {rows.min()}..{rows.max()} outside the {len(frames)} frames")
        return self._send_each_header(frames, lengths, one_length, rows)

    def _send_segmented(self, block: np.ndarray, size: int) -> int:
        """Send the rows of ``block`` (whole, ``size`` bytes each: C-contiguous) with UDP GSO,
        up to GSO_SEGMENTS per call; what the kernel refuses goes by ``sendmmsg``."""
        cmsg = self._gso_cmsg.get(size)
        if cmsg is None:
            cmsg = self._gso_cmsg[size] = [(socket.IPPROTO_UDP, _UDP_SEGMENT,
                                            struct.pack("=H", size))]
        step = max(1, min(GSO_SEGMENTS, GSO_BYTES // size))
        n_total = len(block)
        for at in range(0, n_total, step):
            part = block[at:at + step]
            try:
                self.syscalls += 1
                self.sock.sendmsg((part,), cmsg if len(part) > 1 else (), 0, self._peer_address)
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.ENOBUFS, errno.ECONNREFUSED,
                                     errno.EINTR):
                    self.gso = False            # refused (no GSO here, MTU): sendmmsg from now
                # one datagram at a time, each failure dropping its datagram alone
                self._send_each_header(part, size, True, None)
        return n_total

    def _send_each_header(self, frames: np.ndarray, lengths, one_length: bool,
                          rows: Optional[np.ndarray]) -> int:
        """``sendmmsg``: one message header per datagram."""
        send = _CALLS[0]
        n_total, done = (len(frames) if rows is None else len(rows)), 0
        stride = frames.strides[0]
        base = frames.ctypes.data
        while done < n_total:
            n = min(self.max_batch, n_total - done)
            if rows is None:
                self._send_base[:n] = base + (self._counts[:n] + done) * stride
            else:
                self._send_base[:n] = base + rows[done:done + n].astype(np.uint64) * stride
            self._send_len[:n] = lengths if one_length else lengths[done:done + n]
            sent = send(self.fd, self._send_msgs_at, n, 0)
            self.syscalls += 1
            if sent < 0:
                err = ctypes.get_errno()
                if err in (errno.EAGAIN, errno.ENOBUFS, errno.ECONNREFUSED, errno.EINTR):
                    done += 1 if err != errno.EINTR else 0      # drop the datagram that failed
                    continue
                raise OSError(err, os.strerror(err))
            done += sent
        return n_total

    def recv(self, timeout: float, linger: float = 0.0,
             enough: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Wait up to ``timeout`` seconds for datagrams, then take every one queued (up to
        ``max_batch``) in one call. With ``linger``, a batch of fewer than ``enough`` datagrams
        waits up to ``linger`` seconds more for the rest, once (interrupt coalescing: one batch
        of several costs less than several of one). Returns (buffer rows, lengths): row ``i``
        of the receive buffer holds datagram ``i``'s first ``lengths[i]`` bytes; both are views
        that the next call overwrites. No datagram: two empty arrays.

        When the last call found nothing queued and had to wait, this one waits first (``poll``
        then one ``recvmmsg``: two calls) instead of trying first (a ``recvmmsg`` that finds
        nothing, ``poll``, ``recvmmsg``: three); a wait that was not one (data already there)
        turns trying first back on."""
        got = 0
        if not (self._wait_first and timeout > 0):
            got = self._take(0)
            self._wait_first = got == 0 and timeout > 0
        if got == 0 and timeout > 0:
            started = time.monotonic()
            self._poll.poll(max(1, int(timeout * 1000)))
            self.syscalls += 1
            if time.monotonic() - started < _NO_WAIT_S:
                self._wait_first = False
            got = self._take(0)
        if 0 < got < min(enough, self.max_batch) and linger > 0:
            select.select((self.fd,), (), (), linger)
            self.syscalls += 1
            got += self._take(got)
        if got == 0:
            return self.recv_buffer[:0], np.zeros(0, dtype=np.int64)
        lengths = self._recv_len[:got].astype(np.int64)
        return self.recv_buffer[:got], lengths

    def _take(self, start: int) -> int:
        """recvmmsg into slots ``start`` onwards, without waiting; how many arrived."""
        got = _CALLS[1](self.fd, self._recv_msgs_at + start * _MMSGHDR.itemsize,
                        self.max_batch - start, _MSG_DONTWAIT, None)
        self.syscalls += 1
        if got < 0:
            err = ctypes.get_errno()
            if err not in (errno.EAGAIN, errno.EINTR, errno.ECONNREFUSED):
                raise OSError(err, os.strerror(err))
            return 0
        return got
