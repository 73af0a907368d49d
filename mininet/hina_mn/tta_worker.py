#!/usr/bin/env python3
"""The agent of one Mininet host for the time-to-accuracy benchmark (``bench/bench_tta.py``):
DDP training of the digits MLP (or, ``--workload``, the demo's DLRM or MoE) until a target test
metric, timed step by step, with the bytes and packets each of the host's interfaces carried
during the steps.

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
#: dlrm only: ``nn.Embedding(sparse=True)``, DDP's sparse gradients on gloo (no hook)
SPARSE = "sparse"
GLOO_MODES = (FP32, SPARSE)
#: the digits workload's modes (the others: :func:`codecs_of`)
CODECS = (FP32,) + tuple(c for c in W.CODECS if c != "sum")
#: what a host can train: the digits MLP, or the demo's sparse workloads (``demo/dlrm.py``,
#: ``demo/moe.py``: their data, model, optimiser and codec settings)
WORKLOADS = ("digits", "dlrm", "moe")
#: per workload: (samples per worker per step, learning rate, metric to reach) when not given
DEFAULTS = {"digits": (H.DDP_BATCH, H.DDP_LR, 0.95), "dlrm": (64, 0.5, 0.76),
            "moe": (8, 0.01, 0.45)}
COUNTERS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets")
TIMEOUT_S = 120


def build_parser():
    p = H.build_parser()
    p.description = __doc__.split("\n\n")[0]
    p.add_argument("--workload", choices=WORKLOADS, default="digits",
                   help="what to train (dlrm: test AUC is the metric)")
    p.add_argument("--target-acc", type=float, default=None,
                   help="stop at this test metric (fraction; default per workload: digits 0.95, "
                   "dlrm 0.76 AUC, moe 0.45); 0: run --max-steps")
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=None,
                   help="samples per worker per step (default per workload: 32, 64, 8)")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default per workload: 0.05, 0.5, 0.01)")
    return p


def fill_defaults(args) -> None:
    """The workload's batch, learning rate and target where not given."""
    batch, lr, target = DEFAULTS[args.workload]
    args.batch = batch if args.batch is None else args.batch
    args.lr = lr if args.lr is None else args.lr
    args.target_acc = target if args.target_acc is None else args.target_acc


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


class Task:
    """What one host trains: the data (train and test tensors, the target last), the model, its
    loss and test metric, the optimiser, the HINA codec and DDP's bucket cap."""

    def __init__(self, workload: str, codec: str, args) -> None:
        import torch
        from torch import nn
        self.workload, self.codec_name, self.args = workload, codec, args
        if workload == "digits":
            from hina.demo.digits import load_digits_split, make_model
            x_tr, y_tr, x_te, y_te = load_digits_split()
            self.train, self.test = (x_tr, y_tr), (x_te, y_te)
            self.module = make_model()       # rank 0's initial parameters on every replica
            self.metric_name = "test accuracy"
            self.bucket_cap_mb = None
            self._loss_fn = nn.CrossEntropyLoss()
            self._wl = None
        else:
            self._wl = load_workload(workload)
            self.train, self.test = self._wl.data()
            self.module = self._wl.make_model(codec, args.seed)
            self.metric_name = self._wl.metric_name
            self.bucket_cap_mb = self._wl.bucket_cap_mb_of(codec)
        self._torch = torch

    def loss(self, model, idx):
        batch = tuple(t[idx] for t in self.train)
        if self._wl is None:
            return self._loss_fn(model(batch[0]), batch[1])
        return self._wl.loss(model, batch)

    def evaluate(self, module) -> float:
        with self._torch.no_grad():
            if self._wl is None:
                x_te, y_te = self.test
                return float((module(x_te).argmax(1) == y_te).float().mean())
            return float(self._wl.evaluate(module, self.test))

    def optimizer(self, params, lr: float):
        if self._wl is None:
            momentum = 0.0 if self.codec_name == "fetchsgd" else 0.9  # FetchSGD keeps its own
            return self._torch.optim.SGD(params, lr=lr, momentum=momentum)
        return self._wl.make_optimizer(params, lr)

    def codec(self, n_workers: int, rank: int, seed: int):
        if self._wl is None:
            return W.make_ddp_codec(self.codec_name, n_workers, rank, seed)
        return self._wl.make_codec(self.codec_name, n_workers, rank, seed)


def load_workload(name: str):
    """The demo's workload object of ``name`` (dlrm, moe), with its defaults."""
    if name == "dlrm":
        from hina.demo.dlrm import DlrmWorkload
        return DlrmWorkload()
    if name == "moe":
        from hina.demo.moe import MoeWorkload
        return MoeWorkload()
    raise ValueError(f"workload {name!r}: one of {WORKLOADS}")


def codecs_of(workload: str) -> tuple:
    """The modes ``workload`` runs: fp32 (and, for dlrm, sparse) on gloo, the rest through the
    switch."""
    if workload == "digits":
        return CODECS
    from hina.demo.common import HINA_MODES
    gloo = GLOO_MODES if workload == "dlrm" else (FP32,)
    return gloo + tuple(HINA_MODES)


def train(args) -> dict:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hina.worker.ddp_hook import HinaState, hina_hook

    codec_name = args.codec
    H.join_gloo(args, TIMEOUT_S)
    transport = state = None
    try:
        torch.set_num_threads(1)
        task = Task(args.workload, codec_name, args)
        n_train = len(task.train[-1])
        shard = torch.arange(args.rank, n_train, args.workers)
        kwargs = {} if task.bucket_cap_mb is None else {"bucket_cap_mb": task.bucket_cap_mb}
        model = DDP(task.module, **kwargs)
        n_params = sum(p.numel() for p in model.parameters())
        if codec_name not in GLOO_MODES:
            transport = H.make_transport(args)
            codec = task.codec(args.workers, args.rank, args.seed)
            state = HinaState(transport, codec, start_iter=H.DDP_START_ITER)
            model.register_comm_hook(state, hina_hook)
        opt = task.optimizer(model.parameters(), args.lr)
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
            loss = task.loss(model, idx)
            loss.backward()
            opt.step()
            step_s.append(time.monotonic() - started)
            after = netdev()
            for n in names:
                for i, c in enumerate(COUNTERS):
                    counted[n][c].append(after[n][i] - before[n][i])
            losses.append(float(loss.detach()))
            accuracy.append(task.evaluate(model.module))
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
        return {"codec": codec_name, "workload": args.workload, "metric": task.metric_name,
                "n_params": n_params, "batch": args.batch, "lr": args.lr,
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
    fill_defaults(args)
    if args.codec not in codecs_of(args.workload):
        print(f"tta_worker: --codec {args.codec!r}: for {args.workload}, one of "
              f"{codecs_of(args.workload)}", file=sys.stderr)
        return 2
    if args.master is None:
        print("tta_worker: --master IP:PORT is needed (gloo's rendezvous)", file=sys.stderr)
        return 2
    if args.max_steps < 1 or not 0 <= args.target_acc <= 1 or args.batch < 1 or not args.lr > 0:
        print("tta_worker: --max-steps and --batch must be >= 1, --lr > 0 and --target-acc in "
              "[0, 1]", file=sys.stderr)
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
