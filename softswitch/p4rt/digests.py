"""Digest streams of the P4Runtime server: each digest's ``DigestEntry`` config, the list being
filled, and the duplicate filter, as p4runtime.proto documents ``DigestEntry.Config``. PI, the
server of BMv2 and Tofino (``proto/frontend/src/digest_mgr.cpp``), does the same but for one
thing: it counts a list's size in entries of its duplicate filter, so without
``ack_timeout_ns`` its lists wait for ``max_timeout_ns`` whatever their size.

* ``max_timeout_ns``: 0 sends each digest at once; otherwise a list is held until its oldest
  digest waited that long or it is full.
* ``max_list_size``: a list is sent once it holds that many digests (0: no limit).
* ``ack_timeout_ns``: 0 keeps no filter. Otherwise a digest whose data equals data already sent
  (or waiting in the list) and not yet acknowledged is dropped; a ``DigestListAck`` of the list
  that carried the data, or ``ack_timeout_ns`` without one, lets it through again.

:class:`DigestStreams` is driven by the server: :meth:`DigestStreams.offer` from the dataplane's
digest sink, :meth:`DigestStreams.ack` from the stream, :meth:`DigestStreams.configure` from
``Write``. Timeouts run on one daemon thread, started on the first config that needs it and
stopped by :meth:`DigestStreams.close`. ``send`` (the server's: to the current primary, if any)
is called without the streams' lock held.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from p4.v1 import p4runtime_pb2

from .errors import invalid

#: config limits: a negative value is refused; a timeout above a day is refused as nonsense
MAX_TIMEOUT_NS = 86_400 * 10**9


@dataclass
class _List:
    """A list being filled: its data (each a tuple of bitstrings) and when its first arrived."""
    data: list = field(default_factory=list)
    started: float = 0.0


@dataclass
class _Stream:
    config: p4runtime_pb2.DigestEntry.Config
    pending: _List = field(default_factory=_List)
    next_list_id: int = 1
    #: data sent (or pending) and not yet acknowledged -> the list id that carries it (0: the
    #: pending list)
    unacked: dict = field(default_factory=dict)
    #: list id -> (sent at, its data), for acks and ack timeouts
    sent: dict = field(default_factory=dict)


def check_config(config: p4runtime_pb2.DigestEntry.Config, what: str) -> None:
    """Refuse values P4Runtime cannot mean (INVALID_ARGUMENT)."""
    for name in ("max_timeout_ns", "ack_timeout_ns"):
        value = getattr(config, name)
        if not 0 <= value <= MAX_TIMEOUT_NS:
            raise invalid(f"{what}: {name} {value} must be between 0 and {MAX_TIMEOUT_NS}")
    if config.max_list_size < 0:
        raise invalid(f"{what}: max_list_size {config.max_list_size} must be >= 0")


class DigestStreams:
    """Every configured digest of the current pipeline.

    Args:
        send: delivers one ``StreamMessageResponse`` (a ``DigestList``); called without this
            object's lock held.
        clock: seconds, monotonic (tests may pass their own).
    """

    def __init__(self, send: Callable[[p4runtime_pb2.StreamMessageResponse], None],
                 clock: Callable[[], float] = time.monotonic):
        self._send, self._clock = send, clock
        self._streams: dict[int, _Stream] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    # -- configuration -------------------------------------------------------------------------
    def configured(self, digest_id: int) -> bool:
        with self._lock:
            return digest_id in self._streams

    def config(self, digest_id: int) -> Optional[p4runtime_pb2.DigestEntry.Config]:
        with self._lock:
            stream = self._streams.get(digest_id)
            return None if stream is None else stream.config

    def configure(self, digest_id: int, config: Optional[p4runtime_pb2.DigestEntry.Config]) -> None:
        """Set (INSERT, MODIFY) or remove (``None``: DELETE) a digest's config. A pending list
        and the filter of a digest whose config is removed are dropped, as PI does."""
        with self._lock:
            if config is None:
                self._streams.pop(digest_id, None)
                return
            copy = p4runtime_pb2.DigestEntry.Config()
            copy.CopyFrom(config)
            stream = self._streams.get(digest_id)
            if stream is None:
                self._streams[digest_id] = _Stream(copy)
            else:
                stream.config = copy
            if (copy.max_timeout_ns or copy.ack_timeout_ns) and self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="p4rt-digest-timeouts")
                self._thread.start()
            self._wake.notify()

    def clear(self) -> None:
        """A new pipeline: no digest is configured."""
        with self._lock:
            self._streams.clear()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._streams.clear()
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- traffic -------------------------------------------------------------------------------
    def offer(self, digest_id: int, data: tuple) -> None:
        """One digest from the dataplane (``data``: its members' bitstrings)."""
        out = []
        with self._lock:
            stream = self._streams.get(digest_id)
            if stream is None:
                return
            config, now = stream.config, self._clock()
            if config.ack_timeout_ns:
                if data in stream.unacked:
                    return
                stream.unacked[data] = 0
            if not stream.pending.data:
                stream.pending.started = now
            stream.pending.data.append(data)
            if config.max_timeout_ns == 0 or (
                    config.max_list_size and len(stream.pending.data) >= config.max_list_size):
                out.append(self._flush(digest_id, stream, now))
            else:
                self._wake.notify()
        for message in out:
            self._send(message)

    def ack(self, digest_id: int, list_id: int) -> None:
        """A ``DigestListAck``: the list's data may be sent again. An unknown list is ignored
        (acknowledged already, or expired), as PI ignores it."""
        with self._lock:
            stream = self._streams.get(digest_id)
            if stream is not None:
                self._forget(stream, list_id)

    # -- internals (called with the lock held) -------------------------------------------------
    def _flush(self, digest_id: int, stream: _Stream, now: float):
        message = p4runtime_pb2.StreamMessageResponse()
        message.digest.digest_id, message.digest.list_id = digest_id, stream.next_list_id
        message.digest.timestamp = time.time_ns()
        for data in stream.pending.data:
            members = message.digest.data.add().struct.members
            for value in data:
                members.add().bitstring = value
        if stream.config.ack_timeout_ns:
            for data in stream.pending.data:
                stream.unacked[data] = stream.next_list_id
            stream.sent[stream.next_list_id] = (now, stream.pending.data)
        stream.next_list_id += 1
        stream.pending = _List()
        return message

    def _forget(self, stream: _Stream, list_id: int) -> None:
        entry = stream.sent.pop(list_id, None)
        if entry is not None:
            for data in entry[1]:
                if stream.unacked.get(data) == list_id:
                    del stream.unacked[data]

    def _due(self, now: float) -> tuple[list, Optional[float]]:
        """Lists whose oldest digest waited ``max_timeout_ns`` (to send), sent lists past
        ``ack_timeout_ns`` (forgotten), and the next deadline."""
        out, deadline = [], None
        for digest_id, stream in self._streams.items():
            config = stream.config
            if stream.pending.data and config.max_timeout_ns:
                due = stream.pending.started + config.max_timeout_ns / 1e9
                if due <= now:
                    out.append(self._flush(digest_id, stream, now))
                else:
                    deadline = due if deadline is None else min(deadline, due)
            if config.ack_timeout_ns:
                for list_id, (sent_at, _) in list(stream.sent.items()):
                    due = sent_at + config.ack_timeout_ns / 1e9
                    if due <= now:
                        self._forget(stream, list_id)
                    else:
                        deadline = due if deadline is None else min(deadline, due)
        return out, deadline

    def tick(self) -> Optional[float]:
        """Send the lists whose time is up and forget acknowledgements that timed out (the
        timeout thread does this); returns the next deadline (clock seconds), if any."""
        with self._lock:
            out, deadline = self._due(self._clock())
        for message in out:
            self._send(message)
        return deadline

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                out, deadline = self._due(self._clock())
                if not out:
                    self._wake.wait(None if deadline is None
                                    else max(0.0, deadline - self._clock()))
                    continue
            for message in out:
                self._send(message)
