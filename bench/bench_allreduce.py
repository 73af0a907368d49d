"""Allreduce goodput through the embedded switch, per codec, next to gloo on the same processes.

For each size (coordinates of one fp32 tensor) and codec, ``--workers`` processes each run
``allreduce`` through the switch (softswitch on loopback UDP ports, p4/hina.p4, job installed over
P4Runtime) and then ``torch.distributed.all_reduce`` (gloo) of the same tensor; goodput is
coordinates per second of wall time (the slowest worker's). It also prints the worker stack's own
packet rate against a discard sink (a UDP socket nobody reads), so the switch, not the host, is
shown to be the limit.

Usage::

    python bench/bench_allreduce.py [--sizes 1000000,16000000] [--codecs fixed,thc,fetchsgd] [--workers 4]
"""
from __future__ import annotations

import argparse
import queue
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

from hina.demo.local import LocalDeployment, connect_worker, free_tcp_port
from hina import codecs as codec_registry
from hina import protocol as P
from hina.procs import rank_processes
from hina.worker.link import Endpoint, FrameLink
from hina.worker.packetizer import build_aggregates, layout_for

#: registry names (hina.codecs) benchmarked
CODECS = ("fixed", "thc", "fetchsgd", "lossless")
SINK_PACKETS = 20000


def make_codec(name: str, n: int, rank: int, size: int):
    from hina.worker.codecs import registry
    params = {
        "thc": {},
        "fixed": {},
        # 10x fewer counters than coordinates, 5 rows
        "fetchsgd": dict(rows=5, columns=1 << max(7, int(np.log2(size / 50))), k=0.01),
        "lossless": dict(columns=1 << max(7, int(np.log2(size / 30)))),
    }
    return registry.build(name, n, rank, **params[name])


def _worker(rank, n, seat, codec_name, size, init, out, transport_kwargs):
    from hina.worker.collective import allreduce
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    try:
        torch.manual_seed(rank)
        x = torch.randn(size)
        codec = make_codec(codec_name, n, rank, size)
        transport = connect_worker(seat, give_up_s=60.0, **transport_kwargs)
        dist.barrier()
        t0 = time.perf_counter()
        allreduce(x, codec, transport)
        hina_s = time.perf_counter() - t0
        stats = transport.total
        dist.barrier()
        y = x.clone()
        t0 = time.perf_counter()
        dist.all_reduce(y)
        gloo_s = time.perf_counter() - t0
        transport.close()
        out.put((rank, hina_s, gloo_s, stats.packets_sent, stats.retransmissions))
    finally:
        dist.destroy_process_group()


def sink_rate(words: int) -> float:
    """Packets/s one worker builds and sends (THC messages) to a socket that discards them."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    link = FrameLink(Endpoint(2, 0x0A000001, 40000), Endpoint(1, 0x0A0000FE, P.UDP_PORT_BASE),
                     ("127.0.0.1", 0), sink.getsockname())
    layout = layout_for(P.Op.LUT_SUM, SINK_PACKETS * words, words)
    data = np.random.default_rng(0).integers(0, 256, layout.elements, dtype=np.uint8)
    t0 = time.perf_counter()
    messages = build_aggregates(layout, data, 1, 0, 32)
    for m in messages:
        link.send(m.tobytes())
    rate = len(messages) / (time.perf_counter() - t0)
    link.close()
    sink.close()
    return rate


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,16000000")
    ap.add_argument("--codecs", default="fixed,thc,fetchsgd")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--words", type=int, default=P.WORDS, choices=P.V1MODEL_WORDS)
    ap.add_argument("--slots", type=int, default=64, help="the job's slots (window)")
    ap.add_argument("--min-rto", type=float, help="the workers' smallest retransmission timeout "
                    "(default: the transport's)")
    args = ap.parse_args(argv)
    transport_kwargs = {} if args.min_rto is None else {"min_rto": args.min_rto}
    sizes = [int(s) for s in args.sizes.split(",")]
    codecs = args.codecs.split(",")
    for c in codecs:
        if c not in CODECS:
            ap.error(f"codec {c!r}: one of {CODECS}")
    n = args.workers
    print(f"worker stack, one process, THC messages of {args.words} words to a discard sink: "
          f"{sink_rate(args.words):,.0f} packets/s")
    print(f"{'codec':<9}{'coords':>12}{'HINA s':>10}{'HINA coords/s':>16}{'gloo s':>9}"
          f"{'gloo coords/s':>16}{'pkts/worker':>13}{'retx/worker':>13}{'switch pps':>12}")
    with LocalDeployment(n, words=args.words) as deployment:
        for size in sizes:
            for codec_name in codecs:
                # codecs whose lanes are THC indices need THC's table in the switch's LUT
                table = (tuple(make_codec(codec_name, n, 0, size).table)
                         if codec_registry.lookup(codec_name).lut else None)
                seats = deployment.create_job(job_id=1, n_slots=args.slots, thc_table=table)
                ctx = rank_processes()
                out = ctx.Queue()
                init = f"tcp://127.0.0.1:{free_tcp_port()}"
                procs = [ctx.Process(target=_worker, args=(r, n, seats[r], codec_name, size, init, out,
                                                   transport_kwargs))
                         for r in range(n)]
                for p in procs:
                    p.start()
                rows = []
                while len(rows) < n:
                    try:
                        rows.append(out.get(timeout=1.0))
                    except queue.Empty:
                        dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                        if dead:
                            for p in procs:
                                p.kill()
                            raise SystemExit(f"{codec_name} {size}: a worker failed "
                                             f"(exit codes {[p.exitcode for p in procs]})")
                for p in procs:
                    p.join()
                deployment.delete_job(1)
                hina_s = max(r[1] for r in rows)
                gloo_s = max(r[2] for r in rows)
                pkts = max(r[3] for r in rows)
                retx = sum(r[4] for r in rows)
                print(f"{codec_name:<9}{size:>12,}{hina_s:>10.2f}{size / hina_s:>16,.0f}"
                      f"{gloo_s:>9.3f}{size / gloo_s:>16,.0f}{pkts:>13,}{retx / n:>13,.0f}"
                      f"{n * pkts / hina_s:>12,.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
