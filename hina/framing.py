"""Ethernet/IPv4/UDP framing of HINA messages: the one place that builds and checks frames.

Everything that writes or reads whole frames (the worker's frame tunnel :mod:`worker.link`, the
fault and fuzz tools :mod:`hina.faults`, the dataplane tests) uses these functions, so the
framing rules of ``docs/protocol.md`` ("Framing") live in one module:

* IPv4 without options, Don't Fragment, TTL 64, header checksum right;
* UDP length = 8 + message size; the UDP checksum (pseudo-header, UDP header, HINA message)
  always present: a computed 0 is sent as 0xFFFF (RFC 768), and 0 ("no checksum") is refused
  by the switch (BAD_CHECKSUM) and by :func:`parse_frame` (version 3 of the protocol).

The checksum is the Internet checksum (RFC 1071). Its ones' complement sum of 16-bit words is
the value of the bytes, read as one big-endian integer, modulo 0xFFFF (2**16 = 1 mod 0xFFFF), so
a whole message is summed by one ``int.from_bytes``: no per-word Python loop.

Example::

    >>> me = Endpoint.make("02:00:00:00:01:00", "10.0.1.0", 40000)
    >>> switch = Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", 48864)
    >>> frame = build_frame(me, switch, b"hello!")
    >>> parsed = parse_frame(frame)
    >>> parsed.message, parsed.src == me, parsed.dst == switch, parsed.checksum_ok
    (b'hello!', True, True, True)
"""
from __future__ import annotations

import functools
import socket
import struct
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from . import protocol as P
from .protocol import ipv4_checksum

__all__ = ["Endpoint", "ETHERTYPE_IPV4", "IP_PROTO_UDP", "FRAME_HEADER_BYTES", "ones_sum",
           "checksum_of", "udp_header_residue", "ipv4_checksum", "build_frame", "ParsedFrame",
           "parse_frame", "ones_sums", "build_frames", "intact_for"]

Buffer = Union[bytes, bytearray, memoryview]

ETHERTYPE_IPV4 = 0x0800
IP_PROTO_UDP = 17
IP_VERSION_IHL = 0x45          # IPv4, 5 words of header: the switch parses no options
IP_TTL = 64
IP_DONT_FRAGMENT = 0x4000
#: Bytes of Ethernet + IPv4 + UDP headers in front of every HINA message.
FRAME_HEADER_BYTES = P.ETHERNET_BYTES + P.IPV4_BYTES + P.UDP_BYTES
_ONES = 0xFFFF


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


def ones_sum(data: Buffer) -> int:
    """The ones' complement sum of ``data``'s 16-bit big-endian words, as a residue mod 0xFFFF
    (0 stands for both zeros of ones' complement; odd lengths are padded with a zero byte).

    Residues of 16-bit aligned pieces add: ``ones_sum(a + b) == (ones_sum(a) + ones_sum(b)) %
    0xFFFF`` when ``len(a)`` is even."""
    n = int.from_bytes(data, "big")
    if len(data) & 1:
        n <<= 8
    return n % _ONES


def checksum_of(residue: int) -> int:
    """The UDP checksum field for data whose ones' sum is ``residue`` (any non-negative integer
    congruent to it): 1..0xFFFF, never 0 (a computed 0 is sent as 0xFFFF, RFC 768)."""
    return _ONES - residue % _ONES


def udp_header_residue(src: Endpoint, dst: Endpoint, udp_len: int) -> int:
    """The ones' sum of the pseudo-header and the UDP header (checksum field 0) of a datagram
    of ``udp_len`` bytes from ``src`` to ``dst``: add ``ones_sum(message)`` and take
    :func:`checksum_of` for the message's checksum."""
    # source, destination, zero + protocol, UDP length; then the UDP header (its length again).
    # A 32-bit word is its two 16-bit halves mod 0xFFFF, so the words add as integers.
    return (src.ip + dst.ip + IP_PROTO_UDP + src.udp_port + dst.udp_port
            + 2 * (udp_len & _ONES)) % _ONES


def build_frame(src: Endpoint, dst: Endpoint, message: Buffer, *, ip_len: Optional[int] = None,
                udp_len: Optional[int] = None, checksum: Optional[int] = None,
                ttl: int = IP_TTL) -> bytes:
    """The Ethernet/IPv4/UDP frame carrying ``message`` from ``src`` to ``dst``.

    Args:
        src, dst: MAC, IPv4 address and UDP port of each end.
        message: the HINA header and payload.
        ip_len, udp_len: the IPv4 total length and UDP length fields (default: right; fuzzing
            gives others). The IPv4 checksum is always right for the given fields.
        checksum: the UDP checksum field (default: right for the fields as built).
    """
    ip_len = P.IPV4_BYTES + P.UDP_BYTES + len(message) if ip_len is None else ip_len
    udp_len = P.UDP_BYTES + len(message) if udp_len is None else udp_len
    eth = dst.mac.to_bytes(6, "big") + src.mac.to_bytes(6, "big") + b"\x08\x00"
    ip = bytearray(struct.pack("!BBHHHBBHII", IP_VERSION_IHL, 0, ip_len & _ONES, 0,
                               IP_DONT_FRAGMENT, ttl, IP_PROTO_UDP, 0, src.ip, dst.ip))
    struct.pack_into("!H", ip, 10, ipv4_checksum(ip))
    udp = struct.pack("!HHHH", src.udp_port, dst.udp_port, udp_len & _ONES, 0)
    if checksum is None:
        checksum = checksum_of(udp_header_residue(src, dst, udp_len) + ones_sum(message))
    return eth + bytes(ip) + udp[:6] + struct.pack("!H", checksum & _ONES) + bytes(message)


@dataclass(frozen=True)
class ParsedFrame:
    """An Ethernet/IPv4/UDP frame taken apart (:func:`parse_frame`)."""
    src: Endpoint
    dst: Endpoint
    message: bytes           # the UDP payload (the HINA message), cut to the UDP length
    ip_ok: bool              # IPv4 total length and header checksum are right
    udp_length_ok: bool      # the UDP length fits the frame and the IPv4 length
    checksum: int            # the UDP checksum field
    checksum_ok: bool        # present (non-zero) and right


def parse_frame(frame: Buffer) -> Optional[ParsedFrame]:
    """``frame`` taken apart, or None if it is not IPv4 (no options) / UDP at all.

    Nothing is refused here but the framing itself: the caller decides what a bad IPv4 header,
    a bad UDP length or a bad checksum means (:class:`worker.link.FrameLink` drops the frame)."""
    frame = bytes(frame)
    if len(frame) < FRAME_HEADER_BYTES:
        return None
    ether_type, = struct.unpack_from("!H", frame, 12)
    if (ether_type != ETHERTYPE_IPV4 or frame[14] != IP_VERSION_IHL
            or frame[23] != IP_PROTO_UDP):
        return None
    total_len, = struct.unpack_from("!H", frame, 16)
    ip_sum, = struct.unpack_from("!H", frame, 24)
    src_ip, dst_ip = struct.unpack_from("!II", frame, 26)
    sport, dport, udp_len, checksum = struct.unpack_from("!HHHH", frame, 34)
    ip_header = frame[14:24] + b"\0\0" + frame[26:34]
    ip_ok = (ipv4_checksum(ip_header) == ip_sum
             and total_len <= len(frame) - P.ETHERNET_BYTES)
    udp_length_ok = (P.UDP_BYTES <= udp_len <= len(frame) - P.ETHERNET_BYTES - P.IPV4_BYTES
                     and udp_len == total_len - P.IPV4_BYTES)
    end = P.ETHERNET_BYTES + P.IPV4_BYTES + udp_len if udp_length_ok else len(frame)
    message = frame[FRAME_HEADER_BYTES:end]
    src = Endpoint(int.from_bytes(frame[6:12], "big"), src_ip, sport)
    dst = Endpoint(int.from_bytes(frame[0:6], "big"), dst_ip, dport)
    # the data's ones' sum plus a right checksum field is 0xFFFF, that is 0 mod 0xFFFF
    checksum_ok = (checksum != P.UDP_NO_CHECKSUM and udp_length_ok
                   and (udp_header_residue(src, dst, udp_len) + checksum
                        + ones_sum(message)) % _ONES == 0)
    return ParsedFrame(src, dst, message, ip_ok, udp_length_ok, checksum, checksum_ok)


# --------------------------------------------------------------------------------------------
# Whole batches at once (worker.link's batched I/O): numpy columns, no Python object per frame
# --------------------------------------------------------------------------------------------
def ones_sums(rows: np.ndarray) -> np.ndarray:
    """:func:`ones_sum` of every row of a 2-D uint8 array of even width (uint64 residues)."""
    words = rows.view(">u2") if rows.flags.c_contiguous else np.ascontiguousarray(rows).view(">u2")
    return words.sum(axis=1, dtype=np.uint64) % np.uint64(_ONES)


@functools.lru_cache(maxsize=64)
def _frame_head(src: Endpoint, dst: Endpoint, length: int) -> bytes:
    """The bytes before the UDP checksum of every frame of ``length``-byte messages."""
    return build_frame(src, dst, bytes(length))[:FRAME_HEADER_BYTES - 2]


def build_frames(src: Endpoint, dst: Endpoint, messages: np.ndarray,
                 out: Optional[np.ndarray] = None) -> np.ndarray:
    """The frames of :func:`build_frame` for each row of ``messages`` (2-D uint8, all of one
    even length), as the rows of one array (``out`` when given, reused)."""
    n, length = messages.shape
    if length % 2:
        raise ValueError(f"messages of {length} bytes: batched framing needs an even length")
    head = _frame_head(src, dst, length)
    if out is None or out.shape != (n, FRAME_HEADER_BYTES + length):
        out = np.empty((n, FRAME_HEADER_BYTES + length), dtype=np.uint8)
    out[:, :FRAME_HEADER_BYTES - 2] = np.frombuffer(head, dtype=np.uint8)
    out[:, FRAME_HEADER_BYTES:] = messages
    residue = (np.uint64(udp_header_residue(src, dst, P.UDP_BYTES + length))
               + ones_sums(messages)) % np.uint64(_ONES)
    out[:, FRAME_HEADER_BYTES - 2:FRAME_HEADER_BYTES].view(">u2")[:, 0] = np.uint64(_ONES) - residue
    return out


#: Below this many frames, :func:`intact_for` checks each with :func:`parse_frame`: numpy's
#: fixed cost per call (tens of microseconds) outweighs its per-frame gain in small batches.
SMALL_BATCH = 16


def intact_for(rows: np.ndarray, lengths: np.ndarray, dst: Endpoint) -> tuple[np.ndarray,
                                                                               np.ndarray]:
    """Which received frames (rows of a 2-D uint8 array, ``lengths`` bytes each; bytes past a
    frame's length may hold anything) are IPv4/UDP to ``dst`` (``to_dst``), and which of those
    are intact (``ok``: IPv4 header checksum and lengths right, UDP checksum present and
    right) -- :func:`parse_frame`'s verdicts, for a whole batch. Returns (to_dst, ok)."""
    n = len(lengths)
    to_dst, ok = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if n < SMALL_BATCH:
        for i in range(n):
            _verdict(rows[i, :int(lengths[i])].tobytes(), dst, to_dst, ok, i)
        return to_dst, ok
    framed = lengths >= FRAME_HEADER_BYTES
    head = np.zeros((n, FRAME_HEADER_BYTES), dtype=np.uint8)
    width = min(rows.shape[1], FRAME_HEADER_BYTES)
    head[:, :width] = rows[:, :width]
    be16 = head.view(">u2").astype(np.int64)
    to_dst = (framed & (be16[:, 6] == ETHERTYPE_IPV4) & (head[:, 14] == IP_VERSION_IHL)
              & (head[:, 23] == IP_PROTO_UDP) & ((be16[:, 15] << 16 | be16[:, 16]) == dst.ip)
              & (be16[:, 18] == dst.udp_port))
    total_len, udp_len, checksum = be16[:, 8], be16[:, 19], be16[:, 20]
    ip_ok = (be16[:, 7:17].sum(axis=1) % _ONES == 0) & (total_len <= lengths - P.ETHERNET_BYTES)
    length_ok = ((udp_len >= P.UDP_BYTES)
                 & (udp_len <= lengths - P.ETHERNET_BYTES - P.IPV4_BYTES)
                 & (udp_len == total_len - P.IPV4_BYTES))
    candidates = to_dst & ip_ok & length_ok & (checksum != P.UDP_NO_CHECKSUM)
    odd = candidates & (udp_len % 2 == 1)
    even = candidates & ~odd
    if even.any():
        start = P.ETHERNET_BYTES + P.IPV4_BYTES
        span = int(udp_len[even].max())
        # each datagram's 16-bit words, summed up to its own length by a running sum
        words = np.ascontiguousarray(rows[even, start:start + span]).view(">u2")
        sums = np.cumsum(words, axis=1, dtype=np.int64)[np.arange(len(words)),
                                                          udp_len[even] // 2 - 1]
        pseudo = (be16[even, 13] + be16[even, 14] + be16[even, 15] + be16[even, 16]
                  + IP_PROTO_UDP + udp_len[even])
        ok[even] = (sums + pseudo) % _ONES == 0
    for i in np.flatnonzero(odd):                      # a pad byte: the scalar check
        _verdict(rows[i, :int(lengths[i])].tobytes(), dst, to_dst, ok, i)
    return to_dst, ok


def _verdict(frame: bytes, dst: Endpoint, to_dst: np.ndarray, ok: np.ndarray, i: int) -> None:
    parsed = parse_frame(frame)
    if parsed is not None and (parsed.dst.ip, parsed.dst.udp_port) == (dst.ip, dst.udp_port):
        to_dst[i] = True
        ok[i] = parsed.ip_ok and parsed.udp_length_ok and parsed.checksum_ok
