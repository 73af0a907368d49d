"""Reliable streaming of lane data through the switch (the codec steps over it: :mod:`worker.collective`).

The transport follows the protocol's self-clocked slot window (``docs/protocol.md``): chunk
``k`` of the job's sequence goes to ``slot = k mod n_slots``, pool ``(k div n_slots) mod 2``, and
is sent only once the result of chunk ``k - n_slots`` (same slot, other pool copy) is in. Every
chunk in flight has a retransmission timer (adaptive, with exponential backoff); a retransmission
carries the RETRANSMIT flag, and the switch answers it with the stored result when the slot is
complete. Results are checked (job, message type, op, generation, sequence within the window)
and duplicates, late copies and replies of another generation of the job are ignored (counted).
When no result arrives for ``give_up_s`` seconds the call fails with :class:`TransportTimeout`,
naming the chunk: a switch that is gone or a worker that died never hangs the others. When the
switch answers with a NOTICE that this worker's generation is not the job's (the job was
restarted without it), the call fails at once with :class:`GenerationChanged`.

Example::

    >>> link = FrameLink(me, switch, ("127.0.0.1", 0), ("127.0.0.1", 9001))   # doctest: +SKIP
    >>> t = Transport(link, JobParams(job_id=1, n_workers=4, n_slots=32))      # doctest: +SKIP
    >>> total = t.reduce(P.Op.SUM, np.arange(1024, dtype=np.int32))            # doctest: +SKIP
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Optional

import numpy as np

from hina import blocksparse as B
from hina import protocol as P
from hina.framing import SMALL_BATCH

from .packetizer import (ChunkLayout, build_aggregates, layout_for, parse_header,
                         result_payload_dtype)
from .sharedlink import SharedLink
from .transport_types import (CallMismatch, CallStats, GenerationChanged, JobParams, Link,
                              OverflowFlagged, TransportError, TransportTimeout, _Timers)

__all__ = ["JobParams", "Transport", "SharedLink", "TransportError", "TransportTimeout",
           "OverflowFlagged", "GenerationChanged", "CallMismatch", "CallStats"]

log = logging.getLogger("hina.worker")

_U32 = 1 << 32
_SEQ_AT = P.HEADER_DTYPE.fields["seq"][1]     # offset of the header's seq
#: Chunks retransmitted per expiry of the retransmission timer.
_RETRANSMIT_BURST = 8
#: Results of later chunks after which a missing chunk is presumed lost and resent.
_FAST_RETRANSMIT_AFTER = 3
#: Interrupt coalescing: a batch of fewer results than this, with more chunks in flight, waits
#: up to _COALESCE_S for more (bench/bench_worker_io.py: a batch costs about what one result
#: does, so this cuts the worker's CPU per packet when results trickle in from a slow switch).
_COALESCE_ENOUGH = 8
_COALESCE_S = 0.0005

#: The bounds where a saturating switch's sums stick (JobParams.sum_saturates).
_INT32_MIN, _INT32_MAX = P.SATURATED_SUM
# numpy dtype a stream's data has on the wire side (before big-endian conversion)
_NP_UP = {P.Op.SUM: np.int32, P.Op.LUT_SUM: np.uint8, P.Op.MAX: np.uint32, P.Op.OR: np.uint32,
          P.Op.BLOCK_SUM: np.int32}
#: Block of the padding round a block-sparse call adds to a slot to keep its pool copies
#: alternating across calls (Transport.reduce_block_sparse).
PAD_BLOCK = P.BLOCK_END - 1

class Transport:
    """Streams lane streams through the switch for one worker of one job.

    Args:
        link: a :class:`~worker.link.FrameLink` or :class:`~worker.link.UdpLink`.
        job: the job's parameters.
        min_rto: smallest retransmission timeout (seconds). 0.2 s, Linux TCP's RTO_MIN: with
            the switch the bottleneck, a full window queues in it and the round-trip time sits
            near the timeout, so a smaller floor turns scheduling jitter into spurious
            retransmissions that the switch must also process (measured with
            ``bench/bench_allreduce.py --min-rto``: 0.05 s cost 2,978 retransmissions per worker
            and 1.8x the time of 0.2 s for THC on 1M coordinates). Loss is mostly recovered by
            fast retransmit, which does not wait for the timeout.
        max_rto: largest retransmission timeout after backoff (seconds), unless the measured
            round trip sets a longer one (up to ``give_up_s`` / 2; ``_Timers`` says why).
        initial_rto: timeout before the first round-trip sample (seconds).
        give_up_s: fail when a chunk has had no result for this long.
        first_seq: the job's sequence number to start from (all workers of a job must start
            at the same number; a new job starts at 0).
        slots: the job's slots this transport uses (default: all of them); fewer makes a
            *lane* (:meth:`lanes`): its chunks go round-robin over these slots only, chunk ``v``
            of the lane at ``seq = (v div m) * n_slots + slots.start + v mod m`` (``m =
            len(slots)``), so each of its slots is used at the sequence numbers the job's own
            numbering gives it, consecutive uses alternating pool copies, and the lane's window
            is ``m`` chunks. ``next_seq`` and ``first_seq`` count the lane's chunks. A lane
            needs ``n_slots`` to divide ``2**32`` (a power of two).
    """

    def __init__(self, link: Link, job: JobParams, min_rto: float = 0.2, max_rto: float = 1.0,
                 give_up_s: float = 10.0, first_seq: int = 0, initial_rto: float = 0.25,
                 slots: Optional[range] = None):
        if not 0 < min_rto <= max_rto:
            raise ValueError(f"min_rto={min_rto}, max_rto={max_rto}: need 0 < min_rto <= max_rto")
        if give_up_s <= max_rto:
            raise ValueError(f"give_up_s={give_up_s}: must exceed max_rto={max_rto}")
        slots = range(job.n_slots) if slots is None else slots
        if (not isinstance(slots, range) or slots.step != 1 or not len(slots)
                or slots.start < 0 or slots.stop > job.n_slots):
            raise ValueError(f"slots={slots!r}: must be a range of step 1 within the job's "
                             f"{job.n_slots} slots")
        if len(slots) < job.n_slots and _U32 % job.n_slots:
            raise ValueError(f"slots={slots!r}: a lane of the job's slots needs n_slots to "
                             f"divide 2**32 (a power of two), not {job.n_slots}")
        self.link, self.job = link, job
        self.give_up_s = give_up_s
        #: The job's slots this transport sends to, and the window: at most that many in flight.
        self.slots, self.window = slots, len(slots)
        #: Sequence numbers of this transport's own count wrap at this (2**32 for all slots).
        self.seq_space = _U32 if self.window == job.n_slots else _U32 // job.n_slots * self.window
        self.next_seq = first_seq % self.seq_space
        # a lane's calls are counted in its transport's ``total`` too (under the lock)
        self._parent: Optional[tuple[CallStats, threading.Lock]] = None
        self.timers = _Timers(min_rto, max_rto, initial_rto, ceiling=give_up_s / 2)
        self.last = CallStats()
        self.total = CallStats()
        #: The id the next :meth:`begin_call` takes by default (calls begun so far).
        self.calls = 0
        self._checked_generation = 0       # the generation whose calls were found aligned

    # -- lanes -------------------------------------------------------------------------------
    def lanes(self, count: int) -> list["Transport"]:
        """``count`` transports over disjoint ranges of this transport's slots (lanes), one link
        shared between them (:class:`SharedLink`), so that as many calls can be on the wire at
        once, each from its own thread. Each lane is this job's protocol on its own slots:
        every slot's uses alternate pool copies at increasing sequence numbers, a lane's
        window is its share of the slots, and the lanes' sequence numbers never meet (each
        slot's belong to one lane). Every worker of the job must make the same lanes and give
        each the same calls in the same order. The lanes start at this transport's next whole
        round of the slots; use this transport no more while they are in use. Their traffic
        is counted in their own ``total`` and in this transport's.

        Raises:
            ValueError: ``count`` does not divide this transport's slots, or ``n_slots`` is not
                a power of two.
        """
        if count < 1 or self.window % count:
            raise ValueError(f"count={count}: must divide this transport's {self.window} slots")
        if count == 1:
            return [self]
        m = self.window // count
        shared = SharedLink(self.link, self.job.n_slots, [
            range(self.slots.start + i * m, self.slots.start + (i + 1) * m) for i in range(count)])
        start = -(-self.next_seq // self.window) * m        # the next whole round, per lane
        parent = (self.total, threading.Lock())
        lanes = []
        for i, slots in enumerate(shared.slots):
            lane = Transport(shared.lane(i), self.job, self.timers.min_rto, self.timers.max_rto,
                             self.give_up_s, start, self.timers.initial_rto, slots=slots)
            lane._parent = parent
            lanes.append(lane)
        return lanes

    def rejoin(self, lanes: list["Transport"]) -> None:
        """Continue this transport after its ``lanes`` (:meth:`lanes`), once their calls are
        done on every worker (e.g. after the aggregation engine's last vote): from the next
        whole round of the slots past anything a lane sent, so that every slot's next use is a
        new round to the switch. (The generation stays this transport's: whoever follows a new
        one on a lane follows it here too, as the aggregation engine does.)"""
        lanes = [lane for lane in lanes if lane is not self]
        if not lanes:
            return
        rounds = max(lane.next_seq // lane.window + 1 for lane in lanes)
        self.next_seq = rounds * self.job.n_slots % self.seq_space
        if all(lane._checked_generation == self.job.generation for lane in lanes):
            self._checked_generation = self.job.generation

    def wire_seq(self, k: int) -> int:
        """The sequence number on the wire of this transport's chunk ``k`` (its own count)."""
        if self.window == self.job.n_slots:
            return k % _U32
        r, j = divmod(k % self.seq_space, self.window)
        return (r * self.job.n_slots + self.slots.start + j) % _U32

    def _wire_seqs(self, first: int, n: int) -> Optional[np.ndarray]:
        """:meth:`wire_seq` of chunks ``first .. first + n - 1`` (None: the job's numbering)."""
        if self.window == self.job.n_slots:
            return None
        k = (np.arange(n, dtype=np.int64) + first) % self.seq_space
        return (k // self.window * self.job.n_slots + self.slots.start
                + k % self.window) % _U32

    def _chunk_index(self, seqs: np.ndarray, first: int) -> np.ndarray:
        """Chunk numbers relative to ``first`` (this transport's count) of wire sequence numbers;
        ``seq_space`` (no chunk of a call) for those of other lanes' slots."""
        seqs = seqs.astype(np.int64)
        if self.window == self.job.n_slots:
            return (seqs - first) % _U32
        r, slot = seqs // self.job.n_slots, seqs % self.job.n_slots
        j = slot - self.slots.start
        mine = (j >= 0) & (j < self.window)
        return np.where(mine, (r * self.window + j - first) % self.seq_space, self.seq_space)

    def _add_total(self, stats: CallStats) -> None:
        self.total.add(stats)
        if self._parent is not None:
            total, lock = self._parent
            with lock:
                total.add(stats)

    # -- calls ---------------------------------------------------------------------------------
    def begin_call(self, call_id: Optional[int] = None) -> int:
        """Start a call (one ``allreduce``: its agreement, streams and follow-up rounds); returns
        its id. The first call of every generation begins with a check that every worker of the
        job is at the same call (docs/protocol.md, "Generations"): a MAX round of one chunk
        carrying ``(id, 2**32 - 1 - id)``, whose result gives the largest and smallest id of the
        job's workers.

        Args:
            call_id: the application's id of the call (e.g. its training step), the same on
                every worker; default: the number of calls this transport began before. A worker
                restarted mid-job must resume at the survivors' call and pass its id (or set
                :attr:`calls`).

        Raises:
            CallMismatch: the workers are at different calls (nothing else is sent).
            GenerationChanged, TransportTimeout: as :meth:`reduce`.
        """
        cid = self.calls if call_id is None else int(call_id)
        if not 0 <= cid < _U32:
            raise ValueError(f"call_id={call_id!r}: must be in [0, 2**32)")
        self.calls = cid + 1
        if self._checked_generation != self.job.generation:
            got = self.reduce(P.Op.MAX, np.array([cid, _U32 - 1 - cid], dtype=np.uint32))
            highest, lowest = int(got[0]), _U32 - 1 - int(got[1])
            if highest != lowest:
                log.error("job %d: the workers are at calls %d..%d, this worker at %d: refused",
                          self.job.job_id, lowest, highest, cid)
                raise CallMismatch(self.job.job_id, cid, lowest, highest)
            self._checked_generation = self.job.generation
        return cid

    # -- one stream --------------------------------------------------------------------------
    def reduce(self, op: P.Op, data: np.ndarray) -> np.ndarray:
        """Combine ``data`` with the other workers' through the switch, element-wise by ``op``.

        Args:
            op: the lane operation.
            data: 1-D wire values: int32 (SUM), uint32 (MAX, OR), uint8 packed nibbles (LUT_SUM).

        Returns:
            The aggregated stream in native byte order: int32 sums (SUM), uint32 (MAX, OR), or
            for LUT_SUM ``2 * data.size`` uint16 sums of table values in coordinate order.

        Raises:
            TransportTimeout: a chunk had no result within ``give_up_s``.
            OverflowFlagged: the switch flagged an overflow in a SUM result; on a job whose
                switch saturates instead (``JobParams.sum_saturates``, the TNA program), a SUM
                result word at an int32 bound (saturation sticks there: every worker of the
                call sees the same words and raises the same).
            GenerationChanged: the switch answered that the job is in another generation.
        """
        op = P.Op(op)
        data = np.ascontiguousarray(data, dtype=_NP_UP[op]).reshape(-1)
        if op is P.Op.BLOCK_SUM:
            return self.reduce_block_sparse(data)
        layout = layout_for(op, data.size, self.job.words)
        results = self._run(layout, data)
        count = 2 * data.size if op is P.Op.LUT_SUM else data.size
        out = results.reshape(-1)[:count].astype(result_payload_dtype(op).newbyteorder("="))
        if self.job.sum_saturates and op is P.Op.SUM:
            self._check_saturated(out, "SUM")
        return out

    def _check_saturated(self, sums: np.ndarray, what: str) -> None:
        """A saturating switch's overflow signal (``JobParams.sum_saturates``): a sum word at an
        int32 bound. Its saturation sticks, so a word within the bounds is exact."""
        stuck = (sums == _INT32_MAX) | (sums == _INT32_MIN)
        if stuck.any():
            at = int(np.flatnonzero(stuck)[0])
            raise OverflowFlagged(
                f"job {self.job.job_id}: {what} result word {at} is {int(sums[at])}, an int32 "
                f"bound: this job's switch saturates instead of flagging overflows (the TNA "
                f"program) and a sum that reached a bound stays there; lower the fixed-point "
                f"scale or the worker count")

    def _run(self, layout: ChunkLayout, data: np.ndarray) -> np.ndarray:
        """Stream the chunks of ``data`` through the switch; their results, in chunk order.

        Works on whole batches: every send is one call for all the chunks it concerns (the
        call's frames are built once, into one array, where the link can send rows of it:
        ``link.prepare``/``send_prepared``; else ``link.send_batch``), every receive takes all
        the messages that have arrived (``link.recv_batch``), and the results of a batch are
        matched, stored and acknowledged with numpy column operations on the chunks' state
        arrays, so no Python object is made per packet."""
        stats = CallStats(chunks=layout.chunks)
        started = time.monotonic()
        n, job = layout.chunks, self.job
        first = self.next_seq
        self.next_seq = (first + n) % self.seq_space
        messages = build_aggregates(layout, data, job.job_id, first, job.n_slots,
                                    job.generation, seqs=self._wire_seqs(first, n))
        out = np.zeros((n, layout.result_per_chunk), dtype=result_payload_dtype(layout.op))
        out_bytes = out.view(np.uint8).reshape(n, layout.down_bytes)
        done = np.zeros(n, dtype=bool)
        sent_at = np.zeros(n)                 # first transmission time (for RTT samples)
        deadline = np.full(n, np.inf)         # retransmission deadline of chunks in flight
        attempts = np.zeros(n, dtype=np.int64)
        later = np.zeros(n, dtype=np.int64)   # results of later chunks seen while k is missing
        # fast retransmission of k when later[k] reaches this; doubled after each one
        fast_at = np.full(n, _FAST_RETRANSMIT_AFTER, dtype=np.int64)
        progress = started                    # last time a new result arrived
        low, next_new, n_done = 0, 0, 0       # chunks in flight are all in [low, next_new)
        expected_down = P.HEADER_BYTES + layout.down_bytes
        matcher = _ResultMatcher(self, first, n, layout.op, expected_down)
        window, message_bytes = self.window, messages.shape[1]
        send_batch = getattr(self.link, "send_batch", None) or self._send_each
        prepare = getattr(self.link, "prepare", None)
        prepared = prepare(messages) if prepare is not None else None
        send_prepared = self.link.send_prepared if prepared is not None else None
        recv_batch = getattr(self.link, "recv_batch", None)
        if recv_batch is None:
            def recv_batch(wait, linger=0.0, enough=1):
                return self._recv_one(wait)

        def send_new(a: int, b: int) -> None:
            """First transmission of chunks a .. b - 1."""
            if prepared is not None:
                send_prepared(prepared, range(a, b))
            else:
                send_batch(messages[a:b])
            stats.packets_sent += b - a
            stats.bytes_sent += (b - a) * message_bytes
            now = time.monotonic()
            sent_at[a:b] = now
            deadline[a:b] = now + self.timers.rto
            attempts[a:b] = 1

        def resend(ks: np.ndarray) -> None:
            if not len(ks):
                return
            rows = messages[ks]
            rows[:, 2] |= int(P.Flag.RETRANSMIT)
            stats.retransmissions += len(ks)
            send_batch(rows)
            stats.packets_sent += len(ks)
            stats.bytes_sent += rows.size
            now = time.monotonic()
            attempts[ks] += 1
            deadline[ks] = now + self.timers.backoff(attempts[ks])

        while n_done < n:
            # Open the window: chunk k needs the result of chunk k - window (same slot). Chunks
            # from next_new on are unsent, so only results below next_new can open any.
            stop = max(next_new, min(n, window))
            if stop < n:
                opened = done[stop - window:min(n, next_new + window) - window]
                if len(opened):
                    i = int(opened.argmin())
                    stop += i if not opened[i] else len(opened)
            if stop > next_new:
                send_new(next_new, stop)
                next_new = stop
            now = time.monotonic()
            if now - progress > self.give_up_s:
                seq = self.wire_seq(first + low)
                raise TransportTimeout(
                    f"job {job.job_id}: no result for chunk seq={seq} (slot {seq % job.n_slots}) "
                    f"after {attempts[low]} transmissions in {now - progress:.1f}s: the switch is "
                    f"unreachable or another worker of the {job.n_workers} stopped contributing")
            wait = max(0.0, min(float(deadline[low:next_new].min()), progress + self.give_up_s)
                       - now)
            # with several chunks in flight, a lone result waits a moment for the next ones:
            # a batch costs about as much to process as one result does
            in_flight = next_new - low - int(np.count_nonzero(done[low:next_new]))
            rows, lengths = recv_batch(wait, _COALESCE_S if in_flight > 1 else 0.0,
                                       min(in_flight, _COALESCE_ENOUGH))
            if not len(lengths):
                # Retransmit the oldest expired chunks only; the rest wait one more timeout.
                # A whole window expiring at once usually means a queue, not loss, and
                # retransmitting all of it would only lengthen the queue.
                now = time.monotonic()
                expired = low + np.flatnonzero(deadline[low:next_new] <= now)
                if len(expired):
                    self.timers.expired()
                resend(expired[:_RETRANSMIT_BURST])
                deadline[expired[_RETRANSMIT_BURST:]] = now + self.timers.rto
                continue
            stats.bytes_received += int(lengths.sum())
            ks, payload_rows, run = matcher.match(rows, lengths, stats)
            if not len(ks):
                continue
            if run is not None and not done[run].any():
                sel = run                     # fresh results of consecutive chunks: a slice
            else:
                # one result per chunk: duplicates within the batch and chunks already complete
                if len(ks) > 1 and not (ks[1:] > ks[:-1]).all():
                    ks, first_of = np.unique(ks, return_index=True)
                    payload_rows = payload_rows[first_of]
                stale = done[ks]
                if stale.any():
                    fresh = ~stale
                    stats.duplicates += len(ks) - int(np.count_nonzero(fresh))
                    ks, payload_rows = ks[fresh], payload_rows[fresh]
                    if not len(ks):
                        continue
                overflowed = payload_rows[:, 2] & int(P.Flag.OVERFLOW)
                if overflowed.any():
                    k = int(ks[np.flatnonzero(overflowed)[0]])
                    raise OverflowFlagged(f"job {job.job_id}: the switch flagged a 32-bit "
                                          f"overflow in chunk seq={self.wire_seq(first + k)}; "
                                          "lower the fixed-point scale or the worker count")
                sel = ks
            out_bytes[sel] = payload_rows[:, P.HEADER_BYTES:expected_down]
            done[sel] = True
            n_done += len(ks)
            stats.results += len(ks)
            now = time.monotonic()
            tries = attempts[sel]
            if (tries == 1).all():            # Karn: no RTT samples from retransmitted chunks
                self.timers.sample(float(now - sent_at[sel].mean()))   # one: the batch's mean
            else:
                clean = ks[tries == 1]
                if len(clean):
                    self.timers.sample(float(now - sent_at[clean].mean()))
            deadline[sel] = np.inf
            progress = now
            # Fast retransmit (as TCP's duplicate ACKs): every worker sends in chunk order, so
            # results come back in order unless something was lost; a chunk passed over by
            # _FAST_RETRANSMIT_AFTER later results is resent at once, not after its timeout.
            # It is resent again after twice as many: the first resend may have reached a slot
            # still waiting for another worker's lost contribution (the switch ignores it), and
            # then this worker's copy of the result may be lost too; waiting for the backed-off
            # timeout would stall every worker of the job, whose windows wait on this one.
            top = int(ks[-1])                 # ks is sorted
            if not done[low:top].all():
                missing = low + np.flatnonzero(~done[low:top])
                later[missing] += len(ks) - np.searchsorted(ks, missing, side="right")
                lost = missing[later[missing] >= fast_at[missing]]
                resend(lost)
                stats.fast_retransmissions += len(lost)
                fast_at[lost] *= 2
            if done[low]:                     # the oldest chunk in flight: the first not done
                pending = done[low:next_new]
                i = int(pending.argmin())
                low = low + i if not pending[i] else next_new
        stats.seconds = time.monotonic() - started
        self.last = stats
        self._add_total(stats)
        return out

    # -- block-sparse ----------------------------------------------------------------------------
    def reduce_block_sparse(self, data: np.ndarray) -> np.ndarray:
        """Sum ``data`` (int32) with the other workers' in block-sparse rounds.

        The job's ``n_slots`` slots each aggregate one stream of blocks of ``words`` lanes
        (:mod:`hina.blocksparse`; docs/protocol.md, "Block-sparse aggregation"): in each round
        this worker sends its block (BLOCK_SUM) if it is nonzero, else only the block header
        (BLOCK_SKIP), with its next nonzero block; the RESULT gives the round's sum and the
        next block. Round ``k`` of stream ``s`` is chunk ``first + k * n_slots + s``, so every
        slot's uses alternate pool copies as in the dense path; each stream has one round in
        flight (the next block is known only from the result), retransmitted on timeout with
        the RETRANSMIT flag, and the switch answers a retransmission from the kept result.

        When every stream is done, a stream whose round count differs in parity from the
        longest one's runs one padding round (every worker sends BLOCK_SKIP for block
        ``PAD_BLOCK``): then every slot's next use, at chunk ``first + R * n_slots + s`` (the
        call ends at ``next_seq = first + R * n_slots``, R the longest stream's rounds), is in
        the other pool copy than its last, which keeps the two-copy loss safety across calls.

        Returns:
            The int32 sums, ``data.size`` of them.

        Raises:
            TransportTimeout, OverflowFlagged, GenerationChanged: as :meth:`reduce`.
            TransportError: a RESULT that contradicts the protocol (another block, a next block
                that skips this worker's).
        """
        data = np.ascontiguousarray(data, dtype=np.int32).reshape(-1)
        job, words, n_slots = self.job, self.job.words, self.window
        stats = CallStats()
        started = progress = time.monotonic()
        first = self.next_seq
        blocks = B.as_blocks(data, words)
        n_blocks = blocks.shape[0]
        streams = [B.StreamState(B.nonzero_blocks(data, words), s, n_slots, n_blocks)
                   for s in range(n_slots)]
        out = np.zeros((n_blocks, words), dtype=np.int32)
        padding = [False] * n_slots
        active = [not st.done for st in streams]
        flight: dict[int, list] = {}          # stream -> [seq, message, deadline, attempts, sent]
        by_seq: dict[int, int] = {}           # seq in flight -> stream
        expected_len = P.HEADER_BYTES + P.BLOCK_HEADER_BYTES + 4 * words
        padded = False

        def build(s: int, flags: int = 0) -> tuple[int, bytes]:
            st = streams[s]
            seq = self.wire_seq(first + st.round * n_slots + s)
            slot, pool = P.slot_and_pool(seq, job.n_slots)
            if padding[s]:
                op, block, nxt, lanes = P.Op.BLOCK_SKIP, PAD_BLOCK, P.BLOCK_END, b""
            else:
                op, block, nxt = st.message()
                lanes = blocks[block].astype(">i4").tobytes() if op is P.Op.BLOCK_SUM else b""
            header = P.pack_header(P.MsgType.AGGREGATE, op, flags=flags, job_id=job.job_id,
                                   pool=pool, slot=slot, seq=seq, generation=job.generation)
            return seq, header + B.pack_block_header(block, nxt) + lanes

        def transmit(s: int, retransmit: bool) -> None:
            now = time.monotonic()
            if retransmit:
                entry = flight[s]
                _, message = build(s, int(P.Flag.RETRANSMIT))
                stats.retransmissions += 1
                entry[3] += 1
                entry[2] = now + float(self.timers.backoff(entry[3]))
            else:
                seq, message = build(s)
                flight[s] = [seq, message, now + self.timers.rto, 1, now]
                by_seq[seq] = s
                stats.chunks += 1
            self.link.send(message)
            stats.packets_sent += 1
            stats.bytes_sent += len(message)

        while True:
            for s in range(n_slots):
                if active[s] and s not in flight:
                    transmit(s, retransmit=False)
            if not flight:
                if padded:
                    break
                longest = max(st.round for st in streams)
                for s, st in enumerate(streams):
                    if (longest - st.round) % 2:
                        padding[s] = active[s] = True
                padded = True
                continue
            now = time.monotonic()
            if now - progress > self.give_up_s:
                seq = min(e[0] for e in flight.values())
                raise TransportTimeout(
                    f"job {job.job_id}: no block-sparse result for chunk seq={seq} (slot "
                    f"{seq % job.n_slots}) in {now - progress:.1f}s: the switch is unreachable or "
                    f"another worker of the {job.n_workers} stopped contributing")
            wait = max(0.0, min(min(e[2] for e in flight.values()),
                                progress + self.give_up_s) - now)
            message = self.link.recv(wait)
            if message is None:
                now = time.monotonic()
                expired = [s for s, e in flight.items() if e[2] <= now]
                if expired:
                    self.timers.expired()
                for s in expired:
                    transmit(s, retransmit=True)
                continue
            stats.bytes_received += len(message)
            if len(message) == P.HEADER_BYTES:
                self._notice(parse_header(message), stats)
                continue
            h = P.unpack_header(message) if len(message) == expected_len else None
            if (h is None or h["version"] != P.VERSION or h["msg_type"] != P.MsgType.RESULT
                    or h["job_id"] != job.job_id or h["op"] != P.Op.BLOCK_SUM):
                stats.foreign += 1
                continue
            if h["generation"] != job.generation:
                stats.other_generation += 1
                continue
            if h["count"] != job.n_workers:
                stats.bad_count += 1
                continue
            s = by_seq.get(h["seq"])
            if s is None:
                stats.duplicates += 1          # a round already complete (or not this call's)
                continue
            if h["flags"] & P.Flag.OVERFLOW:
                raise OverflowFlagged(f"job {job.job_id}: the switch flagged a 32-bit overflow "
                                      f"in block-sparse chunk seq={h['seq']}; lower the "
                                      "fixed-point scale or the worker count")
            block, nxt = B.unpack_block_header(message[P.HEADER_BYTES:])
            st = streams[s]
            if padding[s]:
                if (block, nxt) != (PAD_BLOCK, P.BLOCK_END):
                    raise TransportError(f"job {job.job_id}: padding round of slot stream {s} "
                                         f"answered with block {block}, next {nxt}")
                st.round += 1
                active[s] = False
            else:
                try:
                    st.advance(block, nxt)
                except ValueError as exc:
                    raise TransportError(f"job {job.job_id}: {exc}") from None
                out[block] = np.frombuffer(message, dtype=">i4",
                                           offset=P.HEADER_BYTES + P.BLOCK_HEADER_BYTES)
                active[s] = not st.done
            seq, _, _, attempts, sent = flight.pop(s)
            del by_seq[seq]
            now = time.monotonic()
            if attempts == 1:
                self.timers.sample(now - sent)
            progress = now
            stats.results += 1
        longest = max((st.round for st in streams), default=0)
        self.next_seq = (first + longest * n_slots) % self.seq_space
        stats.seconds = time.monotonic() - started
        self.last = stats
        self._add_total(stats)
        sums = out.reshape(-1)[:data.size]
        if job.sum_saturates:
            self._check_saturated(sums, "BLOCK_SUM")
        return sums

    def _send_each(self, rows: np.ndarray) -> None:
        """``send_batch`` for links that send one message at a time."""
        for row in rows:
            self.link.send(row.tobytes())

    def _recv_one(self, timeout: float) -> tuple[np.ndarray, np.ndarray]:
        """``recv_batch`` for links that receive one message at a time."""
        message = self.link.recv(timeout)
        if message is None:
            return np.zeros((0, 0), dtype=np.uint8), np.zeros(0, dtype=np.int64)
        return np.frombuffer(message, dtype=np.uint8)[None, :], np.array([len(message)])

    def _match_batch(self, rows: np.ndarray, lengths: np.ndarray, first: int, n: int,
                     op: P.Op, expected_len: int, stats: CallStats) -> tuple[np.ndarray,
                                                                          np.ndarray]:
        """The chunk index of every message of a batch that is a result of this call, and those
        messages' rows; the others are counted in ``stats`` (foreign, other generation, bad
        count) or acted on (a NOTICE of another generation raises).

        Raises:
            GenerationChanged: a NOTICE says the job is in another generation.
        """
        if len(lengths) < SMALL_BATCH:     # a few: one by one (numpy's fixed costs dominate)
            picked = [(k, i) for i in range(len(lengths)) for k in [self._match(
                rows[i, :lengths[i]].tobytes(), first, n, op, expected_len, stats)]
                if k is not None]
            return (np.array([k for k, _ in picked], dtype=np.int64),
                    rows[[i for _, i in picked]])
        for i in np.flatnonzero(lengths == P.HEADER_BYTES):       # header-only: NOTICEs
            self._notice(parse_header(rows[i, :P.HEADER_BYTES].tobytes()), stats)
        sized = lengths == expected_len
        stats.foreign += int(np.count_nonzero(~sized & (lengths != P.HEADER_BYTES)))
        rows = rows[sized]
        if not len(rows):
            return np.zeros(0, dtype=np.int64), rows
        h = np.ascontiguousarray(rows[:, :P.HEADER_BYTES]).view(P.HEADER_DTYPE)[:, 0]
        ours = ((h["ver_type"] == (P.VERSION << 4 | P.MsgType.RESULT))
                & (h["job_id"] == self.job.job_id) & (h["op"] == op))
        stats.foreign += int(np.count_nonzero(~ours))
        # a round of another run of the job: not ours
        this_generation = ours & (h["generation"] == self.job.generation)
        stats.other_generation += int(np.count_nonzero(ours & ~this_generation))
        # Not the sum of exactly one contribution per worker (a slot copy that took a
        # contribution twice, e.g. a late duplicate reordered behind the worker's next use):
        # never delivered; the chunk is retransmitted until a whole result comes, or times out.
        whole = this_generation & (h["count"] == self.job.n_workers)
        stats.bad_count += int(np.count_nonzero(this_generation & ~whole))
        ks = self._chunk_index(h["seq"], first)
        in_call = whole & (ks < n)
        stats.foreign += int(np.count_nonzero(whole & ~in_call))
        return ks[in_call], rows[in_call]

    def _match(self, message: bytes, first: int, n: int, op: P.Op, expected_len: int,
               stats: CallStats) -> Optional[int]:
        """:meth:`_match_batch` for one message: its chunk index, or None (counted)."""
        if len(message) == P.HEADER_BYTES:
            self._notice(parse_header(message), stats)
            return None
        header = parse_header(message) if len(message) == expected_len else None
        if (header is None or header["ver_type"] != (P.VERSION << 4 | P.MsgType.RESULT)
                or header["job_id"] != self.job.job_id or header["op"] != op):
            stats.foreign += 1
            return None
        if header["generation"] != self.job.generation:
            stats.other_generation += 1
            return None
        if header["count"] != self.job.n_workers:
            stats.bad_count += 1
            return None
        k = int(self._chunk_index(np.array([int(header["seq"])]), first)[0])
        if k >= n:
            stats.foreign += 1
            return None
        return k

    def _notice(self, header: np.void, stats: CallStats) -> None:
        """Act on a header-only message: a NOTICE that this worker is stale raises."""
        if (header["ver_type"] >> 4 != P.VERSION or header["ver_type"] & 0xF != P.MsgType.NOTICE
                or header["job_id"] != self.job.job_id):
            stats.foreign += 1
            return
        generation, reason = int(header["generation"]), int(header["op"])
        if reason == P.DropReason.STALE_GENERATION and generation != self.job.generation:
            raise GenerationChanged(self.job.job_id, generation, self.job.generation,
                                    P.DropReason(reason))
        # A NOTICE of our own generation answered some other sender's stale packet (an earlier
        # process on this address); an unknown reason is for a newer worker.
        stats.notices += 1

    def follow(self, generation: int, first_seq: int = 0) -> None:
        """Continue in ``generation`` of the job (after :class:`GenerationChanged`): its packets
        carry it from now on, numbered from ``first_seq`` (every worker of the new generation
        starts at the same number: 0 for a retried call, docs/protocol.md "Generations")."""
        P.check_generation(generation)
        self.job = dataclasses.replace(self.job, generation=generation)
        self.next_seq = first_seq % self.seq_space

    def close(self) -> None:
        self.link.close()


class _ResultMatcher:
    """:meth:`Transport._match_batch` for one call, with a fast path: a batch whose messages
    are all RESULTs of the call's length whose header bytes (version and type, op, count, job,
    generation, and no OVERFLOW flag) are the ones every clean result of this call carries,
    and whose chunks are all of the call, is matched with a handful of column operations on the
    rows as they lie in the receive buffer; any other batch goes through
    :meth:`Transport._match_batch` (which counts what it drops, and raises on a NOTICE of
    another generation), so both give the same chunks and rows.

    :meth:`match` returns (chunks, rows, run): ``run`` is the slice of chunks when the batch
    took the fast path and its chunks are consecutive, in order (results come back in order
    unless something was lost), else None.
    """

    def __init__(self, transport: Transport, first: int, n: int, op: P.Op, expected_len: int):
        self.transport, self.first, self.n = transport, first, n
        self.op, self.expected_len = op, expected_len
        job = transport.job
        want = np.zeros(1, dtype=P.HEADER_DTYPE)
        want["ver_type"] = P.VERSION << 4 | P.MsgType.RESULT
        want["op"], want["count"] = int(op), job.n_workers
        want["job_id"], want["generation"] = job.job_id, job.generation
        mask = np.zeros(1, dtype=P.HEADER_DTYPE)
        for field in ("ver_type", "op", "count", "job_id", "generation"):
            mask[field] = np.iinfo(mask.dtype[field]).max          # every bit of the field
        mask["flags"] = int(P.Flag.OVERFLOW)      # an overflow takes the general path (raises)
        self.want, self.mask = want.view("<u8"), mask.view("<u8")
        self.full = transport.window == job.n_slots
        self.iota = np.arange(n)

    def match(self, rows: np.ndarray, lengths: np.ndarray,
              stats: CallStats) -> tuple[np.ndarray, np.ndarray, Optional[slice]]:
        n = len(lengths)
        if (lengths[0] == self.expected_len and (n == 1 or (lengths == self.expected_len).all())
                and ((rows[:n, :P.HEADER_BYTES].view("<u8") & self.mask) == self.want).all()):
            seqs = rows[:n, _SEQ_AT:_SEQ_AT + 4].view(">u4")[:, 0].astype(np.int64)
            if self.full:
                ks = (seqs - self.first) % _U32
            else:
                ks = self.transport._chunk_index(seqs, self.first)
            k0 = int(ks[0])
            if k0 + n <= self.n and (ks == self.iota[k0:k0 + n]).all():
                return ks, rows[:n], slice(k0, k0 + n)
            if ks.max() < self.n:
                return ks, rows[:n], None
        ks, rows = self.transport._match_batch(rows, lengths, self.first, self.n, self.op,
                                               self.expected_len, stats)
        return ks, rows, None
