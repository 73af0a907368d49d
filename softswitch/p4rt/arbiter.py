"""Client arbitration on ``StreamChannel``: the connected client with the highest election id
is the primary; every client hears when that changes."""
from __future__ import annotations

import logging
import queue
import threading
from typing import Optional

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2

from .errors import P4RuntimeError, invalid

log = logging.getLogger("softswitch.p4runtime")


CLOSE = object()   # end-of-stream marker in a client's outgoing queue


class Client:
    """One StreamChannel: its election id (``None`` before arbitration) and outgoing queue."""

    def __init__(self):
        self.election_id: Optional[int] = None
        self.outgoing: "queue.Queue" = queue.Queue()
        self.abort_with: Optional[P4RuntimeError] = None

    def send(self, message) -> None:
        self.outgoing.put(message)

    def close(self, error: Optional[P4RuntimeError] = None) -> None:
        if error is not None:
            self.abort_with = error
        self.outgoing.put(CLOSE)


def election_id_of(msg) -> int:
    return (msg.high << 64) | msg.low


class Arbiter:
    """Primary election among the open streams of one device (default role only)."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self._lock = threading.Lock()
        self._clients: list[Client] = []
        self._primary: Optional[Client] = None

    @property
    def primary(self) -> Optional[Client]:
        return self._primary

    def is_primary(self, election_id: int) -> bool:
        primary = self._primary
        return primary is not None and primary.election_id == election_id

    def update(self, client: Client, election_id: int) -> None:
        """Handle a MasterArbitrationUpdate from ``client``.

        Raises:
            P4RuntimeError: INVALID_ARGUMENT if another client already uses ``election_id``.
        """
        with self._lock:
            if any(c is not client and c.election_id == election_id for c in self._clients):
                raise invalid(f"election id {format_election_id(election_id)} is already "
                               "used by another client")
            if client not in self._clients:
                self._clients.append(client)
            client.election_id = election_id
            changed = self._elect()
            if changed:
                for c in self._clients:
                    c.send(self._arbitration_for(c))
            else:
                client.send(self._arbitration_for(client))

    def remove(self, client: Client) -> None:
        with self._lock:
            if client in self._clients:
                self._clients.remove(client)
                if self._elect():
                    for c in self._clients:
                        c.send(self._arbitration_for(c))

    def _elect(self) -> bool:
        candidates = [c for c in self._clients if c.election_id is not None]
        best = max(candidates, key=lambda c: c.election_id, default=None)
        changed = best is not self._primary
        self._primary = best
        if changed:
            log.info("device %d: primary is now election id %s", self.device_id,
                     "none" if best is None else format_election_id(best.election_id))
        return changed

    def _arbitration_for(self, client: Client) -> p4runtime_pb2.StreamMessageResponse:
        response = p4runtime_pb2.StreamMessageResponse()
        arbitration = response.arbitration
        arbitration.device_id = self.device_id
        highest = self._primary.election_id if self._primary else client.election_id
        arbitration.election_id.high, arbitration.election_id.low = (highest >> 64,
                                                                     highest & (2**64 - 1))
        if client is self._primary:
            arbitration.status.code = code_pb2.OK
            arbitration.status.message = "is primary"
        elif self._primary is not None:
            arbitration.status.code = code_pb2.ALREADY_EXISTS
            arbitration.status.message = "is backup: a client with a higher election id is primary"
        else:
            arbitration.status.code = code_pb2.NOT_FOUND
            arbitration.status.message = "is backup: no primary"
        return response


def format_election_id(value: int) -> str:
    return f"({value >> 64}, {value & (2**64 - 1)})"


