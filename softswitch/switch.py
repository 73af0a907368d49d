"""The switch host: one dataplane, its ports, and the lock that makes it one packet at a time.

Everything that touches the dataplane (ports delivering frames, the P4Runtime server, the STF
runner) goes through a :class:`Switch`, which serialises access like BMv2's default atomicity:
a frame runs to completion (including its replicas, recirculations and resubmissions) before the
next frame or control-plane request is served.

Ports implement :class:`Port`; ``softswitch.ports`` has the kinds BMv2 offers on its command line
(Linux interfaces, loopback UDP) plus an in-process port for tests.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Optional, Protocol

from .api import CompiledProgram, ControlError, Dataplane, Digest

log = logging.getLogger("softswitch")

PacketInSink = Callable[[bytes], None]
DigestSink = Callable[[Digest], None]


class Port(Protocol):
    """A switch port. ``start`` begins delivering received frames to ``deliver(frame)``."""

    number: int
    name: str

    def start(self, deliver: Callable[[bytes], None]) -> None: ...
    def send(self, frame: bytes) -> None: ...
    def close(self) -> None: ...


class Switch:
    """A device: ``device_id``, ports by number, an optional CPU port, and the loaded program.

    Args:
        device_id: the P4Runtime device id.
        cpu_port: the port number whose output frames become PacketIn, and whose PacketOut frames
            enter ingress (as in ``simple_switch_grpc --cpu-port``); ``None`` disables packet I/O.
        trace: log a per-packet trace at debug level.
    """

    def __init__(self, device_id: int = 0, cpu_port: Optional[int] = None, trace: bool = False):
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.trace = trace
        self.lock = threading.RLock()
        self.ports: dict[int, Port] = {}
        self.program: Optional[CompiledProgram] = None
        self.dataplane: Optional[Dataplane] = None
        self.cookie: int = 0                    # P4Runtime ForwardingPipelineConfig cookie
        self.p4info_bytes: Optional[bytes] = None   # the P4Info the controller pushed, verbatim
        self._packet_in_sinks: list[PacketInSink] = []
        self._digest_sinks: list[DigestSink] = []
        self.stats = {"rx": 0, "tx": 0, "dropped_no_program": 0, "tx_no_port": 0}

    # -- program ---------------------------------------------------------------------------
    def load(self, program: CompiledProgram, cookie: int = 0,
             p4info_bytes: Optional[bytes] = None) -> None:
        """Replace the running program; all run-time state starts afresh."""
        dataplane = program.instantiate()
        dataplane.cpu_port = self.cpu_port
        with self.lock:
            self.program, self.dataplane = program, dataplane
            self.cookie, self.p4info_bytes = cookie, p4info_bytes
        log.info("loaded program %s", program.name)

    def require_dataplane(self) -> Dataplane:
        dp = self.dataplane
        if dp is None:
            raise ControlError("FAILED_PRECONDITION", "no forwarding pipeline is set on the device")
        return dp

    # -- ports -----------------------------------------------------------------------------
    def add_port(self, port: Port) -> None:
        if port.number in self.ports:
            raise ValueError(f"port {port.number} is already in use by {self.ports[port.number].name}")
        self.ports[port.number] = port
        port.start(lambda frame, n=port.number: self.receive(n, frame))

    def close(self) -> None:
        for port in list(self.ports.values()):
            try:
                port.close()
            except Exception:  # a port that fails to close must not keep the others open
                log.exception("closing port %s", port.name)
        self.ports.clear()

    # -- sinks -----------------------------------------------------------------------------
    def add_packet_in_sink(self, sink: PacketInSink) -> None:
        self._packet_in_sinks.append(sink)

    def remove_packet_in_sink(self, sink: PacketInSink) -> None:
        if sink in self._packet_in_sinks:
            self._packet_in_sinks.remove(sink)

    def add_digest_sink(self, sink: DigestSink) -> None:
        self._digest_sinks.append(sink)

    def remove_digest_sink(self, sink: DigestSink) -> None:
        if sink in self._digest_sinks:
            self._digest_sinks.remove(sink)

    # -- the data path ---------------------------------------------------------------------
    def receive(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Process one frame and send its outputs; returns them (for in-process use).

        A PacketOut from the controller enters here with ``ingress_port == cpu_port``.
        """
        with self.lock:
            dp = self.dataplane
            self.stats["rx"] += 1
            if dp is None:
                self.stats["dropped_no_program"] += 1
                return []
            result = dp.process(ingress_port, frame, trace=self.trace)
            if self.trace and result.trace:
                log.debug("port %d frame of %d bytes:\n  %s", ingress_port, len(frame),
                          "\n  ".join(result.trace))
            for port_no, out in result.outputs:
                self._emit(port_no, out)
            for digest in result.digests:
                for sink in list(self._digest_sinks):
                    sink(digest)
            return result.outputs

    def _emit(self, port_no: int, frame: bytes) -> None:
        if self.cpu_port is not None and port_no == self.cpu_port:
            for sink in list(self._packet_in_sinks):
                sink(frame)
            return
        port = self.ports.get(port_no)
        if port is None:
            self.stats["tx_no_port"] += 1
            return
        self.stats["tx"] += 1
        try:
            port.send(frame)
        except OSError as exc:   # a dead interface must not take the switch down
            log.warning("port %s: send failed: %s", port.name, exc)
