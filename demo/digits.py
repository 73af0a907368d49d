"""The HINA demo: 4 DDP workers train on scikit-learn's digits through the embedded switch.

For each mode (plain fp32 all-reduce, then each codec through the switch) the demo starts the
embedded switch (``softswitch``) on loopback UDP ports, pushes ``p4/hina.p4`` and creates the job
over P4Runtime, and runs ``--workers`` processes (``torch.distributed`` with gloo for DDP's own
bookkeeping) whose gradient buckets go through :func:`worker.ddp_hook.hina_hook`. It prints a
table of final test accuracy, time per step and bytes each worker sends per step, and saves the
loss curves to ``out/demo_loss.png`` (and the figures to ``out/demo_results.json``). The
machinery is shared with the sparse workloads (:mod:`demo.common`, ``demo.dlrm``, ``demo.moe``).

Usage::

    python -m hina.demo.digits [--workers 4] [--epochs 12] [--modes fp32,thc,sketched_sgd,lossless,fixed]
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch
from torch import nn

from .common import (ALL_MODES, HINA_MODES, L2_L4_BYTES, RunResult, RunSpec, Workload,  # noqa: F401
                     add_common_args, check_common_args, print_table, run_all, save_plot,
                     save_results)

#: the default modes (on this dense MLP adaptive is thc, and block_sparse is fixed with a block
#: header per packet)
MODES = ("fp32",) + tuple(m for m in HINA_MODES if m not in ("adaptive", "block_sparse", "sparse_thc"))
#: The digits MLP has no embedding tables: every mode but ``sparse``.
DIGITS_MODES = tuple(m for m in ALL_MODES if m != "sparse")
HIDDEN = 128
N_CLASSES = 10
SEED = 0
TITLE = "HINA demo: DDP on digits through the embedded switch"
CAPTION = ("bytes: codecs measured on the wire (Ethernet/IPv4/UDP/HINA headers included); fp32: "
           "gloo ring all-reduce payload, computed")


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


def make_model(seed: int = SEED) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, N_CLASSES))


def make_codec(mode: str, n_workers: int, rank: int, seed: int = SEED):
    """The codec of ``mode`` (a registry name, :mod:`hina.codecs`) with the digits MLP's
    parameters; the sketch is sized for >= 10x compression of the model."""
    from hina.worker.codecs import registry
    params = {
        "thc": dict(seed=seed),
        "sparse_thc": dict(seed=seed),
        # Sketched SGD, two rounds (docs/codecs.md says why not FetchSGD here). Per step: 1
        # packet of MAX (3 row + 120 value-block exponents), 1 packet of the 3 x 128 sketch
        # (10-bit cells, 3 per int32 lane), 4 packets of the exact sums of the 2560 candidates
        # (6-bit fields, 5 per lane): 6 x (54 + 512) B = 3396 B vs 38440 B of fp32 gradient
        # for the 9610 parameters: 11.3x.
        "sketched_sgd": dict(rows=3, columns=128, k=2560, sketch_bits=10, value_bits=6,
                             value_blocks=120, rotate=8, seed=seed),
        "lossless": dict(columns=1 << 12, seed=seed),
        "fixed": {},
        "block_sparse": {},
        "adaptive": dict(seed=seed, columns=1 << 12, sketch_seed=seed),
    }
    if mode not in params:
        raise ValueError(f"mode={mode!r}: one of {HINA_MODES}")
    return registry.build(mode, n_workers, rank, **params[mode])


class DigitsWorkload(Workload):
    """A 64-128-10 MLP on scikit-learn's digits."""
    name = "digits"
    title = TITLE
    metric_name = "test accuracy"

    def data(self):
        x_tr, y_tr, x_te, y_te = load_digits_split()
        return (x_tr, y_tr), (x_te, y_te)

    def make_model(self, mode: str, seed: int) -> nn.Module:
        return make_model(seed)

    def loss(self, model, batch):
        x, y = batch
        return nn.functional.cross_entropy(model(x), y)

    def evaluate(self, module, test) -> float:
        x, y = test
        return float((module(x).argmax(1) == y).float().mean())

    def make_codec(self, mode: str, n_workers: int, rank: int, seed: int):
        return make_codec(mode, n_workers, rank, seed)


def run_modes(modes: Sequence, args) -> List[RunResult]:
    """Run every mode (names, or :class:`~demo.common.RunSpec`); one switch serves all codecs."""
    runs = [m if isinstance(m, RunSpec) else RunSpec(m, SEED) for m in modes]
    return run_all(DigitsWorkload(), runs, args)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hina.demo.digits", description=__doc__.split("\n\n")[0])
    add_common_args(parser, DIGITS_MODES, ",".join(MODES))
    args = parser.parse_args(argv)
    runs = check_common_args(parser, args, DIGITS_MODES)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = run_modes(runs, args)
    print_table(results, TITLE, CAPTION, show_seed=any(r.seed != SEED for r in results))
    save_plot(results, out_dir / "demo_loss.png", "HINA: loss through the switch, per codec")
    save_results(results, out_dir / "demo_results.json")
    print(f"loss curves: {out_dir / 'demo_loss.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
