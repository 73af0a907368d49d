"""Packets per second through p4/hina.p4 on the embedded target, in process, per mode.

    python bench/bench_dataplane.py [--words 128] [--packets 2000] [--workers 4] [--repeat 3]
                                    [--modes SUM "THC LUT_SUM" ...] [--cpu-time]

Each mode runs a job of ``--workers`` workers on one switch; every worker sends its packets in
rounds over the job's slots (both pool copies), so completions and multicast replication are
included in the time. Reports input packets/s, output frames/s and payload coordinates/s, best
of ``--repeat`` runs on fresh state (the machine is shared; the best run is the least disturbed).
``--modes``: only the modes named (as printed). ``--cpu-time``: time by this process's CPU time
(``time.process_time``) instead of the wall clock, so that other processes on a loaded machine
take less from the figures (they still share the caches).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
from hina import protocol as P
from hina.testing.frames import contribution, frame, install, install_lut, make_job
from hina.testing.targets import EmbeddedTarget


def slot_frames(job, op, words, n_packets, rng):
    n = len(job.workers)
    rounds = max(1, n_packets // n)
    frames = []
    for seq in range(rounds):
        slot, pool = seq % job.n_slots, (seq // job.n_slots) % 2
        for w in range(n):
            if op == P.Op.LUT_SUM:
                values = rng.integers(0, 16, 2 * words)
            else:
                values = rng.integers(0, 1 << 20, words)
            frames.append((job.workers[w].port, contribution(job, w, op, values, slot=slot,
                                                             pool=pool, seq=seq)))
    return frames, 2 * words if op == P.Op.LUT_SUM else words


def block_frames(job, words, n_packets, rng, skip: float):
    """Block-sparse rounds (BLOCK_SUM, or BLOCK_SKIP with probability ``skip`` per worker and
    round, at least one BLOCK_SUM per round): the switch's block-sparse path as workers use it."""
    from hina.testing.frames import block_contribution
    n = len(job.workers)
    frames = []
    for seq in range(max(1, n_packets // n)):
        slot, pool = seq % job.n_slots, (seq // job.n_slots) % 2
        block = seq                        # stream `slot` aggregates blocks slot, slot + n_slots..
        skips = rng.random(n) < skip
        skips[rng.integers(n)] = False
        for w in range(n):
            values = None if skips[w] else rng.integers(0, 1 << 20, words)
            frames.append((job.workers[w].port,
                           block_contribution(job, w, block, block + job.n_slots, values,
                                              slot=slot, pool=pool, seq=seq)))
    return frames, words


def pairs_frames(job, n_packets, rng):
    frames = []
    n = len(job.workers)
    for k in range(n_packets):
        w = k % n
        buf = np.zeros((P.PAIRS_PER_PACKET, 2), dtype=">u4")
        buf[:, 0] = rng.integers(0, 1 << 30, P.PAIRS_PER_PACKET)
        buf[:, 1] = rng.integers(1, 100, P.PAIRS_PER_PACKET)
        frames.append((job.workers[w].port, frame(job.workers[w], buf.tobytes(),
                                                  msg_type=P.MsgType.PAIRS, job_id=job.job_id,
                                                  seq=k // n)))
    return frames, P.PAIRS_PER_PACKET


def harvest_frames(job, words, n_packets):
    blocks = job.sketch_columns // words
    frames = []
    for k in range(n_packets):
        payload = bytes([k % P.SKETCH_ROWS, 0]) + ((k // P.SKETCH_ROWS) % blocks).to_bytes(2, "big")
        frames.append((job.workers[0].port, frame(job.workers[0], payload,
                                                  msg_type=P.MsgType.HARVEST, job_id=job.job_id)))
    return frames, words


MODES = [("SUM", P.Op.SUM), ("MAX", P.Op.MAX), ("OR", P.Op.OR), ("THC LUT_SUM", P.Op.LUT_SUM),
         ("BLOCK_SUM (block-sparse)", P.Op.BLOCK_SUM),
         ("BLOCK_SKIP 75 % (block-sparse)", P.Op.BLOCK_SKIP),
         ("PAIRS (in-switch sketch)", None), ("HARVEST", None)]


def run(words: int, n_packets: int, n_workers: int, repeat: int = 3, modes=None,
        clock=time.perf_counter) -> list[tuple[str, float, float, float]]:
    target = EmbeddedTarget()
    t0 = time.perf_counter()
    target.load(defines={"HINA_WORDS": words})
    print(f"compiled and loaded HINA_WORDS={words} in {time.perf_counter() - t0:.1f} s")
    rng = np.random.default_rng(0)
    rows = []
    for name, op in MODES:
        if modes and name not in modes:
            continue
        best, outputs = float("inf"), 0
        for _ in range(repeat):
            target.load(defines={"HINA_WORDS": words})        # fresh state (program cached)
            job = make_job(1, n_workers, n_slots=8, lut_id=1, words=words,
                           sketch_columns=max(words, 4096), sketch_seed=1)
            install(target, job)
            if op == P.Op.LUT_SUM:
                install_lut(target, 1, words=words)
            if op in (P.Op.BLOCK_SUM, P.Op.BLOCK_SKIP):
                frames, coords = block_frames(job, words, n_packets, rng,
                                              skip=0.75 if op == P.Op.BLOCK_SKIP else 0.0)
            elif op is not None:
                frames, coords = slot_frames(job, op, words, n_packets, rng)
            elif name.startswith("PAIRS"):
                frames, coords = pairs_frames(job, n_packets, rng)
            else:
                frames, coords = harvest_frames(job, words, n_packets)
            outputs = 0
            start = clock()
            for port, data in frames:
                outputs += len(target.send(port, data))
            best = min(best, clock() - start)
        pps = len(frames) / best
        rows.append((name, pps, outputs / best, pps * coords))
        print(f"  {name:<26}{pps:>10.0f} pkt/s in {outputs / best:>10.0f} frames/s out "
              f"{pps * coords:>12.0f} coordinates/s")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, nargs="+", default=[P.WORDS])
    ap.add_argument("--packets", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", nargs="+", metavar="MODE",
                    help="only these modes: " + ", ".join(repr(n) for n, _ in MODES))
    ap.add_argument("--cpu-time", action="store_true",
                    help="time by this process's CPU time instead of the wall clock")
    args = ap.parse_args(argv)
    unknown = set(args.modes or ()) - {n for n, _ in MODES}
    if unknown:
        ap.error(f"unknown mode(s) {sorted(unknown)}; modes: {[n for n, _ in MODES]}")
    clock = time.process_time if args.cpu_time else time.perf_counter
    for w in args.words:
        run(w, args.packets, args.workers, args.repeat, args.modes, clock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
