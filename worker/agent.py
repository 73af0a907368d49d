"""The worker agent: join a job through the controller's job service, then run training or a
synthetic allreduce benchmark with what the service handed out.

``run`` starts a command (``python train.py``) once every worker of the job is at the start
barrier, with the seat in its environment (:data:`SEAT_ENV`, JSON; :func:`seat_from_env` reads it
back, :func:`transport_from_env` builds the transport). The agent keeps the seat's lease alive
while the command runs and gives the seat back when it ends.

``bench`` allreduces random tensors through the switch and reports time, throughput and (with
``check``) the error against the exact mean, which every worker can compute because each worker's
tensor is drawn from a seed of (round, worker index).

Example::

    >>> with JobClient("127.0.0.1:50051") as client:                  # doctest: +SKIP
    ...     seat = client.join(job_id=1)
    ...     report = run_bench(client, seat, size=1_000_000, rounds=5)
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from hina.procs import with_parent_death_signal

from .jobclient import JobClient, JobServiceError, Seat

__all__ = ["SEAT_ENV", "seat_from_env", "transport_from_env", "run_command", "BenchReport",
           "run_bench", "follow_generation", "allreduce_following", "MAX_GENERATION_CHANGES"]

log = logging.getLogger("hina.worker")

#: Environment variable holding the seat (JSON) for a command started by ``hina-worker run``.
SEAT_ENV = "HINA_SEAT"
#: Generation changes one :func:`allreduce_following` call survives before it gives up.
MAX_GENERATION_CHANGES = 4


def follow_generation(client: Optional[JobClient], transport, changed) -> int:
    """Move ``transport`` to the job's current generation after ``changed`` (a
    :class:`~worker.transport.GenerationChanged`); the transport starts again at seq 0. Returns
    the generation.

    With a ``client``, the seat is re-read (:meth:`JobClient.refresh`: same session, no bump);
    without one (a process started by ``hina-worker run``, which has only its seat in
    ``$HINA_SEAT``: its agent keeps the session), or when the service cannot answer, the
    generation the switch's NOTICE named is taken: the switch admits exactly one generation
    per job, so the NOTICE names the current one."""
    generation = changed.generation
    if client is not None:
        try:
            generation = client.refresh().generation
        except JobServiceError as exc:
            log.warning("job %d: cannot re-read the seat (%s); following the switch's "
                        "generation %d", changed.job_id, exc, changed.generation)
            generation = changed.generation
        if generation == transport.job.generation:     # the service lags the switch: trust it
            generation = changed.generation
    log.warning("job %d: %s; continuing in generation %d", changed.job_id, changed, generation)
    transport.follow(generation)
    return generation


def allreduce_following(client: Optional[JobClient], tensor, codec, transport, key=0,
                        max_changes: int = MAX_GENERATION_CHANGES,
                        call_id: Optional[int] = None):
    """:func:`worker.collective.allreduce` that survives a restart of other workers.

    When the switch answers that the job moved to another generation (a worker restarted and
    took its seat again), the call follows it (:func:`follow_generation`: the seat re-read with
    ``client``, or with ``client=None`` the generation of the switch's NOTICE, for a process that
    has only its seat, e.g. under ``hina-worker run``) and retries the same ``tensor`` in the new
    generation from seq 0, where every worker of that generation starts, so the restarted worker
    and the survivors meet in the same call (docs/protocol.md, "Who bumps, who follows").
    Contributions of the old generation never reach a result of the new one.

    The retry is exact: the codec's state of bucket ``key`` is restored before it
    (:meth:`~worker.codecs.base.Codec.snapshot` / ``restore``), so error feedback, momentum,
    step counters and rounding noise are what one clean call would have used. A call that
    fails (raises) leaves the codec as it was before it, too.

    The first call of a generation checks that every worker is at the same call
    (:meth:`~worker.transport.Transport.begin_call`), so that workers at different calls never
    sum each other's data: a worker that had finished this call before the generation changed
    and went on, while others lost its result (a switch restarted while it multicast it), or a
    restarted worker that resumed at another call. A worker ahead of the others (``own ==
    highest``) retries its call, waiting for them to move on to it; one behind raises
    :class:`~worker.transport.CallMismatch` (its call's result is lost: the application goes on
    with its next call).

    Args:
        call_id: the application's id of the call (e.g. its step), the same on every worker;
            default: the transport's count of calls. A worker restarted mid-job must resume at
            the survivors' call and pass its id.

    Raises:
        GenerationChanged: more than ``max_changes`` changes in this one call.
        CallMismatch: this worker is behind the others (or ahead and they never caught up).
        TransportError: as :func:`~worker.collective.allreduce` (e.g. TransportTimeout when the
            restarted worker does not come back within the transport's ``give_up_s``).
    """
    from .collective import allreduce
    from .transport import CallMismatch, GenerationChanged
    snapshot = codec.snapshot(key)
    cid = transport.calls if call_id is None else call_id
    try:
        for attempt in range(max_changes + 1):
            try:
                return allreduce(tensor, codec, transport, key=key, call_id=cid)
            except GenerationChanged as exc:
                codec.restore(key, snapshot)
                if attempt == max_changes:
                    raise
                follow_generation(client, transport, exc)
            except CallMismatch as exc:
                codec.restore(key, snapshot)
                if exc.own < exc.highest or attempt == max_changes:
                    raise
                log.warning("job %d: %s; waiting for the others at call %d", exc.job_id, exc,
                            cid)
            except BaseException:
                codec.restore(key, snapshot)
                raise
        raise AssertionError("unreachable")
    finally:
        codec.release(key, snapshot)


def seat_from_env(environ=os.environ) -> Seat:
    """The seat ``hina-worker run`` gave this process.

    Raises:
        JobServiceError: not started by ``hina-worker run``.
    """
    text = environ.get(SEAT_ENV)
    if not text:
        raise JobServiceError(f"${SEAT_ENV} is not set: start this under 'hina-worker join ... "
                              "run -- COMMAND'", "FAILED_PRECONDITION")
    return Seat.from_json(json.loads(text))


def transport_from_env(**kwargs):
    """A :class:`~worker.transport.Transport` for the seat in the environment."""
    return seat_from_env().transport(**kwargs)


def run_command(client: JobClient, seat: Seat, command: Sequence[str],
                barrier_timeout: float = 60.0) -> int:
    """Wait at the start barrier, run ``command`` with the seat in its environment; its status.

    The seat handed to the command is re-read after the barrier, so it carries the job's
    generation at the command's start (another worker may have moved the job on meanwhile);
    later changes reach the command through the switch's NOTICEs (``allreduce_following`` with
    ``client=None``, the DDP hook). A restarted worker passes the start barrier at once when the
    other workers passed it already (they run: it joins them). The command is killed when this
    agent dies (Linux): the seat dies with the agent."""
    client.barrier("start", timeout=barrier_timeout)
    try:
        seat = client.refresh()
    except JobServiceError as exc:
        log.warning("cannot re-read the seat after the start barrier (%s); the command starts "
                    "in generation %d", exc, seat.generation)
    env = dict(os.environ)
    env.update({SEAT_ENV: json.dumps(seat.to_json()), "HINA_JOB_ID": str(seat.job_id),
                "HINA_WORKER_INDEX": str(seat.worker_index),
                "HINA_N_WORKERS": str(seat.n_workers)})
    log.info("running %s as worker %d of job %d", " ".join(command), seat.worker_index,
             seat.job_id)
    if shutil.which(command[0]) is None:
        raise JobServiceError(f"cannot run {command[0]!r}: no such program", "NOT_FOUND")
    # SIGKILL when this agent dies: the seat is the agent's, and a command left running after
    # its agent was killed would go on sending as this worker beside the worker's next process
    # (which takes the seat once the lease runs out). No preexec_fn: gRPC runs here (hina.procs).
    return subprocess.call(with_parent_death_signal(command), env=env)


@dataclass
class BenchReport:
    """What ``bench`` measured on this worker."""
    worker_index: int
    n_workers: int
    codec: str
    size: int
    rounds: int
    seconds: list[float] = field(default_factory=list)
    max_rel_error: Optional[float] = None
    retransmissions: int = 0

    @property
    def elements_per_s(self) -> float:
        total = sum(self.seconds)
        return self.size * len(self.seconds) / total if total else 0.0

    def to_json(self) -> dict:
        return {"worker_index": self.worker_index, "n_workers": self.n_workers,
                "codec": self.codec, "size": self.size, "rounds": self.rounds,
                "seconds": self.seconds, "elements_per_s": self.elements_per_s,
                "max_rel_error": self.max_rel_error, "retransmissions": self.retransmissions}


def _tensor(round_: int, worker: int, size: int):
    import torch
    return torch.randn(size, generator=torch.Generator().manual_seed(round_ * 1009 + worker))


def bench_device(text: str):
    """The torch device ``text`` names ("cpu", "cuda", "cuda:N"), if this machine has it; else
    ValueError saying why."""
    import torch
    try:
        dev = torch.device(text)
    except RuntimeError:
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise ValueError(f"--device {text!r}: cpu, cuda or cuda:N")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"--device {text!r}: no CUDA device available")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"--device {text!r}: this machine has {torch.cuda.device_count()} GPU(s)")
    return dev


def run_bench(client: JobClient, seat: Seat, size: int, rounds: int = 3, check: bool = True,
              barrier_timeout: float = 60.0,
              progress: Optional[Callable[[int], None]] = None, device: str = "cpu") -> BenchReport:
    """Allreduce ``rounds`` random tensors of ``size`` elements through the switch.

    Args:
        client: the joined client (barriers before the first round and after the last).
        seat: this worker's seat.
        size: elements per tensor.
        rounds: allreduce calls.
        check: compare with the exact mean (every worker's tensor is reproducible here).
        progress: called with the number of elements done after each round (a progress bar).
        device: where the tensors live and the codec runs ("cpu", "cuda", "cuda:1", ...); the
            tensors are drawn on the CPU (reproducible on every worker) and moved there untimed.
    """
    import torch
    if size < 1 or rounds < 1:
        raise ValueError(f"size={size}, rounds={rounds}: both must be >= 1")
    dev = bench_device(device)
    codec = seat.codec()
    transport = seat.transport()
    report = BenchReport(seat.worker_index, seat.n_workers, seat.codec_params.name, size, rounds)
    try:
        client.barrier("bench-start", timeout=barrier_timeout)
        for r in range(rounds):
            mine = _tensor(r, seat.worker_index, size).to(dev)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            start = time.perf_counter()
            mean = allreduce_following(client, mine, codec, transport, key=0, call_id=r)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            report.seconds.append(time.perf_counter() - start)
            mean = mean.cpu()
            if check:
                exact = sum(_tensor(r, w, size) for w in range(seat.n_workers)) / seat.n_workers
                err = float((mean - exact).norm() / exact.norm())
                report.max_rel_error = max(report.max_rel_error or 0.0, err)
            if progress is not None:
                progress(size)
        report.retransmissions = transport.total.retransmissions
        client.barrier("bench-end", timeout=barrier_timeout)
    finally:
        transport.close()
    return report
