"""Helpers of the controller tests: the switches behind their real P4Runtime gRPC servers.

* :class:`EmbeddedSwitch`: the embedded target in this process (``softswitch.switch.Switch`` +
  ``p4runtime_server.serve``), so a pipeline push reuses the compile cache; the controller
  reaches it only over gRPC. Each worker port is a UDP tunnel (``softswitch.ports.UdpPort``)
  whose peer is the worker's ``FrameLink`` socket.
* :class:`Bmv2PortSwitch`: real ``simple_switch_grpc`` (:class:`controller.bmv2.Bmv2Process`)
  with one veth pair per port; a worker's frames go in and out on a raw socket of the pair's
  other end (:class:`VethLink`). Needs root and the BMv2 toolchain.

Both offer what a test sends traffic with: ``address``, ``worker(i)`` (a ``WorkerConfig`` on
switch port ``i + 1``), ``worker_arg(i)`` (the same for ``hina-ctl --worker``), ``link(worker)``,
``registers(conn)`` (the target's register path), ``restart()`` (a fresh device on the same
ports: every entry and register is gone) and ``stop()``.
"""
from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from typing import ClassVar, Optional

from hina.controller.config import JobConfig, WorkerConfig
from hina.loopback import free_port  # noqa: F401 (the tests import it from here)

#: Tests compile the program with 64 words: half the LUT entries and lane registers of the
#: default, same code paths.
TEST_WORDS = 64
TEST_DEFINES = {"HINA_WORDS": str(TEST_WORDS)}
SWITCH_MAC, SWITCH_IP = "02:00:00:00:00:fe", "10.0.0.254"


def wait_for(read, done, timeout: float = 5.0, interval: float = 0.05):
    """``read()`` until ``done(value)`` holds or ``timeout`` seconds pass; the last value.

    For switch state after a frame that draws no answer to wait on (a first contribution, a
    drop): the switch processes it asynchronously, and BMv2 register reads are one call per
    array, not one snapshot."""
    deadline = time.monotonic() + timeout
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(interval)
        value = read()
    return value


@dataclass
class EmbeddedSwitch:
    """An embedded switch on ``address`` with ``n_ports`` UDP tunnel ports (1..n)."""
    kind: ClassVar[str] = "embedded"
    n_ports: int = 4
    address: str = ""
    switch_ports: list[int] = field(default_factory=list)    # UDP port of each switch port
    worker_ports: list[int] = field(default_factory=list)    # UDP port of each worker's tunnel
    pipeline: Optional[object] = None       # the PipelineConfig for it (traffic_switch sets it)

    def __post_init__(self):
        self.address = f"127.0.0.1:{free_port()}"
        # The workers' tunnel ports are held while the switch binds its own with port 0 (the OS
        # picks): the two sets are distinct, and no port is released between its pick and its
        # bind on the switch side (picking-then-binding raced with other tests' sockets).
        held = []
        try:
            for _ in range(self.n_ports):
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                held.append(sock)
                sock.bind(("127.0.0.1", 0))
            self.worker_ports = [sock.getsockname()[1] for sock in held]
            self._start()
        finally:
            for sock in held:
                sock.close()

    def _start(self) -> None:
        """Start the switch; the first start binds its ports where the OS picks, a restart the
        same ones again."""
        from hina.softswitch.p4runtime_server import serve
        from hina.softswitch.ports import UdpPort
        from hina.softswitch.switch import Switch
        self.switch = Switch(device_id=0)
        first = not self.switch_ports
        for i in range(self.n_ports):
            port = UdpPort(i + 1, ("127.0.0.1", 0 if first else self.switch_ports[i]),
                           ("127.0.0.1", self.worker_ports[i]))
            self.switch.add_port(port)
            if first:
                self.switch_ports.append(port.local_address[1])
        self.server = serve(self.switch, self.address)

    def stop(self) -> None:
        self.server.stop(grace=None).wait(5)
        self.server.servicer.close()
        self.switch.close()

    def restart(self) -> None:
        """A switch restart: a fresh device (no pipeline, no state) on the same addresses."""
        self.stop()
        self._start()

    def worker(self, index: int, udp_port: int = 40000) -> WorkerConfig:
        """Worker ``index`` on switch port ``index + 1``, reaching it through the tunnel."""
        return WorkerConfig(ip=f"10.0.1.{index + 1}", udp_port=udp_port, port=index + 1,
                            mac=f"02:00:00:00:01:{index:02x}",
                            tunnel_local=f"127.0.0.1:{self.worker_ports[index]}",
                            tunnel_switch=f"127.0.0.1:{self.switch_ports[index]}")

    def worker_arg(self, index: int) -> str:
        """``hina-ctl job create --worker`` of :meth:`worker`."""
        w = self.worker(index)
        return f"{w.ip}:{w.udp_port},port={w.port},mac={w.mac},tunnel={w.tunnel_local}>" \
               f"{w.tunnel_switch}"

    def job(self, job_id: int = 1, n_workers: int = 2, codec: str = "fixed",
            **kwargs) -> JobConfig:
        return _job(self, job_id, n_workers, codec, **kwargs)

    def link(self, worker: WorkerConfig):
        """The worker's ``FrameLink`` through its tunnel (any ``WorkerConfig`` of this switch:
        a test may change its address to play a stranger)."""
        from hina import protocol as P
        from hina.worker.link import Endpoint, FrameLink
        local, remote = worker.tunnel_local.rpartition(":"), worker.tunnel_switch.rpartition(":")
        return FrameLink(Endpoint.make(worker.mac, worker.ip, worker.udp_port),
                         Endpoint.make(SWITCH_MAC, SWITCH_IP, P.UDP_PORT_BASE),
                         (local[0], int(local[2])), (remote[0], int(remote[2])))

    @staticmethod
    def registers(conn):
        from hina.controller.target import P4RuntimeRegisters
        return P4RuntimeRegisters(conn)


def _job(sw, job_id: int, n_workers: int, codec: str, **kwargs) -> JobConfig:
    kwargs.setdefault("n_slots", 4)
    return JobConfig(job_id=job_id, codec=codec,
                     workers=tuple(sw.worker(w) for w in range(n_workers)),
                     words=TEST_WORDS, **kwargs)


# ------------------------------------------------------------------------------------------------
# BMv2 on veth pairs
# ------------------------------------------------------------------------------------------------
#: Veth pairs come from :class:`controller.bmv2_dataplane.VethPorts` (``hv<owner pid, base
#: 36>-<n>{s,h}<port>``: two runs never collide; :func:`controller.bmv2_dataplane.sweep_stale`
#: removes the pairs of a killed run).
_ETH_P_ALL = 0x0003
_SOL_PACKET, _PACKET_IGNORE_OUTGOING = 263, 23


class VethLink:
    """A worker's HINA messages in Ethernet/IPv4/UDP frames on a raw socket of a veth end.

    Same interface as :mod:`worker.link`'s links: ``send(message)``, ``recv(timeout) -> message
    | None`` (the next one addressed to this worker), ``close()``.

    Args:
        worker: the worker's address (MAC, IPv4, UDP port: what admission knows it by).
        ifname: the veth end wired to the worker's switch port.
    """

    def __init__(self, worker: WorkerConfig, ifname: str):
        self.worker = worker
        # protocol 0 until bound (opened for ETH_P_ALL it queues every interface's frames)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            self.sock.setsockopt(_SOL_PACKET, _PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            pass            # older kernels: our own frames are not addressed to us: skipped
        self.sock.bind((ifname, _ETH_P_ALL))

    def send(self, message) -> None:
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether
        from scapy.packet import Raw, raw

        from hina import protocol as P
        w = self.worker
        self.sock.send(raw(Ether(dst=SWITCH_MAC, src=w.mac) / IP(src=w.ip, dst=SWITCH_IP) /
                           UDP(sport=w.udp_port, dport=P.UDP_PORT_BASE) / Raw(bytes(message))))

    def recv(self, timeout: float) -> Optional[bytes]:
        from scapy.layers.inet import IP, UDP
        from scapy.layers.l2 import Ether
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                frame = Ether(self.sock.recv(1 << 16))
            except socket.timeout:
                return None
            if IP in frame and UDP in frame and frame[IP].dst == self.worker.ip and \
                    frame[UDP].dport == self.worker.udp_port:
                return bytes(frame[UDP].payload)

    def close(self) -> None:
        self.sock.close()


class Bmv2PortSwitch:
    """``simple_switch_grpc`` with ``n_ports`` veth ports (1..n), for tests that send traffic.

    The switch process dies with the test process (``PR_SET_PDEATHSIG``); the veth pairs are
    deleted by :meth:`stop`, and those of a killed run by the next run's
    :func:`controller.bmv2_dataplane.sweep_stale`."""

    kind = "bmv2"
    pipeline = None         # the PipelineConfig for it (traffic_switch sets it)

    def __init__(self, n_ports: int = 2):
        from hina.controller.bmv2_dataplane import bmv2_on_veths
        self.veths, self.process = bmv2_on_veths(range(1, n_ports + 1))
        self._interfaces = {p: self.veths.switch(p) for p in self.veths.ports}

    @property
    def address(self) -> str:
        return self.process.address

    @property
    def thrift_port(self) -> int:
        return self.process.thrift_port

    def restart(self) -> None:
        """A switch restart: a fresh ``simple_switch_grpc`` on the same ports (new gRPC and
        Thrift ports: read ``address`` and ``thrift_port`` again)."""
        from hina.controller.bmv2 import Bmv2Process
        self.process.stop()
        self.process = Bmv2Process(self._interfaces)

    def stop(self) -> None:
        try:
            self.process.stop()
        finally:
            self.veths.close()

    def worker(self, index: int, udp_port: int = 40000) -> WorkerConfig:
        return WorkerConfig(ip=f"10.0.1.{index + 1}", udp_port=udp_port, port=index + 1,
                            mac=f"02:00:00:00:01:{index:02x}")

    def worker_arg(self, index: int) -> str:
        w = self.worker(index)
        return f"{w.ip}:{w.udp_port},port={w.port},mac={w.mac}"

    def job(self, job_id: int = 1, n_workers: int = 2, codec: str = "fixed",
            **kwargs) -> JobConfig:
        return _job(self, job_id, n_workers, codec, **kwargs)

    def link(self, worker: WorkerConfig) -> VethLink:
        """The worker's link: frames on the veth end of its switch port."""
        return VethLink(worker, self.veths.host(worker.port))

    def registers(self, conn):
        from hina.controller.target import ThriftRegisters
        return ThriftRegisters(self.thrift_port, use_cli=False)



#: sketched_sgd parameters of the tests: demo/digits.py's "sketched_sgd" mode (rows 3, columns 128,
#: 10-bit cells, 6-bit values, 120 value blocks, 8 hash seeds), k scaled to the test's bucket.
SKETCHED_SGD = {"sketch_rows": 3, "sketch_columns": 128, "sketch_seed": 11, "sketch_bits": 10,
                "value_bits": 6, "value_blocks": 120, "sketch_rotate": 8}


def sketched_sgd_grads(n_workers: int, steps: int, numel: int = 1000):
    """``steps`` lists of one gradient per worker (heavy coordinates for the sketch to find)."""
    import torch
    gen = torch.Generator().manual_seed(5)
    out = []
    for _ in range(steps):
        grads = [torch.randn(numel, generator=gen) for _ in range(n_workers)]
        heavy = torch.randperm(numel, generator=gen)[:numel // 20]
        for g in grads:
            g[heavy] += 8.0
        out.append(grads)
    return out


def join_and_allreduce(address: str, job_id: int, steps, timeout: float = 60.0,
                       token: Optional[str] = None):
    """Every worker of ``steps`` joins ``job_id`` through the job service (one thread each, with
    ``token``, default ``$HINA_JOB_TOKEN``), meets the others at a barrier and all-reduces its
    gradient of every step with the codec and transport its seat gives.

    Returns:
        ``(seats, codecs, means)`` in worker-index order; ``means[w][t]`` is worker w's step t.
    """
    from concurrent.futures import ThreadPoolExecutor

    from hina.worker.jobclient import JobClient
    from hina.worker.collective import allreduce
    n_workers = len(steps[0])

    def worker(_):
        with JobClient(address, token=token) as client:
            seat = client.join(job_id)
            client.barrier("start", timeout=timeout)
            codec = seat.codec()
            transport = seat.transport(give_up_s=10.0)
            try:
                means = [allreduce(grads[seat.worker_index].clone(), codec, transport)
                         for grads in steps]
            finally:
                transport.close()
            return seat, codec, means

    with ThreadPoolExecutor(n_workers) as pool:
        results = sorted(pool.map(worker, range(n_workers)), key=lambda r: r[0].worker_index)
    return tuple(list(col) for col in zip(*results))


def bmv2_ports_missing() -> Optional[str]:
    """Why :class:`Bmv2PortSwitch` cannot run here (one line), or ``None``."""
    from hina.controller.bmv2 import missing
    reason = missing()
    if reason is None and os.geteuid() != 0:
        reason = "BMv2 with ports needs root (veth pairs, raw sockets)"
    return reason
