"""How often the lossless codec's 3-row count sketch fails to peel, by load (nonzeros / cells).

    python bench/bench_peel_load.py [--columns 256,1024] [--loads 0.5,0.6,0.7,0.78] [--trials 40]

For each sketch size and load: ``--trials`` single-worker lossless round trips of a vector of
65,536 values with ``load * 3 * columns`` random nonzeros (each trial its own hash seed and
support), counting the decodes whose peel did not finish (``incomplete_peels``). Peeling's
asymptotic threshold is 0.818; ``AdaptiveCodec`` gives a sketch at most load 0.5
(``ADAPTIVE_LOAD``), this bench is the measurement behind that choice (docs/codecs.md).
"""
from __future__ import annotations

import argparse

import torch

from hina.worker.codecs import LosslessSketchCodec, reference_allreduce

NUMEL = 1 << 16


def failures(columns: int, load: float, trials: int) -> int:
    failed = 0
    for t in range(trials):
        codec = LosslessSketchCodec(1, columns=columns, seed=t)
        k = int(load * 3 * columns)
        gen = torch.Generator().manual_seed(t)
        g = torch.zeros(NUMEL)
        idx = torch.randperm(NUMEL, generator=gen)[:k]
        g[idx] = torch.randn(k, generator=gen)
        reference_allreduce([codec], [g])
        failed += codec.incomplete_peels
    return failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--columns", default="256,1024")
    ap.add_argument("--loads", default="0.5,0.6,0.7,0.78")
    ap.add_argument("--trials", type=int, default=40)
    args = ap.parse_args(argv)
    try:
        columns = [int(c) for c in args.columns.split(",")]
        loads = [float(x) for x in args.loads.split(",")]
    except ValueError:
        ap.error("--columns and --loads take comma-separated numbers")
    if args.trials < 1 or any(c < 1 or c & (c - 1) for c in columns) or \
            any(not 0 < x or 3 * c * x > NUMEL for x in loads for c in columns):
        ap.error("--trials >= 1, --columns powers of two, loads > 0 that fit the vector")
    torch.set_num_threads(1)
    print(f"{'columns':>8} {'load':>6} {'incomplete peels':>18}")
    for c in columns:
        for load in loads:
            print(f"{c:>8} {load:>6.2f} {failures(c, load, args.trials):>10} of {args.trials}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
