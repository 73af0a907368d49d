"""The worker's packet I/O through loopback to a reflector: batched against per-message, and
against the switch it is paired with.

    python bench/bench_worker_io.py [--packets 200000] [--window 64] [--words 128]

A reflector process answers every frame the worker tunnels to it with a RESULT frame for the
worker (``hina.framing``, checksums right), as a switch with one worker would, but with no P4
behind it, and cheaply (batched, a few numpy column operations per batch, UDP GSO; see
:func:`reflector`), so that what is measured is the worker side: its own CPU per packet is
printed next to the worker's, to show which of the two sets the rate. Rows:

* ``link``: messages through ``FrameLink`` with at most ``--window`` in flight, per message
  (``send``/``recv``, one system call each) and batched (``prepare``/``send_prepared``,
  ``recv_batch``: UDP GSO or ``sendmmsg``, ``recvmmsg``).
* ``transport``: whole ``Transport.reduce`` calls of SUM chunks (``--words`` 32-bit words per
  packet) with each link kind: window, matching, result copy and retransmission timers included.
* the embedded switch's own rate for the same SUM packets, in process (4 workers), for the
  ratio the issue asks for.

Columns: round trips per second; the worker's system calls per datagram sent or received
(counted on its socket; one per datagram per message); CPU microseconds per round trip of the
worker (of which in the kernel) and of the reflector, and the reflector's datagrams per batch.
Each figure is the best of ``--repeat`` runs (the machine is shared).
"""
from __future__ import annotations

import argparse
import dataclasses
import multiprocessing as mp
import resource
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
RESULT_TYPE = (P.VERSION << 4) | P.MsgType.RESULT
_FEW = 3                      # the reflector answers batches smaller than this frame by frame


def reflector(address_out, stop) -> None:
    """Answer each tunnelled AGGREGATE with its RESULT (count 1) until ``stop``, batched and
    cheap, so that the worker side is what is measured: every datagram queued is taken by one
    ``recvmmsg``; a batch of one length (the usual case) is answered with a few column
    operations into a preallocated buffer (the headers for the worker copied from a template,
    the message copied with its type and count set, the UDP checksum summed for the whole
    batch at once) and one send (UDP GSO, or ``sendmmsg``). Sends back (frames answered,
    batches, CPU seconds) at the end.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
    address_out.send(sock.getsockname())
    peer = address_out.recv()
    batch = batchio.BatchSocket(sock, peer)
    # the answers, rows of exactly the frame's length (whole rows of one width go out in one
    # UDP GSO call: worker.batchio)
    out = np.zeros(batchio.MAX_BATCH * batchio.MAX_DATAGRAM, dtype=np.uint8)
    # frame length -> (headers before the UDP checksum, as bytes and as an array; the ones' sum
    # of the pseudo-header and UDP header)
    heads: dict[int, tuple[bytes, np.ndarray, int]] = {}
    answered, batches, cpu0 = 0, 0, time.process_time()
    at = F.FRAME_HEADER_BYTES
    while not stop.is_set():
        rows, lengths = batch.recv(0.1)
        n = len(lengths)
        if not n:
            continue
        batches += 1
        length = int(lengths[0])
        if length % 2 or (n > 1 and not (lengths == length).all()):   # one group per length
            for size in np.unique(lengths):
                frames = rows[lengths == size, :size]
                messages = np.ascontiguousarray(frames[:, at:])
                messages[:, 0] = RESULT_TYPE
                messages[:, 3] = 1                               # count: one worker
                frames = F.build_frames(SWITCH, ME, messages)
                batch.send(frames, frames.shape[1])
            answered += n
            continue
        if length not in heads:
            head = F.build_frame(SWITCH, ME, bytes(length - at))[:at - 2]
            heads[length] = (head, np.frombuffer(head, dtype=np.uint8),
                             F.udp_header_residue(SWITCH, ME, length - at + P.UDP_BYTES))
        head_bytes, head, residue = heads[length]
        if n < _FEW:                  # one or two: bytes operations cost less than numpy's
            for i in range(n):
                frame = rows[i, :length].tobytes()
                message = bytes((RESULT_TYPE, frame[at + 1], frame[at + 2], 1)) + frame[at + 4:]
                checksum = F.checksum_of(residue + F.ones_sum(message))
                sock.sendto(head_bytes + checksum.to_bytes(2, "big") + message, peer)
            answered += n
            continue
        frames = out[:n * length].reshape(n, length)
        frames[:, :at - 2] = head
        frames[:, at:length] = rows[:, at:length]
        frames[:, at] = RESULT_TYPE
        frames[:, at + 3] = 1                                    # count: one worker
        # the message's ones' sum from little-endian words (no byte swap): 256 times the
        # big-endian sum mod 0xFFFF, and 256 * 256 = 1 mod 0xFFFF takes it back
        sums = frames[:, at:length].view("<u2").sum(axis=1, dtype=np.uint32) % np.uint32(0xFFFF)
        frames[:, at - 2:at].view(">u2")[:, 0] = 0xFFFF - (sums * np.uint32(256) + np.uint32(
            residue)) % np.uint32(0xFFFF)
        batch.send(frames, length)
        answered += n
    address_out.send((answered, batches, time.process_time() - cpu0))
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
        self.pipe = mine

    def close(self) -> tuple[int, int, float]:
        """Stop it; (frames it answered, batches, its CPU seconds), or (0, 0, nan) if it did not
        say."""
        self.stop.set()
        said = self.pipe.recv() if self.pipe.poll(5) else (0, 0, float("nan"))
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
        return said


@dataclasses.dataclass
class Run:
    """One measured run: round trips (packets sent and answered) per second, the worker's
    system calls (on its socket: ``sendmmsg``/``recvmmsg``/``poll``, or ``send``/``recv``) per
    datagram sent or received, and CPU microseconds per round trip of the worker and of the
    reflector."""
    rate: float
    syscalls: float
    worker_us: float
    reflector_us: float
    worker_sys_us: float         # of worker_us, in the kernel
    reflector_batch: float       # datagrams per batch the reflector received


def _cpu() -> np.ndarray:
    """This process's (user + system, system) CPU seconds so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return np.array([usage.ru_utime + usage.ru_stime, usage.ru_stime])


def link_rate(batched: bool, packets: int, window: int, words: int) -> Run:
    """Round trips through a FrameLink, at most ``window`` in flight."""
    link = FrameLink(ME, SWITCH, ("127.0.0.1", 0), ("127.0.0.1", 9), batched=batched)
    ref = Reflector(link)
    try:
        msg = np.zeros((window, P.HEADER_BYTES + 4 * words), dtype=np.uint8)
        msg[:, :P.HEADER_BYTES] = np.frombuffer(P.pack_header(P.MsgType.AGGREGATE, P.Op.SUM),
                                                dtype=np.uint8)
        one = msg[0].tobytes()
        sent = got = 0
        cpu, start = _cpu(), time.perf_counter()
        if batched:
            frames = link.prepare(msg)
            calls0 = link.batch.syscalls
            while got < packets:
                n = min(window - (sent - got), packets - sent)
                if n > 0:
                    link.send_prepared(frames, range(n))
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
        seconds, cpu = time.perf_counter() - start, _cpu() - cpu
    finally:
        answered, batches, ref_cpu = ref.close()
        link.close()
    return Run(packets / seconds, calls / (2 * packets), 1e6 * cpu[0] / packets,
               1e6 * ref_cpu / packets, 1e6 * cpu[1] / packets, answered / max(1, batches))


def transport_rate(batched: bool, chunks: int, words: int, slots: int) -> Run:
    """Transport.reduce of ``chunks`` SUM chunks (one worker, the reflector as its switch)."""
    link = FrameLink(ME, SWITCH, ("127.0.0.1", 0), ("127.0.0.1", 9), batched=batched)
    ref = Reflector(link)
    try:
        t = Transport(link, JobParams(job_id=0, n_workers=1, n_slots=slots, words=words))
        data = np.arange(chunks * words, dtype=np.int32)
        calls0 = link.batch.syscalls if batched else 0
        cpu, start = _cpu(), time.perf_counter()
        result = t.reduce(P.Op.SUM, data)
        seconds, cpu = time.perf_counter() - start, _cpu() - cpu
        assert np.array_equal(result, data), "the reflector's results came back wrong"
        datagrams = t.last.packets_sent + t.last.results
        # per message: one call per datagram sent or received (a receive waits in its own call)
        calls = (link.batch.syscalls - calls0) if batched else datagrams
    finally:
        answered, batches, ref_cpu = ref.close()
        link.close()
    return Run(chunks / seconds, calls / datagrams, 1e6 * cpu[0] / chunks,
               1e6 * ref_cpu / chunks, 1e6 * cpu[1] / chunks, answered / max(1, batches))


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
    best: dict[tuple[str, bool], Run] = {}
    chunks = max(1000, args.packets // 4)
    for _ in range(args.repeat):
        for batched in (False, True):
            for level, run in (("link", lambda: link_rate(batched, args.packets, args.window,
                                                          args.words)),
                               ("transport", lambda: transport_rate(batched, chunks, args.words,
                                                                    args.window))):
                got = run()
                if (level, batched) not in best or got.rate > best[(level, batched)].rate:
                    best[(level, batched)] = got
    switch = switch_rate(args.words, args.switch_packets)
    print(f"worker I/O through loopback to a reflector, {args.words} words per packet, "
          f"window {args.window}, best of {args.repeat} ({args.packets:,} link round trips, "
          f"{chunks:,} transport chunks per run):")
    print("  (the reflector: another process, recvmmsg/UDP GSO, a batch answered with a few "
          "numpy column operations;\n   CPU us/pkt: user + system time per round trip of the "
          "worker (of which system) | of the reflector, and datagrams per batch it received)")
    for level in ("link", "transport"):
        per, bat = best[(level, False)], best[(level, True)]
        print(f"  {level:<9} per-message {per.rate:>9,.0f} pkt/s  {per.syscalls:5.3f} calls/dgram  "
              f"CPU {per.worker_us:5.1f} (sys {per.worker_sys_us:4.1f}) | {per.reflector_us:4.1f}"
              f" us/pkt, {per.reflector_batch:4.1f}/batch")
        print(f"  {'':<9} batched     {bat.rate:>9,.0f} pkt/s  {bat.syscalls:5.3f} calls/dgram  "
              f"CPU {bat.worker_us:5.1f} (sys {bat.worker_sys_us:4.1f}) | {bat.reflector_us:4.1f}"
              f" us/pkt, {bat.reflector_batch:4.1f}/batch   "
              f"batched / per-message {bat.rate / per.rate:5.2f}x")
    print(f"  embedded switch, SUM, 4 workers: {switch:,.0f} pkt/s in; batched transport / switch "
          f"{best[('transport', True)].rate / switch:.1f}x")


if __name__ == "__main__":
    main()
