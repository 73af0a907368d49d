"""Switch ports: Linux interfaces, loopback UDP sockets, and in-process queues for tests.

Every port implements :class:`softswitch.switch.Port`. Ports are named on the command line the
way BMv2 names them, ``-i N@SPEC``, and :func:`parse_port_spec` turns such a string into a port:

=====================================  ==========================================================
``1@s1-eth1``                          Linux interface ``s1-eth1`` through an AF_PACKET raw socket
                                       (Mininet). Needs root (CAP_NET_RAW). The interface is put in
                                       promiscuous mode; frames this host transmits on it
                                       (``PACKET_OUTGOING``: the switch's own, or another
                                       program's) are not taken as received.
``2@udp:127.0.0.1:9002@127.0.0.1:19002``  Loopback UDP: one datagram is one Ethernet frame. The
                                       port binds the first address (port ``0``: any free port;
                                       the port's ``name`` then carries the real one), takes
                                       datagrams from the peer ``127.0.0.1:19002`` only and sends
                                       the switch's frames there.
``2@udp:127.0.0.1:9002``               Same without a configured peer: the first address a
                                       datagram comes from becomes the peer, for as long as the
                                       port is open (first-peer lock); before that, frames the
                                       switch sends are dropped (and counted).
=====================================  ==========================================================

A UDP port is a wire: whoever sends to its socket is on that port. So a datagram from any address
but the peer is dropped before the switch (or the port's capture) sees it, counted in
``stats["rx_foreign_peer"]`` and logged at warning level (the first one of a port, then at most
one line per :data:`FOREIGN_LOG_INTERVAL_S`); otherwise any local process could send frames into
any port and pass the dataplane's port-based checks (``docs/reliability.md``). Give every port
its peer; the first-peer lock serves quick experiments, where the intended sender is the first
to send.

Every port can also record both directions into pcap files (:class:`PortCapture`, files
``DIR/<name>_in.pcap`` and ``DIR/<name>_out.pcap`` as BMv2's ``--pcap DIR`` writes them, with
characters other than letters, digits, ``.``, ``-`` and ``_`` in the name replaced by ``_``) and
drop frames at random (:class:`PortLoss`, seeded for reproducible tests).

Receive threads never die on a frame: the dataplane never raises on frame content, and anything a
delivery raises anyway is logged with its traceback and the next frame is served.

Example::

    >>> port = parse_port_spec("3@udp:127.0.0.1:0")
    >>> port.number, port.name.startswith("udp:127.0.0.1:")
    (3, True)
    >>> port.close()
"""
from __future__ import annotations

import logging
import os
import queue
import random
import re
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from .pcap import PcapWriter

log = logging.getLogger("softswitch.ports")

Deliver = Callable[[bytes], None]

# -- constants of the Linux packet socket interface (linux/if_packet.h, linux/if_ether.h) --------
ETH_P_ALL = 0x0003            # every protocol
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_OUTGOING = 4           # pkttype of frames this host transmitted
PACKET_MREQ = struct.Struct("iHH8s")   # ifindex, type, alen, address
PACKET_AUXDATA = 8            # ask for struct tpacket_auxdata with every frame
TPACKET_AUXDATA = struct.Struct("IIIHHHH")  # status, len, snaplen, mac, net, vlan_tci, vlan_tpid
TP_STATUS_VLAN_VALID = 1 << 4           # the kernel took an 802.1Q tag off the frame
TP_STATUS_VLAN_TPID_VALID = 1 << 6      # ... and says which TPID it had
ETH_P_8021Q = 0x8100
MAC_ADDRESSES_LEN = 12        # destination + source MAC: a VLAN tag goes right after them
AUXDATA_SPACE = socket.CMSG_SPACE(TPACKET_AUXDATA.size) if hasattr(socket, "CMSG_SPACE") else 0

MAX_FRAME = 65535             # receive buffer: larger than any frame (jumbo frames included)
POLL_INTERVAL_S = 0.2         # how often a receive thread checks that it should stop
JOIN_TIMEOUT_S = 2.0          # how long close() waits for a receive thread
FOREIGN_LOG_INTERVAL_S = 10.0  # at most one warning per port and interval about foreign senders
UDP_SCHEME = "udp:"

PCAP_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class PortError(Exception):
    """A port that cannot be opened or a port specification that cannot be parsed."""


# ------------------------------------------------------------------------------------------------
# Loss and capture, shared by every port kind
# ------------------------------------------------------------------------------------------------
@dataclass
class PortLoss:
    """Drop frames at random on one port, for testing loss recovery.

    Args:
        rx: probability in [0, 1] that a received frame is dropped before the switch sees it.
        tx: probability in [0, 1] that a frame the switch sends is dropped before the wire.
        seed: seed of the port's own random generator (``None``: seeded from the OS), so a test
            sees the same drops on every run.

    Example::

        >>> loss = PortLoss(rx=0.5, seed=1)
        >>> sum(loss.drop_rx() for _ in range(1000)) in range(400, 600)
        True
    """

    rx: float = 0.0
    tx: float = 0.0
    seed: Optional[int] = None
    rx_rng: random.Random = field(init=False, repr=False, compare=False)
    tx_rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for direction, prob in (("rx", self.rx), ("tx", self.tx)):
            if not 0.0 <= prob <= 1.0:
                raise ValueError(f"PortLoss {direction}={prob!r}: a drop probability must be "
                                 f"between 0 and 1")
        # One generator per direction: receive and transmit run in different threads, and
        # sharing one would make the drops depend on how the threads interleave.
        self.rx_rng = random.Random(None if self.seed is None else f"{self.seed}:rx")
        self.tx_rng = random.Random(None if self.seed is None else f"{self.seed}:tx")

    def drop_rx(self) -> bool:
        """Whether to drop the frame being received (draws only when ``rx`` > 0)."""
        return self.rx > 0.0 and self.rx_rng.random() < self.rx

    def drop_tx(self) -> bool:
        """Whether to drop the frame being sent (draws only when ``tx`` > 0)."""
        return self.tx > 0.0 and self.tx_rng.random() < self.tx


def pcap_stem(name: str) -> str:
    """The file-name stem of a port's captures: its name with unsafe characters as ``_``."""
    return PCAP_NAME_UNSAFE.sub("_", name)


class PortCapture:
    """The two pcap files of one port: ``<dir>/<stem>_in.pcap`` and ``<dir>/<stem>_out.pcap``."""

    def __init__(self, directory: str, port_name: str):
        os.makedirs(directory, exist_ok=True)
        stem = os.path.join(directory, pcap_stem(port_name))
        self.rx = PcapWriter(stem + "_in.pcap")
        self.tx = PcapWriter(stem + "_out.pcap")

    def close(self) -> None:
        self.rx.close()
        self.tx.close()


class BasePort:
    """What all port kinds share: number, name, loss, capture, counters and the receive thread.

    Subclasses implement :meth:`_transmit` (put a frame on the wire) and :meth:`_receive_once`
    (wait at most ``POLL_INTERVAL_S`` for one frame; ``None`` when none came).

    Args:
        number: the switch port number (``standard_metadata.ingress_port``).
        name: a human-readable name, used in logs and capture file names.
        loss: random drops on this port, or ``None``.
        pcap_dir: record both directions into pcap files in this folder, or ``None``.
    """

    def __init__(self, number: int, name: str, *, loss: Optional[PortLoss] = None,
                 pcap_dir: Optional[str] = None):
        if not isinstance(number, int) or number < 0:
            raise PortError(f"port number {number!r} must be a non-negative integer")
        self.number = number
        self.name = name
        self.loss = loss
        self.pcap_dir = pcap_dir
        self.capture: Optional[PortCapture] = None
        self.stats = {"rx": 0, "tx": 0, "rx_dropped_loss": 0, "tx_dropped_loss": 0,
                      "rx_errors": 0, "tx_errors": 0}
        self._deliver: Optional[Deliver] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, deliver: Deliver) -> None:
        """Begin delivering received frames to ``deliver`` from a daemon thread."""
        if self._thread is not None:
            raise PortError(f"port {self.number} ({self.name}) is already started")
        if self.pcap_dir is not None:
            self.capture = PortCapture(self.pcap_dir, self.name)
        self._deliver = deliver
        self._thread = threading.Thread(target=self._receive_loop, daemon=True,
                                        name=f"port-{self.number}-rx")
        self._thread.start()

    def close(self) -> None:
        """Stop the receive thread, release the socket and close the captures. Idempotent."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_TIMEOUT_S)
        self._close_resources()
        if self.capture is not None:
            self.capture.close()

    def _close_resources(self) -> None:
        """Release what the port kind holds (its socket)."""

    # -- transmit ----------------------------------------------------------------------------
    def send(self, frame: bytes) -> None:
        """Transmit one frame out of this port (subject to loss; recorded when capturing)."""
        if self.loss is not None and self.loss.drop_tx():
            self.stats["tx_dropped_loss"] += 1
            return
        if self.capture is not None:
            self.capture.tx.write(frame)
        try:
            self._transmit(frame)
        except OSError:
            self.stats["tx_errors"] += 1
            raise                      # the switch logs it and goes on
        self.stats["tx"] += 1

    def _transmit(self, frame: bytes) -> None:
        raise NotImplementedError

    # -- receive -----------------------------------------------------------------------------
    def _receive_once(self) -> Optional[bytes]:
        raise NotImplementedError

    def _receive_loop(self) -> None:
        while not self._stop.is_set():
            try:
                frame = self._receive_once()
            except OSError as exc:
                if self._stop.is_set():
                    return
                self.stats["rx_errors"] += 1
                log.warning("port %d (%s): receive failed: %s", self.number, self.name, exc)
                self._stop.wait(POLL_INTERVAL_S)
                continue
            if frame is not None:
                self.handle_frame(frame)

    def handle_frame(self, frame: bytes) -> None:
        """Deliver one received frame to the switch, after loss and capture; never raises."""
        if self.loss is not None and self.loss.drop_rx():
            self.stats["rx_dropped_loss"] += 1
            return
        if self.capture is not None:
            self.capture.rx.write(frame)
        self.stats["rx"] += 1
        deliver = self._deliver
        if deliver is None:
            return
        try:
            deliver(frame)
        except Exception:  # a bad frame or a bug must not kill the port: log it, serve the next
            self.stats["rx_errors"] += 1
            log.exception("port %d (%s): processing a frame of %d bytes failed",
                          self.number, self.name, len(frame))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.number}@{self.name})"


# ------------------------------------------------------------------------------------------------
# In-process port (tests)
# ------------------------------------------------------------------------------------------------
class InProcessPort(BasePort):
    """A port whose wire is a Python queue, for tests.

    ``inject(frame)`` receives a frame as if from the wire (synchronously, in the caller's
    thread: the switch has processed it when ``inject`` returns); the frames the switch sends
    wait in a thread-safe queue for :meth:`recv` or :meth:`drain`.

    Example::

        >>> p = InProcessPort(1)
        >>> p.start(lambda frame: p.send(frame[::-1]))   # a "switch" that reverses and reflects
        >>> p.inject(b"\\x01\\x02")
        >>> p.recv(timeout=1)
        b'\\x02\\x01'
        >>> p.close()
    """

    def __init__(self, number: int, name: Optional[str] = None, **kwargs):
        super().__init__(number, name or f"inproc{number}", **kwargs)
        self._sent: "queue.Queue[bytes]" = queue.Queue()

    def start(self, deliver: Deliver) -> None:
        if self._deliver is not None:
            raise PortError(f"port {self.number} ({self.name}) is already started")
        if self.pcap_dir is not None:
            self.capture = PortCapture(self.pcap_dir, self.name)
        self._deliver = deliver            # no thread: inject() delivers synchronously

    def inject(self, frame: bytes) -> None:
        """Receive ``frame`` on this port (loss and capture apply)."""
        self.handle_frame(bytes(frame))

    def _transmit(self, frame: bytes) -> None:
        self._sent.put(bytes(frame))

    def recv(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next frame the switch sent on this port, or ``None`` after ``timeout`` seconds."""
        try:
            return self._sent.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain(self) -> list[bytes]:
        """All frames sent and not yet received, oldest first."""
        frames = []
        while True:
            try:
                frames.append(self._sent.get_nowait())
            except queue.Empty:
                return frames


# ------------------------------------------------------------------------------------------------
# Loopback UDP port
# ------------------------------------------------------------------------------------------------
def _parse_host_port(text: str, what: str) -> tuple[str, int]:
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 0xFFFF:
        raise PortError(f"{what} {text!r} must be HOST:PORT with PORT in 0..65535")
    return host, int(port_text)


def _resolve_peer(number: int, peer: tuple[str, int]) -> tuple[str, int]:
    """``peer`` as the ``(IPv4 address, port)`` that ``recvfrom`` reports for its datagrams."""
    try:
        infos = socket.getaddrinfo(peer[0], peer[1], socket.AF_INET, socket.SOCK_DGRAM)
    except (OSError, UnicodeError) as exc:
        raise PortError(f"port {number}: cannot resolve the peer {peer[0]}:{peer[1]}: "
                        f"{getattr(exc, 'strerror', None) or exc}") from None
    return infos[0][4][:2]


class UdpPort(BasePort):
    """A port carried over UDP: each datagram is one Ethernet frame, to and from one peer.

    Datagrams from any other address are dropped, counted in ``stats["rx_foreign_peer"]`` and
    logged (the first of the port at warning level, then at most one line per
    :data:`FOREIGN_LOG_INTERVAL_S`): the peer is the only host on this "wire".

    Args:
        number: the switch port number.
        local: ``(host, port)`` to bind; port ``0`` picks a free one (see :attr:`local_address`).
        peer: the one address frames come from and go to. ``None``: the first address that
            sends a datagram becomes the peer for as long as the port is open (first-peer lock).

    Raises:
        PortError: the local address cannot be bound, or the peer's host cannot be resolved.
    """

    def __init__(self, number: int, local: tuple[str, int],
                 peer: Optional[tuple[str, int]] = None, **kwargs):
        if peer is not None:
            peer = _resolve_peer(number, peer)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind(local)
        except OSError as exc:
            raise PortError(f"port {number}: cannot bind UDP {local[0]}:{local[1]}: "
                            f"{exc.strerror or exc}") from None
        sock.settimeout(POLL_INTERVAL_S)
        self.sock = sock
        self.local_address: tuple[str, int] = sock.getsockname()[:2]
        self.peer = peer
        self.fixed_peer = peer is not None
        super().__init__(number, f"{UDP_SCHEME}{self.local_address[0]}:{self.local_address[1]}",
                         **kwargs)
        self.stats["tx_no_peer"] = 0
        self.stats["rx_foreign_peer"] = 0
        self._foreign_logged_at: Optional[float] = None   # monotonic time of the last warning
        self._foreign_unlogged = 0                        # foreign datagrams since then

    def _receive_once(self) -> Optional[bytes]:
        try:
            data, address = self.sock.recvfrom(MAX_FRAME)
        except socket.timeout:
            return None
        sender = address[:2]
        if self.peer is None:
            self.peer = sender                # first-peer lock
            log.info("port %d (%s): peer is %s:%d (the first sender; locked)", self.number,
                     self.name, *sender)
        elif sender != self.peer:
            self._drop_foreign(sender, len(data))
            return None
        return data

    def _drop_foreign(self, sender: tuple[str, int], size: int) -> None:
        """Count a datagram from an address that is not the peer; warn, rate-limited."""
        self.stats["rx_foreign_peer"] += 1
        now = time.monotonic()
        last = self._foreign_logged_at
        if last is not None and now - last < FOREIGN_LOG_INTERVAL_S:
            self._foreign_unlogged += 1
            return
        since = (f"; {self._foreign_unlogged} more from foreign senders since the last warning"
                 if self._foreign_unlogged else "")
        log.warning("port %d (%s): dropped a datagram of %d bytes from %s:%d, not its peer "
                    "%s:%d (rx_foreign_peer = %d)%s", self.number, self.name, size, *sender,
                    *self.peer, self.stats["rx_foreign_peer"], since)
        self._foreign_logged_at = now
        self._foreign_unlogged = 0

    def _transmit(self, frame: bytes) -> None:
        peer = self.peer
        if peer is None:
            self.stats["tx_no_peer"] += 1
            log.debug("port %d (%s): no peer yet, frame dropped", self.number, self.name)
            return
        self.sock.sendto(frame, peer)

    def _close_resources(self) -> None:
        self.sock.close()


# ------------------------------------------------------------------------------------------------
# Linux interface through AF_PACKET
# ------------------------------------------------------------------------------------------------
class InterfacePort(BasePort):
    """A Linux network interface, read and written through an AF_PACKET raw socket.

    The interface is put in promiscuous mode (the membership ends with the socket). Frames this
    host transmits on it (``PACKET_OUTGOING``: the switch's own, or those of another program on
    the host) are not taken as received: only frames from the wire enter the switch. An 802.1Q
    tag that the kernel took off a received frame (VLAN offload) is put back, as libpcap does,
    so the program parses the frame as it was on the wire.

    Raises:
        PortError: not root (no CAP_NET_RAW), or no such interface.
    """

    def __init__(self, number: int, ifname: str, **kwargs):
        if not hasattr(socket, "AF_PACKET"):
            raise PortError(f"port {number}@{ifname}: raw interfaces need Linux (AF_PACKET)")
        try:
            ifindex = socket.if_nametoindex(ifname)
        except OSError:
            raise PortError(f"port {number}: no network interface named {ifname!r}") from None
        try:
            # protocol 0 until bound: opened for ETH_P_ALL, the socket would queue frames of
            # every interface until bind() names one
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        except PermissionError:
            raise PortError(f"port {number}@{ifname}: opening a raw socket needs root "
                            f"(CAP_NET_RAW); use a udp: port otherwise") from None
        try:
            sock.bind((ifname, ETH_P_ALL))     # (CPython applies htons)
            mreq = PACKET_MREQ.pack(ifindex, PACKET_MR_PROMISC, 0, b"")
            sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        except OSError as exc:
            sock.close()
            raise PortError(f"port {number}@{ifname}: {exc.strerror or exc}") from None
        self.sock = sock
        self.ifname = ifname
        super().__init__(number, ifname, **kwargs)

    def _receive_once(self) -> Optional[bytes]:
        readable, _, _ = select.select([self.sock], [], [], POLL_INTERVAL_S)
        if not readable:
            return None
        data, ancillary, _flags, address = self.sock.recvmsg(MAX_FRAME, AUXDATA_SPACE)
        pkttype = address[2]
        if pkttype == PACKET_OUTGOING:
            return None
        return restore_vlan_tag(data, ancillary)

    def _transmit(self, frame: bytes) -> None:
        self.sock.send(frame)

    def _close_resources(self) -> None:
        self.sock.close()


def restore_vlan_tag(frame: bytes, ancillary) -> bytes:
    """Put back the 802.1Q tag the kernel moved from ``frame`` into its ``tpacket_auxdata``.

    Args:
        frame: the frame as an AF_PACKET socket returned it.
        ancillary: ``recvmsg``'s ancillary data (``(level, type, data)`` tuples).
    """
    for level, kind, data in ancillary:
        if level != SOL_PACKET or kind != PACKET_AUXDATA or len(data) < TPACKET_AUXDATA.size:
            continue
        status, _, _, _, _, tci, tpid = TPACKET_AUXDATA.unpack_from(data)
        if status & TP_STATUS_VLAN_VALID and len(frame) >= MAC_ADDRESSES_LEN:
            if not status & TP_STATUS_VLAN_TPID_VALID:
                tpid = ETH_P_8021Q
            tag = struct.pack("!HH", tpid, tci)
            return frame[:MAC_ADDRESSES_LEN] + tag + frame[MAC_ADDRESSES_LEN:]
    return frame


# ------------------------------------------------------------------------------------------------
# Command-line specifications
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PortSpec:
    """A parsed ``N@SPEC`` port specification (nothing opened yet).

    ``kind`` is ``"interface"`` (``ifname`` set) or ``"udp"`` (``local`` and optional ``peer``).
    """

    text: str
    number: int
    kind: str
    ifname: Optional[str] = None
    local: Optional[tuple[str, int]] = None
    peer: Optional[tuple[str, int]] = None

    @classmethod
    def parse(cls, text: str) -> "PortSpec":
        """Check the syntax of ``N@IFNAME``, ``N@udp:HOST:PORT`` or ``N@udp:HOST:PORT@PEER:PORT``.

        Raises:
            PortError: the message names the specification and what is wrong.

        Example::

            >>> PortSpec.parse("x@eth0")
            Traceback (most recent call last):
            ...
            softswitch.ports.PortError: port 'x@eth0': the port number 'x' is not a non-negative integer
        """
        number_text, sep, spec = text.partition("@")
        if not sep or not spec:
            raise PortError(f"port {text!r}: expected N@INTERFACE or N@udp:HOST:PORT[@PEER:PORT]")
        if not number_text.isdigit():
            raise PortError(f"port {text!r}: the port number {number_text!r} is not a "
                            f"non-negative integer")
        number = int(number_text)
        if spec.startswith(UDP_SCHEME):
            local_text, _, peer_text = spec[len(UDP_SCHEME):].partition("@")
            local = _parse_host_port(local_text, f"port {text!r}: local address")
            peer = _parse_host_port(peer_text, f"port {text!r}: peer") if peer_text else None
            if peer is not None and peer[1] == 0:
                raise PortError(f"port {text!r}: the peer's UDP port must not be 0")
            return cls(text, number, "udp", local=local, peer=peer)
        if "@" in spec or ":" in spec or "/" in spec:
            raise PortError(f"port {text!r}: {spec!r} is neither an interface name nor "
                            f"udp:HOST:PORT")
        return cls(text, number, "interface", ifname=spec)

    def open(self, *, loss: Optional[PortLoss] = None,
             pcap_dir: Optional[str] = None) -> BasePort:
        """Open (bind) the port; it starts receiving when the switch starts it.

        Raises:
            PortError: the socket cannot be opened (address in use, not root, no interface).
        """
        if self.kind == "udp":
            return UdpPort(self.number, self.local, self.peer, loss=loss, pcap_dir=pcap_dir)
        return InterfacePort(self.number, self.ifname, loss=loss, pcap_dir=pcap_dir)


def parse_port_spec(text: str, *, loss: Optional[PortLoss] = None,
                    pcap_dir: Optional[str] = None) -> BasePort:
    """Open the port that a BMv2-style ``N@SPEC`` string names.

    Args:
        text: ``N@IFNAME``, ``N@udp:HOST:PORT`` or ``N@udp:HOST:PORT@PEERHOST:PEERPORT``.
        loss: random drops for this port.
        pcap_dir: capture both directions into this folder.

    Returns:
        The opened (bound) but not yet started port.

    Raises:
        PortError: a malformed specification, or a port that cannot be opened; the message names
            the specification and what is wrong.
    """
    return PortSpec.parse(text).open(loss=loss, pcap_dir=pcap_dir)


def parse_loss_spec(text: str, seed: Optional[int] = None) -> tuple[int, PortLoss]:
    """Parse ``--loss PORT:PROB[:DIR]`` (DIR ``rx``, ``tx`` or ``both``, default ``both``).

    Returns:
        ``(port number, PortLoss)``.

    Example::

        >>> parse_loss_spec("2:0.1:rx", seed=7)
        (2, PortLoss(rx=0.1, tx=0.0, seed=7))
    """
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0].isdigit():
        raise PortError(f"loss {text!r}: expected PORT:PROB[:rx|tx|both]")
    direction = parts[2] if len(parts) == 3 else "both"
    if direction not in ("rx", "tx", "both"):
        raise PortError(f"loss {text!r}: direction {direction!r} is not rx, tx or both")
    try:
        prob = float(parts[1])
    except ValueError:
        raise PortError(f"loss {text!r}: probability {parts[1]!r} is not a number") from None
    if not 0.0 <= prob <= 1.0:
        raise PortError(f"loss {text!r}: probability {prob} is not between 0 and 1")
    rx = prob if direction in ("rx", "both") else 0.0
    tx = prob if direction in ("tx", "both") else 0.0
    return int(parts[0]), PortLoss(rx=rx, tx=tx, seed=seed)
