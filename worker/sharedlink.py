"""One link shared by the lanes of a transport (:meth:`hina.worker.transport.Transport.lanes`):
sends one at a time, and every message received routed to the lane whose slots its ``seq`` falls
in."""
from __future__ import annotations

import threading
import time
from typing import Optional

import numpy as np

from hina import protocol as P

from .transport_types import Link

__all__ = ["SharedLink"]


_NO_ROWS = (np.zeros((0, 0), dtype=np.uint8), np.zeros(0, dtype=np.int64))
#: Offset of ``seq`` in the HINA header (big-endian u32): what :class:`SharedLink` routes by.
_SEQ_OFFSET = P.HEADER_DTYPE.fields["seq"][1]


class SharedLink:
    """One link shared by the lanes of a transport (:meth:`Transport.lanes`), each on a thread
    of its own: sends go out one at a time, and every message received goes to the lane whose
    slots its ``seq`` falls in (RESULTs and NOTICEs echo the chunk's ``seq``), whichever
    lane's thread read it from the socket. One thread reads at a time; the others wait for
    their messages or their timeout.

    Args:
        link: the link (``send``/``recv``, and ``send_batch``/``recv_batch`` where it has them).
        n_slots: the job's slots.
        slots: each lane's slots (disjoint ranges).
    """

    def __init__(self, link: Link, n_slots: int, slots: list[range]):
        self.link, self.n_slots, self.slots = link, n_slots, slots
        self._lane_of = np.zeros(n_slots, dtype=np.int64)
        for i, r in enumerate(slots):
            self._lane_of[r.start:r.stop] = i
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._reading = False
        self._queues: list[list] = [[] for _ in slots]    # per lane: (rows, lengths) batches

    def lane(self, index: int) -> "_LaneLink":
        """The link as lane ``index`` sees it."""
        return _LaneLink(self, index)

    def send(self, message: bytes) -> None:
        with self._send_lock:
            self.link.send(message)

    def send_batch(self, rows: np.ndarray) -> None:
        send_batch = getattr(self.link, "send_batch", None)
        with self._send_lock:
            if send_batch is not None:
                send_batch(rows)
            else:
                for row in rows:
                    self.link.send(row.tobytes())

    def prepare(self, messages: np.ndarray) -> Optional[np.ndarray]:
        """The link's ``prepare`` (its frames of ``messages`` for ``send_prepared``), or None."""
        prepare = getattr(self.link, "prepare", None)
        return prepare(messages) if prepare is not None else None

    def send_prepared(self, prepared: np.ndarray, rows) -> None:
        with self._send_lock:
            self.link.send_prepared(prepared, rows)

    def recv_batch(self, lane: int, timeout: float, linger: float = 0.0,
                   enough: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Lane ``lane``'s messages that have arrived, waiting up to ``timeout`` for the first."""
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                while not self._queues[lane]:
                    if not self._reading:
                        self._reading = True
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return _NO_ROWS
                    self._cond.wait(left)
                else:
                    return self._take(lane)
            try:
                rows, lengths = self._read(max(0.0, deadline - time.monotonic()), linger, enough)
            finally:
                with self._cond:
                    self._reading = False
                    self._cond.notify_all()
            with self._cond:
                if len(lengths):
                    self._route(rows, lengths)
                    self._cond.notify_all()
                if self._queues[lane]:
                    return self._take(lane)
            if time.monotonic() >= deadline:
                return _NO_ROWS

    def _read(self, timeout: float, linger: float, enough: int) -> tuple[np.ndarray, np.ndarray]:
        recv_batch = getattr(self.link, "recv_batch", None)
        if recv_batch is not None:
            rows, lengths = recv_batch(timeout, linger, enough)
            return np.array(rows[:len(lengths)]), np.array(lengths)   # the link reuses its rows
        message = self.link.recv(timeout)
        if message is None:
            return _NO_ROWS
        return np.frombuffer(message, dtype=np.uint8)[None, :].copy(), np.array([len(message)])

    def _route(self, rows: np.ndarray, lengths: np.ndarray) -> None:
        """Queue every message for its lane (call with the condition held); a message too
        short for a header goes to lane 0, which counts it as foreign."""
        lanes = np.zeros(len(lengths), dtype=np.int64)
        whole = lengths >= P.HEADER_BYTES
        if np.any(whole):
            seq = np.ascontiguousarray(rows[whole, _SEQ_OFFSET:_SEQ_OFFSET + 4]).view(">u4")[:, 0]
            lanes[whole] = self._lane_of[seq.astype(np.int64) % self.n_slots]
        for i in np.unique(lanes):
            pick = lanes == i
            self._queues[int(i)].append((rows[pick], lengths[pick]))

    def _take(self, lane: int) -> tuple[np.ndarray, np.ndarray]:
        batches, self._queues[lane] = self._queues[lane], []
        if len(batches) == 1:
            return batches[0]
        width = max(rows.shape[1] for rows, _ in batches)
        rows = np.zeros((sum(len(lengths) for _, lengths in batches), width), dtype=np.uint8)
        at = 0
        for part, lengths in batches:
            rows[at:at + len(lengths), :part.shape[1]] = part
            at += len(lengths)
        return rows, np.concatenate([lengths for _, lengths in batches])

    def close(self) -> None:
        self.link.close()


class _LaneLink:
    """A lane's view of a :class:`SharedLink` (the :class:`Link` its transport uses); closing
    it leaves the shared link open (its owner closes it)."""

    def __init__(self, shared: SharedLink, index: int):
        self.shared, self.index = shared, index
        self._held: list[bytes] = []          # messages received by recv() beyond the first

    def send(self, message: bytes) -> None:
        self.shared.send(message)

    def send_batch(self, rows: np.ndarray) -> None:
        self.shared.send_batch(rows)

    def prepare(self, messages: np.ndarray) -> Optional[np.ndarray]:
        return self.shared.prepare(messages)

    def send_prepared(self, prepared: np.ndarray, rows) -> None:
        self.shared.send_prepared(prepared, rows)

    def recv_batch(self, timeout: float, linger: float = 0.0,
                   enough: int = 1) -> tuple[np.ndarray, np.ndarray]:
        if self._held:
            held, self._held = self._held, []
            lengths = np.array([len(m) for m in held])
            rows = np.zeros((len(held), int(lengths.max())), dtype=np.uint8)
            for i, m in enumerate(held):
                rows[i, :len(m)] = np.frombuffer(m, dtype=np.uint8)
            return rows, lengths
        return self.shared.recv_batch(self.index, timeout, linger, enough)

    def recv(self, timeout: float) -> Optional[bytes]:
        if not self._held:
            rows, lengths = self.shared.recv_batch(self.index, timeout)
            self._held = [rows[i, :lengths[i]].tobytes() for i in range(len(lengths))]
        return self._held.pop(0) if self._held else None

    def close(self) -> None:
        pass
