"""The aggregation engine behind the DDP comm hook: gradient buckets go through the switch on
threads of their own, in the order DDP hands them over, while DDP's backward pass goes on
computing the next buckets (the point of a comm hook: PyTorch's own hooks return the future of
asynchronous work).

Several buckets are on the wire at once (a pipeline): the job's slots are split into *lanes*
(:meth:`worker.transport.Transport.lanes`: disjoint slot ranges, each with its own sequence of
rounds, one link shared), and bucket ``n`` (the ``n``-th handed over) goes to lane ``n mod
lanes``, whose thread takes its buckets in order. So bucket ``n + 1``'s agreement round, encode
and data rounds run while bucket ``n``'s are on the wire, and the last buckets of a backward
pass, which DDP hands over within milliseconds of each other, are not queued behind one another.
Every rank gives every lane the same buckets in the same order (DDP's reducer hands them over in
the same order on every rank), so the lanes' rounds match across ranks whatever the timing. The
collectives (the vote, the fp32 fallback) are issued in bucket order on every rank: a bucket
waits for the previous bucket's before it issues its own. Pipelining needs a codec whose calls
for different buckets may run at once (:attr:`~worker.codecs.base.Codec.concurrent_keys`: no
state shared between buckets); other codecs, and ``lanes=1``, take one bucket at a time. The
engine owns its transport until :meth:`AggregationEngine.close`, which continues the transport
past the lanes' rounds.

The engine owns the codec steps (agreement, encode, the switch rounds, decode: one
:func:`worker.collective.allreduce` per bucket) and the fallback decision; the transport moves
packets. Every rank hands the engine the same buckets in the same order (DDP's reducer does), so
the engine's collectives are the same on every rank, in the same order: they use a process group
of their own (:func:`engine_group`), so they never interleave with DDP's collectives on the
default group, which the training thread issues meanwhile.

Per bucket, on its lane's thread:

1. CUDA: the engine's own stream waits for the event recorded when the bucket was handed over
   (the gradients are ready then), as PyTorch's hooks order their work after the producer.
2. ``allreduce`` through the switch on the lane (the codec's state snapshotted first).
3. Once the previous bucket has voted (collectives in bucket order), the vote: one MAX
   all-reduce of ``(failed, newest generation a NOTICE named, the lane's next sequence
   number)`` on the engine's group. Every rank learns whether all of them got their result.
4. All did: the decoded mean is written into the bucket and the future completes. One did not:
   every rank restores its codec (the bucket never happened to error feedback), follows the
   newest generation on this lane, continues the lane from a sequence number past anything
   any rank sent in it, and all-reduces the bucket in fp32 on the engine's group; the future
   completes with that mean. (The other lanes learn a new generation from their own next
   bucket: its NOTICE fails it at once on every rank, and it falls back likewise.)

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
from contextlib import contextmanager, nullcontext
from typing import Hashable, Optional

import torch
import torch.distributed as dist

from hina import protocol as P

from .codecs.base import Codec
from .collective import allreduce
from .transport import GenerationChanged, Transport, TransportError

__all__ = ["AggregationEngine", "engine_group", "fallback_cause", "new_stats", "default_lanes",
           "DEFAULT_LANES"]

log = logging.getLogger("hina.worker")

#: Buckets on the wire at once by default: DDP hands the last two buckets of a backward pass
#: over within a few ms of each other (bench/trace_ddp_overlap.py, docs/benchmarks.md), and
#: every lane more halves each lane's window of slots.
DEFAULT_LANES = 2


def default_lanes(transport: Transport, codec: Codec) -> int:
    """:data:`DEFAULT_LANES` where the codec allows buckets in flight at once and the job's
    slots split into that many lanes (a power of two, at least 2 slots per lane); else 1."""
    n_slots = transport.job.n_slots
    if (not codec.concurrent_keys or transport.window % DEFAULT_LANES
            or transport.window < 2 * DEFAULT_LANES or n_slots & (n_slots - 1)):
        return 1
    return DEFAULT_LANES


def new_stats() -> dict:
    """The counters an engine keeps (``HinaState.stats``)."""
    return {"hina_buckets": 0, "fallback_buckets": 0, "allreduce_buckets": 0, "bytes_sent": 0,
            "seconds": 0.0, "bucket_seconds": 0.0, "generation_changes": 0}


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
        lanes: buckets on the wire at once (each on its own lane of the job's slots and its own
            thread); default :func:`default_lanes`; 1: one bucket after the other. The same on
            every rank.

    Raises:
        ValueError: ``lanes`` > 1 with a codec whose buckets cannot be in flight at once, with
            the synchronous engine, or that does not divide the transport's slots.
    """

    def __init__(self, transport: Transport, codec: Codec,
                 group: Optional[dist.ProcessGroup], stats: Optional[dict] = None,
                 synchronous: bool = False, lanes: Optional[int] = None):
        if lanes is None:
            lanes = 1 if synchronous else default_lanes(transport, codec)
        if not isinstance(lanes, int) or lanes < 1:
            raise ValueError(f"lanes={lanes!r}: must be an int >= 1")
        if lanes > 1 and synchronous:
            raise ValueError(f"lanes={lanes}: the synchronous engine takes one bucket at a time")
        if lanes > 1 and not codec.concurrent_keys:
            raise ValueError(f"lanes={lanes}: codec {codec.name} keeps state shared by its "
                             "buckets (concurrent_keys is False), so its buckets go one at a "
                             "time: use lanes=1")
        self.transport, self.codec, self.group = transport, codec, group
        self.stats = new_stats() if stats is None else stats
        self.synchronous = synchronous
        #: The lanes' transports (the transport itself when there is one lane).
        self.transports = transport.lanes(lanes)
        self.lanes = lanes
        self._queues = [queue.SimpleQueue() for _ in range(lanes)]
        self._threads: list[Optional[threading.Thread]] = [None] * lanes
        self._submitted = 0                 # buckets handed over: bucket n goes to lane n % lanes
        self._turn = threading.Condition()  # the collectives' order: bucket _next_turn's next
        self._next_turn = 0
        self._streams: dict = {}
        self._closed = False
        self._busy = threading.Lock()       # the buckets in their switch path, and since when
        self._in_path, self._busy_since = 0, 0.0

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
        job = (self._submitted, key, tensor, ready, fut)
        lane = self._submitted % self.lanes
        self._submitted += 1
        if self.synchronous:
            self._process(lane, job)
            return fut
        if self._threads[lane] is None:
            thread = threading.Thread(target=self._run, args=(lane,), daemon=True,
                                      name="hina-engine" + (f"-{lane}" if self.lanes > 1 else ""))
            self._threads[lane] = thread
            thread.start()
        self._queues[lane].put(job)
        return fut

    def close(self, timeout: float = 30.0) -> None:
        """Finish the queued buckets, then stop the threads; the transport continues past the
        lanes' rounds (:meth:`~worker.transport.Transport.rejoin`: another engine, or plain
        calls, can use it next)."""
        self._closed = True
        for lane, thread in enumerate(self._threads):
            if thread is not None:
                self._queues[lane].put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread is not None:
                thread.join(max(0.0, deadline - time.monotonic()))
        if not any(thread is not None and thread.is_alive() for thread in self._threads):
            self.transport.rejoin(self.transports)

    # -- the lanes' threads ------------------------------------------------------------------
    def _run(self, lane: int) -> None:
        while True:
            job = self._queues[lane].get()
            if job is None:
                return
            self._process(lane, job)

    def _stream_for(self, tensor: torch.Tensor, ready):
        """CUDA: the engine's stream on the bucket's device, made to wait for the bucket. One
        stream for all lanes: the GPU runs their work in the order the lanes issue it, so a
        codec's scratch buffers, which its lock hands to one call at a time on the CPU side, are
        used one call at a time on the GPU too (streams of their own would overlap them)."""
        if ready is None:
            return nullcontext()
        with self._turn:                  # the lanes' threads create it once
            stream = self._streams.get(tensor.device)
            if stream is None:
                stream = self._streams[tensor.device] = torch.cuda.Stream(tensor.device)
        stream.wait_event(ready)
        return torch.cuda.stream(stream)

    def _process(self, lane: int, job) -> None:
        n, key, tensor, ready, fut = job
        try:
            with self._stream_for(tensor, ready):
                self._aggregate(n, self.transports[lane], key, tensor)
                fut.set_result(tensor)    # CUDA: the future records the engine stream's work
        except BaseException as exc:         # the future carries it to DDP's wait
            log.error("HINA: bucket %s could not be aggregated: %s", key, exc)
            fut.set_exception(exc)
        finally:
            self._pass_turn(n)               # a bucket that failed before its vote

    @contextmanager
    def _turn_of(self, n: int):
        """Bucket ``n``'s turn for the collectives: after bucket ``n - 1``'s, on every rank."""
        with self._turn:
            while self._next_turn < n:
                self._turn.wait()
        try:
            yield
        finally:
            self._pass_turn(n)

    def _pass_turn(self, n: int) -> None:
        """Bucket ``n`` is done with the collectives (waits for its turn if it had none)."""
        with self._turn:
            while self._next_turn < n:
                self._turn.wait()
            if self._next_turn == n:
                self._next_turn = n + 1
                self._turn.notify_all()

    def _aggregate(self, n: int, transport: Transport, key: Hashable,
                   tensor: torch.Tensor) -> None:
        """Bucket ``n``: the switch path on ``transport`` (its lane), the vote, the result or
        the fp32 fallback, in place."""
        codec = self.codec
        sent_before = transport.total.bytes_sent
        result, failure = None, None
        snapshot = codec.snapshot(key)
        started, in_path = self._enter_path(), True
        try:
            try:
                result = allreduce(tensor, codec, transport, key=key)
            except Exception as exc:     # a failed switch path, or a codec error: vote for fp32
                failure = exc
                if not isinstance(exc, TransportError):
                    log.exception("HINA: bucket %s: the codec failed; fp32 for it", key)
            sent = transport.total.bytes_sent - sent_before
            seen = failure.generation if isinstance(failure, GenerationChanged) else 0
            with self._turn_of(n):
                failed, generation, next_seq = self._vote(transport, tensor.device,
                                                          failure is not None, seen)
                in_path = False
                self._leave_path(started)
                self.stats["bytes_sent"] += sent
                if not failed:
                    self.stats["hina_buckets"] += 1
                    tensor.copy_(result)
                    return
                codec.restore(key, snapshot)          # as if the bucket had never been compressed
                self._fall_back(transport, key, tensor, failure, generation, next_seq)
        finally:
            if in_path:                      # failed before its vote
                self._leave_path(started)
            codec.release(key, snapshot)

    def _enter_path(self) -> float:
        """A bucket starts its switch path: the engine is busy from now if it was not."""
        with self._busy:
            now = time.monotonic()
            if not self._in_path:
                self._busy_since = now
            self._in_path += 1
            return now

    def _leave_path(self, started: float) -> None:
        """A bucket's switch path (from ``started``) ends: ``bucket_seconds`` counts it, and
        ``seconds`` the time since the engine became busy once no other bucket is in its path
        (buckets on several lanes at once count once there)."""
        with self._busy:
            now = time.monotonic()
            self.stats["bucket_seconds"] += now - started
            self._in_path -= 1
            if not self._in_path:
                self.stats["seconds"] += now - self._busy_since

    def _fall_back(self, transport: Transport, key: Hashable, tensor: torch.Tensor,
                   failure: Optional[BaseException], generation: int, next_seq: int) -> None:
        self.stats["fallback_buckets"] += 1
        self.stats["generation_changes"] += 1 if generation else 0
        log.warning("HINA: bucket %s falls back to fp32 all-reduce (%s)", key,
                    fallback_cause(failure, transport.job.job_id, generation))
        if generation and generation != transport.job.generation:
            # the lane's next buckets go in the job's new generation (every worker: the vote
            # told all)
            log.warning("HINA: job %d continues in generation %d", transport.job.job_id,
                        generation)
            transport.follow(generation)
            if transport is not self.transport and generation != self.transport.job.generation:
                self.transport.follow(generation)    # the job's generation, as workers know it
        # a failed call may have stopped part-way on some worker: all continue the lane from one
        # sequence number past anything sent, which the switch treats as new rounds in every
        # slot copy
        transport.next_seq = (next_seq + 2 * transport.window) % transport.seq_space
        self._fallback(tensor)

    def _vote(self, transport: Transport, device: torch.device, failed: bool,
              generation: int) -> tuple[int, int, int]:
        """(any rank failed, the newest generation a NOTICE named to any rank, the largest next
        sequence number of the lane): one MAX all-reduce on the bucket's device (NCCL reduces
        CUDA tensors only)."""
        vote = torch.tensor([int(failed), generation, transport.next_seq], dtype=torch.int64,
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
