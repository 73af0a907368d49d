"""Fault injection and frame fuzzing for HINA: the reusable pieces of the fault and fuzz suite.

* :func:`random_frames`: seeded random byte strings (lengths 0..1600), some behind a valid
  Ethernet or Ethernet/IPv4/UDP-to-HINA-port prefix so that the parser gets past its first states.
* :class:`HinaFrameFuzzer`: valid Ethernet/IPv4/UDP frames to the HINA port from a given sender,
  with a fuzzed HINA header and payload: scapy's ``fuzz()`` of the :class:`~hina.layers.HINA`
  layer plus targeted mutations (truncation, wrong IPv4/UDP lengths, wrong version, reserved bits,
  unknown types and ops, switch-only types, bad slots, bad jobs, other generations, missing or
  wrong UDP checksums). Frames carry a right UDP checksum unless that is the mutation, so that
  the fuzzed HINA fields reach the checks behind it.
* :class:`FaultyLink`: a seeded fault-injecting wrapper around a :class:`worker.link.FrameLink`:
  drops, duplicates, reorders (bounded window) and corrupts frames in both directions (corruption
  caught by the FCS, or bit flips after it that only the UDP checksum can catch).

Everything takes a seed: the same seed gives the same frames and the same faults.
``bench/bench_faults.py`` and ``tests/faults/`` use them (``docs/reliability.md``, "Fault and
fuzz results").

Example::

    >>> import random
    >>> frames = random_frames(random.Random(1), 3)
    >>> [len(f) <= MAX_RANDOM_FRAME for f in frames]
    [True, True, True]
"""
from __future__ import annotations

import random
import struct
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Optional

from . import framing
from . import protocol as P

__all__ = ["MAX_RANDOM_FRAME", "random_frames", "Sender", "HinaFrameFuzzer", "MUTATIONS",
           "LinkFaults", "FaultyLink", "build_frame", "flip_bit"]

#: Longest random frame (a standard Ethernet frame is at most 1514 bytes without FCS).
MAX_RANDOM_FRAME = 1600
_HEADERS = P.ETHERNET_BYTES + P.IPV4_BYTES + P.UDP_BYTES
_ETH_IPV4 = 0x0800


@dataclass(frozen=True)
class Sender:
    """Who a frame claims to come from (MAC, IPv4, UDP port) and the switch port it enters."""
    port: int
    mac: int
    ip: int
    udp_port: int


SWITCH_MAC, SWITCH_IP = 0x0200000000FE, 0x0A0000FE


def build_frame(sender: Sender, message: bytes, *, ip_len: Optional[int] = None,
                udp_len: Optional[int] = None, dport: int = P.UDP_PORT_BASE,
                checksum: Optional[int] = None) -> bytes:
    """Ethernet/IPv4/UDP around ``message`` from ``sender`` to the switch (:func:`hina.framing.
    build_frame`: right lengths and checksums unless given)."""
    return framing.build_frame(framing.Endpoint(sender.mac, sender.ip, sender.udp_port),
                               framing.Endpoint(SWITCH_MAC, SWITCH_IP, dport), message,
                               ip_len=ip_len, udp_len=udp_len, checksum=checksum)


def random_frames(rng: random.Random, n: int, max_len: int = MAX_RANDOM_FRAME) -> list[bytes]:
    """``n`` random frames of random length in [0, max_len]: half pure random bytes, a quarter
    behind an Ethernet header with the IPv4 type, a quarter behind a whole Ethernet/IPv4/UDP
    header to the HINA port range (random addresses, lengths and checksum)."""
    out = []
    for i in range(n):
        length = rng.randint(0, max_len)
        body = rng.randbytes(length)
        kind = i % 4
        if kind == 2 and length >= 14:
            body = body[:12] + b"\x08\x00" + body[14:]
        elif kind == 3 and length >= _HEADERS:
            head = bytearray(body[:_HEADERS])
            head[12:14], head[14], head[23] = b"\x08\x00", 0x45, 17
            struct.pack_into("!H", head, 36, P.UDP_PORT_BASE + rng.randrange(P.UDP_PORT_COUNT))
            body = bytes(head) + body[_HEADERS:]
        out.append(body)
    return out


def _header(msg_type=P.MsgType.AGGREGATE, op=P.Op.SUM, **fields) -> bytes:
    """A HINA header with any values, each cut to its field's width."""
    return P.pack_header(msg_type, op, wrap=True, **fields)


#: The mutations :class:`HinaFrameFuzzer` draws from, in order.
MUTATIONS = ("scapy_fuzz", "truncate", "extend", "udp_length", "ip_length", "version",
             "reserved", "unknown_type", "switch_only_type", "unknown_op", "bad_slot", "bad_job",
             "other_generation", "lut_without_table", "pairs", "harvest", "bad_checksum")


class HinaFrameFuzzer:
    """Fuzzed HINA frames from one sender: every frame is Ethernet/IPv4/UDP to the HINA port
    (unless the mutation is about those lengths) with a HINA header and payload that are not a
    valid contribution to ``live_job`` (so no fuzzed frame can legitimately change its sums).

    Args:
        seed: seed of the fuzzer's generator (scapy's ``fuzz()`` included).
        words: ``HINA_WORDS`` of the program.
        live_job: (job id, generation, n_slots) of the job whose sums must stay exact.
        jobs: job ids to aim at besides random ones (installed jobs).
    """

    def __init__(self, seed: int, words: int, live_job: tuple[int, int, int],
                 jobs: tuple[int, ...] = ()):
        self.rng = random.Random(seed)
        self.words = words
        self.live_job = live_job
        self.jobs = tuple(jobs) or (live_job[0],)
        self.counts: Counter = Counter()

    def _job(self) -> int:
        return self.rng.choice(self.jobs) if self.rng.random() < 0.7 else self.rng.randrange(1 << 16)

    def _valid_header(self, job_id: Optional[int] = None, **kw) -> dict:
        rng = self.rng
        n_slots = self.live_job[2]
        d = dict(msg_type=P.MsgType.AGGREGATE, op=rng.choice(list(P.Op)), flags=rng.choice((0, 2)),
                 job_id=self._job() if job_id is None else job_id, pool=rng.randrange(2),
                 slot=rng.randrange(n_slots), seq=rng.randrange(64),
                 generation=self.live_job[1])
        d.update(kw)
        return d

    def _payload(self, d: dict) -> bytes:
        try:
            n = P.payload_bytes(d["msg_type"], d.get("op"), words=self.words)
        except ValueError:
            n = 4 * self.words
        return self.rng.randbytes(n)

    def _scapy_fuzz(self) -> bytes:
        from scapy.packet import fuzz
        from .layers import HINA
        state = random.getstate()
        random.seed(self.rng.getrandbits(64))       # scapy's random values come from `random`
        try:
            header = bytes(fuzz(HINA()))
        finally:
            random.setstate(state)
        payload_len = self.rng.choice((0, self.words, 4 * self.words, 4 + 4 * self.words,
                                       P.PAIRS_PER_PACKET * P.PAIR_BYTES, 4,
                                       self.rng.randrange(1200)))
        return header + self.rng.randbytes(payload_len)

    def is_live_contribution(self, message: bytes) -> bool:
        """Whether ``message`` could be summed into the live job (a valid AGGREGATE of its
        generation with the exact length): such frames are never produced."""
        if len(message) < P.HEADER_BYTES:
            return False
        h = P.unpack_header(message)
        if h["version"] != P.VERSION or h["msg_type"] != P.MsgType.AGGREGATE or h["reserved"]:
            return False
        if (h["job_id"], h["generation"]) != self.live_job[:2] or h["op"] not in set(P.Op):
            return False
        return len(message) == P.HEADER_BYTES + P.payload_bytes(P.MsgType.AGGREGATE, h["op"],
                                                                  words=self.words)

    def frame(self, sender: Sender) -> tuple[str, bytes]:
        """One fuzzed frame from ``sender``: (mutation name, frame)."""
        while True:
            kind, frame, message = self._draw(sender)
            if not self.is_live_contribution(message):
                self.counts[kind] += 1
                return kind, frame

    def _draw(self, sender: Sender) -> tuple[str, bytes, bytes]:
        rng = self.rng
        kind = rng.choice(MUTATIONS)
        ip_len = udp_len = checksum = None
        if kind == "scapy_fuzz":
            message = self._scapy_fuzz()
        else:
            d = self._valid_header()
            if kind == "version":
                d["version"] = rng.choice([v for v in range(16) if v != P.VERSION])
            elif kind == "reserved":
                d["reserved"] = rng.randrange(1, 1 << 16)
            elif kind == "unknown_type":
                d["msg_type"] = rng.choice([0] + list(range(max(P.MsgType) + 1, 16)))
            elif kind == "switch_only_type":
                d["msg_type"] = rng.choice((P.MsgType.RESULT, P.MsgType.PAIRS_ACK,
                                            P.MsgType.HARVEST_DATA, P.MsgType.NOTICE))
            elif kind == "unknown_op":
                d["op"] = rng.choice([0] + list(range(max(P.Op) + 1, 256)))
            elif kind == "bad_slot":
                d["slot"] = rng.randrange(self.live_job[2], 1 << 15)
            elif kind == "bad_job":
                d["job_id"] = rng.choice([j for j in (0, 1, 2, 4, 6, 100, P.MAX_JOB_ID,
                                                      P.MAX_JOB_ID + 1, 0xFFFF)
                                          if j not in self.jobs])
            elif kind == "other_generation":
                d["generation"] = rng.choice([g for g in (0, 2, 3, 0xFFFF, rng.randrange(1 << 16))
                                              if g != self.live_job[1]] or [0])
            elif kind == "lut_without_table":
                d["op"] = P.Op.LUT_SUM
            elif kind == "pairs":
                d["msg_type"] = P.MsgType.PAIRS
                d["seq"] = rng.randrange(1 << 32)
            elif kind == "harvest":
                d["msg_type"] = rng.choice((P.MsgType.HARVEST, P.MsgType.RESET))
            message = _header(**d) + self._payload(d)
            if kind == "lut_without_table" and d["job_id"] == self.live_job[0]:
                message = message[:P.HEADER_BYTES + self.words]
                # a THC frame for a job without a table: still not a live contribution below
            if kind == "truncate":
                message = message[:rng.randrange(len(message))]
            elif kind == "extend":
                message = message + rng.randbytes(rng.randint(1, 64))
            elif kind == "udp_length":
                udp_len = rng.choice([v for v in (0, 7, 8, rng.randrange(1 << 16))
                                      if v != P.UDP_BYTES + len(message)] or [0])
            elif kind == "ip_length":
                ip_len = rng.choice([v for v in (0, 20, 28, rng.randrange(1 << 16))
                                     if v != P.IPV4_BYTES + P.UDP_BYTES + len(message)] or [0])
            elif kind == "bad_checksum":
                right = build_frame(sender, message)[framing.FRAME_HEADER_BYTES - 2:
                                                     framing.FRAME_HEADER_BYTES]
                checksum = rng.choice([c for c in (P.UDP_NO_CHECKSUM, rng.randrange(1 << 16))
                                       if c != int.from_bytes(right, "big")] or [0])
        frame = build_frame(sender, message, ip_len=ip_len, udp_len=udp_len, checksum=checksum)
        return kind, frame, message


# ------------------------------------------------------------------------------------------
# Link faults
# ------------------------------------------------------------------------------------------
@dataclass
class LinkFaults:
    """Probabilities of each fault, per frame and direction (up: worker to switch; down:
    switch to worker).

    Attributes:
        drop: the frame is lost.
        duplicate: the frame is delivered twice.
        reorder: the frame is held back and delivered after up to ``window`` later frames.
        fcs_corrupt: bits of the frame flip and Ethernet's FCS catches it: the frame is dropped
            by the receiving NIC (so it is a drop, counted apart).
        corrupt: one bit of the frame (any: headers or payload) flips and the frame reaches the
            receiver: corruption the FCS did not see (in a NIC or host memory), which only the
            UDP checksum can catch.
        window: bound on reordering, in frames.
        seed: seed of the link's generator.
    """
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    fcs_corrupt: float = 0.0
    corrupt: float = 0.0
    window: int = 4
    seed: int = 0

    def __post_init__(self):
        for name in ("drop", "duplicate", "reorder", "fcs_corrupt", "corrupt"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}={value!r}: must be a probability in [0, 1]")
        if self.window < 1:
            raise ValueError(f"window={self.window!r}: must be >= 1 frame")


class _Direction:
    """The faults of one direction: turns each frame into the frames that get through."""

    def __init__(self, faults: LinkFaults, rng: random.Random):
        self.f, self.rng = faults, rng
        self.held: deque = deque()             # (frames still to pass, frame)
        self.stats: Counter = Counter()

    def __call__(self, frame: bytes) -> list[bytes]:
        f, rng, out = self.f, self.rng, []
        self.stats["frames"] += 1
        # held frames move one step per frame that passes; released ones go after this one
        released = []
        for _ in range(len(self.held)):
            left, held = self.held.popleft()
            if left <= 1:
                released.append(held)
            else:
                self.held.append((left - 1, held))
        if rng.random() < f.drop:
            self.stats["dropped"] += 1
        elif rng.random() < f.fcs_corrupt:
            self.stats["fcs_dropped"] += 1
        else:
            if rng.random() < f.corrupt:
                frame = flip_bit(frame, rng)
                self.stats["corrupted"] += 1
            copies = 2 if rng.random() < f.duplicate else 1
            self.stats["duplicated"] += copies - 1
            if rng.random() < f.reorder:
                self.held.append((rng.randint(1, f.window), frame))
                self.stats["reordered"] += 1
                copies -= 1
            out += [frame] * copies
        return out + released

    def flush(self) -> list[bytes]:
        frames = [held for _, held in self.held]
        self.held.clear()
        return frames


def flip_bit(frame: bytes, rng: random.Random) -> bytes:
    """``frame`` with one random bit flipped (headers or payload alike)."""
    if not frame:
        return frame
    b = bytearray(frame)
    bit = rng.randrange(8 * len(frame))
    b[bit // 8] ^= 0x80 >> (bit % 8)
    return bytes(b)


class FaultyLink:
    """A :class:`worker.link.FrameLink` whose frames meet seeded faults in both directions.

    Every fault of :class:`LinkFaults` in both directions, on whole frames: a result whose bits
    flip reaches the worker's link, which must drop it (its UDP checksum). Frames held back for
    reordering are released by later frames and by :meth:`recv` when nothing else arrives.

    Args:
        link: the worker's FrameLink (its tunnel to the switch port).
        faults: what goes wrong, with which probability.
        seed: seeds both directions (``faults.seed`` when not given).
    """

    def __init__(self, link, faults: LinkFaults, seed: Optional[int] = None):
        self.link, self.faults = link, faults
        seed = faults.seed if seed is None else seed
        self.up = _Direction(faults, random.Random(seed * 2 + 1))
        self.down = _Direction(faults, random.Random(seed * 2 + 2))
        self._inbox: deque = deque()

    @property
    def stats(self) -> dict:
        """Counts per direction: frames, dropped, fcs_dropped, duplicated, reordered, corrupted."""
        return {"up": dict(self.up.stats), "down": dict(self.down.stats)}

    def send(self, message: bytes) -> None:
        for frame in self.up(self.link.frame(message)):
            self.link.send_frame(frame)

    def recv(self, timeout: float) -> Optional[bytes]:
        if not self._inbox:
            frame = self.link.recv_frame(timeout)
            if frame is None:
                frames = self.down.flush()
                if not frames:
                    for held in self.up.flush():        # held-back requests go out at last
                        self.link.send_frame(held)
            else:
                frames = self.down(frame)
            # what the worker's link keeps of them: corrupted or foreign frames are dropped
            self._inbox.extend(m for m in map(self.link.unwrap, frames) if m is not None)
        return self._inbox.popleft() if self._inbox else None

    def close(self) -> None:
        self.link.close()
