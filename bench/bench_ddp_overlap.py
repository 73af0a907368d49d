"""How much of the switch's communication the DDP hook hides behind the backward pass.

    python bench/bench_ddp_overlap.py [--workers 2] [--steps 12] [--codec thc] [--batch 256]
        [--rounds 2] [--lanes 2]

Two (``--workers``) DDP processes train a model on random data through the embedded switch
(its own process, loopback UDP ports, as the demo runs it). The model is a small convolutional
network (few parameters, much compute) whose backward pass takes at least as long as its
communication through the switch at the chosen batch size: the figures below print both, so
that the claim can be checked. Per
worker, each measured as the median over ``--steps`` steps after the warm-up:

* compute only: forward, backward, optimiser step with DDP's communication replaced by a hook
  that returns the bucket at once (no communication at all);
* communication only: the same buckets (the gradients of one step, same sizes, same order)
  aggregated through the switch by the engine alone, with no compute around them;
* step, synchronous hook: every bucket aggregated inside the hook (no overlap);
* step, asynchronous hook, one lane: buckets handed to the engine's thread, one bucket on the
  wire at a time (the engine before it pipelined buckets);
* step, asynchronous hook (the default): buckets handed to the engine, ``--lanes`` of them on
  the wire at once (``worker.engine``); its communication only is measured with it too.

With ``--rounds`` R the modes take turns: R rounds of every mode in the order above (a fresh
model and hook each time), so that a change of the machine's load during the run hits every
mode alike; the figures are medians over all rounds' steps.

hidden = (compute only + communication only - step) / communication only (the communication
only of the same engine: one lane for the synchronous and one-lane hooks): 0 % when nothing
overlaps, 100 % when communication costs nothing beyond compute. The embedded switch carries
thousands of packets per second, so communication is slow here; what matters is the share.

"engine busy" is the wall time per step with at least one bucket in the engine's switch path
(from its start to its vote); "buckets' paths" sums each bucket's, so with several lanes it
counts the time buckets spend on the wire together (or waiting for the previous bucket's vote)
once per bucket.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch import nn

from hina.procs import rank_processes

WARMUP = 3          # iterations before measuring: DDP's bucket rebuild and the hook's start_iter
#: The modes, in the order each round runs them.
MODES = ("compute", "synchronous", "one_lane", "asynchronous")


def make_model(width: int, depth: int) -> nn.Module:
    """A small convolutional network: few parameters (little to communicate), much compute per
    sample (3x3 convolutions over 32x32 images), so backward can outlast communication."""
    layers, channels = [], 3
    for _ in range(depth):
        layers += [nn.Conv2d(channels, width, 3, padding=1), nn.ReLU()]
        channels = width
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))


def _noop_hook(_state, bucket):
    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def _sync(device: torch.device) -> None:
    """Wait for the GPU's queued work, so that wall-clock times cover it (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _steps(model, opt, batch, width, steps, gen, backward_times=None,
           device=torch.device("cpu")) -> list[float]:
    """Step times (forward, backward, optimiser) after the warm-up; backward alone too. On a
    GPU each phase ends with a device synchronisation, so the times are the GPU's too."""
    times = []
    for i in range(WARMUP + steps):
        x = torch.randn(batch, 3, 32, 32, generator=gen).to(device)
        y = torch.randint(0, 10, (batch,), generator=gen).to(device)
        _sync(device)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        _sync(device)
        t1 = time.perf_counter()
        loss.backward()
        _sync(device)
        t2 = time.perf_counter()
        opt.step()
        _sync(device)
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
            if backward_times is not None:
                backward_times.append(t2 - t1)
    return times


def _worker(rank: int, n: int, init: str, seat, args, out) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hina.demo.digits import make_codec
    from hina.demo.local import connect_worker
    from hina.worker.ddp_hook import HinaState, hina_hook
    torch.set_num_threads(args.threads)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    device = torch.device("cpu")
    if args.device == "cuda":
        # worker r on GPU r mod count, as the demo places them; gloo carries CUDA tensors
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)

    def ddp(module):
        module = module.to(device)
        if device.type == "cuda":
            return DDP(module, device_ids=[device], bucket_cap_mb=args.bucket_mb)
        return DDP(module, bucket_cap_mb=args.bucket_mb)
    try:
        gen = torch.Generator().manual_seed(rank)
        figures = {}
        # the buckets of a step after DDP's rebuild, in its order: the communication-only load
        steps_buckets: list[list[torch.Tensor]] = [[]]

        def record(_state, bucket):
            steps_buckets[-1].append(bucket.buffer().clone())
            if bucket.is_last():
                steps_buckets.append([])
            return _noop_hook(None, bucket)
        torch.manual_seed(0)
        probe = ddp(make_model(args.width, args.depth))
        probe.register_comm_hook(None, record)
        popt = torch.optim.SGD(probe.parameters(), lr=0.01)
        _steps(probe, popt, args.batch, args.width, 1, gen, device=device)
        last = steps_buckets[-2]
        transport = connect_worker(seat)
        times: dict = {mode: [] for mode in MODES}
        times.update(backward=[], communication=[], communication_one_lane=[])
        engine_s = {mode: 0.0 for mode in MODES[1:]}
        bucket_s = {mode: 0.0 for mode in MODES[1:]}
        fallbacks = {mode: 0 for mode in MODES[1:]}
        for _ in range(args.rounds):
            for mode in MODES:
                torch.manual_seed(0)
                model = ddp(make_model(args.width, args.depth))
                opt = torch.optim.SGD(model.parameters(), lr=0.01)
                if mode == "compute":
                    model.register_comm_hook(None, _noop_hook)
                    times[mode] += _steps(model, opt, args.batch, args.width, args.steps, gen,
                                          times["backward"], device)
                    continue
                state = HinaState(transport, make_codec(args.codec, n, rank), start_iter=2,
                                  asynchronous=mode != "synchronous",
                                  lanes=args.lanes if mode == "asynchronous" else 1)
                model.register_comm_hook(state, hina_hook)
                times[mode] += _steps(model, opt, args.batch, args.width, args.steps, gen,
                                      device=device)
                fallbacks[mode] += state.stats["fallback_buckets"]
                engine_s[mode] += state.stats["seconds"] / (WARMUP + args.steps - 2)
                bucket_s[mode] += state.stats["bucket_seconds"] / (WARMUP + args.steps - 2)
                if mode != "synchronous":
                    figures[f"{mode}_lanes"] = state.engine.lanes
                    # communication only: the last step's buckets through the engine alone
                    for _ in range(args.steps):
                        dist.barrier()
                        t0 = time.perf_counter()
                        futures = [state.engine.submit(i, b.clone()) for i, b in enumerate(last)]
                        for f in futures:
                            f.wait()
                        _sync(device)
                        times["communication" if mode == "asynchronous" else
                              "communication_one_lane"].append(time.perf_counter() - t0)
                state.close()
        for name, values in times.items():
            figures[name] = statistics.median(values)
            figures[f"{name}_spread"] = (min(values), max(values))
        for mode in MODES[1:]:
            figures[f"{mode}_fallbacks"] = fallbacks[mode]
            figures[f"{mode}_engine_s_per_step"] = engine_s[mode] / args.rounds
            figures[f"{mode}_bucket_s_per_step"] = bucket_s[mode] / args.rounds
        figures["buckets"] = len(last)
        figures["params"] = sum(p.numel() for p in model.parameters())
        figures["bytes_per_step"] = transport.total.bytes_sent / max(
            1, args.rounds * (3 * (WARMUP + args.steps) + 2 * args.steps))
        transport.close()
        out.put((rank, figures))
    finally:
        dist.destroy_process_group()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of every mode in turn (the figures: medians over all)")
    ap.add_argument("--lanes", type=int, default=None,
                    help="buckets on the wire at once in the asynchronous hook (default: the "
                         "engine's, worker.engine.default_lanes)")
    ap.add_argument("--codec", default="thc")
    ap.add_argument("--width", type=int, default=32, help="channels of each convolution")
    ap.add_argument("--depth", type=int, default=4, help="3x3 convolutions")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--bucket-mb", type=float, default=0.02, help="DDP's bucket_cap_mb")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where the model, its gradients and the codec run")
    ap.add_argument("--switch-interval", type=float, default=None, metavar="SECONDS",
                    help="the workers' sys.setswitchinterval (Python's default 0.005): how long "
                         "a thread waiting for the GIL lets the holder run before it asks for "
                         "it; an experiment on what the engine's threads wait for")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        ap.error("--steps and --rounds must be >= 1")
    if args.switch_interval is not None and not 0 < args.switch_interval <= 1:
        ap.error(f"--switch-interval {args.switch_interval}: must be in (0, 1] seconds")
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: this torch sees no GPU")
    from hina import codecs as codec_registry
    from hina.demo.digits import make_codec
    from hina.demo.local import LocalDeployment, free_tcp_port
    try:
        spec = codec_registry.lookup(args.codec)
    except codec_registry.UnknownCodecError as exc:
        ap.error(f"--codec: {exc}")
    with LocalDeployment(args.workers) as dep:
        table = None
        if spec.lut:     # THC indices: the switch maps them
            table = tuple(make_codec(args.codec, args.workers, 0).table)
        seats = dep.create_job(job_id=1, n_slots=32, thc_table=table)
        ctx = rank_processes()
        out = ctx.Queue()
        init = f"tcp://127.0.0.1:{free_tcp_port()}"
        procs = [ctx.Process(target=_worker, args=(r, args.workers, init, seats[r], args, out))
                 for r in range(args.workers)]
        for p in procs:
            p.start()
        results = dict(out.get(timeout=1800) for _ in procs)
        for p in procs:
            p.join(60)
    f = results[0]
    comm = {"synchronous": f["communication_one_lane"], "one_lane": f["communication_one_lane"],
            "asynchronous": f["communication"]}
    rows = {mode: (f["compute"] + comm[mode] - f[mode]) / comm[mode] for mode in MODES[1:]}
    if args.json:
        print(json.dumps({"workers": args.workers, "codec": args.codec, "figures": results,
                          "hidden": rows}, indent=1))
        return 0
    print(f"DDP through the embedded switch: {args.workers} workers, codec {args.codec}, model "
          f"{args.depth} 3x3 convolutions of {args.width} channels on 32x32 images "
          f"({f['params']:,} parameters, {f['buckets']} buckets of <= {args.bucket_mb} MB), "
          f"batch {args.batch}, medians of {args.rounds} x {args.steps} steps (worker 0; "
          f"[min, max]), "
          f"{os.cpu_count()} CPU cores for the workers and the switch, model on {args.device}"
          f"{'' if args.switch_interval is None else f', switch interval {args.switch_interval} s'}"
          f"{' (' + torch.cuda.get_device_name(0) + ')' if args.device == 'cuda' else ''}:")
    def ms(name):
        low, high = f[f"{name}_spread"]
        return f"{f[name] * 1e3:8.1f} ms [{low * 1e3:.0f}, {high * 1e3:.0f}]"
    lanes = f"{f['asynchronous_lanes']} lane{'s' if f['asynchronous_lanes'] > 1 else ' '}"
    print(f"  compute only (no communication)          {ms('compute')}   of which backward "
          f"{ms('backward').strip()}")
    print(f"  communication only, one lane (alone)     {ms('communication_one_lane')}")
    print(f"  communication only, {lanes} (alone)     {ms('communication')}")
    labels = {"synchronous": "step, synchronous hook             ",
              "one_lane": "step, asynchronous hook, one lane  ",
              "asynchronous": f"step, asynchronous hook, {lanes}   "}
    for mode in MODES[1:]:
        print(f"  {labels[mode]}      {ms(mode)}   hidden {100 * rows[mode]:5.1f} %"
              f"   (engine busy {f[f'{mode}_engine_s_per_step'] * 1e3:.1f} ms per step, "
              f"buckets' paths {f[f'{mode}_bucket_s_per_step'] * 1e3:.1f}; "
              f"fp32 fallbacks {f[f'{mode}_fallbacks']})")
    print(f"  backward >= communication: "
          f"{'yes' if f['backward'] >= max(comm.values()) else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
