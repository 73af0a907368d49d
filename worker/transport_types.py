"""The transport's types: the link it moves frames over, its errors, the job's parameters, per-call
statistics and the retransmission timers (:mod:`hina.worker.transport` uses and re-exports them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol

import numpy as np

from hina import protocol as P

__all__ = ["Link", "TransportError", "TransportTimeout", "OverflowFlagged", "CallMismatch",
           "GenerationChanged", "JobParams", "CallStats"]


class Link(Protocol):
    """What the transport needs of a link; ``send_batch(rows)``, ``recv_batch(timeout) ->
    (rows, lengths)`` and ``prepare(messages)``/``send_prepared(prepared, rows)``
    (``worker.link``) are used where the link has them, one message per call otherwise."""
    def send(self, message: bytes) -> None: ...
    def recv(self, timeout: float) -> Optional[bytes]: ...
    def close(self) -> None: ...


class TransportError(RuntimeError):
    """The switch's answers cannot complete the call."""


class TransportTimeout(TransportError):
    """No result for a chunk within the give-up time: switch unreachable or a worker gone."""


class OverflowFlagged(TransportError):
    """The switch flagged a SUM lane overflow in a result: the sum is not usable."""


class CallMismatch(TransportError):
    """The workers of the job are not at the same call (:meth:`Transport.begin_call`'s check).

    Happens after a generation change when one worker had finished the call the others are
    still in (a result multicast split by a switch restart), or when a restarted worker resumes
    at another call than the survivors. Continuing would sum different calls' data, so the call
    is refused on every worker instead; a worker behind the others has lost the result of its
    call (``own < highest``), the others retry theirs (``worker.agent.allreduce_following``).

    Attributes:
        job_id: the job.
        own: this worker's call id.
        lowest, highest: the smallest and largest call id of the job's workers.
    """

    def __init__(self, job_id: int, own: int, lowest: int, highest: int):
        self.job_id, self.own, self.lowest, self.highest = job_id, own, lowest, highest
        super().__init__(f"job {job_id}: the workers are at calls {lowest}..{highest}, this worker "
                         f"at call {own}: the calls would mix different data, so none is made"
                         + (" (this worker's call lost its result: go on from a later call)"
                            if own < highest else ""))

    def __reduce__(self):
        return type(self), (self.job_id, self.own, self.lowest, self.highest)


class GenerationChanged(TransportError):
    """The switch answered with a NOTICE: this worker's generation is not the job's current one.

    The job was restarted (its generation bumped by the controller) and this worker belongs to
    an earlier run; its packets are dropped, so it must rejoin with the new generation.

    Attributes:
        job_id: the job.
        generation: the job's current generation, as the switch reported it.
        own_generation: the generation this worker sent.
        reason: the :class:`hina.protocol.DropReason` of the NOTICE (STALE_GENERATION).
    """

    def __init__(self, job_id: int, generation: int, own_generation: int,
                 reason: P.DropReason = P.DropReason.STALE_GENERATION):
        self.job_id, self.generation = job_id, generation
        self.own_generation, self.reason = own_generation, reason
        super().__init__(f"job {job_id}: the switch answered {reason.name}: this worker sends "
                         f"generation {own_generation}, the job is in generation {generation} "
                         "on the switch (the job was restarted: rejoin it for the current "
                         "generation)")

    def __reduce__(self):
        return type(self), (self.job_id, self.generation, self.own_generation, self.reason)


@dataclass(frozen=True)
class JobParams:
    """What a worker must know about its job (the controller's job service hands it out).

    Attributes:
        job_id: the job.
        n_workers: workers whose contributions complete a slot.
        n_slots: slots of the job (the window: at most this many chunks in flight).
        words: words per packet of the pushed program (``HINA_WORDS`` of the v1model program,
            two blocks of ``TNA_LANES`` of the TNA program): ``hina.protocol.WORKER_WORDS``.
        thc_table: the THC table installed for the job (LUT-SUM streams must use it).
        generation: the job's generation this worker belongs to (docs/protocol.md,
            "Generations"); every packet carries it, replies of another one are ignored.
        sum_saturates: the switch's SUM saturates at the int32 bounds instead of flagging an
            overflow (the TNA program), and a sum that reached a bound stays there for the rest
            of its round: a result word at a bound is the overflow signal (the transport raises
            ``OverflowFlagged`` on every worker, as for v1model's ``FLAG_OVERFLOW``), a word
            within the bounds is exact.
    """
    job_id: int
    n_workers: int
    n_slots: int
    words: int = P.WORDS
    thc_table: Optional[tuple[int, ...]] = None
    generation: int = P.FIRST_GENERATION
    sum_saturates: bool = False

    def __post_init__(self):
        if not 0 <= self.job_id <= P.MAX_JOB_ID:
            raise ValueError(f"job_id={self.job_id}: must be in [0, {P.MAX_JOB_ID}]")
        if not 1 <= self.n_workers <= P.MAX_WORKERS:
            raise ValueError(f"n_workers={self.n_workers}: must be in [1, {P.MAX_WORKERS}]")
        if not 1 <= self.n_slots <= P.SLOT_CAPACITY:
            raise ValueError(f"n_slots={self.n_slots}: must be in [1, {P.SLOT_CAPACITY}]")
        P.check_worker_words(self.words)
        P.check_generation(self.generation)


@dataclass
class CallStats:
    """Per-call statistics (the last call's are in ``Transport.last``; totals in ``.total``)."""
    chunks: int = 0
    packets_sent: int = 0
    retransmissions: int = 0
    fast_retransmissions: int = 0   # of which sent on later results, before the timeout
    results: int = 0
    duplicates: int = 0             # results for chunks already complete
    foreign: int = 0                # messages that are not results of this call
    other_generation: int = 0       # replies of this job in another generation (ignored)
    notices: int = 0                # NOTICEs that did not change this worker's generation
    bad_count: int = 0              # results whose contributor count is not the worker count
    bytes_sent: int = 0             # HINA messages (header + payload), without L2-L4 headers
    bytes_received: int = 0
    seconds: float = 0.0

    def add(self, other: "CallStats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def goodput_bytes_per_s(self) -> float:
        return self.bytes_sent / self.seconds if self.seconds else 0.0


@dataclass
class _Timers:
    """Retransmission timeout estimation (RFC 6298 style) with exponential backoff.

    Until the first RTT sample the timeout is ``initial_rto``, conservative as in RFC 6298: a
    full window of every worker queues in the switch, and a timeout shorter than that queue
    retransmits the whole window (Karn's rule then leaves no sample to learn from).

    ``max_rto`` caps the backoff, not what the round trip measures: where the round trip
    itself is longer (a slow link or a slow switch with a window of frames queued in front of
    it), a timeout held at ``max_rto`` would resend every chunk that is still queued, and the
    resends queue behind them on the same slow path (measured: bench_tta.py on BMv2 at 0.05
    Mbit/s doubled THC's bytes per step with the timeout held at 1 s). So the timeout follows
    ``srtt + 4 rttvar`` up to ``ceiling`` (the transport's ``give_up_s`` / 2, so that a
    chunk is still resent before the call gives up), backoff goes up to the larger of
    ``max_rto`` and that, and an expired timeout doubles the timeout of later chunks too
    until the next sample (:meth:`expired`).
    """
    min_rto: float
    max_rto: float
    initial_rto: float
    ceiling: float = float("inf")
    srtt: Optional[float] = None
    rttvar: float = 0.0
    rto: float = field(default=0.0)

    def __post_init__(self):
        self.rto = min(self.max_rto, max(self.min_rto, self.initial_rto))

    def sample(self, rtt: float) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = rtt, rtt / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
            self.srtt = 0.875 * self.srtt + 0.125 * rtt
        self.rto = min(self.ceiling, max(self.min_rto, self.srtt + 4 * self.rttvar))

    def expired(self) -> None:
        """A timeout expired: back the timer off for the chunks sent from now on too (RFC 6298
        5.5), so that a path slower than the timeout, whose chunks are all resent before their
        results arrive (Karn's rule then gives no sample), still lets a chunk through once and
        measure the path; the next sample sets the timeout again. Once the path has been
        measured, this doubling stops at the larger of ``max_rto`` and twice the smoothed round
        trip: a switch that stopped answering (restarting, say) is then still probed about as
        often as before, so the job resumes soon after it is back."""
        limit = self.ceiling
        if self.srtt is not None:
            limit = min(limit, max(self.max_rto, 2 * self.srtt))
        self.rto = max(self.rto, min(limit, self.rto * 2))

    def backoff(self, attempts):
        """The timeout after ``attempts`` transmissions (an int or a numpy array of them):
        ``rto * 2 ** (attempts - 1)`` (at most 64x), capped at ``max(max_rto, rto)``."""
        return np.minimum(self.rto * 2.0 ** np.minimum(np.asarray(attempts) - 1, 6),
                          max(self.max_rto, self.rto))
