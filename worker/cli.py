"""``hina-worker``: the worker agent's command line.

Usage::

    hina-worker join --controller HOST:PORT --job J [--ip IP --udp-port N] info [--json]
    hina-worker join --controller HOST:PORT --job J run -- python train.py
    hina-worker join --controller HOST:PORT --job J bench [--codec thc] --size 1000000 [--rounds 5]

``join`` takes a seat in the job (the seat of ``--ip``/``--udp-port`` when given, else the first
free one) through the controller's job service (``hina-ctl serve``), showing the job's token
(``--token-file FILE``, ``--token TOKEN`` or ``$HINA_JOB_TOKEN``; ``hina-ctl job token J`` gives
it), over TLS with ``--tls-ca`` (and a client certificate with ``--tls-client-cert`` and
``--tls-client-key``). Errors are one line on stderr and exit status 1 (usage: 2); ``run`` exits
with the command's status.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Optional, Sequence

from hina.cli import EXIT_FAILURE, EXIT_OK, OneLineParser
from hina.cli import help_with_example as _help

from hina.tls import ClientTls

from .jobclient import TOKEN_ENV, JobClient, JobServiceError

__all__ = ["main", "build_parser"]

log = logging.getLogger("hina.worker")

PROG = "hina-worker"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, **_help(
        "The HINA worker agent: join an aggregation job through the controller's job service, "
        "then run training or a benchmark.",
        "hina-worker join --controller 10.0.0.1:50051 --job 1 run -- python train.py"))
    parser.add_argument("--log-level", default="warning",
                        choices=["debug", "info", "warning", "error"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                parser_class=OneLineParser)
    join = sub.add_parser("join", help="join a job, then info | run | bench", **_help(
        "Take a seat in a job (by --ip/--udp-port, else the first free seat).",
        "hina-worker join --controller 127.0.0.1:50051 --job 1 info --json"))
    join.add_argument("--controller", required=True, metavar="HOST:PORT",
                      help="the job service (hina-ctl serve)")
    join.add_argument("--job", type=int, required=True)
    join.add_argument("--ip", default="", help="this worker's IPv4 address as the job lists it")
    join.add_argument("--udp-port", type=int, default=0)
    join.add_argument("--barrier-timeout", type=float, default=60.0,
                      help="seconds to wait for the other workers (default 60)")
    join.add_argument("--seat-wait", type=float, default=60.0, metavar="SECONDS",
                      help="while the seat is taken (a crashed earlier process of this worker "
                           "keeps it until its lease runs out), try again for this long "
                           "(default 60; 0: fail at once)")
    token = join.add_mutually_exclusive_group()
    token.add_argument("--token-file", metavar="FILE",
                       help="file holding the job's token (hina-ctl job token J --token-file "
                            f"FILE); default ${TOKEN_ENV}")
    token.add_argument("--token", metavar="TOKEN",
                       help="the job's token (visible to other users in the process list: "
                            "prefer --token-file)")
    join.add_argument("--tls-ca", metavar="FILE",
                      help="connect with TLS, trusting the CA in FILE (PEM) for the service's "
                           "certificate")
    join.add_argument("--tls-client-cert", metavar="FILE",
                      help="this worker's certificate (PEM), for a service that wants one")
    join.add_argument("--tls-client-key", metavar="FILE", help="its private key (PEM)")
    what = join.add_subparsers(dest="action", metavar="ACTION", required=True,
                               parser_class=OneLineParser)
    info = what.add_parser("info", help="print the seat and leave", **_help(
        "Print what the job service hands this worker.", "hina-worker join ... info --json"))
    info.add_argument("--json", action="store_true")
    run = what.add_parser("run", help="run a command with the seat in its environment", **_help(
        "Wait until every worker joined, then run COMMAND with $HINA_SEAT (JSON), "
        "$HINA_WORKER_INDEX, $HINA_N_WORKERS set (worker.agent.transport_from_env() builds "
        "the transport). Exits with COMMAND's status.",
        "hina-worker join --controller 127.0.0.1:50051 --job 1 run -- python train.py"))
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    bench = what.add_parser("bench", help="synthetic allreduce benchmark", **_help(
        "Allreduce random tensors through the switch with the job's codec; report time per "
        "round, elements/s and the error against the exact mean.",
        "hina-worker join --controller 127.0.0.1:50051 --job 1 bench --codec thc "
        "--size 1000000"))
    bench.add_argument("--codec", help="expected codec (refused if the job runs another)")
    bench.add_argument("--size", type=int, default=1_000_000)
    bench.add_argument("--rounds", type=int, default=3)
    bench.add_argument("--no-check", dest="check", action="store_false",
                       help="skip the comparison with the exact mean")
    bench.add_argument("--device", default="cpu",
                       help="where the tensors live and the codec runs: cpu, cuda or cuda:N")
    bench.add_argument("--json", action="store_true")
    return parser


def _bench(client, seat, args) -> int:
    from .agent import run_bench
    if args.codec and args.codec != seat.codec_params.name:
        raise JobServiceError(f"job {seat.job_id} runs codec {seat.codec_params.name!r}, "
                              f"not {args.codec!r}", "INVALID_ARGUMENT")
    from tqdm import tqdm
    with tqdm(total=args.size * args.rounds, unit="el", unit_scale=True, disable=args.json,
              desc=f"worker {seat.worker_index} {seat.codec_params.name}") as bar:
        report = run_bench(client, seat, args.size, args.rounds, args.check,
                           args.barrier_timeout, progress=bar.update, device=args.device)
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        err = ("" if report.max_rel_error is None
               else f", max relative error {report.max_rel_error:.3g}")
        print(f"worker {report.worker_index}/{report.n_workers}: {report.rounds} x "
              f"{report.size} elements, {report.elements_per_s:.3g} elements/s{err}, "
              f"{report.retransmissions} retransmissions")
    return EXIT_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "action", None) == "bench":  # refused before joining: the others would wait
        from .agent import bench_device
        try:
            bench_device(args.device)
        except ValueError as exc:
            parser.error(str(exc))
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        tls = ClientTls.from_args(args.tls_ca, args.tls_client_cert, args.tls_client_key)
        with JobClient(args.controller, token=args.token, token_file=args.token_file,
                       tls=tls) as client:
            seat = client.join(args.job, args.ip, args.udp_port, wait_s=args.seat_wait)
            if args.action == "info":
                data = seat.to_json()
                print(json.dumps(data) if args.json else
                      f"job {seat.job_id}: worker {seat.worker_index} of {seat.n_workers}, "
                      f"codec {seat.codec_params.name} ({seat.codec_params.lane_op}), "
                      f"{seat.n_slots} slots, switch {seat.switch[1]}:{seat.switch[2]}")
                return EXIT_OK
            if args.action == "run":
                from .agent import run_command
                cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
                if not cmd:
                    raise JobServiceError("run: no command given (hina-worker join ... run -- "
                                          "COMMAND)", "INVALID_ARGUMENT")
                return run_command(client, seat, cmd, args.barrier_timeout)
            return _bench(client, seat, args)
    except (JobServiceError, ValueError, OSError) as exc:
        log.debug("failed", exc_info=True)
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE
    except Exception as exc:     # e.g. TransportTimeout: one line; the traceback at debug level
        log.debug("failed", exc_info=True)
        print(f"{PROG}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
