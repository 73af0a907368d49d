"""Hold the primary role on a switch for as long as a long-running controller runs.

``hina-ctl serve`` keeps a P4Runtime arbitration stream open with its election id, so while it
runs the switch refuses every other client's Write (PERMISSION_DENIED: unarbitrated requests,
election id 0, and any other election id) and every other controller that tries to become primary
with a lower or equal election id. An operator's one-shot command with a higher ``--election-id``
takes over for its duration, and the switch hands the role back when it ends (P4Runtime's
arbitration). When the stream ends (the switch restarted), the role is taken again every
``retry_s`` seconds until it is back.

Example::

    >>> hold = PrimaryHold(lambda: SwitchConnection("127.0.0.1:9559"))  # doctest: +SKIP
    >>> hold.start()          # raises if the role cannot be had now  # doctest: +SKIP
    >>> hold.stop()           # gives the role up                     # doctest: +SKIP
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Optional

from .p4runtime_client import P4RuntimeClientError, SwitchConnection

__all__ = ["PrimaryHold", "RETRY_S"]

log = logging.getLogger("hina.controller.primary")

#: Seconds between attempts to take the role back after the stream ended.
RETRY_S = 2.0
_WATCH_TICK_S = 0.5              # how often the holder looks at its stream


class PrimaryHold:
    """Keep a primary arbitration stream open in a background thread.

    Args:
        connect: opens a primary :class:`SwitchConnection` (raises :class:`P4RuntimeClientError`,
            :class:`~controller.p4runtime_client.NotPrimaryError` when another controller holds
            a higher or the same election id).
        retry_s: seconds between attempts to take the role back after the stream ended.
        on_primary: called with the new connection each time the role is taken (at start and
            after every re-take; ``hina-ctl serve``: :meth:`controller.restarts.SwitchKeeper.
            attach` re-installs a restarted switch); it must not raise.
    """

    def __init__(self, connect: Callable[[], SwitchConnection], retry_s: float = RETRY_S,
                 on_primary: Optional[Callable[[SwitchConnection], None]] = None):
        if retry_s <= 0:
            raise ValueError(f"retry_s={retry_s}: must be > 0")
        self._connect, self.retry_s, self._on_primary = connect, retry_s, on_primary
        self._conn: Optional[SwitchConnection] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def is_primary(self) -> bool:
        conn = self._conn
        return conn is not None and conn.is_primary

    @property
    def connection(self) -> Optional[SwitchConnection]:
        """The primary connection now (``None`` while the role is being taken back)."""
        return self._conn

    def start(self) -> None:
        """Take the role now and keep it in the background.

        Raises:
            P4RuntimeClientError: the switch cannot be reached, or another controller is primary
                with a higher or the same election id.
        """
        self._conn = self._connect()
        if self._on_primary is not None:
            self._on_primary(self._conn)
        self._thread = threading.Thread(target=self._run, daemon=True, name="primary-hold")
        self._thread.start()

    def _run(self) -> None:
        last_error = ""
        while not self._stop.is_set():
            conn = self._conn
            if conn is None:
                try:
                    conn = self._conn = self._connect()
                    log.info("primary role on %s taken again", conn.address)
                    last_error = ""
                    if self._on_primary is not None:
                        self._on_primary(conn)
                except P4RuntimeClientError as exc:
                    if str(exc) != last_error:
                        log.warning("cannot take the primary role back: %s", exc)
                        last_error = str(exc)
                    self._stop.wait(self.retry_s)
                    continue
            primary = conn.is_primary
            while not self._stop.is_set() and not conn.stream_ended.wait(_WATCH_TICK_S):
                if conn.is_primary != primary:
                    primary = conn.is_primary
                    log.warning("%s: %s", conn.address,
                                "primary again" if primary else
                                "another controller with a higher election id took the primary "
                                "role; it comes back when that one leaves")
            if not self._stop.is_set():
                log.warning("%s: the arbitration stream ended (switch restarted?); taking the "
                            "primary role again", conn.address)
                conn.close()
                self._conn = None
                self._stop.wait(self.retry_s)

    def stop(self) -> None:
        """Give the role up (close the stream); idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
