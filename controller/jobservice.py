"""The worker-facing gRPC job service (``hina/jobservice.proto``; ``hina-ctl serve``).

Workers join a job and get what they need to reach the switch: their worker index, their address
as the switch admits it, the switch's address, the link (UDP socket or loopback tunnel), slots,
words and the codec's parameters (THC table and RHT seed, sketch shape and seed, sketched_sgd's
k and field widths). A named barrier
releases every worker once all of the job's seats are taken and every worker has reached it.

Seats are leased: any request renews the lease, and a worker silent for ``lease_s`` seconds loses
its seat (as does one that calls Leave). A barrier that was waiting for a worker who leaves is
broken: its waiters get ABORTED and may join again. A barrier that is not complete within its
timeout answers DEADLINE_EXCEEDED, naming the missing workers.

The service reads jobs from a callable (the controller's state file, reloaded when it changes),
so ``hina-ctl job create`` in another process is seen by a running ``hina-ctl serve`` (which
holds the primary role on the switch: that command writes beside it with a higher
``--election-id``).

Restarts (docs/reliability.md, "Restarts"): a seat taken by a new session after it was already
held in the job's current generation (its worker left, or crashed and its lease ran out, or the
whole job runs again) moves the job to its next generation before the Join is answered, through
the ``generation_bumper`` that ``hina-ctl serve`` gives (:class:`controller.restarts.
GenerationBumper`: the switch's admission entries and the state file). One re-run of all N
workers bumps once (the first seat taken again); Join and Heartbeat replies carry the generation,
so workers of the old generation re-read it with their session (no bump). Without a bumper (tests
without a switch) nothing is bumped.

Every request must carry its job's token (``controller/tokens.py``) as gRPC metadata
``authorization: Bearer TOKEN``: without it, or with another, the answer is UNAUTHENTICATED and
nothing about the job is told or changed (an unknown job is still NOT_FOUND). Tokens are compared
in constant time (:func:`hmac.compare_digest`). With :class:`hina.tls.ServerTls` the service
speaks TLS only, and with a client CA only to clients with a certificate it signed.
"""
from __future__ import annotations

import hmac
import logging
import math
import secrets
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional

import grpc

from hina import protocol as P
from hina.generated import jobservice_pb2 as pb
from hina.generated import jobservice_pb2_grpc as pb_grpc
from hina.tls import ServerTls

from .config import ConfigError, JobConfig
from .state import ControllerState

__all__ = ["JobService", "StateFileJobs", "serve", "DEFAULT_LEASE_S", "AUTH_METADATA_KEY"]

log = logging.getLogger("hina.controller.jobservice")

DEFAULT_LEASE_S = 30.0
DEFAULT_BARRIER_TIMEOUT_S = 60.0
_WAIT_TICK_S = 0.25            # how often a waiting barrier re-checks leases and cancellation
_SERVER_THREADS = 64           # each waiting Barrier holds one
#: The metadata key of a worker's credential (``authorization: Bearer TOKEN``, as HTTP has it).
AUTH_METADATA_KEY = "authorization"
_BEARER = "bearer"
_NAME_MAX = 128               # characters of a worker's free-text name kept for the logs


class StateFileJobs:
    """Jobs from the controller's state file, re-read whenever the file changes."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._stamp: Optional[tuple[int, int]] = None
        self._jobs: dict[int, JobConfig] = {}
        self._lock = threading.Lock()

    def __call__(self) -> dict[int, JobConfig]:
        with self._lock:
            try:
                st = self.path.stat()
                stamp = (st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                stamp = None
            if stamp != self._stamp:
                self._jobs = ControllerState.load(self.path).jobs if stamp else {}
                self._stamp = stamp
            return self._jobs


@dataclass
class _Seat:
    session: str
    name: str
    last_seen: float


@dataclass
class _Barrier:
    generation: int = 0
    arrived: set[int] = field(default_factory=set)
    outcome: dict[int, Optional[str]] = field(default_factory=dict)   # generation -> broken why


@dataclass
class _JobSeats:
    seats: dict[int, _Seat] = field(default_factory=dict)
    barriers: dict[str, _Barrier] = field(default_factory=dict)
    generation: Optional[int] = None        # the job's generation the fields below are of
    held: set[int] = field(default_factory=set)       # seats taken in that generation
    gone: dict[int, str] = field(default_factory=dict)   # seat -> who held it last and why it
                                                         # was freed (the cause of a bump)


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _bearer_token(metadata) -> Optional[str]:
    """The token of the request's ``authorization: Bearer TOKEN`` metadata; ``None`` if absent.

    Raises:
        _Abort: UNAUTHENTICATED, the metadata is there but not one ``Bearer TOKEN``.
    """
    values = [value for key, value in (metadata or ()) if key == AUTH_METADATA_KEY]
    if not values:
        return None
    if len(values) == 1:
        value = values[0]
        if isinstance(value, bytes):
            value = value.decode("ascii", "replace")
        scheme, _, token = value.strip().partition(" ")
        token = token.strip()
        if scheme.lower() == _BEARER and token and " " not in token:
            return token
    raise _Abort(grpc.StatusCode.UNAUTHENTICATED,
                 f"the {AUTH_METADATA_KEY!r} metadata must be one 'Bearer TOKEN'")


class JobService(pb_grpc.JobServiceServicer):
    """The servicer.

    Args:
        jobs: returns the installed jobs by id (e.g. :class:`StateFileJobs`).
        tokens: returns each job's token by job id (e.g. :class:`controller.tokens.TokenStore`);
            a request for a job without a token is refused.
        lease_s: a seat is freed after this long without a request from its worker.
        clock: monotonic time source (tests).
        generation_bumper: ``bumper(job_id, cause) -> generation``: moves the job to its next
            generation on the switch and in what ``jobs`` returns, all or nothing (raises on
            failure: the Join is refused UNAVAILABLE). ``None``: seats taken again bump nothing.
    """

    def __init__(self, jobs: Callable[[], dict[int, JobConfig]],
                 tokens: Callable[[], Mapping[int, str]], lease_s: float = DEFAULT_LEASE_S,
                 clock: Callable[[], float] = time.monotonic,
                 generation_bumper: Optional[Callable[[int, str], int]] = None):
        if lease_s <= 0:
            raise ValueError(f"lease_s={lease_s}: must be > 0")
        self.jobs, self.tokens, self.lease_s, self.clock = jobs, tokens, lease_s, clock
        self.generation_bumper = generation_bumper
        self._cond = threading.Condition()
        self._state: dict[int, _JobSeats] = {}

    # -- helpers (call with the lock held) ------------------------------------------------
    def _job(self, job_id: int) -> JobConfig:
        job = self.jobs().get(job_id)
        if job is None:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"job {job_id} does not exist")
        return job

    def _free_seat(self, job_id: int, index: int, why: str) -> None:
        state = self._state[job_id]
        seat = state.seats.pop(index, None)
        if seat is None:
            return
        log.info("job %d: worker %d (%s) %s", job_id, index, seat.name, why)
        state.gone[index] = f"{seat.name} {why}"
        for name, barrier in state.barriers.items():
            if barrier.arrived:       # someone waits for a worker who is gone: break it
                barrier.outcome[barrier.generation] = f"worker {index} {why}"
                barrier.generation += 1
                barrier.arrived.clear()
        self._cond.notify_all()

    def _expire(self, job_id: int) -> None:
        state = self._state.setdefault(job_id, _JobSeats())
        now = self.clock()
        for index, seat in list(state.seats.items()):
            if now - seat.last_seen > self.lease_s:
                self._free_seat(job_id, index, f"timed out (no request for {self.lease_s:g}s)")

    def _sync_generation(self, job: JobConfig) -> _JobSeats:
        """Follow a generation change made elsewhere (``hina-ctl job bump-generation``): the
        seats held now are the new generation's."""
        state = self._state.setdefault(job.job_id, _JobSeats())
        if state.generation != job.generation:
            state.generation, state.held = job.generation, set(state.seats)
        return state

    def _bump(self, job: JobConfig, index: int, name: str) -> int:
        """Move ``job`` to its next generation because seat ``index`` is taken again."""
        state = self._state[job.job_id]
        gone = state.gone.get(index, "its earlier worker is gone")
        cause = (f"worker {index} restarted ({name}): its seat was held in generation "
                 f"{job.generation} by {gone}"
                 + ("" if state.seats else "; the whole job runs again"))
        try:
            generation = self.generation_bumper(job.job_id, cause)
        except Exception as exc:     # the switch refused or is away: the Join is refused too
            log.warning("job %d: cannot move to a new generation (%s): %s", job.job_id, cause, exc)
            raise _Abort(grpc.StatusCode.UNAVAILABLE,
                         f"job {job.job_id}: worker {index} restarted, but the job cannot move "
                         f"to a new generation: {exc}") from None
        log.warning("job %d: generation %d -> %d: %s", job.job_id, job.generation, generation,
                    cause)
        state.generation, state.held = generation, set(state.seats)
        return generation

    def _seat(self, job_id: int, session: str) -> tuple[JobConfig, int]:
        job = self._job(job_id)
        self._sync_generation(job)
        self._expire(job_id)
        for index, seat in self._state[job_id].seats.items():
            if seat.session == session:
                seat.last_seen = self.clock()
                return job, index
        raise _Abort(grpc.StatusCode.FAILED_PRECONDITION,
                     f"job {job_id}: not joined (or the seat's lease ran out); join again")

    def _authenticate(self, job_id: int, context) -> None:
        """Refuse (UNAUTHENTICATED) a request without ``job_id``'s token; NOT_FOUND for a job
        that does not exist."""
        self._job(job_id)
        expected = self.tokens().get(job_id)
        if not expected:
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED,
                         f"job {job_id} has no token yet: issue one with 'hina-ctl job token "
                         f"{job_id}'")
        given = _bearer_token(context.invocation_metadata())
        if given is None:
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED,
                         f"job {job_id}: no token: send the job's token as metadata "
                         f"'{AUTH_METADATA_KEY}: Bearer TOKEN' (hina-worker --token-file FILE or "
                         "$HINA_JOB_TOKEN)")
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"),
                                   expected.encode("utf-8")):
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED, f"job {job_id}: wrong token")

    def _run(self, context, request, what: str, body):
        try:
            self._authenticate(request.job_id, context)
            return body()
        except _Abort as exc:
            log.info("%s refused (peer %s): %s", what, context.peer(), exc.message)
            context.abort(exc.code, exc.message)
        except ConfigError as exc:            # the state or tokens file went bad under us
            log.warning("%s failed: %s", what, exc)
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))

    # -- RPCs ------------------------------------------------------------------------------
    def Join(self, request, context):
        return self._run(context, request, "join", lambda: self._join(request))

    def _join(self, request) -> pb.JoinReply:
        with self._cond:
            job = self._job(request.job_id)
            self._expire(request.job_id)
            seats = self._state[request.job_id].seats
            if request.ip:
                key = f"{request.ip}:{request.udp_port}"
                index = next((i for i, w in enumerate(job.workers) if w.key == key), None)
                if index is None:
                    raise _Abort(grpc.StatusCode.NOT_FOUND,
                                 f"job {job.job_id} has no worker {key} "
                                 f"(workers: {', '.join(w.key for w in job.workers)})")
                if index in seats:
                    raise _Abort(grpc.StatusCode.ALREADY_EXISTS,
                                 f"job {job.job_id}: worker {index} ({key}) has joined already "
                                 f"({seats[index].name})")
            else:
                index = next((i for i in range(len(job.workers)) if i not in seats), None)
                if index is None:
                    raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"job {job.job_id}: all {len(job.workers)} seats are taken")
            name = request.name[:_NAME_MAX] or "?"
            state = self._sync_generation(job)
            generation = job.generation
            if index in state.held and self.generation_bumper is not None:
                generation = self._bump(job, index, name)
            state.held.add(index)
            session = secrets.token_hex(8)
            seats[index] = _Seat(session, name, self.clock())
            log.info("job %d: worker %d joined (%s), generation %d", job.job_id, index, name,
                     generation)
            self._cond.notify_all()
            return _join_reply(job, index, session, self.lease_s, generation)

    def Barrier(self, request, context):
        return self._run(context, request, "barrier", lambda: self._barrier(request, context))

    def _barrier(self, request, context) -> pb.BarrierReply:
        timeout = request.timeout_s or DEFAULT_BARRIER_TIMEOUT_S
        if not (math.isfinite(timeout) and timeout > 0):
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                         f"barrier {request.name!r}: timeout_s={request.timeout_s}: must be a "
                         "finite number of seconds > 0 (0: the default)")
        deadline = self.clock() + timeout
        with self._cond:
            job, me = self._seat(request.job_id, request.session)
            state = self._state[job.job_id]
            barrier = state.barriers.setdefault(request.name, _Barrier())
            generation = barrier.generation
            barrier.arrived.add(me)
            while True:
                if barrier.generation != generation:
                    broken = barrier.outcome.get(generation)
                    if broken:
                        raise _Abort(grpc.StatusCode.ABORTED, f"barrier {request.name!r} of "
                                                              f"job {job.job_id} broken: {broken}")
                    return pb.BarrierReply(generation=barrier.generation)
                if len(barrier.arrived) == len(job.workers) and \
                        len(state.seats) == len(job.workers):
                    barrier.outcome[generation] = None
                    barrier.generation += 1
                    barrier.arrived.clear()
                    self._cond.notify_all()
                    return pb.BarrierReply(generation=barrier.generation)
                now = self.clock()
                if now >= deadline or not context.is_active():
                    barrier.arrived.discard(me)
                    missing = sorted(set(range(len(job.workers))) - barrier.arrived - {me})
                    raise _Abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                 f"barrier {request.name!r} of job {job.job_id}: timed out after "
                                 f"{timeout:g}s waiting for workers {missing}")
                for index in barrier.arrived:          # waiting is being alive
                    if index in state.seats:
                        state.seats[index].last_seen = now
                self._expire(job.job_id)
                if me not in state.seats:
                    raise _Abort(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"job {job.job_id}: this worker's seat was freed")
                self._cond.wait(min(_WAIT_TICK_S, deadline - now))

    def Leave(self, request, context):
        def leave():
            with self._cond:
                job, index = self._seat(request.job_id, request.session)
                self._free_seat(job.job_id, index, "left")
                return pb.LeaveReply()
        return self._run(context, request, "leave", leave)

    def Heartbeat(self, request, context):
        def beat():
            with self._cond:
                self._seat(request.job_id, request.session)
                return pb.HeartbeatReply(generation=self._state[request.job_id].generation)
        return self._run(context, request, "heartbeat", beat)


def _join_reply(job: JobConfig, index: int, session: str, lease_s: float,
                generation: int) -> pb.JoinReply:
    w = job.workers[index]
    link = pb.Link(kind=pb.Link.TUNNEL if w.tunnel_local else pb.Link.UDP,
                   tunnel_local=w.tunnel_local, tunnel_switch=w.tunnel_switch)
    codec = pb.CodecParams(name=job.codec, lane_op=job.lane_op,
                           thc_table=list(job.thc_table or ()),
                           thc_granularity=job.thc_granularity, rht_seed=job.rht_seed,
                           sketch=pb.SketchShape(rows=job.sketch_rows,
                                                 columns=job.sketch_columns,
                                                 seed=job.sketch_seed, k=job.sketch_k,
                                                 k_fraction=job.sketch_k_fraction,
                                                 sketch_bits=job.sketch_bits,
                                                 value_bits=job.value_bits,
                                                 value_blocks=job.value_blocks,
                                                 rotate=job.sketch_rotate))
    return pb.JoinReply(
        job_id=job.job_id, worker_index=index, n_workers=len(job.workers), n_slots=job.n_slots,
        words=job.words, session=session, lease_s=lease_s, codec=codec, link=link,
        generation=generation,
        me=pb.Endpoint(mac=w.mac, ip=w.ip, udp_port=w.udp_port),
        switch=pb.Endpoint(mac=job.switch_mac, ip=job.switch_ip, udp_port=P.UDP_PORT_BASE))


def serve(jobs: Callable[[], dict[int, JobConfig]], address: str,
          lease_s: float = DEFAULT_LEASE_S, *, tokens: Callable[[], Mapping[int, str]],
          tls: Optional[ServerTls] = None,
          generation_bumper: Optional[Callable[[int, str], int]] = None) -> grpc.Server:
    """Start the job service on ``address`` (``host:port``); returns the started server.

    Args:
        jobs: the installed jobs by id (:class:`StateFileJobs`).
        address: ``host:port`` to listen on.
        lease_s: seconds without a request before a worker's seat is freed.
        tokens: each job's token by job id (:class:`controller.tokens.TokenStore`).
        tls: serve TLS only (with its client CA: mutual TLS); ``None``: plaintext.
        generation_bumper: as :class:`JobService` (``hina-ctl serve``: a
            :class:`controller.restarts.GenerationBumper`).

    Raises:
        RuntimeError: the address cannot be bound.
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=_SERVER_THREADS,
                                                    thread_name_prefix="jobservice"))
    servicer = JobService(jobs, tokens, lease_s, generation_bumper=generation_bumper)
    pb_grpc.add_JobServiceServicer_to_server(servicer, server)
    try:
        port = (server.add_secure_port(address, tls.credentials()) if tls is not None
                else server.add_insecure_port(address))
    except RuntimeError:
        port = 0
    if port == 0:
        raise RuntimeError(f"cannot listen on {address} (in use, or not a local address)")
    server.start()
    server.servicer = servicer
    return server
