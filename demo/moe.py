"""A small mixture of experts (top-k routing, data parallel) through the embedded switch.

The task (:func:`generate_regimes`, ``docs/workloads.md``): points from a few Gaussian clusters
("regimes"), each with its own linear labelling rule, so a router that sends each regime to its
own experts is what solves it. The model: a linear router over ``--experts`` experts (two-layer
MLPs, stored as batched tensors), top-``k`` routing with the router's probabilities as weights
(Switch Transformer / GShard) and the Switch Transformer's load-balancing loss. With few tokens
per worker per step (``--batch``) against many experts, most experts get no token on a worker in
a step, so their gradients are exactly zero: the buckets holding the experts are sparse, in
64-element blocks (one expert's slice of a weight tensor is a contiguous run of blocks). The demo
prints the measured density of every DDP bucket, the table of every mode (the same modes as
``demo.dlrm`` but ``sparse``: DDP's sparse gradients exist only for ``nn.Embedding``), and saves
``out/moe_results.json`` and ``out/moe_curves.png``.

Usage::

    python -m hina.demo.moe [--workers 4] [--experts 32] [--top-k 1] [--batch 8]
"""
from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .common import (ALL_MODES, SparseCodecs, Workload, add_common_args, check_common_args, report,
                     run_all)

TITLE = "HINA demo: mixture of experts (top-k routing), DDP through the embedded switch"
MOE_MODES = tuple(m for m in ALL_MODES if m != "sparse")
DEFAULT_MODES = ("fp32,fp16,powersgd,thc,sparse_thc,sketched_sgd,lossless,fixed,block_sparse,"
                 "adaptive,fp32@1,thc@1,sparse_thc@1,sketched_sgd@1,block_sparse@1,adaptive@1")


@dataclass(frozen=True)
class RegimeSpec:
    """The task's sizes (docs/workloads.md, "Mixture-of-experts task")."""
    regimes: int = 8
    features: int = 16
    classes: int = 4
    center_scale: float = 3.0
    label_noise: float = 0.5


def generate_regimes(n: int, seed: int, spec: RegimeSpec = RegimeSpec()):
    """``n`` labelled points: ``(x float32 (n, features), y int64 (n,), regime int64 (n,))``.

    Regime ``c`` (uniform) has a centre ``m_c ~ N(0, center_scale^2 I)`` and a rule
    ``V_c`` (classes x features, standard normal); ``x = m_c + e`` with ``e ~ N(0, I)`` and
    ``y = argmax(2 V_c e + label_noise * Gumbel)``: the label depends on where the point lies
    within its regime, through the regime's own rule.
    """
    if n < 1:
        raise ValueError(f"n={n}: must be >= 1")
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, spec.center_scale, (spec.regimes, spec.features))
    rules = rng.normal(0.0, 1.0, (spec.regimes, spec.classes, spec.features))
    regime = rng.integers(0, spec.regimes, n)
    e = rng.normal(0.0, 1.0, (n, spec.features))
    logits = 2.0 * np.einsum("nkd,nd->nk", rules[regime], e)
    y = np.argmax(logits + spec.label_noise * rng.gumbel(size=(n, spec.classes)), axis=1)
    return (centres[regime] + e).astype(np.float32), y.astype(np.int64), regime.astype(np.int64)


class TopKMoE(nn.Module):
    """Router + ``experts`` two-layer MLPs (batched weights ``w1 (E, d, h)``, ``w2 (E, h, c)``);
    each token goes to its ``k`` most probable experts, weighted by their probabilities.
    ``forward`` returns (logits, load-balancing loss ``E * sum_e f_e P_e``)."""

    def __init__(self, features: int, classes: int, experts: int, hidden: int, k: int):
        super().__init__()
        if not 1 <= k <= experts:
            raise ValueError(f"k={k}: must be in [1, experts={experts}]")
        self.experts, self.k = experts, k
        self.router = nn.Linear(features, experts)
        self.w1 = nn.Parameter(torch.randn(experts, features, hidden) / features ** 0.5)
        self.b1 = nn.Parameter(torch.zeros(experts, hidden))
        self.w2 = nn.Parameter(torch.randn(experts, hidden, classes) / hidden ** 0.5)
        self.b2 = nn.Parameter(torch.zeros(experts, classes))

    def forward(self, x: torch.Tensor):
        probs = F.softmax(self.router(x), dim=1)
        weight, chosen = probs.topk(self.k, dim=1)                         # (n, k)
        h = F.relu(torch.einsum("nd,nkdh->nkh", x, self.w1[chosen]) + self.b1[chosen])
        out = torch.einsum("nkh,nkhc->nkc", h, self.w2[chosen]) + self.b2[chosen]
        logits = (weight.unsqueeze(2) * out).sum(dim=1)
        share = F.one_hot(chosen[:, 0], self.experts).float().mean(0)     # f_e: top-1 share
        balance = self.experts * (share * probs.mean(0)).sum()
        return logits, balance


@dataclass(frozen=True)
class MoeWorkload(SparseCodecs, Workload):
    spec: RegimeSpec = RegimeSpec()
    n_train: int = 4000
    n_test: int = 2000
    experts: int = 32
    hidden: int = 16
    k: int = 1
    balance_weight: float = 0.01
    data_seed: int = 0
    lossless_columns: int = 1 << 12
    sketch_columns: int = 256
    #: Sketched SGD's candidates, a fraction of the bucket: at a quarter it was 8.3 and 4.6
    #: points below fp32 on seeds 3 and 4 (6 epochs, 15x fewer bytes); at half, within 1 point of
    #: fp32 on each of seeds 0-4 at 10x (docs/workloads.md)
    sketch_k: float = 0.5

    name = "moe"
    title = TITLE
    metric_name = "test accuracy"
    # DDP's default buckets (one bucket here). Smaller buckets (bucket_cap_mb=0.008: the experts
    # and the router apart) hang torch's powerSGD_hook on gloo: its future callbacks wait on a
    # second all-reduce inside gloo's worker threads (docs/workloads.md). THC gets a bucket per
    # parameter (its own scale per tensor): over five seeds of 6 epochs its mean accuracy is
    # 0.1 points above fp32's so, 1.4 points below in the one bucket (docs/workloads.md).
    hina_bucket_cap_by_mode = {"thc": 0.0001}

    def make_optimizer(self, params, lr: float):
        """Adam: SGD's router learns the regimes too slowly for a demo of a few hundred steps."""
        return torch.optim.Adam(params, lr=lr)

    def data(self):
        x, y, _ = generate_regimes(self.n_train + self.n_test, self.data_seed, self.spec)
        x = torch.from_numpy(x)
        mean, std = x[:self.n_train].mean(0), x[:self.n_train].std(0) + 1e-3
        x = (x - mean) / std
        y = torch.from_numpy(y)
        return (x[:self.n_train], y[:self.n_train]), (x[self.n_train:], y[self.n_train:])

    def make_model(self, mode: str, seed: int) -> nn.Module:
        torch.manual_seed(seed)
        return TopKMoE(self.spec.features, self.spec.classes, self.experts, self.hidden, self.k)

    def loss(self, model, batch):
        x, y = batch
        logits, balance = model(x)
        return F.cross_entropy(logits, y) + self.balance_weight * balance

    def evaluate(self, module, test) -> float:
        x, y = test
        return float((module(x)[0].argmax(1) == y).float().mean())

def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hina.demo.moe", description=__doc__.split("\n\n")[0])
    add_common_args(parser, MOE_MODES, DEFAULT_MODES, epochs=6, batch=8, lr=0.01)
    parser.add_argument("--experts", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=1, help="experts per token")
    parser.add_argument("--hidden", type=int, default=16, help="hidden units of each expert")
    parser.add_argument("--train", type=int, default=4000)
    parser.add_argument("--test", type=int, default=2000)
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--lossless-columns", type=int, default=1 << 12,
                        help="columns of the lossless codec's 3-row sketch (a power of two): peeling "
                             "needs a bucket's union support below 0.818 x 3 x columns")
    args = parser.parse_args(argv)
    runs = check_common_args(parser, args, MOE_MODES)
    if args.experts < 1:
        parser.error(f"--experts {args.experts}: must be >= 1")
    if not 1 <= args.top_k <= args.experts:
        parser.error(f"--top-k {args.top_k}: must be in [1, --experts={args.experts}]")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    workload = MoeWorkload(n_train=args.train, n_test=args.test, experts=args.experts,
                           hidden=args.hidden, k=args.top_k, data_seed=args.data_seed,
                           lossless_columns=args.lossless_columns)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = run_all(workload, runs, args)
    tokens = args.batch * args.top_k
    bound = min(1.0, tokens / args.experts)
    print(f"{args.batch} tokens x top-{args.top_k} per worker per step over {args.experts} experts: "
          f"at most {bound:.0%} of the experts get a gradient on one worker")
    return report(workload, results, args, out_dir, "moe")


if __name__ == "__main__":
    sys.exit(main())
