"""One worker process of the restart tests (``test_restarts.py``): a real process, so a test can
kill it with SIGKILL mid-job and start it again.

Two ways to get its seat:

* ``--controller ADDR --job J --token-file F [--ip IP --udp-port N]``: it joins through the job
  service itself (:class:`worker.jobclient.JobClient`, retrying while its old seat is still
  leased) and follows generations with it (``allreduce_following(client, ...)``);
* ``--env``: it runs under ``hina-worker join ... run --``, with only ``$HINA_SEAT``, and follows
  the generation the switch's NOTICE names (``allreduce_following(None, ...)``).

It all-reduces worker ``index``'s gradient of steps ``--steps FIRST LAST`` (:func:`grads`: the
same on every worker) and writes each mean to ``OUT/w{index}_s{step}.pt``. Events go to stdout as
JSON lines: ``joined`` (index, generation, pid), ``begin`` and ``done`` of each step (``done`` with the
transport's generation and the seconds since the Join), ``paused``. With ``--pause-in-step S`` it
stops in step S after sending ``--pause-after`` packets of the step's main stream (its agreement
round complete, part of its contribution in the switch's slots) and sleeps until it is killed;
its heartbeats go on meanwhile, so only the kill frees its seat.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
N_WORKERS = 3
NUMEL = 300


def grads(step: int, n: int = N_WORKERS, numel: int = NUMEL):
    """Every worker's gradient of ``step`` (reproducible in any process)."""
    import torch
    gen = torch.Generator().manual_seed(100 + step)
    return [torch.randn(numel, generator=gen) for _ in range(n)]


def exact(step: int, n: int = N_WORKERS):
    return sum(grads(step, n)) / n


def emit(**event) -> None:
    print(json.dumps(event), flush=True)


class PausingLink:
    """A link that, once armed, stops for good after ``after`` main-stream sends (not MAX)."""

    def __init__(self, link):
        self.link, self.after = link, None
        self.sent = 0

    def send(self, message) -> None:
        from hina import protocol as P
        from hina.worker.packetizer import parse_header
        if self.after is not None and parse_header(message)["op"] != P.Op.MAX:
            if self.sent >= self.after:
                emit(event="paused")
                while True:                  # killed here
                    time.sleep(60)
            self.sent += 1
        self.link.send(message)

    def recv(self, timeout: float):
        return self.link.recv(timeout)

    def close(self) -> None:
        self.link.close()


def _join(args):
    from hina.worker.jobclient import JobClient
    client = JobClient(args.controller, token_file=args.token_file)
    try:     # a killed worker's seat is free once its lease ran out: wait for it
        return client, client.join(args.job, args.ip, args.udp_port, wait_s=args.join_timeout)
    except BaseException:
        client.close()
        raise


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--controller")
    parser.add_argument("--job", type=int, default=1)
    parser.add_argument("--token-file")
    parser.add_argument("--ip", default="")
    parser.add_argument("--udp-port", type=int, default=0)
    parser.add_argument("--env", action="store_true", help="the seat from $HINA_SEAT")
    parser.add_argument("--steps", type=int, nargs=2, required=True, metavar=("FIRST", "LAST"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pause-in-step", type=int)
    parser.add_argument("--pause-after", type=int, default=2)
    parser.add_argument("--give-up", type=float, default=30.0)
    parser.add_argument("--join-timeout", type=float, default=60.0)
    args = parser.parse_args(argv)

    import torch

    from hina.worker.agent import allreduce_following, seat_from_env
    from hina.worker.transport import Transport
    torch.set_num_threads(1)
    client = None
    if args.env:
        seat = seat_from_env()
    else:
        client, seat = _join(args)
    joined = time.monotonic()
    emit(event="joined", index=seat.worker_index, generation=seat.generation, pid=os.getpid())
    codec = seat.codec()
    link = PausingLink(seat.link())
    transport = Transport(link, seat.job_params(), give_up_s=args.give_up)
    try:
        for step in range(*args.steps):
            emit(event="begin", step=step)
            if step == args.pause_in_step:
                link.after = args.pause_after
            mine = grads(step)[seat.worker_index]
            mean = allreduce_following(client, mine.clone(), codec, transport, call_id=step)
            torch.save(mean, args.out / f"w{seat.worker_index}_s{step}.pt")
            emit(event="done", step=step, generation=transport.job.generation,
                 since_join=time.monotonic() - joined)
    finally:
        transport.close()
        if client is not None:
            client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
