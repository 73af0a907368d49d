"""Why THC fails on DLRM with one DDP bucket, and what per-table buckets change: THC's error on
each parameter of the model's first gradients, offline (no switch, no training).

    python bench/analyze_thc_buckets.py [--workers 4] [--batch 64] [--steps 3] [--seed 0]

The DLRM workload of ``python -m hina.demo.dlrm`` (its defaults: the click log, the model, the
shards and batch order of each worker), gradients of ``--steps`` consecutive steps from the
initial model (no update between them: the first gradients, where training starts). For each
bucket layout, every worker's bucket goes through :func:`reference_allreduce` with THC (the
codec's defaults, error feedback off: one round's error), and the decoded mean is compared with
the exact mean per parameter:

* ``one bucket``: the whole model in one bucket (DDP's default 25 MiB cap, what the demo ran);
* ``per table``: each embedding table in a bucket of its own, the MLPs in the rest (what
  ``--hina-bucket-mb 0.01`` gives);
* ``per parameter``: every parameter tensor in a bucket of its own (what a cap below the
  smallest tensor, ``--hina-bucket-mb 0.0001``, gives).

Columns: the parameter's share of the bucket's squared norm, THC's NMSE on it
(``||decoded - mean||^2 / ||mean||^2``, averaged over the steps), and the share of its
coordinates that THC's decoded mean leaves nonzero (the exact mean's support in brackets).
"""
from __future__ import annotations

import argparse
from typing import Dict, List, Sequence

import torch

from hina.demo.dlrm import DlrmWorkload
from hina.worker.codecs import ThcCodec
from hina.worker.codecs.base import reference_allreduce


def worker_grads(wl: DlrmWorkload, n: int, batch: int, steps: int, seed: int) -> List[List[Dict[str, torch.Tensor]]]:
    """[step][worker] -> {parameter name: gradient} of the initial model, each worker on its own
    shard in the demo's order."""
    train, _ = wl.data()
    model = wl.make_model("fp32", seed)
    n_train = len(train[-1])
    out: List[List[Dict[str, torch.Tensor]]] = [[] for _ in range(steps)]
    for rank in range(n):
        shard = torch.arange(rank, n_train, n)
        gen = torch.Generator().manual_seed(seed)
        order = shard[torch.randperm(len(shard), generator=gen)]
        for s in range(steps):
            idx = order[s * batch:(s + 1) * batch]
            model.zero_grad()
            wl.loss(model, tuple(t[idx] for t in train)).backward()
            out[s].append({name: p.grad.detach().clone() for name, p in model.named_parameters()})
    return out


def layouts(names: Sequence[str]) -> Dict[str, List[List[str]]]:
    """Bucket layouts: DDP fills buckets in reverse registration order."""
    rev = list(reversed(names))
    tables = [n for n in rev if n.startswith("tables.")]
    rest = [n for n in rev if not n.startswith("tables.")]
    return {"one bucket": [rev], "per table": [[t] for t in tables] + [rest],
            "per parameter": [[n] for n in rev]}


def analyse(grads, layout: List[List[str]], n: int, seed: int) -> Dict[str, tuple]:
    """{parameter: (share of its bucket's squared norm, mean NMSE, decoded support, exact support)}."""
    acc: Dict[str, list] = {}
    for step in grads:
        for b, bucket in enumerate(layout):
            flat = [torch.cat([g[name].reshape(-1) for name in bucket]) for g in step]
            codecs = [ThcCodec(n, rank=r, seed=seed, error_feedback=False) for r in range(n)]
            decoded = reference_allreduce(codecs, flat, key=b)[0]
            exact = torch.stack(flat).mean(0)
            total = float((exact.double() ** 2).sum())
            offset = 0
            for name in bucket:
                k = step[0][name].numel()
                d, e = decoded[offset:offset + k].double(), exact[offset:offset + k].double()
                offset += k
                norm = float((e ** 2).sum())
                nmse = float(((d - e) ** 2).sum()) / norm if norm > 0 else float("nan")
                acc.setdefault(name, []).append((norm / total if total else 0.0, nmse,
                                                 float((d != 0).double().mean()),
                                                 float((e != 0).double().mean())))
    return {name: tuple(sum(v[i] for v in rows) / len(rows) for i in range(4))
            for name, rows in acc.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.workers < 1 or args.batch < 1 or args.steps < 1:
        ap.error("--workers, --batch and --steps must be >= 1")
    torch.set_num_threads(1)
    wl = DlrmWorkload()
    grads = worker_grads(wl, args.workers, args.batch, args.steps, args.seed)
    names = list(grads[0][0])
    print(f"THC (error feedback off) on DLRM's first gradients: {args.workers} workers, batch "
          f"{args.batch}, mean over {args.steps} steps")
    for title, layout in layouts(names).items():
        result = analyse(grads, layout, args.workers, args.seed)
        print(f"\n== {title}: {len(layout)} bucket(s) ==")
        print(f"{'parameter':<18} {'elements':>9} {'share of bucket norm^2':>23} {'NMSE':>9} "
              f"{'nonzero decoded (exact)':>24}")
        for name in reversed(names):
            share, nmse, nz, nz_exact = result[name]
            print(f"{name:<18} {grads[0][0][name].numel():>9,} {100 * share:>22.2f}% {nmse:>9.3f} "
                  f"{100 * nz:>15.1f}% ({100 * nz_exact:5.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
