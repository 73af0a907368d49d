"""PyTorch DDP communication hook that aggregates gradient buckets in the switch.

(No ``from __future__ import annotations`` here: DDP checks the hook's annotations as objects.)

Modelled on ``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook``: configuration and
state live in :class:`HinaState`, the hook :func:`hina_hook` is a free function. The hook hands
each bucket to the state's :class:`~worker.engine.AggregationEngine` and returns its pending
future, so DDP's backward pass goes on while the bucket is on the wire.

Example::

    >>> transport = Transport(link, job)                                   # doctest: +SKIP
    >>> state = HinaState(transport, ThcCodec(n_workers=4, rank=rank))     # doctest: +SKIP
    >>> ddp_model.register_comm_hook(state, hina_hook)                     # doctest: +SKIP
"""

import logging
from typing import Optional

import torch
import torch.distributed as dist

from .codecs.base import Codec
from .engine import AggregationEngine, engine_group, new_stats
from .transport import Transport

__all__ = ["HinaState", "hina_hook"]

log = logging.getLogger("hina.worker")


class HinaState:
    """State of :func:`hina_hook` for one worker.

    Construct it on every rank of the job, after ``init_process_group``, in the same order as
    the ranks' other ``new_group`` calls: it makes the process group of the aggregation engine's
    collectives (:func:`~worker.engine.engine_group`).

    Args:
        transport: this worker's :class:`~worker.transport.Transport` to the switch.
        codec: the codec (one instance per worker; its per-bucket state is keyed by bucket index).
        start_iter: iterations that use plain all-reduce first. DDP rebuilds its buckets after the
            first iteration, and codecs with per-bucket state (error feedback) must only see the
            final buckets, so this must be >= 1 (PowerSGD's ``start_powerSGD_iter`` likewise).
        process_group: the ranks of the job (default: the world): the warm-up all-reduce runs on
            it, the engine's vote and fp32 fallback on a group of the same ranks of its own.
        asynchronous: hand buckets to the engine's thread and return pending futures (default);
            ``False`` aggregates each bucket inside the hook (no overlap; a baseline).
        lanes: buckets on the wire at once in the asynchronous engine (default
            :func:`~worker.engine.default_lanes`: 2 with a codec that allows it, e.g. THC; 1 takes
            one bucket after the other). The same on every rank.

    Attributes:
        iteration: number of completed backward passes (counted on bucket 0).
        engine: the :class:`~worker.engine.AggregationEngine`.
        stats: ``hina_buckets``, ``fallback_buckets``, ``allreduce_buckets``, ``bytes_sent``,
            ``seconds`` (wall time with at least one bucket in the engine's switch path, from its
            start to its vote: buckets on several lanes at once count once), ``bucket_seconds``
            (the same summed over buckets: with lanes, more than the wall time),
            ``generation_changes`` (fallen back buckets whose cause was a NOTICE that the job
            is in another generation).
    """

    __slots__ = ("transport", "codec", "start_iter", "process_group", "iteration", "stats",
                 "engine")

    def __init__(self, transport: Transport, codec: Codec, start_iter: int = 2,
                 process_group: Optional[dist.ProcessGroup] = None, asynchronous: bool = True,
                 lanes: Optional[int] = None):
        if start_iter < 1:
            raise ValueError(f"start_iter={start_iter}: must be >= 1 because DDP rebuilds its "
                             "buckets after the first iteration")
        if codec.n_workers != transport.job.n_workers:
            raise ValueError(f"codec.n_workers={codec.n_workers} differs from the job's "
                             f"n_workers={transport.job.n_workers}")
        self.transport, self.codec = transport, codec
        self.start_iter, self.process_group = start_iter, process_group
        self.iteration = 0
        self.stats = new_stats()
        group = engine_group(process_group) if dist.is_initialized() else None
        self.engine = AggregationEngine(transport, codec, group, self.stats,
                                        synchronous=not asynchronous, lanes=lanes)
        log.info("HINA DDP hook: codec=%s workers=%d job=%d start_iter=%d %s, %d lane(s)",
                 codec.name, codec.n_workers, transport.job.job_id, start_iter,
                 "asynchronous" if asynchronous else "synchronous", self.engine.lanes)

    def close(self) -> None:
        """Finish the buckets in flight, stop the engine's thread, and log what the hook did
        (:attr:`stats`, one INFO line)."""
        self.engine.close()
        s = self.stats
        log.info("HINA DDP hook closed: %d bucket(s) through the switch, %d fell back to fp32 "
                 "(%d after a job restart), %d warm-up all-reduce(s); %.1f kB sent to the "
                 "switch; engine busy %.2f s", s["hina_buckets"], s["fallback_buckets"],
                 s["generation_changes"], s["allreduce_buckets"], s["bytes_sent"] / 1e3,
                 s["seconds"])


def _allreduce_mean(state: HinaState, tensor: torch.Tensor) -> torch.futures.Future:
    group = state.process_group or dist.group.WORLD
    world = dist.get_world_size(group)
    fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0].div_(world))


def hina_hook(state: HinaState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average a gradient bucket across workers through the switch.

    Algorithm:
        1. Before ``state.start_iter`` iterations: plain all-reduce (DDP is still rebuilding
           buckets).
        2. Otherwise the bucket goes to the state's :class:`~worker.engine.AggregationEngine`,
           and the hook returns at once with a future that completes when the bucket's mean is
           in it. On the engine's threads, in the order DDP handed the buckets over (with
           ``lanes`` > 1, the next bucket's rounds on the wire while the previous one's are, each
           bucket on its own lane of the job's slots): the codec's agreement round (switch MAX),
           encode, stream through the switch, decode to the mean
           (:func:`worker.collective.allreduce`).
        3. All workers vote (one all-reduce on the engine's own process group, in bucket order
           on every rank) on whether every
           one of them got its result, on the newest job generation a NOTICE of the switch
           reported, and on the largest sequence number sent; if any did not (switch
           unreachable, a result lost beyond the give-up time, the job restarted in another
           generation, a codec error), every worker falls back to an fp32 all-reduce of this
           bucket, logged as a warning that names the cause (the reason and generation, when a
           NOTICE said so). Every worker then continues in the newest generation the vote
           carried, from a common sequence number past anything sent, so the next bucket goes
           through the switch again at once (no give-up wait). Following needs no job-service
           session: a hook built from ``transport_from_env()`` (under ``hina-worker run``)
           follows the same way.
        4. A bucket that falls back leaves the codec as it was before the bucket, on every
           worker, whether its own switch path failed or not (:meth:`~worker.codecs.base.Codec.
           snapshot` / ``restore``): the fp32 all-reduce sends this step's gradient exactly, so
           error feedback owes nothing for it, and keeps owing what earlier steps left (it goes
           with the bucket's next compressed all-reduce). Codecs whose state must be the same on
           every worker (FetchSGD's sketches) stay the same even when one worker's call completed
           and another's did not.

    DDP's ``join`` (uneven inputs) works unchanged: a rank that ran out of data calls the hook
    with zero buckets, in the same order, and the switch sums its zeros.

    Args:
        state: the :class:`HinaState`.
        bucket: the gradient bucket (not pre-divided by the world size).

    Returns:
        A future completed with the bucket's averaged gradient. CUDA: the engine works on a
        stream of its own that waits for the bucket's gradients, and the future records that
        stream's work, as PyTorch's own hooks do.

    .. warning::
        Non-finite gradients (NaN/Inf) are not sent through the switch (the codec refuses them:
        they would poison every worker's decode): the worker that found them sends a poisoned
        agreement round instead, every other worker's codec refuses the aggregated value at
        once, and the bucket falls back to the fp32 all-reduce on every worker together, which
        carries them as plain DDP would (no worker waits for ``give_up_s``).
    """
    tensor = bucket.buffer()
    warming_up = state.iteration < state.start_iter
    if bucket.is_last():
        state.iteration += 1
    if warming_up:
        state.stats["allreduce_buckets"] += 1
        return _allreduce_mean(state, tensor)
    return state.engine.submit(bucket.index(), tensor)
