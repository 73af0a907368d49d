"""DLRM-style click prediction through the embedded switch: embedding tables with skewed ids.

A synthetic click log (:func:`generate_click_log`, the generative model is in
``docs/workloads.md``) trains a small DLRM (embedding tables, a bottom MLP for the dense
features, pairwise dot-product interactions, a top MLP) under DDP with ``--workers`` processes,
once per mode: fp32 all-reduce, DDP's sparse embedding gradients (gloo's sparse all-reduce),
PyTorch's fp16 and PowerSGD hooks, and HINA's codecs through the switch. It prints one table
(test AUC, ms per step, bytes per worker per step, compression against fp32) and the density of
every DDP bucket, and saves ``out/dlrm_results.json`` and ``out/dlrm_curves.png``.

Usage::

    python -m hina.demo.dlrm [--workers 4] [--epochs 2] [--modes fp32,sparse,...,adaptive@1]
"""
from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from .common import (ALL_MODES, SparseCodecs, Workload, add_common_args, check_common_args,
                     report, run_all)

TITLE = "HINA demo: DLRM on a synthetic click log, DDP through the embedded switch"
DEFAULT_MODES = ("fp32,sparse,fp16,powersgd,thc,sparse_thc,sketched_sgd,lossless,fixed,block_sparse,adaptive,"
                 "fp32@1,thc@1,sparse_thc@1,sketched_sgd@1,lossless@1,block_sparse@1,adaptive@1")


# --------------------------------------------------------------------------- the click log
@dataclass(frozen=True)
class ClickLogSpec:
    """The generative model's sizes (docs/workloads.md, "DLRM click log").

    Attributes:
        rows: rows of each categorical feature's id space (one embedding table each).
        zipf: exponent ``a`` of the id popularity: the rank-``r`` id (1-based) has probability
            proportional to ``r ** -a``; ranks map to ids through a random permutation.
        dense: dense features, standard normal.
        latent: dimension of the ids' latent vectors.
        latent_scale: standard deviation of the latent vectors' entries is
            ``latent_scale / latent ** 0.25`` (a pair's dot product has variance
            ``latent_scale ** 4``).
        id_bias: standard deviation of each id's own click bias.
        offset: the logit's constant (sets the click rate).
    """
    rows: Tuple[int, ...] = (1024, 512, 256)
    zipf: float = 1.1
    dense: int = 8
    latent: int = 8
    latent_scale: float = 1.0
    id_bias: float = 1.0
    offset: float = -1.0


@dataclass
class ClickLog:
    """``n`` impressions: dense features, one id per table, click, and the true click probability."""
    dense: np.ndarray        # (n, dense) float32
    ids: np.ndarray          # (n, tables) int64
    clicks: np.ndarray       # (n,) float32 in {0, 1}
    prob: np.ndarray         # (n,) float64, the generative model's P(click)


def _world(spec: ClickLogSpec, rng: np.random.Generator) -> Dict[str, list]:
    """The generative model's hidden parameters, drawn from ``rng`` in a fixed order."""
    std = spec.latent_scale / spec.latent ** 0.25
    return {
        "perm": [rng.permutation(r) for r in spec.rows],
        "latent": [rng.normal(0.0, std, (r, spec.latent)) for r in spec.rows],
        "bias": [rng.normal(0.0, spec.id_bias, r) for r in spec.rows],
        "w": [rng.normal(0.0, 0.5, spec.dense)],
        "mix": [rng.normal(0.0, 0.5 / np.sqrt(spec.dense), (spec.latent, spec.dense))],
    }


def popularity(rows: int, zipf: float) -> np.ndarray:
    """P(rank r) for r = 1..rows: ``r ** -zipf``, normalised (truncated Zipf)."""
    p = np.arange(1, rows + 1, dtype=np.float64) ** -zipf
    return p / p.sum()


def generate_click_log(n: int, seed: int, spec: ClickLogSpec = ClickLogSpec()) -> ClickLog:
    """``n`` impressions of the synthetic click log; the same ``seed`` gives the same log.

    Per impression: for each table ``t`` an id ``i_t = perm_t[r_t]`` with the rank ``r_t`` drawn
    from :func:`popularity`; dense features ``x ~ N(0, I)``; then the logit::

        z = offset + w.x + sum_t b_t[i_t] + sum_{t<t'} <u_t[i_t], u_t'[i_t']> + <M x, u_0[i_0]>

    and a click with probability ``sigmoid(z)``.
    """
    if n < 1:
        raise ValueError(f"n={n}: must be >= 1")
    rng = np.random.default_rng(seed)
    world = _world(spec, rng)
    ids = np.stack([world["perm"][t][rng.choice(rows, size=n, p=popularity(rows, spec.zipf))]
                    for t, rows in enumerate(spec.rows)], axis=1).astype(np.int64)
    x = rng.normal(0.0, 1.0, (n, spec.dense))
    z = spec.offset + x @ world["w"][0]
    lat = [world["latent"][t][ids[:, t]] for t in range(len(spec.rows))]
    for t in range(len(spec.rows)):
        z = z + world["bias"][t][ids[:, t]]
        for u in range(t + 1, len(spec.rows)):
            z = z + np.sum(lat[t] * lat[u], axis=1)
    z = z + np.sum((x @ world["mix"][0].T) * lat[0], axis=1)
    prob = 1.0 / (1.0 + np.exp(-z))
    clicks = (rng.random(n) < prob).astype(np.float32)
    return ClickLog(x.astype(np.float32), ids, clicks, prob)


def top_share(ids: np.ndarray, rows: int, fraction: float = 0.01) -> float:
    """Share of the lookups that go to the most frequent ``fraction`` of the ``rows`` ids."""
    counts = np.sort(np.bincount(ids, minlength=rows))[::-1]
    return float(counts[:max(1, int(rows * fraction))].sum() / counts.sum())


# --------------------------------------------------------------------------- the model
class Dlrm(nn.Module):
    """DLRM (Naumov et al. 2019), small: one table per categorical feature, a bottom MLP that maps
    the dense features to the embedding dimension, the dot products of every pair of the
    resulting vectors, and a top MLP over the bottom output and the dot products."""

    def __init__(self, rows: Sequence[int], dim: int, dense: int, hidden: int = 32,
                 sparse: bool = False):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(r, dim, sparse=sparse) for r in rows)
        for table in self.tables:
            nn.init.normal_(table.weight, 0.0, 0.05)
        self.bottom = nn.Sequential(nn.Linear(dense, hidden), nn.ReLU(), nn.Linear(hidden, dim), nn.ReLU())
        vectors = len(rows) + 1
        self.register_buffer("pairs", torch.triu_indices(vectors, vectors, 1), persistent=False)
        self.top = nn.Sequential(nn.Linear(dim + self.pairs.shape[1], hidden), nn.ReLU(),
                                 nn.Linear(hidden, 1))

    def forward(self, dense: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        d = self.bottom(dense)
        v = torch.stack([d] + [table(ids[:, t]) for t, table in enumerate(self.tables)], dim=1)
        inter = torch.bmm(v, v.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([d, inter], dim=1)).squeeze(1)


@dataclass(frozen=True)
class DlrmWorkload(SparseCodecs, Workload):
    """The click log and the model, sized by the fields (the CLI's options)."""
    spec: ClickLogSpec = ClickLogSpec()
    n_train: int = 16384
    n_test: int = 8192
    dim: int = 16
    data_seed: int = 0
    #: LosslessSketchCodec columns (3 rows): peeling needs the union support of a bucket below
    #: 0.818 x 3 x columns; 1024 holds every bucket of the default sizes with a bucket per
    #: table (union supports of 1,300-2,000 values), 4096 would cost more than fp32 per bucket.
    lossless_columns: int = 1 << 10
    #: SketchedSgdCodec: sketch columns and candidates per step (fraction of the bucket).
    sketch_columns: int = 1024
    sketch_k: float = 0.125

    name = "dlrm"
    title = TITLE
    #: HINA's modes get a DDP bucket per embedding table (and the MLPs in the rest): a codec
    #: then scales (THC) or sizes (adaptive's lossless sketch) itself per table. In one bucket
    #: THC's scale is the top MLP's and the tables' gradients drown in its noise
    #: (bench/analyze_thc_buckets.py; docs/workloads.md). torch's hooks keep DDP's default
    #: buckets (powerSGD_hook hangs on gloo with several).
    hina_bucket_cap_mb = 0.01
    #: THC gets a bucket per parameter: with the MLPs in one bucket its scale is the largest
    #: tensor's and the small ones carry NMSE 0.05-0.4 (0.004-0.015 in their own; measured by
    #: bench/analyze_thc_buckets.py): the AUC gap to fp32 goes from -1.9 to -0.1 points
    #: (docs/workloads.md). adaptive, which chooses THC for every bucket of these tables, gets
    #: the same (0.7747 / 0.7754 against 0.7569 per table). Sketched SGD keeps per-table
    #: buckets: its candidates are chosen per bucket, and per parameter it did worse (AUC 0.751
    #: against 0.767).
    hina_bucket_cap_by_mode = {"thc": 0.0001, "sparse_thc": 0.0001, "adaptive": 0.0001}
    metric_name = "test AUC"
    has_embeddings = True

    def data(self):
        log_ = generate_click_log(self.n_train + self.n_test, self.data_seed, self.spec)
        dense = torch.from_numpy(log_.dense)
        ids = torch.from_numpy(log_.ids)
        clicks = torch.from_numpy(log_.clicks)
        tr, te = slice(0, self.n_train), slice(self.n_train, None)
        return (dense[tr], ids[tr], clicks[tr]), (dense[te], ids[te], clicks[te])

    def make_model(self, mode: str, seed: int) -> nn.Module:
        torch.manual_seed(seed)
        return Dlrm(self.spec.rows, self.dim, self.spec.dense, sparse=mode == "sparse")

    def loss(self, model, batch):
        dense, ids, clicks = batch
        return nn.functional.binary_cross_entropy_with_logits(model(dense, ids), clicks)

    def evaluate(self, module, test) -> float:
        from sklearn.metrics import roc_auc_score
        dense, ids, clicks = test
        return float(roc_auc_score(clicks.cpu().numpy(), module(dense, ids).float().cpu().numpy()))

    def oracle_auc(self) -> float:
        """AUC of the generative model's own click probability on the test impressions."""
        from sklearn.metrics import roc_auc_score
        log_ = generate_click_log(self.n_train + self.n_test, self.data_seed, self.spec)
        return float(roc_auc_score(log_.clicks[self.n_train:], log_.prob[self.n_train:]))

def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hina.demo.dlrm", description=__doc__.split("\n\n")[0])
    add_common_args(parser, ALL_MODES, DEFAULT_MODES, epochs=2, batch=64, lr=0.5)
    parser.add_argument("--rows", default="1024,512,256", help="rows of each embedding table")
    parser.add_argument("--zipf", type=float, default=ClickLogSpec.zipf, help="id popularity exponent")
    parser.add_argument("--train", type=int, default=16384, help="training impressions")
    parser.add_argument("--test", type=int, default=8192, help="test impressions")
    parser.add_argument("--data-seed", type=int, default=0, help="seed of the click log")
    parser.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--lossless-columns", type=int, default=DlrmWorkload.lossless_columns,
                        help="columns of the lossless codec's 3-row sketch (a power of two): peeling "
                             "needs a bucket's union support below 0.818 x 3 x columns")
    args = parser.parse_args(argv)
    runs = check_common_args(parser, args, ALL_MODES)
    try:
        rows = tuple(int(r) for r in args.rows.split(","))
    except ValueError:
        parser.error(f"--rows {args.rows!r}: comma-separated ints")
    if not rows or min(rows) < 1:
        parser.error(f"--rows {args.rows!r}: every table needs >= 1 row")
    if args.zipf <= 0:
        parser.error(f"--zipf {args.zipf}: must be > 0")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    workload = DlrmWorkload(ClickLogSpec(rows=rows, zipf=args.zipf), n_train=args.train,
                            n_test=args.test, data_seed=args.data_seed,
                            lossless_columns=args.lossless_columns)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = run_all(workload, runs, args)
    return report(workload, results, args, out_dir, "dlrm")


if __name__ == "__main__":
    sys.exit(main())
