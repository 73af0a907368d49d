#!/usr/bin/env python3
"""Run HINA in Mininet: a star of worker hosts around one P4 switch (embedded target or BMv2),
the pipeline pushed and the job created over P4Runtime, a worker agent on every host.

Usage (root; Mininet is Debian's ``mininet`` package for the system python3)::

    sudo .venv/bin/python mininet/run.py --target embedded --workers 4 --codec thc --loss 1
    sudo .venv/bin/python mininet/run.py --codec sum,thc,fetchsgd,lossless --size 65536
    sudo .venv/bin/python mininet/run.py --mode ddp --codec thc --steps 8
    sudo .venv/bin/python mininet/run.py --topo topology.json --codec sum
    sudo .venv/bin/python mininet/run.py --interactive        # Mininet CLI, everything running

It prints each worker's results and the switch's drop/exception counters, exits 0 when every
result is within its bound (1 otherwise), and always tears the network down: on success, on
failure, on Ctrl-C and on SIGTERM (no interfaces or processes are left behind).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_WORKERS = 4
DEFAULT_SIZE = 65536


def mininet_missing() -> str | None:
    """Why Mininet cannot be used from this interpreter (None when it can)."""
    try:
        import mininet.net  # noqa: F401
    except ImportError as exc:
        return (f"cannot import Mininet ({exc}) from {sys.executable}. Mininet is the Debian "
                "package for the system python3: 'apt-get install mininet', then run with "
                "/usr/bin/python3 or with a venv made with --system-site-packages "
                "(scripts/setup.sh makes .venv that way)")
    if shutil.which("mnexec") is None:
        return "Mininet's 'mnexec' helper is not on PATH: 'apt-get install mininet'"
    return None


def project_missing() -> str | None:
    """Why the project's own dependencies cannot be imported (None when they can)."""
    try:
        import grpc  # noqa: F401
        import p4.v1.p4runtime_pb2  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        return (f"{exc} under {sys.executable}: run the launcher with the project's virtual "
                f"environment (sudo {ROOT / '.venv/bin/python'} mininet/run.py ...; "
                "scripts/setup.sh makes it, with Mininet visible)")
    return None


def build_parser() -> argparse.ArgumentParser:
    from hina.mininet.switches import LOG_LEVELS, TARGETS
    from hina.mininet.topo import LOSS_METHODS
    from hina.mininet.workloads import CODECS
    p = argparse.ArgumentParser(prog="mininet/run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--target", choices=list(TARGETS), default="embedded",
                   help="the switch: the embedded target (softswitch) or BMv2 "
                        "(simple_switch_grpc); default embedded")
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="worker hosts (star)")
    p.add_argument("--topo", metavar="topology.json",
                   help="a p4lang-tutorials topology.json instead of the star")
    p.add_argument("--aggregator", help="with --topo: the switch that aggregates")
    p.add_argument("--codec", default="sum",
                   help=f"comma separated, from {','.join(CODECS)} (ddp: one)")
    p.add_argument("--mode", choices=("allreduce", "ddp"), default="allreduce",
                   help="an allreduce benchmark, or DDP training of the digits MLP")
    p.add_argument("--size", type=int, default=DEFAULT_SIZE, help="coordinates per allreduce")
    p.add_argument("--rounds", type=int, default=1, help="allreduces per codec")
    p.add_argument("--steps", type=int, default=6, help="DDP steps")
    p.add_argument("--bw", type=float, help="bandwidth of every worker link, Mbit/s")
    p.add_argument("--delay", help="delay of every worker link per direction, e.g. 1ms (netem)")
    p.add_argument("--loss", type=float, default=0.0, help="loss of every worker link, percent "
                   "per direction")
    p.add_argument("--loss-method", choices=LOSS_METHODS, default="auto",
                   help="netem (TCLink), nft (netdev hooks in the hosts), switch (embedded "
                        "target drops itself); auto: the first available")
    p.add_argument("--program", choices=("v1model", "tna"), default="v1model",
                   help="the switch program: p4/hina.p4 (default) or the TNA program "
                        "p4/tna/hina_tna.p4 (embedded target only, --words 32 or 64)")
    p.add_argument("--words", type=int, default=None, choices=(32, 64, 128, 256),
                   help="words per packet of the program (HINA_WORDS; the TNA program: two "
                        "blocks of TNA_LANES); default 128, the TNA program's 64")
    p.add_argument("--slots", type=int, default=32, help="the job's aggregation slots")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-rto", type=float, help="the workers' smallest retransmission timeout, "
                   "seconds (default: the transport's)")
    p.add_argument("--log-dir", help="switch log, worker outputs (default: a temporary dir)")
    p.add_argument("--pcap", metavar="DIR", help="capture every switch port into DIR")
    p.add_argument("--switch-log-level", choices=LOG_LEVELS, default="warn")
    p.add_argument("--no-control-network", action="store_true",
                   help="no management bridge (allreduce only; DDP's gloo needs it)")
    p.add_argument("--name-suffix", default="", metavar="SUFFIX",
                   help="appended to the star's switch and control bridge names (s1SUFFIX, "
                        "mgmt0SUFFIX): networks with different suffixes can run at the same time")
    p.add_argument("--interactive", action="store_true",
                   help="open the Mininet CLI with the switch, pipeline and job up (workers "
                        "are started from it: see mininet/README.md)")
    p.add_argument("--verbose", action="store_true", help="Mininet's info log")
    return p


def _raise_on_sigterm(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def print_reports(reports, counters: dict, extra: dict) -> None:
    for r in reports:
        if "error" in r.report:
            print(f"{r.host} (rank {r.rank}): ERROR {r.report['error']}")
            if r.stderr_tail:
                print("    " + r.stderr_tail.replace("\n", "\n    "))
            continue
        for res in r.report.get("results", []):
            verdict = "ok" if res.get("ok") else "OUT OF BOUNDS"
            shown = {k: v for k, v in res.items() if k not in ("codec", "ok", "losses",
                                                                 "seconds_per_step")}
            if "seconds" in shown:
                shown["seconds"] = [round(s, 3) for s in shown["seconds"]]
            if "losses" in res:
                shown["loss first/last"] = (round(res["losses"][0], 4),
                                            round(res["losses"][-1], 4))
            print(f"{r.host} (rank {r.rank}) {res['codec']}: {verdict} {json.dumps(shown)}")
    print("switch counters (packets per reason): " + json.dumps(counters))
    for key, value in extra.items():
        print(f"{key}: {json.dumps(value)}")


def main(argv=None) -> int:
    why = mininet_missing() or project_missing()
    if why:
        print(f"mininet/run.py: {why}", file=sys.stderr)
        return EXIT_FAILED
    parser = build_parser()
    args = parser.parse_args(argv)
    from hina.mininet import topo as T
    from hina.mininet.deploy import DeploymentError, HinaNetwork, resolve_loss_method
    from hina.mininet.workloads import CODECS
    codecs = [c for c in args.codec.split(",") if c]
    if not codecs or any(c not in CODECS for c in codecs):
        parser.error(f"--codec {args.codec}: choose from {','.join(CODECS)}")
    if args.mode == "ddp" and len(codecs) != 1:
        parser.error("--mode ddp takes one codec")
    if os.geteuid() != 0:
        print("mininet/run.py: Mininet needs root (network namespaces): run it with sudo",
              file=sys.stderr)
        return EXIT_FAILED
    from mininet.log import setLogLevel
    setLogLevel("info" if args.verbose or args.interactive else "warning")
    try:
        shape = T.LinkShape(bw=args.bw, delay=args.delay, loss=args.loss)
        method = resolve_loss_method(args.loss_method, args.target, shape)
        control = not args.no_control_network
        if args.topo:
            topo = T.JsonTopo(path=args.topo, shape=shape, netem_loss=method == "netem",
                              control_network=control, aggregator=args.aggregator,
                              suffix=args.name_suffix)
        else:
            topo = T.StarTopo(n_workers=args.workers, shape=shape,
                              netem_loss=method == "netem", control_network=control,
                              suffix=args.name_suffix)
    except (ValueError, DeploymentError) as exc:
        print(f"mininet/run.py: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, ValueError) else EXIT_FAILED
    if shape.loss:
        print(f"loss {shape.loss}% per direction on every worker link, applied by {method}")
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        hn = HinaNetwork(topo, target=args.target, shape=shape, loss_method=method,
                         words=args.words or (64 if args.program == "tna" else 128),
                         program=args.program, n_slots=args.slots, log_dir=args.log_dir,
                         pcap_dir=args.pcap, switch_log_level=args.switch_log_level,
                         loss_seed=args.seed)
    except DeploymentError as exc:
        print(f"mininet/run.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        hn.start()
        print(f"{args.target} switch {hn.switch.name} up (P4Runtime {hn.switch.grpc_address}), "
              f"job {hn.job_id} over {', '.join(h.name for h in hn.workers)}; logs in "
              f"{hn.log_dir}", flush=True)
        print(f"inspect with: {' '.join(hn.ctl_command('counters'))}", flush=True)
        if args.interactive:
            from mininet.cli import CLI
            print("Everything is up. Workers, from the CLI (all of them, then wait):")
            for rank, host in enumerate(hn.workers):
                cmd = hn.worker_command(rank, args.mode, codecs, args.size, args.rounds,
                                        args.steps, args.seed, min_rto=args.min_rto)
                print(f"  {host.name} {' '.join(cmd)} > {hn.log_dir / host.name}.out &")
            print("Exit the CLI to tear everything down.")
            CLI(hn.net)
            return EXIT_OK
        reports = hn.run_workers(args.mode, codecs, args.size, args.rounds, args.steps,
                                 args.seed, min_rto=args.min_rto)
        extra = {"nft drops per host": hn.nft_drops()} if method == "nft" else {}
        print_reports(reports, hn.counters(), extra)
        return EXIT_OK if all(r.ok for r in reports) else EXIT_FAILED
    except KeyboardInterrupt:
        print("mininet/run.py: interrupted; tearing down", file=sys.stderr)
        return EXIT_FAILED
    except (DeploymentError, RuntimeError, OSError) as exc:
        print(f"mininet/run.py: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        hn.stop()


if __name__ == "__main__":
    sys.exit(main())
