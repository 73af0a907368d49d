"""Write the STF tests of p4/hina.p4 (default sizes): ``python p4/tests/make_stf.py``.

The expected frames are built here with scapy from the protocol description, independently of
the P4 program, so the STF files check the program rather than restate it. The files are
committed; rerun this script after a protocol change.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw, raw

ROOT = Path(__file__).resolve().parents[2]
from hina import pipeline
from hina import protocol as P
from hina.layers import HINA

HERE = Path(__file__).resolve().parent
SWITCH_MAC, SWITCH_IP = 0x0200000000FE, 0x0A0000FE
W = P.WORDS


def ip(n):
    return ".".join(str((n >> s) & 0xFF) for s in (24, 16, 8, 0))


def mac(n):
    return ":".join(f"{(n >> s) & 0xFF:02x}" for s in range(40, -1, -8))


def workers(n):
    return tuple(pipeline.WorkerAddress(port=i + 1, mac=0x020000000100 + i, ip=0x0A000100 + i,
                                        udp_port=40000 + i) for i in range(n))


def words(values):
    return np.asarray(values, dtype=np.int64).astype(np.uint32).astype(">u4").tobytes()


def to_switch(addr, payload, **hina):
    return raw(Ether(src=mac(addr.mac), dst=mac(SWITCH_MAC)) / IP(src=ip(addr.ip), dst=ip(SWITCH_IP))
               / UDP(sport=addr.udp_port, dport=P.UDP_PORT_BASE) / HINA(**hina) / Raw(payload))


def to_worker(addr, payload, **hina):
    return raw(Ether(src=mac(SWITCH_MAC), dst=mac(addr.mac)) / IP(src=ip(SWITCH_IP), dst=ip(addr.ip))
               / UDP(sport=P.UDP_PORT_BASE, dport=addr.udp_port) / HINA(**hina)
               / Raw(payload))


def hexs(frame: bytes) -> str:
    return frame.hex().upper()


def entry_lines(job):
    lines = []
    for e in pipeline.job_entries(job):
        table = job_table_info[e.table]
        keys = " ".join(f"{k}:{m.value}" for k, m in zip(table[0], e.matches))
        args = ", ".join(f"{p}:{a}" for p, a in zip(table[1], e.action.args))
        lines.append(f"add {e.table} {keys} {e.action.action}({args})")
    group, replicas = pipeline.multicast_group(job)
    lines.append(f"mc_mgrp_create {group}")
    for handle, r in enumerate(replicas):
        lines.append(f"mc_node_create {r.rid} {r.port}")
        lines.append(f"mc_node_associate {group} {handle}")
    return lines


# Key and parameter names of the tables the STF files write (as in p4/include/*.p4).
job_table_info = {
    pipeline.JOB_CONFIG: (("job_id",), ("n_slots", "lut_id", "sketch_base", "sketch_mask",
                                        "sketch_seed")),
    pipeline.WORKER_ADMISSION: (("job_id", "ingress_port", "src_mac", "src_addr", "src_port"),
                                ("worker_id", "worker_bit", "n_workers", "mcast_grp", "reg_base",
                                 "pair_stream", "generation")),
    pipeline.WORKER_BY_ADDRESS: (("job_id", "src_addr", "src_port"), ()),
    pipeline.REPLICA_REWRITE: (("egress_rid",), ("dst_mac", "dst_addr", "dst_port")),
}


def sum_and_retransmit():
    job = pipeline.JobSpec(job_id=1, workers=workers(2), n_slots=4, reg_base=0)
    a, b = np.arange(W) - 100, np.full(W, 7)
    total = words(a + b)
    hdr = dict(op=P.Op.SUM, job_id=1, slot=2, pool=1, seq=6)
    lines = ["# Two workers SUM into slot 2 / pool 1; both get the result; a retransmission by",
             "# worker 0 is answered by unicast with the stored result and the RETRANSMIT flag."]
    lines += entry_lines(job)
    lines.append(f"packet 1 {hexs(to_switch(job.workers[0], words(a), **hdr))}")
    lines.append(f"packet 2 {hexs(to_switch(job.workers[1], words(b), **hdr))}")
    res = dict(hdr, msg_type=P.MsgType.RESULT, count=2)
    for w in (0, 1):
        lines.append(f"expect {w + 1} {hexs(to_worker(job.workers[w], total, **res))} $")
    lines.append(f"packet 1 {hexs(to_switch(job.workers[0], words(a), flags=P.Flag.RETRANSMIT, **hdr))}")
    lines.append(f"expect 1 {hexs(to_worker(job.workers[0], total, flags=P.Flag.RETRANSMIT, **res))} $")
    return lines


def drops():
    job = pipeline.JobSpec(job_id=1, workers=workers(2), n_slots=4, reg_base=0)
    stranger = workers(5)[4]
    ones = words(np.ones(W))
    good = to_switch(job.workers[0], ones, op=P.Op.SUM, job_id=1)
    lines = ["# Unknown worker, unknown job, bad slot, truncated frame, bad version, frame cut",
             "# inside the HINA header, worker 0's frame forged on worker 1's port, a wrong and a",
             "# missing UDP checksum: no output, each counted once in reason_counter; then a",
             "# clean round still completes."]
    lines += entry_lines(job)
    lines.append(f"packet 5 {hexs(to_switch(stranger, ones, op=P.Op.SUM, job_id=1))}")
    lines.append(f"packet 2 {hexs(good)}")
    lines.append(f"packet 1 {hexs(to_switch(job.workers[0], ones, op=P.Op.SUM, job_id=9))}")
    lines.append(f"packet 1 {hexs(to_switch(job.workers[0], ones, op=P.Op.SUM, job_id=1, slot=4))}")
    lines.append(f"packet 1 {hexs(good[:-8])}")
    lines.append(f"packet 1 {hexs(to_switch(job.workers[0], ones, op=P.Op.SUM, job_id=1, version=P.VERSION - 1))}")
    cut = raw(Ether(src=mac(job.workers[0].mac), dst=mac(SWITCH_MAC))
              / IP(src=ip(job.workers[0].ip), dst=ip(SWITCH_IP))
              / UDP(sport=job.workers[0].udp_port, dport=P.UDP_PORT_BASE)
              / Raw(raw(HINA(op=P.Op.SUM, job_id=1))[:P.HEADER_BYTES - 4]))
    lines.append(f"packet 1 {hexs(cut)}")
    udp_checksum = P.ETHERNET_BYTES + P.IPV4_BYTES + 6
    for checksum in (good[udp_checksum:udp_checksum + 2][::-1], b"\0\0"):    # wrong, missing
        lines.append(f"packet 1 {hexs(good[:udp_checksum] + checksum + good[udp_checksum + 2:])}")
    for reason, count in ((P.DropReason.UNKNOWN_WORKER, 1), (P.DropReason.BAD_JOB, 1),
                          (P.DropReason.BAD_SLOT, 1), (P.DropReason.MALFORMED, 3),
                          (P.DropReason.WRONG_PORT, 1), (P.DropReason.BAD_CHECKSUM, 2)):
        lines.append(f"check_counter {P.REASON_COUNTER}({int(reason)}) packets == {count}")
    lines.append(f"packet 1 {hexs(good)}")
    lines.append(f"packet 2 {hexs(to_switch(job.workers[1], ones, op=P.Op.SUM, job_id=1))}")
    res = dict(op=P.Op.SUM, job_id=1, msg_type=P.MsgType.RESULT, count=2)
    for w in (0, 1):
        lines.append(f"expect {w + 1} {hexs(to_worker(job.workers[w], words(np.full(W, 2)), **res))} $")
    return lines


def stale_generation():
    job = pipeline.JobSpec(job_id=1, workers=workers(2), n_slots=4, reg_base=0, generation=3)
    ones = words(np.ones(W))
    hdr = dict(op=P.Op.SUM, job_id=1, slot=1, pool=0, seq=1)
    lines = ["# A job in generation 3: a packet of generation 2 from an admitted worker is dropped",
             "# and answered with a header-only NOTICE (STALE_GENERATION, generation 3) out of its",
             "# ingress port; a round of generation 3 then completes; the results carry it."]
    lines += entry_lines(job)
    lines.append(f"packet 1 {hexs(to_switch(job.workers[0], ones, generation=2, **hdr))}")
    notice = dict(hdr, msg_type=P.MsgType.NOTICE, op=int(P.DropReason.STALE_GENERATION),
                  generation=3)
    lines.append(f"expect 1 {hexs(to_worker(job.workers[0], b'', **notice))} $")
    lines.append(f"check_counter {P.REASON_COUNTER}({int(P.DropReason.STALE_GENERATION)}) "
                 "packets == 1")
    for w in (0, 1):
        lines.append(f"packet {w + 1} {hexs(to_switch(job.workers[w], ones, generation=3, **hdr))}")
    res = dict(hdr, msg_type=P.MsgType.RESULT, count=2, generation=3)
    for w in (0, 1):
        lines.append(f"expect {w + 1} {hexs(to_worker(job.workers[w], words(np.full(W, 2)), **res))} $")
    return lines


def in_switch_sketch():
    from hina import hashing
    columns, seed = W, 7
    job = pipeline.JobSpec(job_id=1, workers=workers(1), n_slots=1, reg_base=0,
                           sketch_columns=columns, sketch_seed=seed)
    w0 = job.workers[0]
    idx, val = [3, 1000, 77777], [5, -7, 11]
    pairs = np.zeros((P.PAIRS_PER_PACKET, 2), dtype=">u4")
    pairs[:3, 0], pairs[:3, 1] = idx, np.asarray(val).astype(np.uint32)
    sketch = np.zeros((P.SKETCH_ROWS, columns), dtype=np.int64)
    for r in range(P.SKETCH_ROWS):
        for i, v in zip(idx, val):
            h = hashing.sketch_hash_scalar(seed, r, i)
            sketch[r, h & (columns - 1)] += hashing.sign_of(h) * v
    lines = ["# In-switch sketch: three pairs, a retransmission of them (acknowledged, not added),",
             "# HARVEST of each row, RESET of row 0, HARVEST of row 0 again (zeros)."]
    lines += entry_lines(job)
    hdr = dict(job_id=1, seq=0)
    for _ in range(2):
        lines.append(f"packet 1 {hexs(to_switch(w0, pairs.tobytes(), msg_type=P.MsgType.PAIRS, **hdr))}")
        lines.append(f"expect 1 {hexs(to_worker(w0, b'', msg_type=P.MsgType.PAIRS_ACK, **hdr))} $")
    for r in range(P.SKETCH_ROWS):
        req = bytes([r, 0, 0, 0])
        lines.append(f"packet 1 {hexs(to_switch(w0, req, msg_type=P.MsgType.HARVEST, **hdr))}")
        lines.append(f"expect 1 {hexs(to_worker(w0, req + words(sketch[r]), msg_type=P.MsgType.HARVEST_DATA, **hdr))} $")
    req = bytes([0, 0, 0, 0])
    lines.append(f"packet 1 {hexs(to_switch(w0, req, msg_type=P.MsgType.RESET, **hdr))}")
    lines.append(f"expect 1 {hexs(to_worker(w0, req, msg_type=P.MsgType.RESET, **hdr))} $")
    lines.append(f"packet 1 {hexs(to_switch(w0, req, msg_type=P.MsgType.HARVEST, **hdr))}")
    lines.append(f"expect 1 {hexs(to_worker(w0, req + words(np.zeros(W)), msg_type=P.MsgType.HARVEST_DATA, **hdr))} $")
    return lines


def block_sparse():
    job = pipeline.JobSpec(job_id=1, workers=workers(3), n_slots=2, reg_base=0)
    a, c = np.arange(W) - 9, np.full(W, -4)
    blk = lambda block, nxt: int(block).to_bytes(4, "big") + int(nxt).to_bytes(4, "big")
    lines = ["# Block-sparse: slot 0 aggregates block 0. Workers 0 and 2 send it (BLOCK_SUM,",
             "# next 6 and 4); worker 1's block 0 is zero (BLOCK_SKIP, next 2). The RESULT (op",
             "# BLOCK_SUM) carries the sum, block 0 and next 2 (the smallest announced), to all.",
             "# A retransmission of worker 1's SKIP gets it by unicast; a packet naming block 2",
             "# in block 0's round is BAD_BLOCK, one whose next is not beyond its block MALFORMED."]
    lines += entry_lines(job)
    hdr = dict(job_id=1, slot=0, pool=0, seq=0)
    lines.append(f"packet 1 {hexs(to_switch(job.workers[0], blk(0, 6) + words(a), op=P.Op.BLOCK_SUM, **hdr))}")
    lines.append(f"packet 2 {hexs(to_switch(job.workers[1], blk(2, 6), op=P.Op.BLOCK_SKIP, **hdr))}")
    lines.append(f"packet 2 {hexs(to_switch(job.workers[1], blk(0, 0), op=P.Op.BLOCK_SKIP, **hdr))}")
    lines.append(f"check_counter {P.REASON_COUNTER}({int(P.DropReason.BAD_BLOCK)}) packets == 1")
    lines.append(f"check_counter {P.REASON_COUNTER}({int(P.DropReason.MALFORMED)}) packets == 1")
    lines.append(f"packet 2 {hexs(to_switch(job.workers[1], blk(0, 2), op=P.Op.BLOCK_SKIP, **hdr))}")
    lines.append(f"packet 3 {hexs(to_switch(job.workers[2], blk(0, 4) + words(c), op=P.Op.BLOCK_SUM, **hdr))}")
    res = dict(hdr, op=P.Op.BLOCK_SUM, msg_type=P.MsgType.RESULT, count=3)
    total = blk(0, 2) + words(a + c)
    for w in (0, 1, 2):
        lines.append(f"expect {w + 1} {hexs(to_worker(job.workers[w], total, **res))} $")
    lines.append(f"packet 2 {hexs(to_switch(job.workers[1], blk(0, 2), op=P.Op.BLOCK_SKIP, flags=P.Flag.RETRANSMIT, **hdr))}")
    lines.append(f"expect 2 {hexs(to_worker(job.workers[1], total, flags=P.Flag.RETRANSMIT, **res))} $")
    return lines


def main():
    for name, make in (("hina_sum_retransmit", sum_and_retransmit), ("hina_drops", drops),
                       ("hina_in_switch_sketch", in_switch_sketch),
                       ("hina_stale_generation", stale_generation),
                       ("hina_block_sparse", block_sparse)):
        path = HERE / f"{name}.stf"
        path.write_text("\n".join(make()) + "\n")
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
