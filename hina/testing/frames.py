"""Test helpers: install HINA jobs on a target, build worker frames, read results back.

The entry-building knowledge lives in :mod:`hina.pipeline`; this module only applies it to a
:class:`hina.testing.targets.Target` (in the layout of the program the target runs,
``target.layout``: the v1model or the TNA program) and adds the frame plumbing the tests share.
"""
from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from hina import pipeline
from hina import protocol as P
from hina.framing import parse_frame
from hina.layers import HINA, pack_nibbles
from hina.pipeline import JobSpec, WorkerAddress

SWITCH_MAC = "02:00:00:00:00:fe"
SWITCH_IP = "10.0.0.254"
WORKER_UDP_BASE = 40000


def worker_address(index: int) -> WorkerAddress:
    """Worker ``index`` (0..): port index+1, MAC 02:00:00:00:01:xx, IP 10.0.1.xx, UDP 40000+index."""
    return WorkerAddress(port=index + 1, mac=0x020000000100 + index, ip=0x0A000100 + index,
                         udp_port=WORKER_UDP_BASE + index)


def make_job(job_id: int, n_workers: int, *, first_worker: int = 0, n_slots: int = 4,
             reg_base: int = 0, words: int = 64, **kwargs) -> JobSpec:
    workers = tuple(worker_address(first_worker + w) for w in range(n_workers))
    return JobSpec(job_id=job_id, workers=workers, n_slots=n_slots, reg_base=reg_base,
                   words=words, **kwargs)


def install(target, job: JobSpec) -> None:
    """Write a job's entries and multicast group (its registers start at zero on a new load)."""
    target.insert(pipeline.job_entries(job, _layout(target)))
    group, replicas = pipeline.multicast_group(job)
    target.set_mcast_group(group, replicas)


def set_generation(target, job: JobSpec, generation: int) -> JobSpec:
    """What the controller does when a job's workers restart: rewrite the job's admission
    entries with ``generation`` (no register wipe; :func:`hina.pipeline.generation_updates`).
    Returns the job as it now is."""
    new = dataclasses.replace(job, generation=generation)
    target.update(pipeline.generation_updates(job, new, _layout(target)))
    return new


def install_lut(target, lut_id: int, table=pipeline.THC_DEFAULT_TABLE, words: int = 64) -> None:
    target.insert(pipeline.lut_entries(lut_id, table, words, _layout(target)))


def _layout(target) -> pipeline.Layout:
    return getattr(target, "layout", pipeline.V1MODEL)


def _ip(n: int) -> str:
    return ".".join(str((n >> s) & 0xFF) for s in (24, 16, 8, 0))


def _mac(n: int) -> str:
    return ":".join(f"{(n >> s) & 0xFF:02x}" for s in range(40, -1, -8))


def frame(addr: WorkerAddress, payload: bytes, *, msg_type: int = P.MsgType.AGGREGATE,
          op: int = 0, job_id: int = 0, slot: int = 0, pool: int = 0, seq: int = 0,
          flags: int = 0, version: int = P.VERSION, dport: int = P.UDP_PORT_BASE,
          generation: int = P.FIRST_GENERATION, reserved: int = 0) -> bytes:
    """A frame from ``addr`` to the switch with the given HINA header and payload."""
    pkt = (Ether(src=_mac(addr.mac), dst=SWITCH_MAC)
           / IP(src=_ip(addr.ip), dst=SWITCH_IP)
           / UDP(sport=addr.udp_port, dport=dport)
           / HINA(version=version, msg_type=msg_type, op=op, flags=flags, job_id=job_id,
                  pool=pool, slot=slot, seq=seq, generation=generation, reserved=reserved)
           / Raw(payload))
    return bytes(pkt)


def words_payload(values) -> bytes:
    """Big-endian 32-bit words (signed or unsigned input)."""
    return np.asarray(values, dtype=np.int64).astype(np.uint32).astype(">u4").tobytes()


def contribution(job: JobSpec, worker: int, op: P.Op, values, *, slot: int = 0, pool: int = 0,
                 seq: int = 0, flags: int = 0, generation: Optional[int] = None) -> bytes:
    """An AGGREGATE frame; ``values`` are words (SUM/MAX/OR) or THC indices (LUT_SUM).
    ``generation`` defaults to the job's."""
    payload = pack_nibbles(values) if op == P.Op.LUT_SUM else words_payload(values)
    return frame(job.workers[worker], payload, op=op, job_id=job.job_id, slot=slot, pool=pool,
                 seq=seq, flags=flags,
                 generation=job.generation if generation is None else generation)


def block_contribution(job: JobSpec, worker: int, block: int, next_block: int, values=None, *,
                       slot: int = 0, pool: int = 0, seq: int = 0, flags: int = 0,
                       generation: Optional[int] = None) -> bytes:
    """A block-sparse AGGREGATE frame: BLOCK_SUM with ``values`` (the block's lanes), or
    BLOCK_SKIP (the block header alone) when ``values`` is None. ``next_block``: the sender's
    next nonzero block (``P.BLOCK_END`` for none)."""
    header = struct.pack("!II", block, next_block)
    op = P.Op.BLOCK_SKIP if values is None else P.Op.BLOCK_SUM
    payload = header if values is None else header + words_payload(values)
    return frame(job.workers[worker], payload, op=op, job_id=job.job_id, slot=slot, pool=pool,
                 seq=seq, flags=flags,
                 generation=job.generation if generation is None else generation)


@dataclass
class Reply:
    """A frame the switch sent, dissected."""
    port: int
    dst_mac: int
    dst_ip: int
    dst_port: int
    src_port: int
    src_mac: int
    src_ip: int
    msg_type: int
    op: int
    flags: int
    count: int
    job_id: int
    pool: int
    slot: int
    seq: int
    generation: int
    reserved: int
    payload: bytes
    ip_ok: bool          # IPv4 total length and checksum, UDP length are right
    checksum_ok: bool    # the UDP checksum is present and right
    udp_checksum: int    # the UDP checksum field
    length: int          # bytes of the whole frame

    def words(self, dtype=">i4") -> np.ndarray:
        """The RESULT's lanes (after the block header of a block-sparse RESULT)."""
        skip = P.BLOCK_HEADER_BYTES if self.op == P.Op.BLOCK_SUM else 0
        return np.frombuffer(self.payload[skip:], dtype=dtype)

    def block(self) -> tuple[int, int]:
        """(block, next) of a block-sparse RESULT."""
        if self.op != P.Op.BLOCK_SUM or len(self.payload) < P.BLOCK_HEADER_BYTES:
            raise AssertionError(f"not a block-sparse RESULT: op {self.op}, "
                                 f"{len(self.payload)} payload bytes")
        return struct.unpack_from("!II", self.payload)


def parse(port: int, data: bytes) -> Reply:
    """Dissect a switch output (Ethernet/IPv4/UDP/HINA) without scapy, for speed."""
    f = parse_frame(data)
    if f is None or len(f.message) < P.HEADER_BYTES:
        raise AssertionError(f"port {port}: the switch sent a frame that is not HINA: {data.hex()}")
    total_len = struct.unpack_from("!H", data, P.ETHERNET_BYTES + 2)[0]
    h = P.unpack_header(f.message)
    return Reply(port=port, dst_mac=f.dst.mac, dst_ip=f.dst.ip, dst_port=f.dst.udp_port,
                 src_port=f.src.udp_port, src_mac=f.src.mac, src_ip=f.src.ip,
                 msg_type=h["msg_type"], op=h["op"], flags=h["flags"], count=h["count"],
                 job_id=h["job_id"], pool=h["pool"], slot=h["slot"], seq=h["seq"],
                 generation=h["generation"], reserved=h["reserved"],
                 payload=f.message[P.HEADER_BYTES:],
                 ip_ok=f.ip_ok and f.udp_length_ok and total_len == len(data) - P.ETHERNET_BYTES,
                 checksum_ok=f.checksum_ok, udp_checksum=f.checksum, length=len(data))


def send(target, job: JobSpec, worker: int, data: bytes,
         expected: Optional[int] = None) -> list[Reply]:
    """Send a worker's frame into its port; return the switch's replies, dissected.
    ``expected``: how many replies the caller expects (a real switch then stops waiting as soon
    as they are in, and waits for them however loaded the machine is)."""
    replies = [parse(p, f) for p, f in target.send(job.workers[worker].port, data, expected)]
    # every frame the switch sends carries a right UDP checksum (protocol v3)
    assert all(r.checksum_ok for r in replies), [r for r in replies if not r.checksum_ok]
    return replies


def reason_count(target, reason: P.DropReason) -> int:
    return target.counter_packets(P.REASON_COUNTER, int(reason))


def reference(op: P.Op, contributions: Sequence[np.ndarray],
              table: Optional[Sequence[int]] = None) -> np.ndarray:
    """numpy reference of what the switch returns, as the words a RESULT carries."""
    stack = np.stack([np.asarray(c, dtype=np.int64) for c in contributions])
    if op == P.Op.SUM:
        return stack.sum(axis=0).astype(np.int32)
    if op == P.Op.MAX:
        return stack.astype(np.uint32).max(axis=0).astype(np.int32)
    if op == P.Op.OR:
        return np.bitwise_or.reduce(stack.astype(np.uint32), axis=0).astype(np.int32)
    if op == P.Op.LUT_SUM:
        values = np.asarray(table, dtype=np.int64)[stack].sum(axis=0)
        return values.astype(">u2").view(">i4").astype(np.int32)   # 16-bit lanes, 2 per word
    raise ValueError(f"reference: unknown op {op!r}")
