#!/usr/bin/env python3
"""The agent of one Mininet host for the time-to-accuracy benchmark (``bench/bench_tta.py``):
DDP training of the digits MLP until a target test accuracy, timed step by step, with the
bytes and packets each of the host's interfaces carried during the steps.

``--codec fp32`` is plain DDP (no comm hook): gloo's ring all-reduce over the control network,
whose links the benchmark limits to the same rate as the data links. Any other codec sends
every gradient bucket through the switch (:func:`worker.ddp_hook.hina_hook`, after DDP's two
warm-up iterations on gloo); gloo then carries only the engine's small vote per bucket.

Usage (what the benchmark runs on host ``hI``; the job's arguments as for ``host_worker``)::

    python -m hina.mininet.tta_worker --rank 0 --workers 4 --job-id 1 --slots 32 --words 128 \\
        --thc-table 0,3,5,... --bind 10.0.0.1:40000 --switch 10.0.0.254:48864 \\
        --codec thc --master 192.168.0.1:29500 --ifname h1-eth1 --target-acc 0.95

Every step: a batch of ``--batch`` samples per worker (the worker's shard, as in
``host_worker --mode ddp``), forward, backward (the all-reduce), optimiser step: that is the
timed part, and the interface counters (``/proc/net/dev`` of the host's namespace) are read
around it. Then test accuracy (every replica holds the same parameters, so every rank computes
the same figure) and a one-byte all-reduce (MAX) of "reached": every rank stops at the same
step even if replicas drifted. Neither is timed nor counted.

Output (stdout, last line): ``{"rank": 0, "results": [{"codec": "thc", "reached": true,
"steps_to_target": 47, "seconds_to_target": ..., "step_seconds": [...], "accuracy": [...],
"netdev": {"h1-eth0": {"tx_bytes": [...], ...}}, "ok": true, ...}]}``. ``ok``: the replicas
agree at the end, losses are finite and (HINA) no bucket fell back to fp32. Reaching the target
is reported, not required (``--max-steps`` bounds the run).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback

from hina.mininet import host_worker as H
from hina.mininet import workloads as W

#: fp32: DDP's own all-reduce (gloo), no hook; the others go through the switch.
FP32 = "fp32"
CODECS = (FP32,) + tuple(c for c in W.CODECS if c != "sum")
COUNTERS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets")
TIMEOUT_S = 120


def build_parser():
    p = H.build_parser()
    p.description = __doc__.split("\n\n")[0]
    p.add_argument("--target-acc", type=float, default=0.95,
                   help="stop at this test accuracy (fraction); 0: run --max-steps")
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=H.DDP_BATCH, help="samples per worker per step")
    p.add_argument("--lr", type=float, default=H.DDP_LR)
    return p


def netdev() -> dict[str, tuple[int, int, int, int]]:
    """(rx_bytes, rx_packets, tx_bytes, tx_packets) of every interface but ``lo`` of this
    process's network namespace (``/proc/net/dev``)."""
    out = {}
    with open("/proc/net/dev") as f:
        for line in f.readlines()[2:]:
            name, _, rest = line.partition(":")
            name, fields = name.strip(), rest.split()
            if name != "lo":
                out[name] = (int(fields[0]), int(fields[1]), int(fields[8]), int(fields[9]))
    return out


def train(args) -> dict:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hina.demo.digits import load_digits_split, make_model
    from hina.worker.ddp_hook import HinaState, hina_hook

    codec_name = args.codec
    H.join_gloo(args, TIMEOUT_S)
    transport = state = None
    try:
        x_tr, y_tr, x_te, y_te = load_digits_split()
        loss_fn = nn.CrossEntropyLoss()
        shard = torch.arange(args.rank, len(x_tr), args.workers)
        model = DDP(make_model())          # rank 0's initial parameters on every replica
        n_params = sum(p.numel() for p in model.parameters())
        if codec_name != FP32:
            transport = H.make_transport(args)
            codec = W.make_ddp_codec(codec_name, args.workers, args.rank, args.seed)
            state = HinaState(transport, codec, start_iter=H.DDP_START_ITER)
            model.register_comm_hook(state, hina_hook)
        momentum = 0.0 if codec_name == "fetchsgd" else 0.9   # FetchSGD keeps its own momentum
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=momentum)
        names = sorted(netdev())
        counted = {n: {c: [] for c in COUNTERS} for n in names}
        step_s, losses, accuracy = [], [], []
        reached_at = None
        dist.barrier()
        for step in range(args.max_steps):
            idx = shard[(step * args.batch + torch.arange(args.batch)) % len(shard)]
            before = netdev()
            started = time.monotonic()
            opt.zero_grad()
            loss = loss_fn(model(x_tr[idx]), y_tr[idx])
            loss.backward()
            opt.step()
            step_s.append(time.monotonic() - started)
            after = netdev()
            for n in names:
                for i, c in enumerate(COUNTERS):
                    counted[n][c].append(after[n][i] - before[n][i])
            losses.append(float(loss.detach()))
            with torch.no_grad():
                accuracy.append(float((model.module(x_te).argmax(1) == y_te).float().mean()))
            if args.target_acc > 0:
                flag = torch.tensor([int(accuracy[-1] >= args.target_acc)], dtype=torch.uint8)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                if flag.item():
                    reached_at = step + 1
                    break
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        gathered = [torch.zeros_like(flat) for _ in range(args.workers)]
        dist.all_gather(gathered, flat)
        in_sync = all(torch.equal(gathered[0], g) for g in gathered)
        stats = state.stats if state is not None else {}
        ok = (in_sync and all(math.isfinite(v) for v in losses)
              and (state is None or (stats["hina_buckets"] > 0
                                     and stats["fallback_buckets"] == 0)))
        return {"codec": codec_name, "n_params": n_params, "batch": args.batch, "lr": args.lr,
                "target_acc": args.target_acc, "steps": len(step_s),
                "reached": reached_at is not None, "steps_to_target": reached_at,
                "seconds_to_target": sum(step_s) if reached_at is not None else None,
                "step_seconds": step_s, "losses": losses, "accuracy": accuracy,
                "netdev": counted, "replicas_in_sync": in_sync,
                "hina_buckets": stats.get("hina_buckets", 0),
                "fallback_buckets": stats.get("fallback_buckets", 0),
                "allreduce_buckets": stats.get("allreduce_buckets", 0),
                **(H._stats(transport) if transport is not None else {}), "ok": ok}
    finally:
        if transport is not None:
            transport.close()
        dist.destroy_process_group()


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.codec not in CODECS:
        print(f"tta_worker: --codec {args.codec!r}: one of {CODECS}", file=sys.stderr)
        return 2
    if args.master is None:
        print("tta_worker: --master IP:PORT is needed (gloo's rendezvous)", file=sys.stderr)
        return 2
    if args.max_steps < 1 or not 0 <= args.target_acc <= 1:
        print("tta_worker: --max-steps must be >= 1 and --target-acc in [0, 1]",
              file=sys.stderr)
        return 2
    report = {"rank": args.rank, "host": os.uname().nodename, "mode": "tta"}
    try:
        report["results"] = [train(args)]
    except Exception as exc:    # the benchmark shows this line; the traceback goes to stderr
        traceback.print_exc()
        report["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    print(json.dumps(report), flush=True)
    return 0 if "error" not in report and report["results"][0]["ok"] else 1


if __name__ == "__main__":
    # Leave without the interpreter's teardown once the report is out: torch's c10d/gloo
    # threads can abort it after destroy_process_group ("terminate called without an active
    # exception", seen on a run whose every step had finished), turning a good run into exit 134.
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
