"""PyTorch DDP communication hook that aggregates gradient buckets in the switch.

(No ``from __future__ import annotations`` here: DDP checks the hook's annotations as objects.)

Modelled on ``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook``: configuration and
state live in :class:`HinaState`, the hook :func:`hina_hook` is a free function.

Example::

    >>> transport = Transport(link, job)                                   # doctest: +SKIP
    >>> state = HinaState(transport, ThcCodec(n_workers=4, rank=rank))     # doctest: +SKIP
    >>> ddp_model.register_comm_hook(state, hina_hook)                     # doctest: +SKIP
"""

import logging
import time
from typing import Optional

import torch
import torch.distributed as dist

from hina import protocol as P

from .codecs.base import Codec
from .transport import GenerationChanged, Transport, TransportError, allreduce

__all__ = ["HinaState", "hina_hook"]

log = logging.getLogger("hina.worker")


class HinaState:
    """State of :func:`hina_hook` for one worker.

    Args:
        transport: this worker's :class:`~worker.transport.Transport` to the switch.
        codec: the codec (one instance per worker; its per-bucket state is keyed by bucket index).
        start_iter: iterations that use plain all-reduce first. DDP rebuilds its buckets after the
            first iteration, and codecs with per-bucket state (error feedback) must only see the
            final buckets, so this must be >= 1 (PowerSGD's ``start_powerSGD_iter`` likewise).
        process_group: the group for the warm-up all-reduce and the per-bucket fallback vote.

    Attributes:
        iteration: number of completed backward passes (counted on bucket 0).
        stats: ``hina_buckets``, ``fallback_buckets``, ``allreduce_buckets``, ``bytes_sent``,
            ``seconds`` (time spent in the hook's switch path), ``generation_changes`` (fallen
            back buckets whose cause was a NOTICE that the job is in another generation).
    """

    __slots__ = ("transport", "codec", "start_iter", "process_group", "iteration", "stats")

    def __init__(self, transport: Transport, codec: Codec, start_iter: int = 2,
                 process_group: Optional[dist.ProcessGroup] = None):
        if start_iter < 1:
            raise ValueError(f"start_iter={start_iter}: must be >= 1 because DDP rebuilds its "
                             "buckets after the first iteration")
        if codec.n_workers != transport.job.n_workers:
            raise ValueError(f"codec.n_workers={codec.n_workers} differs from the job's "
                             f"n_workers={transport.job.n_workers}")
        self.transport, self.codec = transport, codec
        self.start_iter, self.process_group = start_iter, process_group
        self.iteration = 0
        self.stats = {"hina_buckets": 0, "fallback_buckets": 0, "allreduce_buckets": 0,
                      "bytes_sent": 0, "seconds": 0.0, "generation_changes": 0}
        log.info("HINA DDP hook: codec=%s workers=%d job=%d start_iter=%d", codec.name,
                 codec.n_workers, transport.job.job_id, start_iter)


def _allreduce_mean(state: HinaState, tensor: torch.Tensor) -> torch.futures.Future:
    group = state.process_group or dist.group.WORLD
    world = dist.get_world_size(group)
    fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0].div_(world))


def _resync_sequence(state: HinaState, group, device: torch.device) -> None:
    """After a failed call the workers' sequence numbers may differ (a worker stopped part-way):
    all continue from a common number past anything sent, which the switch treats as new rounds
    in every slot copy (partial contributions of the failed call are discarded)."""
    transport = state.transport
    seq = torch.tensor([transport.next_seq], dtype=torch.int64, device=device)
    dist.all_reduce(seq, op=dist.ReduceOp.MAX, group=group)
    transport.next_seq = (int(seq) + 2 * transport.job.n_slots) % (1 << 32)


def _fallback_cause(failure: Optional[TransportError], job_id: int, generation: int) -> str:
    """Why a bucket falls back, for the warning: this worker's failure, and the job generation
    any worker learned from a NOTICE (the vote carries it, so every worker names it)."""
    if isinstance(failure, GenerationChanged):
        return str(failure)
    seen = (f"a worker was told by the switch ({P.DropReason.STALE_GENERATION.name}) that job "
            f"{job_id} is in generation {generation}: the job was restarted; rejoin it for the "
            "current generation") if generation else ""
    if failure is not None:
        return f"{failure}; {seen}" if seen else str(failure)
    return seen or "another worker's switch path failed"


def hina_hook(state: HinaState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Average a gradient bucket across workers through the switch.

    Algorithm:
        1. Before ``state.start_iter`` iterations: plain all-reduce (DDP is still rebuilding
           buckets).
        2. Otherwise: the codec's agreement round (switch MAX), encode, stream through the
           switch, decode to the mean (:func:`worker.transport.allreduce`).
        3. All workers vote (a two-element all-reduce) on whether every one of them got its
           result, and on the newest job generation a NOTICE of the switch reported; if any did
           not (switch unreachable, a result lost beyond the give-up time, the job restarted in
           another generation), every worker falls back to an fp32 all-reduce of this bucket,
           logged as a warning that names the cause (the reason and generation, when a NOTICE
           said so). Every worker then continues in the newest generation the vote carried,
           from a common sequence number past anything sent, so the next bucket goes through
           the switch again at once (no give-up wait). Following needs no job-service session:
           a hook built from ``transport_from_env()`` (under ``hina-worker run``) follows the
           same way.
        4. A bucket that falls back leaves the codec as it was before the bucket, on every
           worker, whether its own switch path failed or not (:meth:`~worker.codecs.base.Codec.
           snapshot` / ``restore``): the fp32 all-reduce sends this step's gradient exactly, so
           error feedback owes nothing for it, and keeps owing what earlier steps left (it goes
           with the bucket's next compressed all-reduce). Codecs whose state must be the same on
           every worker (FetchSGD's sketches) stay the same even when one worker's call completed
           and another's did not.

    Args:
        state: the :class:`HinaState`.
        bucket: the gradient bucket (not pre-divided by the world size).

    Returns:
        A future completed with the bucket's averaged gradient.

    .. warning::
        Non-finite gradients (NaN/Inf) raise :class:`~worker.codecs.NonFiniteGradientError`
        rather than being sent: they would poison every worker's decode.
    """
    tensor = bucket.buffer()
    warming_up = state.iteration < state.start_iter
    if bucket.is_last():
        state.iteration += 1
    if warming_up:
        state.stats["allreduce_buckets"] += 1
        return _allreduce_mean(state, tensor)

    started = time.monotonic()
    sent_before = state.transport.total.bytes_sent
    result, failure = None, None
    key = bucket.index()
    snapshot = state.codec.snapshot(key)
    try:
        result = allreduce(tensor, state.codec, state.transport, key=key)
    except TransportError as exc:
        failure = exc
    except BaseException:        # NonFiniteGradientError (nothing sent), a codec error: raised
        state.codec.restore(key, snapshot)
        state.codec.release(key, snapshot)
        raise
    group = state.process_group or dist.group.WORLD
    # One MIN all-reduce votes on both: ok (0 if any worker failed) and -generation (the newest
    # job generation a NOTICE reported to any worker; 0 when none did). On the bucket's device:
    # NCCL groups (CUDA training) reduce only CUDA tensors.
    seen = failure.generation if isinstance(failure, GenerationChanged) else 0
    vote = torch.tensor([0 if failure else 1, -seen], dtype=torch.int32, device=tensor.device)
    dist.all_reduce(vote, op=dist.ReduceOp.MIN, group=group)
    ok, generation = int(vote[0]), -int(vote[1])
    state.stats["seconds"] += time.monotonic() - started
    state.stats["bytes_sent"] += state.transport.total.bytes_sent - sent_before
    if ok == 0:
        state.codec.restore(key, snapshot)        # as if the bucket had never been compressed
        state.codec.release(key, snapshot)
        state.stats["fallback_buckets"] += 1
        state.stats["generation_changes"] += 1 if generation else 0
        log.warning("HINA: bucket %d falls back to fp32 all-reduce (%s)", bucket.index(),
                    _fallback_cause(failure, state.transport.job.job_id, generation))
        if generation and generation != state.transport.job.generation:
            # the next buckets go in the job's new generation (every worker: the vote told all)
            log.warning("HINA: job %d continues in generation %d", state.transport.job.job_id,
                        generation)
            state.transport.follow(generation, first_seq=state.transport.next_seq)
        _resync_sequence(state, group, tensor.device)
        return _allreduce_mean(state, tensor)
    state.codec.release(key, snapshot)
    state.stats["hina_buckets"] += 1
    tensor.copy_(result)
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(tensor)
    return fut
