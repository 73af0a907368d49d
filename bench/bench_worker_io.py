"""The worker's packet I/O through loopback to a reflector: batched against per-message, and
against the switch it is paired with.

    python bench/bench_worker_io.py [--packets 200000] [--window 64] [--words 128]

A reflector process (its own core) answers every frame the worker tunnels to it with a RESULT
frame for the worker (``hina.framing``, checksums right), as a switch with one worker would, but
with no P4 behind it: what is measured is the worker side alone. Rows:

* ``link``: messages through ``FrameLink`` with at most ``--window`` in flight, per message
  (``send``/``recv``, one system call each) and batched (``send_batch``/``recv_batch``,
  ``sendmmsg``/``recvmmsg``); system calls per packet counted on the worker's socket.
* ``transport``: whole ``Transport.reduce`` calls of SUM chunks (``--words`` 32-bit words per
  packet) with each link kind: window, matching, result copy and retransmission timers included.
* the embedded switch's own rate for the same SUM packets, in process (4 workers), for the
  ratio the issue asks for.

Each figure is the best of ``--repeat`` runs (the machine is shared).
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import socket
import time


import numpy as np

from hina import framing as F
from hina import programs
from hina import protocol as P
from hina.worker import batchio
from hina.worker.link import FrameLink
from hina.worker.transport import JobParams, Transport

HINA_P4 = programs.HINA_P4
ME = F.Endpoint.make("02:00:00:00:01:00", "10.0.1.0", 40000)
SWITCH = F.Endpoint.make("02:00:00:00:00:fe", "10.0.0.254", P.UDP_PORT_BASE)


def reflector(address_out, stop) -> None:
    """Answer each tunnelled AGGREGATE with its RESULT (count 1), batched, until ``stop``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    address_out.send(sock.getsockname())
    peer = address_out.recv()
    batch = batchio.BatchSocket(sock, peer)
    out = None
    while not stop.is_set():
        rows, lengths = batch.recv(0.1)
        if not len(lengths):
            continue
        for length in np.unique(lengths):
            frames = rows[lengths == length, :length]
            messages = np.ascontiguousarray(frames[:, F.FRAME_HEADER_BYTES:])
            messages[:, 0] = (P.VERSION << 4) | P.MsgType.RESULT
            messages[:, 3] = 1                                       # count: one worker
            out = F.build_frames(SWITCH, ME, messages)
            batch.send(out, np.full(len(out), out.shape[1], dtype=np.int64))
    sock.close()


class Reflector:
    def __init__(self, link: FrameLink):
        ctx = mp.get_context("fork")
        mine, theirs = ctx.Pipe()
        self.stop = ctx.Event()
        self.proc = ctx.Process(target=reflector, args=(theirs, self.stop), daemon=True)
        self.proc.start()
        link.tunnel_switch = mine.recv()
        mine.send(link.sock.getsockname())

    def close(self) -> None:
        self.stop.set()
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()


def link_rate(batched: bool, packets: int, window: int, words: int) -> tuple[float, float]:
    """(packets/s round trip, system calls per packet) through a FrameLink."""
    link = FrameLink(ME, SWITCH, ("127.0.0.1", 0), ("127.0.0.1", 9), batched=batched)
    ref = Reflector(link)
    try:
        msg = np.zeros((window, P.HEADER_BYTES + 4 * words), dtype=np.uint8)
        msg[:, :P.HEADER_BYTES] = np.frombuffer(P.pack_header(P.MsgType.AGGREGATE, P.Op.SUM),
                                                dtype=np.uint8)
        one = msg[0].tobytes()
        sent = got = 0
        start = time.perf_counter()
        if batched:
            calls0 = link.batch.syscalls
            while got < packets:
                n = min(window - (sent - got), packets - sent)
                if n > 0:
                    link.send_batch(msg[:n])
                    sent += n
                _, lengths = link.recv_batch(0.5)
                if not len(lengths):
                    raise RuntimeError("the reflector stopped answering")
                got += len(lengths)
            calls = link.batch.syscalls - calls0
        else:
            while got < packets:
                while sent - got < window and sent < packets:
                    link.send(one)
                    sent += 1
                if link.recv(0.5) is None:
                    raise RuntimeError("the reflector stopped answering")
                got += 1
            calls = sent + got
        return packets / (time.perf_counter() - start), calls / (2 * packets)
    finally:
        ref.close()
        link.close()


def transport_rate(batched: bool, chunks: int, words: int, slots: int) -> float:
    """Packets/s of Transport.reduce (one worker, the reflector as its switch)."""
    link = FrameLink(ME, SWITCH, ("127.0.0.1", 0), ("127.0.0.1", 9), batched=batched)
    ref = Reflector(link)
    try:
        t = Transport(link, JobParams(job_id=0, n_workers=1, n_slots=slots, words=words))
        data = np.arange(chunks * words, dtype=np.int32)
        start = time.perf_counter()
        result = t.reduce(P.Op.SUM, data)
        seconds = time.perf_counter() - start
        assert np.array_equal(result, data), "the reflector's results came back wrong"
        return chunks / seconds
    finally:
        ref.close()
        link.close()


def switch_rate(words: int, packets: int, n_workers: int = 4) -> float:
    """Input packets/s of the embedded switch on SUM rounds of ``n_workers``, in process."""
    from hina import pipeline
    from hina.softswitch.compiler import compile_file
    from hina.softswitch.switch import Switch
    switch = Switch(device_id=0)
    switch.load(compile_file(str(HINA_P4), defines={"HINA_WORDS": str(words)}))
    job = pipeline.JobSpec(job_id=1, workers=tuple(
        pipeline.WorkerAddress(port=w + 1, mac=0x020000000100 + w, ip=0x0A000100 + w,
                               udp_port=40000 + w) for w in range(n_workers)), n_slots=8,
        reg_base=0, words=words)
    dp = switch.require_dataplane()
    for entry in pipeline.job_entries(job):
        dp.table_insert(entry)
    dp.mcast_group_set(*pipeline.multicast_group(job))
    rng = np.random.default_rng(0)
    frames = []
    for seq in range(max(1, packets // n_workers)):
        slot, pool = P.slot_and_pool(seq, job.n_slots)
        for w, addr in enumerate(job.workers):
            message = P.pack_header(P.MsgType.AGGREGATE, P.Op.SUM, job_id=job.job_id, slot=slot,
                                    pool=pool, seq=seq) + rng.integers(
                0, 1 << 20, words).astype(">i4").tobytes()
            frames.append((addr.port, F.build_frame(F.Endpoint(addr.mac, addr.ip, addr.udp_port),
                                                    SWITCH, message)))
    outputs = 0
    start = time.perf_counter()
    for port, frame in frames:
        outputs += len(switch.receive(port, frame))
    seconds = time.perf_counter() - start
    assert outputs == len(frames), f"{outputs} results for {len(frames)} contributions"
    return len(frames) / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=200_000)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--words", type=int, default=P.WORDS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--switch-packets", type=int, default=2000)
    args = ap.parse_args()
    why = batchio.available()
    if why:
        raise SystemExit(f"batched I/O unavailable here: {why}")
    best = {}
    for _ in range(args.repeat):
        for batched in (False, True):
            rate, calls = link_rate(batched, args.packets, args.window, args.words)
            key = ("link", batched)
            if rate > best.get(key, (0, 0))[0]:
                best[key] = (rate, calls)
            chunks = max(1000, args.packets // 4)
            rate = transport_rate(batched, chunks, args.words, args.window)
            key = ("transport", batched)
            best[key] = max(best.get(key, (0, 0)), (rate, 0))
    switch = switch_rate(args.words, args.switch_packets)
    print(f"worker I/O through loopback to a reflector, {args.words} words per packet, "
          f"window {args.window}, best of {args.repeat}:")
    for level in ("link", "transport"):
        per, batched = best[(level, False)][0], best[(level, True)][0]
        print(f"  {level:<9} per-message {per:>10,.0f} pkt/s   batched {batched:>10,.0f} pkt/s"
              f"   batched / per-message {batched / per:5.2f}x")
    print(f"  system calls per packet (link, batched): {best[('link', True)][1]:.3f} "
          f"(per-message: {best[('link', False)][1]:.3f})")
    print(f"  embedded switch, SUM, 4 workers: {switch:,.0f} pkt/s in; batched transport / switch "
          f"{best[('transport', True)][0] / switch:.1f}x")


if __name__ == "__main__":
    main()
