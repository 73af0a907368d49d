"""The worker-facing gRPC job service (``hina/jobservice.proto``; ``hina-ctl serve``).

Workers join a job and get what they need to reach the switch: their worker index, their address
as the switch admits it, the switch's address, the link (UDP socket or loopback tunnel), slots,
words and the codec's parameters (THC table and RHT seed, sketch shape and seed, sketched_sgd's
k and field widths). A named barrier
releases every worker once all of the job's seats are taken and every worker has reached it, or
passed it already: each seat's holder counts its passes of each barrier name, so a worker that
took the seat of a running job (it restarted) passes at once a barrier every other worker passed
(``hina-worker run``'s ``start``), while a whole job run again (every holder new) meets there.

Seats are leased: any request renews the lease, and a worker silent for ``lease_s`` seconds loses
its seat (as does one that calls Leave). A barrier that was waiting for a worker who leaves is
broken: its waiters get ABORTED and may join again. A barrier that is not complete within its
timeout answers DEADLINE_EXCEEDED, naming the missing workers.

The service reads jobs from a callable (the controller's state file, reloaded when it changes),
so ``hina-ctl job create`` in another process is seen by a running ``hina-ctl serve`` (which
holds the primary role on the switch: that command writes beside it with a higher
``--election-id``).

Restarts (docs/reliability.md, "Restarts"): every Join carries the worker's *incarnation* (a
random nonce of the worker process, :attr:`worker.jobclient.JobClient.incarnation`). A seat taken
by another incarnation than the one that already held it in the job's current generation (its
worker left, or crashed and its lease ran out, or the whole job runs again) moves the job to its
next generation before the Join is answered, through the ``generation_bumper`` that ``hina-ctl
serve`` gives (:meth:`controller.restarts.SwitchKeeper.bump`: the switch's admission entries and
the state file). The same incarnation joining again (the service restarted, or the worker's
lease ran out while it lived) keeps the generation: it is the same process, with its transport's
sequence where the others expect it. One re-run of all N workers bumps once (the first seat
taken again); Join and Heartbeat replies carry the generation, so workers of the old generation
re-read it with their session (no bump). Without a bumper (tests without a switch) nothing is
bumped. A Join without an incarnation (an older client) is never the same worker again.

The holders survive a restart of the service: with a ``seat_store`` (:class:`StateFileJobs`
brings one: the state file's seat records, :class:`controller.state.SeatRecord`) every change of
a seat's holder is written before the Join is answered, and a restarted service starts with the
seats that were held: each is kept for its incarnation for one lease from the service's start
(its worker joins again within a heartbeat interval), then freed as a timed-out seat. So a
worker that crashed while the service was down and comes back as a new process moves the job to
a new generation, as it would have with the service up.

Every request must carry its job's token (``controller/tokens.py``) as gRPC metadata
``authorization: Bearer TOKEN``: without it, or with another, the answer is UNAUTHENTICATED and
nothing about the job is told or changed (an unknown job is still NOT_FOUND). Tokens are compared
in constant time (:func:`hmac.compare_digest`). With :class:`hina.tls.ServerTls` the service
speaks TLS only, and with a client CA only to clients with a certificate it signed.
"""
from __future__ import annotations

import dataclasses
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
from .state import ControllerState, SeatHolder, SeatRecord

__all__ = ["JobService", "StateFileJobs", "StateFileSeats", "serve", "DEFAULT_LEASE_S",
           "AUTH_METADATA_KEY", "INCARNATION_MAX"]

log = logging.getLogger("hina.controller.jobservice")

DEFAULT_LEASE_S = 30.0
DEFAULT_BARRIER_TIMEOUT_S = 60.0
_WAIT_TICK_S = 0.25            # how often a waiting barrier re-checks leases and cancellation
_SERVER_THREADS = 64           # each waiting Barrier holds one
#: The metadata key of a worker's credential (``authorization: Bearer TOKEN``, as HTTP has it).
AUTH_METADATA_KEY = "authorization"
_BEARER = "bearer"
_NAME_MAX = 128               # characters of a worker's free-text name kept for the logs
#: Longest incarnation (``JoinRequest.incarnation``) accepted, in printable ASCII characters.
INCARNATION_MAX = 64


class StateFileSeats:
    """Who holds each job's seats, in the controller's state file (``seat_store`` of
    :class:`JobService`): :attr:`controller.state.ControllerState.seats`."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def load(self, job_id: int) -> Optional[SeatRecord]:
        """The job's record, ``None`` when there is none.

        Raises:
            ConfigError: the file is unreadable."""
        return ControllerState.load(self.path).seats.get(job_id)

    def save(self, job_id: int, record: SeatRecord) -> None:
        """Write the job's record (atomically, the rest of the file kept).

        Raises:
            ConfigError, OSError: the file cannot be read or written, or lost the job."""
        ControllerState.save_seats(self.path, job_id, record)


class StateFileJobs:
    """Jobs from the controller's state file, re-read whenever the file changes; its
    ``seat_store`` keeps the seats' holders in the same file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.seat_store = StateFileSeats(self.path)
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
    session: Optional[str]        # None: restored from the seat record after a restart
    name: str
    last_seen: float
    incarnation: str = ""


@dataclass
class _Barrier:
    # seat -> the release it waits for (how many times this barrier released its holder before)
    waiting: dict[int, int] = field(default_factory=dict)
    broken: dict[int, str] = field(default_factory=dict)    # seat -> why its wait was broken


@dataclass
class _JobSeats:
    seats: dict[int, _Seat] = field(default_factory=dict)
    barriers: dict[str, _Barrier] = field(default_factory=dict)
    generation: Optional[int] = None        # the job's generation the holders are of
    # seat -> who took it in that generation (and why it was freed since): the seat record
    holders: dict[int, SeatHolder] = field(default_factory=dict)

    def record(self) -> SeatRecord:
        return SeatRecord(self.generation or 0, dict(self.holders))


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _check_incarnation(text: str) -> str:
    if len(text) > INCARNATION_MAX or any(not 0x21 <= ord(c) <= 0x7E for c in text):
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                     f"incarnation: at most {INCARNATION_MAX} printable ASCII characters without "
                     "spaces")
    return text


def _same_worker(holder: SeatHolder, incarnation: str) -> bool:
    """Is ``incarnation`` the worker that took the seat (and did not give it back since)?"""
    return bool(incarnation) and holder.incarnation == incarnation and not holder.left


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
        seat_store: keeps each job's seat holders across restarts of the service
            (``load(job_id) -> SeatRecord | None``, ``save(job_id, record)``; e.g.
            :class:`StateFileSeats`). Default: ``jobs.seat_store`` when ``jobs`` has one
            (:class:`StateFileJobs`), else none (the holders live in memory only).
    """

    def __init__(self, jobs: Callable[[], dict[int, JobConfig]],
                 tokens: Callable[[], Mapping[int, str]], lease_s: float = DEFAULT_LEASE_S,
                 clock: Callable[[], float] = time.monotonic,
                 generation_bumper: Optional[Callable[[int, str], int]] = None,
                 seat_store=None):
        if lease_s <= 0:
            raise ValueError(f"lease_s={lease_s}: must be > 0")
        self.jobs, self.tokens, self.lease_s, self.clock = jobs, tokens, lease_s, clock
        self.generation_bumper = generation_bumper
        self.seat_store = seat_store if seat_store is not None else getattr(jobs, "seat_store",
                                                                            None)
        self._started = clock()
        self._cond = threading.Condition()
        self._state: dict[int, _JobSeats] = {}

    # -- helpers (call with the lock held) ------------------------------------------------
    def _job(self, job_id: int) -> JobConfig:
        job = self.jobs().get(job_id)
        if job is None:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"job {job_id} does not exist")
        return job

    def _persist(self, job_id: int, state: _JobSeats, strict: bool = False) -> None:
        """Write the job's seat record (``strict``: raise UNAVAILABLE when it cannot be)."""
        if self.seat_store is None:
            return
        try:
            self.seat_store.save(job_id, state.record())
        except (ConfigError, OSError) as exc:
            log.warning("job %d: cannot record its seats: %s", job_id, exc)
            if strict:
                raise _Abort(grpc.StatusCode.UNAVAILABLE,
                             f"job {job_id}: cannot record the seat: {exc}") from None

    def _restore(self, job: JobConfig) -> _JobSeats:
        """The job's seats as the seat record left them (the service restarted): each seat
        still held then is kept for its incarnation, leased from the service's start."""
        state = _JobSeats(generation=job.generation)
        record = None
        if self.seat_store is not None:
            try:
                record = self.seat_store.load(job.job_id)
            except ConfigError as exc:
                log.warning("job %d: cannot read its seat record: %s", job.job_id, exc)
        if record is None:
            return state
        state.generation, state.holders = record.generation, dict(record.holders)
        for index, holder in record.holders.items():
            if not holder.freed and index < len(job.workers):
                state.seats[index] = _Seat(None, holder.name, self._started, holder.incarnation)
        if state.seats:
            log.info("job %d: seats %s held before the job service restarted are kept %gs for "
                     "their workers (%s)", job.job_id, sorted(state.seats), self.lease_s,
                     ", ".join(state.seats[i].name for i in sorted(state.seats)))
        return state

    def _job_state(self, job: JobConfig) -> _JobSeats:
        """The job's seats, restored at first use, following a generation change made elsewhere
        (``hina-ctl job bump-generation``: the seats held now are the new generation's)."""
        state = self._state.get(job.job_id)
        if state is None:
            state = self._state[job.job_id] = self._restore(job)
        if state.generation != job.generation:
            state.generation = job.generation
            self._seated_hold(state)
            self._persist(job.job_id, state)
        return state

    @staticmethod
    def _holder(state: _JobSeats, index: int, incarnation: str, name: str) -> SeatHolder:
        """Seat ``index``'s holder record for this worker: the one it has (with its barrier
        counts), or a new one."""
        holder = state.holders.get(index)
        if holder is not None and _same_worker(holder, incarnation):
            return dataclasses.replace(holder, name=name, freed="")
        return SeatHolder(incarnation, name)

    def _seated_hold(self, state: _JobSeats) -> None:
        """A new generation: the seats held now are its holders (no one else's)."""
        state.holders = {i: self._holder(state, i, seat.incarnation, seat.name)
                         for i, seat in state.seats.items()}

    def _free_seat(self, job_id: int, index: int, why: str) -> None:
        state = self._state[job_id]
        seat = state.seats.pop(index, None)
        if seat is None:
            return
        log.info("job %d: worker %d (%s) %s", job_id, index, seat.name, why)
        state.holders[index] = dataclasses.replace(
            self._holder(state, index, seat.incarnation, seat.name), freed=why,
            left=why == "left")
        self._persist(job_id, state)
        for barrier in state.barriers.values():
            for waiter in barrier.waiting:   # someone waits for a worker who is gone: break it
                barrier.broken[waiter] = f"worker {index} {why}"
            barrier.waiting.clear()
        self._cond.notify_all()

    def _expire(self, job_id: int) -> None:
        state = self._state[job_id]
        now = self.clock()
        for index, seat in list(state.seats.items()):
            if now - seat.last_seen > self.lease_s:
                self._free_seat(job_id, index,
                                f"timed out (no request for {self.lease_s:g}s)"
                                if seat.session is not None else
                                f"timed out (did not join again within {self.lease_s:g}s of "
                                "the job service's restart)")

    def _bump(self, job: JobConfig, state: _JobSeats, index: int, name: str) -> int:
        """Move ``job`` to its next generation because seat ``index`` is taken again."""
        holder = state.holders.get(index)
        gone = (f"{holder.name} {holder.freed or 'gone'}" if holder is not None
                else "its earlier worker is gone")
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
        state.generation = generation
        self._seated_hold(state)
        return generation

    def _seat(self, job_id: int, session: str) -> tuple[JobConfig, int]:
        job = self._job(job_id)
        self._job_state(job)
        self._expire(job_id)
        for index, seat in self._state[job_id].seats.items():
            if seat.session is not None and seat.session == session:
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
            incarnation = _check_incarnation(request.incarnation)
            state = self._job_state(job)
            self._expire(request.job_id)
            seats = state.seats

            def takes_back(seat: _Seat) -> bool:
                """A seat restored after a restart of the service, joined by its worker."""
                return seat.session is None and bool(incarnation) and \
                    seat.incarnation == incarnation

            if request.ip:
                key = f"{request.ip}:{request.udp_port}"
                index = next((i for i, w in enumerate(job.workers) if w.key == key), None)
                if index is None:
                    raise _Abort(grpc.StatusCode.NOT_FOUND,
                                 f"job {job.job_id} has no worker {key} "
                                 f"(workers: {', '.join(w.key for w in job.workers)})")
                if index in seats and not takes_back(seats[index]):
                    raise _Abort(grpc.StatusCode.ALREADY_EXISTS,
                                 f"job {job.job_id}: worker {index} ({key}) has joined already "
                                 f"({seats[index].name})")
            else:
                index = next((i for i, seat in seats.items() if takes_back(seat)), None)
                if index is None:
                    index = next((i for i in range(len(job.workers)) if i not in seats), None)
                if index is None:
                    raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"job {job.job_id}: all {len(job.workers)} seats are taken")
            name = request.name[:_NAME_MAX] or "?"
            generation = job.generation
            before = state.holders.get(index)
            bumped = False
            if before is not None and not _same_worker(before, incarnation) and \
                    self.generation_bumper is not None:
                generation = self._bump(job, state, index, name)
                bumped = True
            session = secrets.token_hex(8)
            previous_seat = seats.get(index)
            seats[index] = _Seat(session, name, self.clock(), incarnation)
            state.holders[index] = self._holder(state, index, incarnation, name)
            try:
                self._persist(job.job_id, state, strict=True)
            except _Abort:        # not recorded: not taken (a restart must not forget it)
                if previous_seat is None:
                    seats.pop(index)
                else:
                    seats[index] = previous_seat
                if before is None or bumped:
                    state.holders.pop(index, None)
                else:
                    state.holders[index] = before
                raise
            log.info("job %d: worker %d joined (%s%s), generation %d", job.job_id, index, name,
                     ", the same worker again" if before is not None and not bumped and
                     _same_worker(before, incarnation) else "", generation)
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
        name = request.name
        with self._cond:
            job, me = self._seat(request.job_id, request.session)
            state = self._state[job.job_id]
            session = state.seats[me].session
            barrier = state.barriers.setdefault(name, _Barrier())

            def passed(index: int) -> int:
                holder = state.holders.get(index)
                return holder.barriers.get(name, 0) if holder is not None else 0

            def ready(index: int, release: int) -> bool:
                """Seat ``index`` does not hold up release ``release``: its worker waits for it
                too, or passed it already (a worker that took a seat of a running job is
                released at once by a barrier every other worker passed)."""
                return barrier.waiting.get(index) == release or passed(index) > release

            mine = passed(me)
            barrier.waiting[me] = mine
            barrier.broken.pop(me, None)
            while True:
                broken = barrier.broken.pop(me, None)
                if broken:
                    raise _Abort(grpc.StatusCode.ABORTED,
                                 f"barrier {name!r} of job {job.job_id} broken: {broken}")
                seat = state.seats.get(me)
                if seat is None or seat.session != session:
                    barrier.waiting.pop(me, None)
                    raise _Abort(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"job {job.job_id}: this worker's seat was freed")
                if me not in barrier.waiting and passed(me) > mine:
                    return pb.BarrierReply(generation=passed(me))     # released by another
                if len(state.seats) == len(job.workers) and \
                        all(ready(i, mine) for i in range(len(job.workers))):
                    for index, release in list(barrier.waiting.items()):
                        if release == mine:
                            del barrier.waiting[index]
                            holder = state.holders[index]
                            state.holders[index] = dataclasses.replace(
                                holder, barriers={**holder.barriers, name: mine + 1})
                    self._persist(job.job_id, state)
                    self._cond.notify_all()
                    return pb.BarrierReply(generation=mine + 1)
                now = self.clock()
                if now >= deadline or not context.is_active():
                    barrier.waiting.pop(me, None)
                    missing = [i for i in range(len(job.workers))
                               if i != me and not ready(i, mine)]
                    raise _Abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                 f"barrier {name!r} of job {job.job_id}: timed out after "
                                 f"{timeout:g}s waiting for workers {missing}")
                for index in barrier.waiting:          # waiting is being alive
                    if index in state.seats:
                        state.seats[index].last_seen = now
                self._expire(job.job_id)
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
                return pb.HeartbeatReply(generation=self._state[request.job_id].generation or 0)
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
                                                 rotate=job.sketch_rotate),
                           adaptive_choices=list(job.adaptive_choices))
    return pb.JoinReply(
        job_id=job.job_id, worker_index=index, n_workers=len(job.workers), n_slots=job.n_slots,
        words=job.words, session=session, lease_s=lease_s, codec=codec, link=link,
        generation=generation, sum_saturates=job.sum_saturates,
        me=pb.Endpoint(mac=w.mac, ip=w.ip, udp_port=w.udp_port),
        switch=pb.Endpoint(mac=job.switch_mac, ip=job.switch_ip, udp_port=P.UDP_PORT_BASE))


def serve(jobs: Callable[[], dict[int, JobConfig]], address: str,
          lease_s: float = DEFAULT_LEASE_S, *, tokens: Callable[[], Mapping[int, str]],
          tls: Optional[ServerTls] = None,
          generation_bumper: Optional[Callable[[int, str], int]] = None,
          seat_store=None) -> grpc.Server:
    """Start the job service on ``address`` (``host:port``); returns the started server.

    Args:
        jobs: the installed jobs by id (:class:`StateFileJobs`).
        address: ``host:port`` to listen on.
        lease_s: seconds without a request before a worker's seat is freed.
        tokens: each job's token by job id (:class:`controller.tokens.TokenStore`).
        tls: serve TLS only (with its client CA: mutual TLS); ``None``: plaintext.
        generation_bumper: as :class:`JobService` (``hina-ctl serve``:
            :meth:`controller.restarts.SwitchKeeper.bump`).
        seat_store: as :class:`JobService` (default: ``jobs.seat_store``, the state file's seat
            records for :class:`StateFileJobs`).

    Raises:
        RuntimeError: the address cannot be bound.
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=_SERVER_THREADS,
                                                    thread_name_prefix="jobservice"))
    servicer = JobService(jobs, tokens, lease_s, generation_bumper=generation_bumper,
                          seat_store=seat_store)
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
