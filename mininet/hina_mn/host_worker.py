#!/usr/bin/env python3
"""The worker agent of one Mininet host: aggregates through the switch, prints one JSON line.

Self-contained: the job's parameters come on the command line (the launcher, ``run.py``, passes
what the controller installed). The host reaches the switch with an ordinary UDP socket
(:class:`worker.link.UdpLink`) bound to its own address.

Usage (what ``run.py`` runs on host ``hI``)::

    python -m hina.mininet.host_worker --rank 0 --workers 4 --job-id 1 --slots 32 --words 128 \\
        --thc-table 0,3,5,... --bind 10.0.0.1:40000 --switch 10.0.0.254:48864 \\
        --mode allreduce --codec sum,thc --size 65536

    python -m hina.mininet.host_worker ... --mode ddp --codec thc --steps 6 \\
        --master 192.168.0.1:29500 --ifname h1-eth1

Output (stdout, last line): ``{"rank": 0, "mode": "allreduce", "results": [{"codec": "sum",
"seconds": ..., "ok": true, ...}, ...]}``; exit status 0 when every result is within bounds,
1 otherwise, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
import traceback

from hina.mininet import workloads as W

MODES = ("allreduce", "ddp")
DDP_BATCH = 32
DDP_LR = 0.05
DDP_START_ITER = 2
DDP_TIMEOUT_S = 120


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected HOST:PORT")
    return host, int(port)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rank", type=int, required=True, help="this worker's index in the job")
    p.add_argument("--workers", type=int, required=True, help="workers of the job")
    p.add_argument("--job-id", type=int, required=True)
    p.add_argument("--slots", type=int, required=True, help="the job's aggregation slots")
    p.add_argument("--words", type=int, required=True, help="HINA_WORDS of the switch program")
    p.add_argument("--thc-table", default="", help="the job's THC table, comma separated")
    p.add_argument("--bind", type=_address, required=True, help="this host's IP:UDP port")
    p.add_argument("--switch", type=_address, required=True, help="the switch's IP:HINA port")
    p.add_argument("--mode", choices=MODES, default="allreduce")
    p.add_argument("--codec", default="sum", help=f"comma separated, from {W.CODECS}")
    p.add_argument("--size", type=int, default=65536, help="coordinates per allreduce")
    p.add_argument("--rounds", type=int, default=1, help="allreduces per codec")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=6, help="DDP training steps")
    p.add_argument("--master", type=_address, help="torch.distributed rendezvous IP:port (ddp)")
    p.add_argument("--ifname", help="interface gloo uses (the control network) (ddp)")
    p.add_argument("--min-rto", type=float, help="smallest retransmission timeout (seconds; "
                   "default: the transport's)")
    p.add_argument("--give-up", type=float, default=30.0, help="fail after this long without "
                   "progress (seconds)")
    p.add_argument("--sum-saturates", action="store_true", help="the switch's SUM saturates, "
                   "sticky at an int32 bound (the TNA program): a result word there is an "
                   "overflow")
    return p


def make_transport(args):
    from hina.worker.link import UdpLink
    from hina.worker.transport import JobParams, Transport
    table = tuple(int(v) for v in args.thc_table.split(",")) if args.thc_table else None
    job = JobParams(args.job_id, args.workers, args.slots, args.words, table,
                    sum_saturates=args.sum_saturates)
    kwargs = {} if args.min_rto is None else {"min_rto": args.min_rto}
    return Transport(UdpLink(args.bind, args.switch), job, give_up_s=args.give_up, **kwargs)


def _stats(transport) -> dict:
    s = transport.total
    return {"packets_sent": s.packets_sent, "retransmissions": s.retransmissions,
            "bytes_sent": s.bytes_sent, "duplicates": s.duplicates}


def run_allreduce(args, codecs: list[str]) -> list[dict]:
    """Each codec ``args.rounds`` times on the workload of :mod:`hina_mn.workloads`."""
    from hina import protocol as P
    from hina.worker.collective import allreduce
    transport = make_transport(args)
    results = []
    try:
        for name in codecs:
            data = W.make_input(name, args.rank, args.size, args.seed)
            codec = W.make_codec(name, args.workers, args.rank, args.seed, args.size)
            before = _stats(transport)
            seconds, first = [], None
            for key in range(args.rounds):
                started = time.monotonic()
                if codec is None:
                    out = transport.reduce(P.Op.SUM, data)
                else:   # a new key per round: fresh codec state, every round alike
                    out = allreduce(data, codec, transport, key=key).cpu()
                seconds.append(time.monotonic() - started)
                first = out if first is None else first
            after = _stats(transport)
            metrics = W.evaluate(name, first, args.workers, args.size, args.seed)  # round 1
            results.append({"codec": name, "seconds": seconds, **metrics,
                            **{k: after[k] - before[k] for k in after}})
    finally:
        transport.close()
    return results


def join_gloo(args, timeout_s: float) -> None:
    """One torch thread, then join the job's gloo group at ``args.master`` over the control
    interface ``args.ifname`` (the P4 switch forwards only HINA)."""
    import datetime

    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    if args.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
    host, port = args.master
    dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=args.rank,
                            world_size=args.workers,
                            timeout=datetime.timedelta(seconds=timeout_s))


def run_ddp(args, codec_name: str) -> list[dict]:
    """A few DDP steps of the digits MLP (``demo/digits.py``) through :func:`hina_hook`, then
    the same steps from the same initial parameters with DDP's own all-reduce (gloo, fp32) as
    the reference.

    Reported: the per-step losses, the training-set loss before training (``loss_initial``),
    after the HINA steps (``loss_hina``) and after the fp32 steps (``loss_fp32``), the largest
    parameter difference between the two models (``max_param_diff``), the hook's bucket counts,
    whether every replica holds the same parameters, and test accuracy. ``ok``: every bucket
    after the warm-up went through the switch (no fp32 fallback), the replicas agree, the losses
    are finite and the HINA steps lowered the training loss.
    """
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hina.demo.digits import load_digits_split, make_model
    from hina.worker.ddp_hook import HinaState, hina_hook
    if args.master is None:
        raise SystemExit("--mode ddp needs --master IP:PORT")
    join_gloo(args, DDP_TIMEOUT_S)
    try:
        x_tr, y_tr, x_te, y_te = load_digits_split()
        loss_fn = nn.CrossEntropyLoss()
        shard = torch.arange(args.rank, len(x_tr), args.workers)
        momentum = 0.0 if codec_name == "fetchsgd" else 0.9   # FetchSGD keeps its own momentum

        def train(model, steps: int) -> tuple[list[float], list[float]]:
            opt = torch.optim.SGD(model.parameters(), lr=DDP_LR, momentum=momentum)
            losses, step_s = [], []
            for step in range(steps):
                idx = shard[(step * DDP_BATCH + torch.arange(DDP_BATCH)) % len(shard)]
                started = time.monotonic()
                opt.zero_grad()
                loss = loss_fn(model(x_tr[idx]), y_tr[idx])
                loss.backward()
                opt.step()
                step_s.append(time.monotonic() - started)
                losses.append(float(loss))
            return losses, step_s

        def train_loss(module) -> float:
            with torch.no_grad():
                return float(loss_fn(module(x_tr), y_tr))

        model = DDP(make_model())          # rank 0's initial parameters on every replica
        initial = {k: v.clone() for k, v in model.module.state_dict().items()}
        loss_initial = train_loss(model.module)
        transport = make_transport(args)
        try:
            codec = W.make_ddp_codec(codec_name, args.workers, args.rank, args.seed)
            state = HinaState(transport, codec, start_iter=DDP_START_ITER)
            model.register_comm_hook(state, hina_hook)
            losses, step_s = train(model, args.steps)
        finally:
            transport.close()
        with torch.no_grad():
            accuracy = float((model.module(x_te).argmax(1) == y_te).float().mean())
        # Every replica must hold the same parameters after the steps (the hook's results agree).
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        gathered = [torch.zeros_like(flat) for _ in range(args.workers)]
        dist.all_gather(gathered, flat)
        in_sync = all(torch.equal(gathered[0], g) for g in gathered)

        reference = DDP(make_model())
        reference.module.load_state_dict(initial)
        train(reference, args.steps)
        ref_flat = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
        loss_hina, loss_fp32 = train_loss(model.module), train_loss(reference.module)
        ok = (state.stats["hina_buckets"] > 0 and state.stats["fallback_buckets"] == 0
              and in_sync and all(math.isfinite(v) for v in losses + [loss_hina])
              and loss_hina < loss_initial)
        return [{"codec": codec_name, "steps": args.steps, "losses": losses,
                 "seconds_per_step": step_s, "accuracy": accuracy, "replicas_in_sync": in_sync,
                 "loss_initial": loss_initial, "loss_hina": loss_hina, "loss_fp32": loss_fp32,
                 "max_param_diff": float((flat - ref_flat).abs().max()),
                 "hina_buckets": state.stats["hina_buckets"],
                 "fallback_buckets": state.stats["fallback_buckets"],
                 "ok": ok, **_stats(transport)}]
    finally:
        dist.destroy_process_group()


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    codecs = [c for c in args.codec.split(",") if c]
    bad = [c for c in codecs if c not in W.CODECS]
    if bad or not codecs:
        print(f"host_worker: --codec {args.codec!r}: choose from {W.CODECS}", file=sys.stderr)
        return 2
    if args.mode == "ddp" and len(codecs) != 1:
        print("host_worker: --mode ddp takes one codec", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    report = {"rank": args.rank, "host": os.uname().nodename, "mode": args.mode,
              "bind": f"{args.bind[0]}:{args.bind[1]}"}
    try:
        if args.mode == "allreduce":
            report["results"] = run_allreduce(args, codecs)
        else:
            report["results"] = run_ddp(args, codecs[0])
    except Exception as exc:    # the launcher shows this line; the traceback goes to stderr
        traceback.print_exc()
        report["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    print(json.dumps(report), flush=True)
    return 0 if "error" not in report and all(r["ok"] for r in report["results"]) else 1


if __name__ == "__main__":
    # Leave without the interpreter's teardown once the report is out: torch's c10d/gloo
    # threads can abort it after destroy_process_group ("terminate called without an active
    # exception", seen on a run whose every step had finished), turning a good run into exit 134.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
