"""The worker transport under packet loss, through the embedded switch in process.

Each worker is a thread with its own transport and a loopback UDP port on an in-process switch
running p4/hina.p4 (64 words per packet); the switch port drops frames in both directions with
the given probability. For each loss rate it prints the time of one SUM reduce of
``--chunks`` chunks per worker and, per worker, packets sent, retransmissions, fast
retransmissions (sent on results of later chunks) and duplicate results.

Usage::

    python bench/bench_transport_loss.py [--loss 0 0.02 0.05] [--workers 4] [--chunks 1500]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
from hina import protocol as P
from hina import programs
from hina.softswitch.compiler import compile_file
from hina.testing.switchjob import WORDS, LocalJob, run_workers


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loss", type=float, nargs="+", default=[0.0, 0.02, 0.05])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--chunks", type=int, default=1500, help="chunks per worker")
    ap.add_argument("--slots", type=int, default=32)
    args = ap.parse_args(argv)
    program = compile_file(str(programs.HINA_P4), defines={"HINA_WORDS": str(WORDS)})
    data = np.arange(WORDS * args.chunks, dtype=np.int32)
    print(f"{args.workers} workers, {args.chunks} chunks of {WORDS} words each, "
          f"{args.slots} slots")
    print(f"{'loss':>6}{'seconds':>9}  per worker: packets / retransmissions / fast / duplicates")
    for loss in args.loss:
        job = LocalJob(program, args.workers, n_slots=args.slots, loss=loss)
        transports = job.transports()
        started = time.monotonic()
        try:
            _, errors = run_workers(lambda w, t: t.reduce(P.Op.SUM, data), transports)
        finally:
            job.close()
        seconds = time.monotonic() - started
        if any(errors):
            print(f"{loss:>6.2%}  failed: {next(e for e in errors if e)}")
            return 1
        per = ", ".join(f"{t.total.packets_sent}/{t.total.retransmissions}/"
                        f"{getattr(t.total, 'fast_retransmissions', '-')}/{t.total.duplicates}"
                        for t in transports)
        print(f"{loss:>6.2%}{seconds:>9.2f}  {per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
