"""The HINA demo: 4 DDP workers train on scikit-learn's digits through the embedded switch.

For each mode (plain fp32 all-reduce, then each codec through the switch) the demo starts the
embedded switch (``softswitch``) on loopback UDP ports, pushes ``p4/hina.p4`` and creates the job
over P4Runtime, and runs ``--workers`` processes (``torch.distributed`` with gloo for DDP's own
bookkeeping) whose gradient buckets go through :func:`worker.ddp_hook.hina_hook`. It prints a
table of final test accuracy, time per step and bytes each worker sends per step, and saves the
loss curves to ``out/demo_loss.png`` (and the figures to ``out/demo_results.json``).

Usage::

    python -m hina.demo.digits [--workers 4] [--epochs 12] [--modes fp32,thc,sketched_sgd,lossless,fixed]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from hina import protocol as P

from .local import LocalDeployment, WorkerSeat, connect_worker, free_tcp_port

#: the demo's modes: codec registry names (hina.codecs), fp32 first as the baseline
MODES = ("fp32", "thc", "sketched_sgd", "lossless", "fixed")
#: Ethernet + IPv4 + UDP bytes around every HINA message on the wire.
L2_L4_BYTES = P.ETHERNET_BYTES + P.IPV4_BYTES + P.UDP_BYTES
HIDDEN = 128
N_CLASSES = 10
SEED = 0

log = logging.getLogger("hina.demo")


@dataclass
class RunResult:
    """What one mode's training gave (rank 0's view; losses are the mean over workers)."""
    mode: str
    accuracy: float = 0.0
    seconds_per_step: float = 0.0
    bytes_per_step: float = 0.0
    bytes_note: str = ""
    steps: int = 0
    n_params: int = 0
    losses: list = field(default_factory=list)
    fallback_buckets: int = 0
    retransmissions: int = 0


def load_digits_split():
    """scikit-learn's digits (shipped with the package), standardised, fixed 80/20 split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, random_state=SEED, stratify=y)
    mean, std = x_tr.mean(0), x_tr.std(0) + 1e-3
    norm = lambda a: torch.from_numpy((a - mean) / std)     # noqa: E731
    return norm(x_tr), torch.from_numpy(y_tr), norm(x_te), torch.from_numpy(y_te)


def make_model() -> nn.Module:
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, N_CLASSES))


def make_codec(mode: str, n_workers: int, rank: int):
    """The codec of ``mode`` (a registry name), with the demo's parameters; the sketch is
    sized for >= 10x compression of the model."""
    from hina.worker.codecs import registry
    params = {
        "thc": dict(seed=SEED),
        # Sketched SGD, two rounds (docs/codecs.md says why not FetchSGD here). Per step: 1
        # packet of MAX (3 row + 120 value-block exponents), 1 packet of the 3 x 128 sketch
        # (10-bit cells, 3 per int32 lane), 4 packets of the exact sums of the 2560 candidates
        # (6-bit fields, 5 per lane): 6 x (54 + 512) B = 3396 B vs 38440 B of fp32 gradient
        # for the 9610 parameters: 11.3x.
        "sketched_sgd": dict(rows=3, columns=128, k=2560, sketch_bits=10, value_bits=6,
                             value_blocks=120, rotate=8, seed=SEED),
        "lossless": dict(columns=1 << 12, seed=SEED),
        "fixed": {},
    }
    if mode not in params:
        raise ValueError(f"mode={mode!r}: one of {MODES[1:]} (fp32 has no codec)")
    return registry.build(mode, n_workers, rank, **params[mode])


def _train_worker(rank: int, mode: str, seat: Optional[WorkerSeat], n_workers: int,
                  init: str, epochs: int, batch: int, lr: float, out: "mp.Queue",
                  device_kind: str = "cpu", hook: str = "async") -> None:
    """One DDP worker process (model, gradients and codec on ``device_kind``: "cpu", or "cuda"
    for GPU ``rank mod count``; gloo carries CUDA tensors too, so ranks may share a GPU)."""
    from hina.worker.ddp_hook import HinaState, hina_hook
    torch.set_num_threads(1)
    device = torch.device("cpu")
    if device_kind == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n_workers)
    try:
        x_tr, y_tr, x_te, y_te = (t.to(device) for t in load_digits_split())
        model = DDP(make_model().to(device), device_ids=[device] if device.type == "cuda" else None)
        n_params = sum(p.numel() for p in model.parameters())
        state = None
        if mode != "fp32":
            transport = connect_worker(seat)
            state = HinaState(transport, make_codec(mode, n_workers, rank), start_iter=2,
                              asynchronous=hook == "async")
            model.register_comm_hook(state, hina_hook)
        # Sketched SGD keeps only error accumulation on the worker (no momentum of its own): the
        # optimiser's momentum runs on the decoded sparse update, as for every other mode.
        momentum = 0.9
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
        shard = torch.arange(rank, len(x_tr), n_workers)
        gen = torch.Generator().manual_seed(SEED)
        losses, step_times = [], []
        loss_fn = nn.CrossEntropyLoss()
        for _ in range(epochs):
            order = shard[torch.randperm(len(shard), generator=gen)]
            for start in range(0, len(order) - batch + 1, batch):
                idx = order[start:start + batch]
                t0 = time.perf_counter()
                opt.zero_grad()
                loss = loss_fn(model(x_tr[idx]), y_tr[idx])
                loss.backward()
                opt.step()
                step_times.append(time.perf_counter() - t0)
                mean_loss = loss.detach().clone()
                dist.all_reduce(mean_loss)
                losses.append(float(mean_loss) / n_workers)
        with torch.no_grad():
            acc = float((model.module(x_te).argmax(1) == y_te).float().mean())
        result = RunResult(mode, accuracy=acc, steps=len(step_times), losses=losses,
                           n_params=n_params,
                           seconds_per_step=float(np.mean(step_times[2:] or step_times)))
        if state is not None:
            total = state.transport.total
            hina_steps = max(1, len(step_times) - state.start_iter)
            result.bytes_per_step = (total.bytes_sent + total.packets_sent * L2_L4_BYTES) / hina_steps
            result.bytes_note = "measured, headers included"
            result.fallback_buckets = state.stats["fallback_buckets"]
            result.retransmissions = total.retransmissions
            state.transport.close()
        else:
            # gloo's ring all-reduce: each worker sends 2 (n-1)/n of the fp32 buffer.
            result.bytes_per_step = 2 * (n_workers - 1) / n_workers * 4 * n_params
            result.bytes_note = "ring all-reduce payload, computed"
        if rank == 0:
            out.put(asdict(result))
    finally:
        dist.destroy_process_group()


def run_mode(mode: str, args, deployment: Optional[LocalDeployment]) -> RunResult:
    """Train once in ``mode``; codec modes get a fresh job (zeroed slots) on ``deployment``."""
    seats: list[Optional[WorkerSeat]] = [None] * args.workers
    if mode != "fp32":
        table = tuple(make_codec("thc", args.workers, 0).table) if mode == "thc" else None
        seats = deployment.create_job(job_id=1, n_slots=args.slots, thc_table=table)
    try:
        ctx = mp.get_context("spawn")
        out = ctx.Queue()
        init = f"tcp://127.0.0.1:{free_tcp_port()}"
        procs = [ctx.Process(target=_train_worker,
                             args=(r, mode, seats[r], args.workers, init, args.epochs,
                                   args.batch, args.lr, out, getattr(args, "device", "cpu"),
                                   getattr(args, "hook", "async")))
                 for r in range(args.workers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs):
            raise RuntimeError(f"mode {mode}: worker exit codes {[p.exitcode for p in procs]}")
        return RunResult(**out.get(timeout=10))
    finally:
        if mode != "fp32":
            log.info("mode %s: switch reason counters %s", mode, deployment.jobs.reason_counts())
            deployment.delete_job(1)


def run_modes(modes, args) -> list[RunResult]:
    """Run every mode; one embedded switch serves all codec modes."""
    deployment = None
    results = []
    try:
        if any(m != "fp32" for m in modes):
            deployment = LocalDeployment(args.workers, words=args.words, loss=args.loss)
        for mode in modes:
            t0 = time.monotonic()
            results.append(run_mode(mode, args, deployment))
            log.info("mode %s done in %.0fs", mode, time.monotonic() - t0)
    finally:
        if deployment is not None:
            deployment.close()
    return results


def print_table(results: list[RunResult]) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title="HINA demo: DDP on digits through the embedded switch",
                  caption="bytes: codecs measured on the wire (Ethernet/IPv4/UDP/HINA headers "
                          "included); fp32: gloo ring all-reduce payload, computed")
    for col in ("mode", "test accuracy", "ms / step", "bytes sent / worker / step",
                "vs fp32", "retransmissions", "fp32 fallbacks"):
        table.add_column(col, justify="right" if col != "mode" else "left")
    base = next((r.bytes_per_step for r in results if r.mode == "fp32"), None)
    for r in results:
        ratio = f"{base / r.bytes_per_step:.1f}x less" if base and r.mode != "fp32" else ""
        table.add_row(r.mode, f"{100 * r.accuracy:.1f}%", f"{1000 * r.seconds_per_step:.1f}",
                      f"{r.bytes_per_step:,.0f}", ratio,
                      str(r.retransmissions), str(r.fallback_buckets))
    Console(width=120).print(table)


def save_plot(results: list[RunResult], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in results:
        ax.plot(r.losses, label=f"{r.mode} ({100 * r.accuracy:.1f}%)", linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (mean over workers)")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("HINA: loss through the switch, per codec")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hina.demo.digits", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated, from {','.join(MODES)}")
    parser.add_argument("--words", type=int, default=P.WORDS, choices=P.SUPPORTED_WORDS,
                        help="HINA_WORDS the switch program is compiled with")
    parser.add_argument("--slots", type=int, default=32, help="aggregation slots of the job")
    parser.add_argument("--loss", type=float, default=0.0, help="packet loss per switch port")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the model, gradients and codecs run (cuda: worker r on GPU r mod "
                             "count; never run in this project's CI, which has no GPU)")
    parser.add_argument("--hook", choices=("async", "sync"), default="async",
                        help="the DDP hook hands buckets to the aggregation engine's thread "
                             "(async) or aggregates each inside the hook (sync: no overlap)")
    parser.add_argument("--out", default="out",
                        help="folder for the loss plot and the JSON results (default: ./out)")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device available")
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in MODES]
    if bad:
        parser.error(f"unknown mode(s) {bad}: choose from {MODES}")
    if not 1 <= args.workers <= P.MAX_WORKERS:
        parser.error(f"--workers {args.workers}: must be in [1, {P.MAX_WORKERS}]")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = run_modes(modes, args)
    print_table(results)
    save_plot(results, out_dir / "demo_loss.png")
    (out_dir / "demo_results.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    print(f"loss curves: {out_dir / 'demo_loss.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
