"""What every demo workload shares: DDP workers through the embedded switch, per mode.

A workload (:class:`Workload`: the data, the model, the loss, the test metric, the codecs' sizes)
is trained once per *run* (a mode and a seed) by ``--workers`` processes under DDP (gloo for
DDP's own collectives). Modes:

* ``fp32``: DDP's own all-reduce, no comm hook (bytes: the ring all-reduce's payload, computed).
* ``sparse``: DDP with ``nn.Embedding(sparse=True)`` and no comm hook: gloo's sparse all-reduce
  (an allgather of the coalesced indices and values) for the embedding tables, the ring
  all-reduce for the rest. Only for workloads with embeddings (:attr:`Workload.has_embeddings`).
* ``fp16``, ``powersgd``: PyTorch's ``fp16_compress_hook`` and ``powerSGD_hook``
  (``torch.distributed.algorithms.ddp_comm_hooks``); their bytes are what the hook hands to
  ``dist.all_reduce``, counted, times the ring all-reduce's 2 (n - 1) / n.
* ``thc``, ``sketch``, ``lossless``, ``fixed``: HINA's codecs through the switch
  (:func:`worker.ddp_hook.hina_hook`); bytes counted on the wire, every header included.

Every comm-hook mode also measures the density of each DDP bucket (:class:`DensityProbe`): the
fraction of nonzero elements and of nonzero 64-element blocks in each worker's own gradient
bucket, and in the union of the workers' supports (what a lossless sparse all-reduce must carry).

``docs/workloads.md`` describes the workloads and how each byte count is obtained.
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from hina import codecs as codec_registry
from hina import programs
from hina import protocol as P
from hina.procs import rank_processes

from .local import LocalDeployment, WorkerSeat, connect_worker, free_tcp_port

ROOT = Path(__file__).resolve().parents[1]
#: HINA's modes: codec registry names (hina.codecs) the workloads configure
HINA_MODES = ("thc", "sparse_thc", "sketched_sgd", "lossless", "fixed", "block_sparse", "adaptive")
TORCH_HOOK_MODES = ("fp16", "powersgd")
ALL_MODES = ("fp32", "sparse") + TORCH_HOOK_MODES + HINA_MODES
#: Ethernet + IPv4 + UDP bytes around every HINA message on the wire.
L2_L4_BYTES = P.ETHERNET_BYTES + P.IPV4_BYTES + P.UDP_BYTES
#: Elements per block of the block density (a block is nonzero when any element is).
DENSITY_BLOCK = 64
#: Iterations before a comm hook compresses: DDP rebuilds its buckets after the first one, and
#: PowerSGD refuses less than 2 (``start_powerSGD_iter``); the same for every hook mode.
START_ITER = 2
#: int64 words of the metadata each rank contributes to gloo's sparse all-reduce
#: (``SparseTensorMetadata::dim``: 4 sparse sizes, 4 dense sizes, nnz).
GLOO_SPARSE_METADATA_WORDS = 9
#: PowerSGD's rank (``matrix_approximation_rank``); 1 is torch's default, 2 loses less here.
POWERSGD_RANK = 2

log = logging.getLogger("hina.demo")


# --------------------------------------------------------------------------- runs and results
@dataclass(frozen=True)
class RunSpec:
    """One training run: a mode and the seed of its model, data order and codec."""
    mode: str
    seed: int = 0

    @property
    def label(self) -> str:
        return self.mode


def parse_runs(text: str, allowed: Sequence[str], default_seed: int = 0) -> List[RunSpec]:
    """``"fp32,thc,fp32@1"`` -> runs; ``mode@seed`` picks a seed (default ``default_seed``).

    Raises:
        ValueError: an unknown mode or a seed that is not an int, naming it and the choices.
    """
    runs = []
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        mode, _, seed = token.partition("@")
        if mode not in allowed:
            raise ValueError(f"unknown mode {mode!r}: choose from {','.join(allowed)}")
        try:
            runs.append(RunSpec(mode, int(seed) if seed else default_seed))
        except ValueError:
            raise ValueError(f"{token!r}: the seed after '@' must be an int") from None
    if not runs:
        raise ValueError("no mode given")
    return runs


@dataclass
class RunResult:
    """What one run gave (rank 0's view; losses are the mean over workers)."""
    mode: str
    seed: int = 0
    metric: float = 0.0
    metric_name: str = "test accuracy"
    seconds_per_step: float = 0.0
    bytes_per_step: float = 0.0
    bytes_note: str = ""
    steps: int = 0
    n_params: int = 0
    losses: list = field(default_factory=list)
    evals: list = field(default_factory=list)          # [(step, metric)] after each epoch
    fallback_buckets: int = 0
    retransmissions: int = 0
    densities: list = field(default_factory=list)      # per bucket (DensityProbe.summary)
    incomplete_peels: int = 0                          # lossless: buckets decoded inexactly
    choices: dict = field(default_factory=dict)       # adaptive: bucket calls per chosen codec

    @property
    def accuracy(self) -> float:
        """The digits demo's name for the metric."""
        return self.metric


# --------------------------------------------------------------------------- workloads
class Workload:
    """A training task for the demo; subclasses are picklable (they travel to the workers).

    Subclasses set the class attributes and implement the methods; tensors of a batch are the
    training tensors (:meth:`data`) indexed by the batch's sample ids, the target last.
    """
    name = "workload"
    title = "HINA demo"
    metric_name = "test accuracy"
    #: the model has embedding tables that ``nn.Embedding(sparse=True)`` can make sparse
    has_embeddings = False
    #: DDP's ``bucket_cap_mb`` (None: DDP's default)
    bucket_cap_mb: Optional[float] = None
    #: DDP's ``bucket_cap_mb`` for the HINA modes (None: ``bucket_cap_mb``); ``--hina-bucket-mb``
    #: overrides it
    hina_bucket_cap_mb: Optional[float] = None
    #: per HINA mode, a ``bucket_cap_mb`` other than ``hina_bucket_cap_mb`` (``--hina-bucket-mb``
    #: overrides these too)
    hina_bucket_cap_by_mode: Dict[str, float] = {}
    momentum = 0.9

    def bucket_cap_mb_of(self, mode: str, override: Optional[float] = None) -> Optional[float]:
        """DDP's ``bucket_cap_mb`` for ``mode`` (None: DDP's default): ``override``
        (``--hina-bucket-mb``), then the mode's own cap, then ``hina_bucket_cap_mb``, for HINA's
        modes; ``bucket_cap_mb`` for the others."""
        if mode not in HINA_MODES:
            return self.bucket_cap_mb
        return next((c for c in (override, self.hina_bucket_cap_by_mode.get(mode),
                                 self.hina_bucket_cap_mb, self.bucket_cap_mb) if c is not None), None)

    def make_optimizer(self, params, lr: float) -> torch.optim.Optimizer:
        """The optimiser (SGD with momentum ``momentum`` by default)."""
        return torch.optim.SGD(params, lr=lr, momentum=self.momentum)

    def data(self) -> Tuple[Tuple[torch.Tensor, ...], Tuple[torch.Tensor, ...]]:
        """(train tensors, test tensors), the same on every worker; the target last."""
        raise NotImplementedError

    def make_model(self, mode: str, seed: int) -> nn.Module:
        """The model, initialised from ``seed`` (sparse embeddings when ``mode == "sparse"``)."""
        raise NotImplementedError

    def loss(self, model: nn.Module, batch: Tuple[torch.Tensor, ...]) -> torch.Tensor:
        raise NotImplementedError

    def evaluate(self, module: nn.Module, test: Tuple[torch.Tensor, ...]) -> float:
        """The test metric of the (unwrapped) model."""
        raise NotImplementedError

    def make_codec(self, mode: str, n_workers: int, rank: int, seed: int):
        """The HINA codec of ``mode`` for this workload's buckets."""
        raise NotImplementedError


#: the caption of the sparse workloads' tables
SPARSE_CAPTION = ("bytes: HINA codecs measured on the wire (Ethernet/IPv4/UDP/HINA headers included); "
                  "fp32, sparse, fp16, powersgd: gloo's payload, computed (docs/workloads.md)")


class SparseCodecs:
    """The HINA codecs of the sparse workloads (DLRM, MoE), sized by the workload's fields
    ``lossless_columns``, ``sketch_columns`` and ``sketch_k``."""

    def make_codec(self, mode: str, n_workers: int, rank: int, seed: int):
        return hina_codec(mode, n_workers, rank, seed, self.lossless_columns, self.sketch_columns,
                          self.sketch_k)


def hina_codec(mode: str, n_workers: int, rank: int, seed: int, lossless_columns: int,
               sketch_columns: int, sketch_k: float):
    """HINA's codec of ``mode`` (a registry name) for the sparse workloads (digits' settings
    but the sizes)."""
    from hina.worker.codecs import registry
    params = {
        "thc": dict(seed=seed),
        "sparse_thc": dict(seed=seed),      # rows of 16 values: a DLRM row, an expert's unit
        "sketched_sgd": dict(rows=3, columns=sketch_columns, k=sketch_k, sketch_bits=10,
                             value_bits=6, value_blocks=120, rotate=8, seed=seed),
        "lossless": dict(columns=lossless_columns, seed=seed),
        "fixed": {},
        "block_sparse": {},
        # adaptive sizes its sketch per bucket (up to 16384 columns), lossless_columns aside
        "adaptive": dict(seed=seed, columns=1 << 14, sketch_seed=seed),
    }
    if mode not in params:
        raise ValueError(f"mode={mode!r}: one of {HINA_MODES}")
    return registry.build(mode, n_workers, rank, **params[mode])


@dataclass(frozen=True)
class TrainConfig:
    """Everything a worker process needs besides its seat (picklable)."""
    workload: Workload
    mode: str
    seed: int
    n_workers: int
    epochs: int
    batch: int
    lr: float
    device: str = "cpu"
    hook: str = "async"
    max_steps: Optional[int] = None
    #: DDP's ``bucket_cap_mb`` for the HINA modes (None: the workload's)
    hina_bucket_mb: Optional[float] = None


# --------------------------------------------------------------------------- densities
def _density(mask: torch.Tensor) -> Tuple[float, float]:
    """(fraction of nonzero elements, fraction of nonzero DENSITY_BLOCK-element blocks)."""
    n = mask.numel()
    if n == 0:
        return 0.0, 0.0
    from hina.worker.codecs.base import nonzero_groups
    blocks = nonzero_groups(mask, DENSITY_BLOCK)
    return float(mask.float().mean()), float(blocks.float().mean())


class DensityProbe:
    """Records the density of every DDP bucket a comm hook sees, from ``START_ITER`` on.

    ``local``: each worker's own bucket (what its codec encodes); ``union``: the OR of the
    workers' nonzero masks (one extra all-reduce per step, outside the timed step), what the
    mean's support is before any codec adds or drops coordinates. Per bucket and per parameter.
    """

    def __init__(self, names: Dict[int, str]):
        self.names = names                  # id(param) -> name
        self.iteration = 0
        self.layout: Dict[int, List[Tuple[str, int]]] = {}    # bucket -> [(param, numel)]
        self.masks: Dict[int, torch.Tensor] = {}              # this step's local masks
        self.sums: Dict[int, Dict[str, np.ndarray]] = {}      # bucket -> kind -> sums
        self.steps = 0

    def see(self, bucket: dist.GradBucket) -> None:
        current = self.iteration            # completed backward passes before this one
        if bucket.is_last():
            self.iteration += 1
        if current < START_ITER:
            return
        idx = bucket.index()
        if idx not in self.layout:
            self.layout[idx] = [(self.names.get(id(p), "?"), p.numel()) for p in bucket.parameters()]
        self.masks[idx] = bucket.buffer().detach().ne(0).cpu()

    def end_step(self, group_allreduce) -> None:
        """After the step: all-reduce the masks (MAX) for the union, accumulate both."""
        if not self.masks:
            return
        keys = sorted(self.masks)
        local = torch.cat([self.masks[k] for k in keys]).to(torch.uint8)
        union = local.clone()
        group_allreduce(union, op=dist.ReduceOp.MAX)
        offset = 0
        for k in keys:
            n = self.masks[k].numel()
            parts = {"local": local[offset:offset + n].bool(), "union": union[offset:offset + n].bool()}
            offset += n
            acc = self.sums.setdefault(k, {})
            for kind, mask in parts.items():
                row = [*_density(mask)]
                start = 0
                for _, numel in self.layout[k]:
                    row += [*_density(mask[start:start + numel])]
                    start += numel
                acc[kind] = acc.get(kind, 0) + np.asarray(row)
        self.masks.clear()
        self.steps += 1

    def summary(self) -> List[dict]:
        """Per bucket: its parameters and mean densities over the recorded steps."""
        out = []
        for k in sorted(self.sums):
            mean = {kind: (v / self.steps).tolist() for kind, v in self.sums[k].items()}
            params = [{"name": name, "numel": numel,
                       "local": mean["local"][2 + 2 * i], "local_blocks": mean["local"][3 + 2 * i],
                       "union": mean["union"][2 + 2 * i], "union_blocks": mean["union"][3 + 2 * i]}
                      for i, (name, numel) in enumerate(self.layout[k])]
            out.append({"bucket": k, "numel": sum(n for _, n in self.layout[k]),
                        "local": mean["local"][0], "local_blocks": mean["local"][1],
                        "union": mean["union"][0], "union_blocks": mean["union"][1],
                        "steps": self.steps, "params": params})
        return out


class _ProbedState:
    """A comm hook's state with a :class:`DensityProbe` in front of it."""
    __slots__ = ("inner", "hook", "probe")

    def __init__(self, inner, hook, probe: DensityProbe):
        self.inner, self.hook, self.probe = inner, hook, probe


def probed_hook(state: _ProbedState, bucket):        # no annotations: DDP checks them as objects
    """Record the bucket's density, then run the wrapped hook."""
    state.probe.see(bucket)
    return state.hook(state.inner, bucket)


# --------------------------------------------------------------------------- byte accounting
def ring_allreduce_bytes(payload_bytes: float, n_workers: int) -> float:
    """Bytes each worker sends in a ring all-reduce of ``payload_bytes``: 2 (n - 1) / n of it."""
    return 2 * (n_workers - 1) / n_workers * payload_bytes


def gloo_sparse_allreduce_bytes(nnz_per_rank: Sequence[int], row_elements: int, elem_bytes: int,
                                n_workers: int) -> float:
    """Mean bytes a worker sends in gloo's sparse all-reduce of one ``(rows, row_elements)`` tensor.

    gloo coalesces each rank's tensor, ring-allgathers 9 int64 of metadata per rank, then
    ring-allgathers (``allgatherv``) the int64 row indices and the values: in a ring allgather
    each rank forwards every block but its successor's, (n - 1) / n of the total on average.
    """
    gathered = sum(nnz_per_rank) * (8 + row_elements * elem_bytes)
    metadata = (n_workers - 1) * GLOO_SPARSE_METADATA_WORDS * 8
    return metadata + (n_workers - 1) / n_workers * gathered


class _CountingAllreduce:
    """``dist.all_reduce`` that adds the payload of every call to a counter (the torch hooks')."""

    def __init__(self, original):
        self.original, self.payload = original, 0

    def __call__(self, tensor, *args, **kwargs):
        self.payload += tensor.numel() * tensor.element_size()
        return self.original(tensor, *args, **kwargs)


# --------------------------------------------------------------------------- the worker
def _train_worker(rank: int, cfg: TrainConfig, seat: Optional[WorkerSeat], init: str,
                  out: "mp.Queue") -> None:
    """One DDP worker process (model, gradients and codec on ``cfg.device``: "cpu", or "cuda"
    for GPU ``rank mod count``; gloo carries CUDA tensors too, so ranks may share a GPU)."""
    from hina.worker.ddp_hook import HinaState, hina_hook
    torch.set_num_threads(1)
    device = torch.device("cpu")
    if cfg.device == "cuda":
        device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=cfg.n_workers)
    plain_allreduce = dist.all_reduce
    wl, mode, n = cfg.workload, cfg.mode, cfg.n_workers
    try:
        train, test = wl.data()
        train = tuple(t.to(device) for t in train)
        test = tuple(t.to(device) for t in test)
        module = wl.make_model(mode, cfg.seed).to(device)
        names = {id(p): name for name, p in module.named_parameters()}
        cap = wl.bucket_cap_mb_of(mode, cfg.hina_bucket_mb)
        kwargs = {} if cap is None else {"bucket_cap_mb": cap}
        model = DDP(module, device_ids=[device] if device.type == "cuda" else None, **kwargs)
        n_params = sum(p.numel() for p in model.parameters())
        probe = DensityProbe(names)
        state = counter = None
        if mode in HINA_MODES:
            transport = connect_worker(seat)
            state = HinaState(transport, wl.make_codec(mode, n, rank, cfg.seed),
                              start_iter=START_ITER, asynchronous=cfg.hook == "async")
            model.register_comm_hook(_ProbedState(state, hina_hook, probe), probed_hook)
        elif mode in TORCH_HOOK_MODES:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
            counter = _CountingAllreduce(plain_allreduce)
            dist.all_reduce = counter       # the hooks call dist.all_reduce: count their payload
            if mode == "fp16":
                inner, hook = None, default_hooks.fp16_compress_hook
            else:
                inner = powerSGD_hook.PowerSGDState(
                    process_group=None, matrix_approximation_rank=POWERSGD_RANK,
                    start_powerSGD_iter=START_ITER, random_seed=cfg.seed)
                hook = powerSGD_hook.powerSGD_hook
            model.register_comm_hook(_ProbedState(inner, hook, probe), probed_hook)
        sparse_params = [p for p in module.parameters()
                         if any(m.weight is p and getattr(m, "sparse", False)
                                for m in module.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag)))]
        dense_bytes = sum(p.numel() * p.element_size() for p in model.parameters()
                          if all(p is not q for q in sparse_params))
        local_nnz = [0] * len(sparse_params)
        for i, p in enumerate(sparse_params):
            def count(g, i=i):
                local_nnz[i] = g.coalesce()._nnz()
            p.register_hook(count)

        opt = wl.make_optimizer(model.parameters(), cfg.lr)
        n_train = len(train[-1])
        shard = torch.arange(rank, n_train, n)
        gen = torch.Generator().manual_seed(cfg.seed)
        losses, step_times, evals, step_bytes = [], [], [], []
        done = False
        for _ in range(cfg.epochs):
            order = shard[torch.randperm(len(shard), generator=gen)]
            for start in range(0, len(order) - cfg.batch + 1, cfg.batch):
                idx = order[start:start + cfg.batch].to(device)
                before = counter.payload if counter is not None else 0
                t0 = time.perf_counter()
                opt.zero_grad()
                loss = wl.loss(model, tuple(t[idx] for t in train))
                loss.backward()
                opt.step()
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                step_times.append(time.perf_counter() - t0)
                # untimed bookkeeping, with the uncounted all-reduce
                if counter is not None:
                    step_bytes.append(ring_allreduce_bytes(counter.payload - before, n))
                elif sparse_params:
                    nnz = torch.zeros(n, len(sparse_params), dtype=torch.int64)
                    nnz[rank] = torch.tensor(local_nnz)
                    plain_allreduce(nnz)
                    sparse_bytes = sum(
                        gloo_sparse_allreduce_bytes(nnz[:, i].tolist(), p[0].numel(),
                                                    p.element_size(), n)
                        for i, p in enumerate(sparse_params))
                    step_bytes.append(sparse_bytes + ring_allreduce_bytes(dense_bytes, n))
                probe.end_step(plain_allreduce)
                mean_loss = loss.detach().clone()
                plain_allreduce(mean_loss)
                losses.append(float(mean_loss) / n)
                if cfg.max_steps is not None and len(step_times) >= cfg.max_steps:
                    done = True
                    break
            with torch.no_grad():
                evals.append((len(step_times), wl.evaluate(model.module, test)))
            if done:
                break
        result = RunResult(mode, seed=cfg.seed, metric=evals[-1][1], metric_name=wl.metric_name,
                           steps=len(step_times), losses=losses, evals=evals, n_params=n_params,
                           seconds_per_step=float(np.mean(step_times[2:] or step_times)),
                           densities=probe.summary())
        if state is not None:
            state.close()
            total = state.transport.total
            hina_steps = max(1, len(step_times) - state.start_iter)
            result.bytes_per_step = (total.bytes_sent + total.packets_sent * L2_L4_BYTES) / hina_steps
            result.bytes_note = "measured, headers included"
            result.fallback_buckets = state.stats["fallback_buckets"]
            result.retransmissions = total.retransmissions
            codec = state.codec
            result.incomplete_peels = getattr(codec, "incomplete_peels", 0)
            result.choices = dict(getattr(codec, "choice_counts", {}))
            state.transport.close()
        elif counter is not None:
            result.bytes_per_step = float(np.mean(step_bytes[START_ITER:] or step_bytes))
            result.bytes_note = "hook's all-reduce payload, counted, x ring factor"
        elif sparse_params:
            result.bytes_per_step = float(np.mean(step_bytes))
            result.bytes_note = "gloo sparse allgather (measured nnz) + dense ring, computed"
        else:
            # gloo's ring all-reduce: each worker sends 2 (n-1)/n of the fp32 buffer.
            result.bytes_per_step = ring_allreduce_bytes(4 * n_params, n)
            result.bytes_note = "ring all-reduce payload, computed"
        if rank == 0:
            out.put(asdict(result))
    finally:
        dist.all_reduce = plain_allreduce
        dist.destroy_process_group()


def run_mode(workload: Workload, run: RunSpec, args, deployment: Optional[LocalDeployment]) -> RunResult:
    """Train once; HINA modes get a fresh job (zeroed slots) on ``deployment``."""
    seats: List[Optional[WorkerSeat]] = [None] * args.workers
    if run.mode in HINA_MODES:
        table = None
        if codec_registry.lookup(run.mode).lut:   # thc, adaptive: the switch maps THC's indices
            table = tuple(workload.make_codec(run.mode, args.workers, 0, run.seed).table)
        seats = deployment.create_job(job_id=1, n_slots=args.slots, thc_table=table)
    cfg = TrainConfig(workload, run.mode, run.seed, args.workers, args.epochs, args.batch, args.lr,
                      getattr(args, "device", "cpu"), getattr(args, "hook", "async"),
                      getattr(args, "max_steps", None), getattr(args, "hina_bucket_mb", None))
    try:
        ctx = rank_processes(__name__, type(workload).__module__)
        out = ctx.Queue()
        init = f"tcp://127.0.0.1:{free_tcp_port()}"
        procs = [ctx.Process(target=_train_worker, args=(r, cfg, seats[r], init, out))
                 for r in range(args.workers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if any(p.exitcode != 0 for p in procs):
            raise RuntimeError(f"mode {run.mode}: worker exit codes {[p.exitcode for p in procs]}")
        raw = out.get(timeout=10)
        return RunResult(**raw)
    finally:
        if run.mode in HINA_MODES:
            log.info("mode %s: switch reason counters %s", run.mode, deployment.jobs.reason_counts())
            deployment.delete_job(1)


def run_all(workload: Workload, runs: Sequence[RunSpec], args,
            deployment: Optional[LocalDeployment] = None) -> List[RunResult]:
    """Every run in turn; one embedded switch serves all HINA modes (``deployment``, else one
    started here for ``args.workers`` and closed at the end)."""
    own = deployment is None
    results = []
    try:
        if own and any(r.mode in HINA_MODES for r in runs):
            deployment = LocalDeployment(args.workers, words=args.words, loss=args.loss,
                                         program=getattr(args, "program", "v1model"))
        for run in runs:
            t0 = time.monotonic()
            results.append(run_mode(workload, run, args, deployment))
            log.info("mode %s seed %d done in %.0fs", run.mode, run.seed, time.monotonic() - t0)
    finally:
        if own and deployment is not None:
            deployment.close()
    return results


# --------------------------------------------------------------------------- output
def table_rows(results: Sequence[RunResult], show_seed: bool) -> Tuple[List[str], List[List[str]]]:
    """The table's columns and rows (strings), for printing and for tests."""
    metric = results[0].metric_name if results else "metric"
    cols = ["mode"] + (["seed"] if show_seed else []) + [
        metric, "ms / step", "bytes sent / worker / step", "vs fp32", "retransmissions",
        "fp32 fallbacks"]
    base = next((r.bytes_per_step for r in results if r.mode == "fp32"), None)
    rows = []
    for r in results:
        ratio = f"{base / r.bytes_per_step:.1f}x less" if base and r.mode != "fp32" else ""
        value = f"{100 * r.metric:.1f}%" if "accuracy" in r.metric_name else f"{r.metric:.4f}"
        rows.append([r.mode] + ([str(r.seed)] if show_seed else []) + [
            value, f"{1000 * r.seconds_per_step:.1f}", f"{r.bytes_per_step:,.0f}", ratio,
            str(r.retransmissions), str(r.fallback_buckets)])
    return cols, rows


def print_table(results: Sequence[RunResult], title: str, caption: str, show_seed: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title=title, caption=caption)
    cols, rows = table_rows(results, show_seed)
    for col in cols:
        table.add_column(col, justify="right" if col != "mode" else "left")
    for row in rows:
        table.add_row(*row)
    Console(width=120).print(table)


def spread_lines(results: Sequence[RunResult]) -> List[str]:
    """One line per mode run with several seeds: the metric's range over the seeds."""
    lines = []
    for mode in dict.fromkeys(r.mode for r in results):
        vals = [(r.seed, r.metric) for r in results if r.mode == mode]
        if len(vals) > 1:
            ms = [v for _, v in vals]
            lines.append(f"{mode}: {results[0].metric_name} over seeds "
                         f"{', '.join(f'{s}: {v:.4f}' for s, v in vals)}; spread {max(ms) - min(ms):.4f}")
    return lines


def density_lines(result: RunResult) -> List[str]:
    """The density table of one run's buckets, as text lines."""
    lines = [f"DDP bucket densities ({result.mode}, mean over {result.densities[0]['steps']} steps; "
             f"blocks of {DENSITY_BLOCK}; local = one worker's bucket, union = OR over workers):"]
    lines.append(f"  {'bucket / parameter':<28} {'elements':>9} {'local':>7} {'blocks':>7} "
                 f"{'union':>7} {'blocks':>7}")
    for b in result.densities:
        lines.append(f"  {'bucket ' + str(b['bucket']):<28} {b['numel']:>9,} {b['local']:>7.1%} "
                     f"{b['local_blocks']:>7.1%} {b['union']:>7.1%} {b['union_blocks']:>7.1%}")
        for p in b["params"]:
            lines.append(f"    {p['name']:<26} {p['numel']:>9,} {p['local']:>7.1%} "
                         f"{p['local_blocks']:>7.1%} {p['union']:>7.1%} {p['union_blocks']:>7.1%}")
    return lines


def save_plot(results: Sequence[RunResult], path: Path, title: str, smooth: int = 1) -> None:
    """Training loss per step (moving mean over ``smooth`` steps) and, when there are several
    evaluations per run, the test metric per epoch beside it."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with_evals = any(len(r.evals) > 1 for r in results)
    fig, axes = plt.subplots(1, 2 if with_evals else 1, figsize=(12 if with_evals else 7, 4))
    ax = axes[0] if with_evals else axes
    for r in results:
        y = np.asarray(r.losses, dtype=float)
        if smooth > 1 and len(y) >= smooth:
            y = np.convolve(y, np.ones(smooth) / smooth, mode="valid")
        name = r.mode if r.seed == 0 else f"{r.mode}@{r.seed}"
        shown = f"{100 * r.metric:.1f}%" if "accuracy" in r.metric_name else f"{r.metric:.3f}"
        ax.plot(y, label=f"{name} ({shown})", linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (mean over workers)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title(title + (f" (moving mean of {smooth} steps)" if smooth > 1 else ""))
    if with_evals:
        for r in results:
            steps, vals = zip(*r.evals)
            axes[1].plot(steps, vals, marker="o", linewidth=1,
                         label=r.mode if r.seed == 0 else f"{r.mode}@{r.seed}")
        axes[1].set_xlabel("step")
        axes[1].set_ylabel(results[0].metric_name)
        axes[1].legend(fontsize=8)
        axes[1].set_title("test metric after each epoch")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --------------------------------------------------------------------------- command line
def add_common_args(parser: argparse.ArgumentParser, modes: Sequence[str], default_modes: str,
                    workers: int = 4, epochs: int = 4, batch: int = 32, lr: float = 0.05) -> None:
    parser.add_argument("--workers", type=int, default=workers)
    parser.add_argument("--epochs", type=int, default=epochs)
    parser.add_argument("--batch", type=int, default=batch, help="samples per worker per step")
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--modes", default=default_modes,
                        help=f"comma-separated, from {','.join(modes)}; mode@SEED runs it with "
                             "another seed (model initialisation, data order, codec)")
    parser.add_argument("--program", choices=tuple(programs.PROGRAMS), default="v1model",
                        help="the switch program: v1model (p4/hina.p4) or tna (the Tofino "
                             "program, p4/tna/hina_tna.p4, on the embedded target's TNA dataplane)")
    parser.add_argument("--words", type=int, default=None,
                        choices=sorted(set(P.V1MODEL_WORDS) | set(programs.TNA_WORDS)),
                        help=f"words per packet the switch program is compiled with (v1model: "
                             f"HINA_WORDS {', '.join(map(str, P.V1MODEL_WORDS))}, default "
                             f"{P.WORDS}; tna: {' or '.join(map(str, programs.TNA_WORDS))}, two "
                             f"blocks of TNA_LANES, default {programs.TNA_WORDS[-1]})")
    parser.add_argument("--slots", type=int, default=32, help="aggregation slots of the job")
    parser.add_argument("--loss", type=float, default=0.0, help="packet loss per switch port")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the model, gradients and codecs run (cuda: worker r on GPU r mod "
                             "count; never run in this project's CI, which has no GPU)")
    parser.add_argument("--hook", choices=("async", "sync"), default="async",
                        help="the DDP hook hands buckets to the aggregation engine's thread "
                             "(async) or aggregates each inside the hook (sync: no overlap)")
    parser.add_argument("--hina-bucket-mb", type=float, default=None, metavar="MB",
                        help="DDP's bucket_cap_mb for the HINA modes only (default: the workload's; "
                             "dlrm: 0.01, a bucket per embedding table, and 0.0001 for thc and "
                             "adaptive, a bucket per parameter): "
                             "small buckets give each embedding table its own bucket, so a codec "
                             "scales or sizes itself per table (torch's PowerSGD hook hangs on gloo "
                             "with several buckets, so the torch rows keep one)")
    parser.add_argument("--out", default=str(ROOT / "out"))


def check_common_args(parser: argparse.ArgumentParser, args, modes: Sequence[str]) -> List[RunSpec]:
    """Refuse bad arguments before any worker starts; the runs to do."""
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device available")
    if args.hina_bucket_mb is not None and not args.hina_bucket_mb > 0:
        parser.error(f"--hina-bucket-mb {args.hina_bucket_mb}: must be > 0")
    allowed = programs.TNA_WORDS if args.program == "tna" else P.V1MODEL_WORDS
    if args.words is None:
        args.words = allowed[-1] if args.program == "tna" else P.WORDS
    elif args.words not in allowed:
        parser.error(f"--words {args.words}: the {args.program} program takes "
                     f"{', '.join(map(str, allowed))}")
    try:
        runs = parse_runs(args.modes, modes)
    except ValueError as exc:
        parser.error(f"--modes: {exc}")
    if not 1 <= args.workers <= P.MAX_WORKERS:
        parser.error(f"--workers {args.workers}: must be in [1, {P.MAX_WORKERS}]")
    for name in ("epochs", "batch"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} {getattr(args, name)}: must be >= 1")
    columns = getattr(args, "lossless_columns", None)
    if columns is not None and (columns < 1 or columns & (columns - 1)):
        parser.error(f"--lossless-columns {columns}: must be a power of two (the switch masks "
                     "the hash)")
    if getattr(args, "max_steps", None) is not None and args.max_steps < 1:
        parser.error(f"--max-steps {args.max_steps}: must be >= 1")
    return runs


def save_results(results: Sequence[RunResult], path: Path, extra: Optional[Dict[str, Any]] = None) -> None:
    doc: Any = [asdict(r) for r in results]
    if extra is not None:
        doc = {**extra, "runs": doc}
    path.write_text(json.dumps(doc, indent=1))


def report(workload, results, args, out_dir: Path, stem: str, extra: Optional[dict] = None) -> int:
    """Print the table, the spread over seeds and the densities; save the JSON and the plot."""
    print_table(results, workload.title, SPARSE_CAPTION, show_seed=True)
    for line in spread_lines(results):
        print(line)
    for r in results:
        if r.incomplete_peels:
            print(f"{r.mode}@{r.seed}: {r.incomplete_peels} bucket decode(s) with peeling incomplete "
                  "(values left to the sketch's median estimate)")
    for r in results:
        if r.choices:
            calls = sum(r.choices.values())
            print(f"{r.mode}@{r.seed} chose, per bucket call: " + ", ".join(
                f"{name} {100.0 * n / calls:.0f}%" for name, n in sorted(r.choices.items(),
                                                                         key=lambda kv: -kv[1])))
    probed = next((r for r in results if r.densities), None)
    if probed is not None:
        print("\n".join(density_lines(probed)))
    doc = {"workload": stem, "workers": args.workers, "epochs": args.epochs, "batch": args.batch,
           "lr": args.lr, "config": repr(workload), **(extra or {})}
    if hasattr(workload, "oracle_auc"):
        doc["oracle_auc"] = workload.oracle_auc()
        print(f"AUC of the generative model's own click probability (the ceiling): {doc['oracle_auc']:.4f}")
    save_results(results, out_dir / f"{stem}_results.json", doc)
    save_plot(results, out_dir / f"{stem}_curves.png", f"{stem}: training loss per mode", smooth=10)
    print(f"results: {out_dir / (stem + '_results.json')}, curves: {out_dir / (stem + '_curves.png')}")
    return 0
