"""The aggregation engine behind the DDP comm hook: gradient buckets go through the switch on a
thread of their own, one after the other in the order DDP hands them over, while DDP's backward
pass goes on computing the next buckets (the point of a comm hook: PyTorch's own hooks return
the future of asynchronous work).

The engine owns the codec steps (agreement, encode, the switch rounds, decode: one
:func:`worker.transport.allreduce` per bucket) and the fallback decision; the transport moves
packets. Every rank hands the engine the same buckets in the same order (DDP's reducer does), so
the engine's collectives are the same on every rank, in the same order: they use a process group
of their own (:func:`engine_group`), so they never interleave with DDP's collectives on the
default group, which the training thread issues meanwhile.

Per bucket, on the engine thread:

1. CUDA: the engine's own stream waits for the event recorded when the bucket was handed over
   (the gradients are ready then), as PyTorch's hooks order their work after the producer.
2. ``allreduce`` through the switch (the codec's state snapshotted first).
3. The vote: one MAX all-reduce of ``(failed, newest generation a NOTICE named, next sequence
   number)`` on the engine's group. Every rank learns whether all of them got their result.
4. All did: the decoded mean is written into the bucket and the future completes. One did not:
   every rank restores its codec (the bucket never happened to error feedback), follows the
   newest generation, continues from a sequence number past anything any rank sent, and
   all-reduces the bucket in fp32 on the engine's group; the future completes with that mean.

Example::

    >>> group = engine_group()                                            # doctest: +SKIP
    >>> engine = AggregationEngine(transport, codec, group)               # doctest: +SKIP
    >>> fut = engine.submit(bucket.index(), bucket.buffer())              # doctest: +SKIP
    >>> fut.wait()                                                        # doctest: +SKIP
"""

import logging
import queue
import threading
import time
from contextlib import nullcontext
from typing import Hashable, Optional

import torch
import torch.distributed as dist

from hina import protocol as P

from .codecs.base import Codec
from .transport import GenerationChanged, Transport, TransportError, allreduce

__all__ = ["AggregationEngine", "engine_group", "fallback_cause", "new_stats"]

log = logging.getLogger("hina.worker")

_U32 = 1 << 32


def new_stats() -> dict:
    """The counters an engine keeps (``HinaState.stats``)."""
    return {"hina_buckets": 0, "fallback_buckets": 0, "allreduce_buckets": 0, "bytes_sent": 0,
            "seconds": 0.0, "generation_changes": 0}


def engine_group(process_group: Optional[dist.ProcessGroup] = None) -> dist.ProcessGroup:
    """A process group of the ranks of ``process_group`` (default: the world) for the engine's
    collectives, apart from DDP's. Like every ``new_group``, every rank of the default group must
    call this, in the same order as its other ``new_group`` calls."""
    ranks = None if process_group is None else dist.get_process_group_ranks(process_group)
    return dist.new_group(ranks=ranks)


def fallback_cause(failure: Optional[BaseException], job_id: int, generation: int) -> str:
    """Why a bucket falls back, for the warning: this worker's failure, and the job generation
    any worker learned from a NOTICE (the vote carries it, so every worker names it)."""
    if isinstance(failure, GenerationChanged):
        return str(failure)
    seen = (f"a worker was told by the switch ({P.DropReason.STALE_GENERATION.name}) that job "
            f"{job_id} is in generation {generation}: the job was restarted; rejoin it for the "
            "current generation") if generation else ""
    if failure is not None:
        text = f"{type(failure).__name__}: {failure}" if not isinstance(
            failure, TransportError) else str(failure)
        return f"{text}; {seen}" if seen else text
    return seen or "another worker's switch path failed"


class AggregationEngine:
    """Aggregates gradient buckets through the switch on a thread of its own.

    Args:
        transport: this worker's transport to the switch.
        codec: the codec (its per-bucket state keyed by bucket index).
        group: the process group of the vote and the fp32 fallback (:func:`engine_group`); None
            runs without one (a single process: the switch path's outcome is the decision).
        stats: the counters to update (:func:`new_stats`).
        synchronous: do the work in :meth:`submit` itself and return a completed future (the
            behaviour without an engine; a baseline for ``bench/bench_ddp_overlap.py``).
    """

    def __init__(self, transport: Transport, codec: Codec,
                 group: Optional[dist.ProcessGroup], stats: Optional[dict] = None,
                 synchronous: bool = False):
        self.transport, self.codec, self.group = transport, codec, group
        self.stats = new_stats() if stats is None else stats
        self.synchronous = synchronous
        self._jobs: "queue.SimpleQueue" = queue.SimpleQueue()
        self._thread: Optional[threading.Thread] = None
        self._streams: dict = {}
        self._closed = False

    # -- the training thread's side ----------------------------------------------------------
    def submit(self, key: Hashable, tensor: torch.Tensor) -> torch.futures.Future:
        """Queue ``tensor`` (a bucket's buffer, not pre-divided) for aggregation; a future that
        completes with the same tensor holding the mean over the workers."""
        if self._closed:
            raise RuntimeError("the HINA aggregation engine is closed")
        ready = None
        if tensor.is_cuda:
            ready = torch.cuda.Event()
            ready.record(torch.cuda.current_stream(tensor.device))
            fut = torch.futures.Future(devices=[tensor.device])
        else:
            fut = torch.futures.Future()
        job = (key, tensor, ready, fut)
        if self.synchronous:
            self._process(job)
            return fut
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="hina-engine", daemon=True)
            self._thread.start()
        self._jobs.put(job)
        return fut

    def close(self, timeout: float = 30.0) -> None:
        """Finish the queued buckets, then stop the thread."""
        self._closed = True
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout)

    # -- the engine thread -------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            self._process(job)

    def _stream_for(self, tensor: torch.Tensor, ready):
        """CUDA: the engine's stream on the bucket's device, made to wait for the bucket."""
        if ready is None:
            return nullcontext()
        stream = self._streams.get(tensor.device)
        if stream is None:
            stream = self._streams[tensor.device] = torch.cuda.Stream(tensor.device)
        stream.wait_event(ready)
        return torch.cuda.stream(stream)

    def _process(self, job) -> None:
        key, tensor, ready, fut = job
        try:
            with self._stream_for(tensor, ready):
                self._aggregate(key, tensor)
                fut.set_result(tensor)    # CUDA: the future records the engine stream's work
        except BaseException as exc:         # the future carries it to DDP's wait
            log.error("HINA: bucket %s could not be aggregated: %s", key, exc)
            fut.set_exception(exc)

    def _aggregate(self, key: Hashable, tensor: torch.Tensor) -> None:
        """One bucket: the switch path, the vote, the result or the fp32 fallback, in place."""
        transport, codec = self.transport, self.codec
        started = time.monotonic()
        sent_before = transport.total.bytes_sent
        result, failure = None, None
        snapshot = codec.snapshot(key)
        try:
            try:
                result = allreduce(tensor, codec, transport, key=key)
            except Exception as exc:     # a failed switch path, or a codec error: vote for fp32
                failure = exc
                if not isinstance(exc, TransportError):
                    log.exception("HINA: bucket %s: the codec failed; fp32 for it", key)
            seen = failure.generation if isinstance(failure, GenerationChanged) else 0
            failed, generation, next_seq = self._vote(tensor.device, failure is not None, seen)
            self.stats["seconds"] += time.monotonic() - started
            self.stats["bytes_sent"] += transport.total.bytes_sent - sent_before
            if not failed:
                self.stats["hina_buckets"] += 1
                tensor.copy_(result)
                return
            codec.restore(key, snapshot)          # as if the bucket had never been compressed
        finally:
            codec.release(key, snapshot)
        self.stats["fallback_buckets"] += 1
        self.stats["generation_changes"] += 1 if generation else 0
        log.warning("HINA: bucket %s falls back to fp32 all-reduce (%s)", key,
                    fallback_cause(failure, transport.job.job_id, generation))
        if generation and generation != transport.job.generation:
            # the next buckets go in the job's new generation (every worker: the vote told all)
            log.warning("HINA: job %d continues in generation %d", transport.job.job_id,
                        generation)
            transport.follow(generation)
        # a failed call may have stopped part-way on some worker: all continue from one sequence
        # number past anything sent, which the switch treats as new rounds in every slot copy
        transport.next_seq = (next_seq + 2 * transport.job.n_slots) % _U32
        self._fallback(tensor)

    def _vote(self, device: torch.device, failed: bool, generation: int) -> tuple[int, int, int]:
        """(any rank failed, the newest generation a NOTICE named to any rank, the largest next
        sequence number): one MAX all-reduce on the bucket's device (NCCL reduces CUDA tensors
        only)."""
        vote = torch.tensor([int(failed), generation, self.transport.next_seq], dtype=torch.int64,
                            device=device)
        if self.group is not None:
            dist.all_reduce(vote, op=dist.ReduceOp.MAX, group=self.group)
        failed, generation, next_seq = (int(v) for v in vote.tolist())
        return failed, generation, next_seq

    def _fallback(self, tensor: torch.Tensor) -> None:
        if self.group is None:
            return                        # one process: the mean is the tensor itself
        dist.all_reduce(tensor, group=self.group)
        tensor.div_(dist.get_world_size(self.group))
