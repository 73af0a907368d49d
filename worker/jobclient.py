"""The worker side of the controller's job service (``hina/jobservice.proto``).

A worker agent joins its job, gets its seat (worker index, its own address as the switch admits
it, the switch's address, the link to use, the codec's parameters), waits at a barrier until every
worker is there, aggregates, and leaves. This module never imports ``controller``: the wire
definitions are in ``hina/``.

Every request carries the job's token (``hina-ctl job token J`` prints it) as gRPC metadata
``authorization: Bearer TOKEN``: from ``token=``, else ``token_file=``, else ``$HINA_JOB_TOKEN``.
With ``tls=`` (:class:`hina.tls.ClientTls`) the client speaks TLS and verifies the service's
certificate, and shows its own where the service wants one.

Example::

    >>> with JobClient("127.0.0.1:50051", token_file="job1.token") as client:  # doctest: +SKIP
    ...     seat = client.join(job_id=1)
    ...     client.barrier("start")
    ...     transport = seat.transport()
    ...     mean = allreduce(grad, seat.codec(), transport)
"""
from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import grpc

from hina.generated import jobservice_pb2 as pb
from hina.generated import jobservice_pb2_grpc as pb_grpc
from hina.tls import ClientTls, open_channel, wait_ready

__all__ = ["JobServiceError", "CodecParams", "Seat", "JobClient", "join", "resolve_token",
           "TOKEN_ENV"]

log = logging.getLogger("hina.worker")

_CONNECT_TIMEOUT_S = 10.0
_RPC_TIMEOUT_S = 10.0
_SEAT_POLL_S = 0.1          # how often join(wait_s=...) asks again for a taken seat
#: Environment variable holding the job's token (when neither ``--token`` nor ``--token-file``).
TOKEN_ENV = "HINA_JOB_TOKEN"
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/=")


class JobServiceError(RuntimeError):
    """The job service refused or could not be reached; ``str()`` is one line.

    Attributes:
        code: the gRPC status code name.
    """

    def __init__(self, message: str, code: str = "UNKNOWN"):
        super().__init__(message)
        self.code = code


def _wrap(exc: grpc.RpcError, what: str) -> JobServiceError:
    code = exc.code().name if exc.code() else "UNKNOWN"
    return JobServiceError(f"{what}: {exc.details() or code}", code)


def resolve_token(token: Optional[str] = None,
                  token_file: Optional[str] = None) -> Optional[str]:
    """The job's token: ``token``, else the first line of ``token_file``, else ``$HINA_JOB_TOKEN``
    (``None`` when there is none: the service will refuse).

    Raises:
        ValueError: both given, an unreadable or empty file, or a token with characters a token
            never has (``hina-ctl`` issues ``[A-Za-z0-9_-]``).
    """
    if token and token_file:
        raise ValueError("give the job's token with --token or --token-file, not both")
    what = "--token"
    if token_file:
        what = f"--token-file {token_file}"
        try:
            token = Path(token_file).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{what}: {getattr(exc, 'strerror', None) or exc}") from None
        if not token:
            raise ValueError(f"{what}: the file is empty")
    elif not token:
        token, what = os.environ.get(TOKEN_ENV) or None, f"${TOKEN_ENV}"
    if token is not None and not set(token) <= _TOKEN_CHARS:
        raise ValueError(f"{what}: not a job token (expected letters, digits, '-' and '_', as "
                         "'hina-ctl job token' prints it)")
    return token


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


@dataclass(frozen=True)
class CodecParams:
    """The codec the job runs and the parameters every worker must share."""
    name: str
    lane_op: str
    thc_table: Optional[tuple[int, ...]]
    thc_granularity: int
    rht_seed: int
    sketch_rows: int
    sketch_columns: int
    sketch_seed: int
    # sketched_sgd only (0 elsewhere; defaults so a seat written before they existed loads)
    sketch_k: int = 0                  # candidates per bucket, or
    sketch_k_fraction: float = 0.0     # candidates as a fraction of the bucket
    sketch_bits: int = 0
    value_bits: int = 0
    value_blocks: int = 0
    sketch_rotate: int = 0
    # adaptive only: the codecs its buckets may use (empty: all)
    adaptive_choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Seat:
    """One worker's place in a job, as the job service handed it out."""
    job_id: int
    worker_index: int
    n_workers: int
    n_slots: int
    words: int
    session: str
    me: tuple[str, str, int]            # (mac, ip, udp_port)
    switch: tuple[str, str, int]
    tunnel: Optional[tuple[tuple[str, int], tuple[str, int]]]   # (local, switch) or None (UDP)
    codec_params: CodecParams
    lease_s: float
    #: the job's generation when the seat was handed out (or last re-read: JobClient.refresh)
    generation: int = 1
    #: the switch's SUM saturates, sticky at the bound (the TNA program): a result word at an
    #: int32 bound is the overflow
    sum_saturates: bool = False

    @classmethod
    def from_reply(cls, r: pb.JoinReply) -> "Seat":
        c = r.codec
        tunnel = None
        if r.link.kind == pb.Link.TUNNEL:
            tunnel = (_host_port(r.link.tunnel_local), _host_port(r.link.tunnel_switch))
        return cls(r.job_id, r.worker_index, r.n_workers, r.n_slots, r.words, r.session,
                   (r.me.mac, r.me.ip, r.me.udp_port),
                   (r.switch.mac, r.switch.ip, r.switch.udp_port), tunnel,
                   CodecParams(c.name, c.lane_op, tuple(c.thc_table) or None, c.thc_granularity,
                               c.rht_seed, c.sketch.rows, c.sketch.columns, c.sketch.seed,
                               c.sketch.k, c.sketch.k_fraction, c.sketch.sketch_bits,
                               c.sketch.value_bits, c.sketch.value_blocks, c.sketch.rotate,
                               tuple(c.adaptive_choices)),
                   r.lease_s, r.generation or 1, r.sum_saturates)

    def to_json(self) -> dict:
        """A JSON-able dict (e.g. for a child process: ``HINA_SEAT``); see :meth:`from_json`."""
        out = dataclasses.asdict(self)
        out["codec_params"] = dataclasses.asdict(self.codec_params)
        return out

    @classmethod
    def from_json(cls, data: dict) -> "Seat":
        data = dict(data)
        c = dict(data.pop("codec_params"))
        if c.get("thc_table") is not None:
            c["thc_table"] = tuple(c["thc_table"])
        c["adaptive_choices"] = tuple(c.get("adaptive_choices") or ())
        tunnel = data.pop("tunnel")
        return cls(**{**data, "me": tuple(data["me"]), "switch": tuple(data["switch"]),
                      "tunnel": None if tunnel is None else (tuple(tunnel[0]), tuple(tunnel[1])),
                      "codec_params": CodecParams(**c)})

    def job_params(self):
        """The :class:`worker.transport.JobParams` of this seat."""
        from .transport import JobParams
        return JobParams(self.job_id, self.n_workers, self.n_slots, self.words,
                         self.codec_params.thc_table, self.generation, self.sum_saturates)

    def link(self):
        """A :class:`~worker.link.FrameLink` (loopback tunnel) or :class:`~worker.link.UdpLink`."""
        from .link import Endpoint, FrameLink, UdpLink
        if self.tunnel is not None:
            return FrameLink(Endpoint.make(*self.me), Endpoint.make(*self.switch), *self.tunnel)
        # UDP: the kernel builds the frames; the switch is reached at its HINA address
        return UdpLink((self.me[1], self.me[2]), (self.switch[1], self.switch[2]))

    def transport(self, **kwargs):
        """A :class:`worker.transport.Transport` over :meth:`link` (kwargs: timers)."""
        from .transport import Transport
        return Transport(self.link(), self.job_params(), **kwargs)

    def codec(self):
        """The job's codec for this worker, built by the codec registry
        (:func:`hina.worker.codecs.registry.from_job`) from the parameters the job service sent.

        Raises:
            JobServiceError: ``UNIMPLEMENTED`` for a job of a raw lane op (no worker codec) or a
                codec this worker does not know (an older worker than the controller);
                ``FAILED_PRECONDITION`` for parameters the codec refuses.
        """
        from hina import codecs as names

        from .codecs import registry
        c = self.codec_params
        try:
            info = names.lookup(c.name)
        except names.UnknownCodecError as exc:
            raise JobServiceError(f"{exc}: is this worker older than the job's controller?",
                                  "UNIMPLEMENTED") from None
        if info.kind != "codec":
            raise JobServiceError(f"codec {c.name!r} is a raw {info.lane_op} lane op: the job "
                                  "carries integers, there is no worker-side codec",
                                  "UNIMPLEMENTED")
        try:
            return registry.from_job(c, self.n_workers, self.worker_index, words=self.words)
        except ValueError as exc:
            raise JobServiceError(f"codec {c.name}: {exc}", "FAILED_PRECONDITION") from None


class JobClient:
    """A connection to the job service; holds at most one seat.

    Args:
        address: ``host:port`` of ``hina-ctl serve``.
        timeout: seconds to wait for the service and for each request.
        heartbeat: renew the seat's lease in the background while joined.
        token: the job's token; default: ``token_file``'s, else ``$HINA_JOB_TOKEN``
            (:func:`resolve_token`).
        token_file: a file holding the job's token (``hina-ctl job token J --token-file F``).
        tls: connect with TLS (``None``: plaintext, for a service on loopback).
        incarnation: this worker's incarnation (default: a fresh random nonce). Every Join of
            this client sends it, so the job service can tell this worker joining again (after
            a restart of the service, or a lease that ran out while it lived: the job keeps its
            generation) from a new worker process taking the seat (the job moves to a new
            generation; docs/protocol.md, "Who bumps, who follows"). One client per worker
            process; a new client is a new incarnation, as a restarted process is.

    Attributes:
        incarnation: as above.

    Raises:
        JobServiceError: the service cannot be reached (UNAVAILABLE; a TLS mismatch is named).
        ValueError: a bad token or token file, or unusable TLS files.
    """

    def __init__(self, address: str, timeout: float = _CONNECT_TIMEOUT_S, heartbeat: bool = True,
                 token: Optional[str] = None, token_file: Optional[str] = None,
                 tls: Optional[ClientTls] = None, incarnation: Optional[str] = None):
        self.address, self.timeout = address, timeout
        self.incarnation = incarnation if incarnation is not None else secrets.token_hex(8)
        self.seat: Optional[Seat] = None
        self._heartbeat = heartbeat
        self._name = ""
        self._lock = threading.Lock()          # the seat: the heartbeat thread replaces it too
        self._stop = threading.Event()
        token = resolve_token(token, token_file)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = open_channel(address, tls)
        problem = wait_ready(self._channel, address, tls, timeout)
        if problem is not None:
            self._channel.close()
            raise JobServiceError(f"cannot reach the job service at {address}: {problem}",
                                  "UNAVAILABLE")
        self._stub = pb_grpc.JobServiceStub(self._channel)

    def join(self, job_id: int, ip: str = "", udp_port: int = 0, name: str = "",
             wait_s: float = 0.0) -> Seat:
        """Take a seat in ``job_id`` (the one of address ``ip:udp_port`` when given).

        Args:
            wait_s: while the seat is taken (ALREADY_EXISTS; RESOURCE_EXHAUSTED without an
                address), try again for up to this many seconds: a worker restarted after a
                crash finds its old seat leased until the lease runs out (``hina-ctl serve
                --lease``). 0: refuse at once.
        """
        name = name or f"{socket.gethostname()}:{os.getpid()}"
        deadline = time.monotonic() + wait_s
        waiting = False
        while True:
            try:
                reply = self._stub.Join(pb.JoinRequest(job_id=job_id, ip=ip, udp_port=udp_port,
                                                       name=name, incarnation=self.incarnation),
                                        timeout=self.timeout, metadata=self._metadata)
                break
            except grpc.RpcError as exc:
                taken = exc.code() in (grpc.StatusCode.ALREADY_EXISTS,
                                       grpc.StatusCode.RESOURCE_EXHAUSTED)
                if not taken or time.monotonic() >= deadline:
                    raise _wrap(exc, f"join job {job_id}") from None
                if not waiting:
                    log.warning("job %d: %s; waiting up to %gs for the seat (an earlier process "
                                "of this worker keeps it until its lease runs out)", job_id,
                                exc.details(), wait_s)
                    waiting = True
                time.sleep(min(_SEAT_POLL_S, max(0.0, deadline - time.monotonic())))
        self.seat = Seat.from_reply(reply)
        self._name = name
        log.info("joined job %d as worker %d of %d (generation %d)", job_id,
                 self.seat.worker_index, self.seat.n_workers, self.seat.generation)
        if self._heartbeat:
            self._stop.clear()
            threading.Thread(target=self._beat, daemon=True, name="jobservice-heartbeat").start()
        return self.seat

    def refresh(self) -> Seat:
        """The seat in the job's current generation (after a :class:`worker.transport.
        GenerationChanged`): a Heartbeat with this seat's session answers it (same seat: the job
        is not bumped again). When the service no longer knows the session (it restarted, or the
        lease ran out) the worker joins again at its own address with its incarnation: the same
        worker index, and the job keeps its generation (it is the same worker).

        Raises:
            JobServiceError: not joined, or the service refused or cannot be reached.
        """
        seat = self._require_seat()
        try:
            reply = self._stub.Heartbeat(pb.HeartbeatRequest(job_id=seat.job_id,
                                                             session=seat.session),
                                         timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            if exc.code() not in (grpc.StatusCode.FAILED_PRECONDITION,
                                  grpc.StatusCode.UNAVAILABLE):
                raise _wrap(exc, "refresh the seat") from None
            log.warning("job %d: seat of worker %d unknown to the job service (%s): joining "
                        "again", seat.job_id, seat.worker_index, exc.details())
            try:
                return self._rejoin(seat)
            except JobServiceError as again:     # the heartbeat thread joined again first
                current = self.seat
                if again.code == "ALREADY_EXISTS" and current is not None and \
                        current.session != seat.session:
                    return current
                raise
        with self._lock:
            if self.seat is not None and self.seat.session == seat.session:
                self.seat = dataclasses.replace(self.seat, generation=reply.generation or 1)
            seat = self.seat or seat
        return seat

    def _rejoin(self, seat: Seat) -> Seat:
        """Join ``seat``'s job again at the seat's own address (same worker index)."""
        try:
            reply = self._stub.Join(pb.JoinRequest(job_id=seat.job_id, ip=seat.me[1],
                                                   udp_port=seat.me[2], name=self._name,
                                                   incarnation=self.incarnation),
                                    timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _wrap(exc, f"join job {seat.job_id} again") from None
        with self._lock:
            self.seat = Seat.from_reply(reply)
        log.info("job %d: joined again as worker %d (generation %d)", seat.job_id,
                 self.seat.worker_index, self.seat.generation)
        return self.seat

    def _require_seat(self) -> Seat:
        if self.seat is None:
            raise JobServiceError("not joined to a job", "FAILED_PRECONDITION")
        return self.seat

    def barrier(self, name: str = "start", timeout: float = 60.0) -> int:
        """Wait until every worker of the job reached barrier ``name``; returns its generation."""
        seat = self._require_seat()
        try:
            reply = self._stub.Barrier(pb.BarrierRequest(job_id=seat.job_id, session=seat.session,
                                                         name=name, timeout_s=timeout),
                                       timeout=timeout + self.timeout,
                                       metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _wrap(exc, f"barrier {name!r}") from None
        return reply.generation

    def leave(self) -> None:
        """Give the seat back (idempotent)."""
        seat, self.seat = self.seat, None
        self._stop.set()
        if seat is None:
            return
        try:
            self._stub.Leave(pb.LeaveRequest(job_id=seat.job_id, session=seat.session),
                             timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise _wrap(exc, "leave") from None

    def _beat(self) -> None:
        """Renew the lease; follow the job's generation; join again (same address) when the
        service forgot the session (``hina-ctl serve`` restarted)."""
        seat = self.seat
        while seat is not None and not self._stop.wait(max(seat.lease_s / 3, 0.1)):
            try:
                reply = self._stub.Heartbeat(pb.HeartbeatRequest(job_id=seat.job_id,
                                                                 session=seat.session),
                                             timeout=self.timeout, metadata=self._metadata)
                generation = reply.generation or 1
                with self._lock:
                    if self.seat is seat and generation != seat.generation:
                        log.warning("job %d: the job service says generation %d (this worker "
                                    "has %d)", seat.job_id, generation, seat.generation)
                        self.seat = dataclasses.replace(seat, generation=generation)
            except grpc.RpcError as exc:
                log.warning("heartbeat failed: %s", exc.details())
                if exc.code() == grpc.StatusCode.FAILED_PRECONDITION and self.seat is seat:
                    try:
                        self._rejoin(seat)
                    except JobServiceError as again:
                        log.warning("%s", again)
                    except ValueError:      # the channel was closed under us (close()): stop
                        return
            except ValueError:              # the same
                return
            seat = self.seat

    def close(self) -> None:
        try:
            self.leave()
        except JobServiceError as exc:
            log.warning("%s", exc)
        self._channel.close()

    def __enter__(self) -> "JobClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def join(controller: str, job_id: int, ip: str = "", udp_port: int = 0,
         token: Optional[str] = None, tls: Optional[ClientTls] = None) -> tuple[JobClient, Seat]:
    """Connect to the job service at ``controller`` and join ``job_id`` (``token``, ``tls``: as
    :class:`JobClient`)."""
    client = JobClient(controller, token=token, tls=tls)
    try:
        return client, client.join(job_id, ip, udp_port)
    except BaseException:
        client.close()
        raise
