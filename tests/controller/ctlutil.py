"""Helpers of the controller tests: the embedded switch behind its real P4Runtime gRPC server,
with loopback UDP ports.

The switch runs in this process (``softswitch.switch.Switch`` + ``p4runtime_server.serve``) so a
pipeline push reuses the compile cache; the controller reaches it only over gRPC, exactly as it
reaches BMv2. Each worker port is a UDP tunnel (``softswitch.ports.UdpPort``) whose peer is the
worker's ``FrameLink`` socket. :meth:`EmbeddedSwitch.restart` replaces the switch by a fresh one on
the same addresses (a switch restart: every entry and register is gone).

The BMv2 variant (``bmv2_switch``) runs ``simple_switch_grpc`` when it is on PATH and skips with
the reason otherwise.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from typing import Optional

from controller.config import JobConfig, WorkerConfig

#: Tests compile the program with 64 words: half the LUT entries and lane registers of the
#: default, same code paths.
TEST_WORDS = 64
TEST_DEFINES = {"HINA_WORDS": str(TEST_WORDS)}
BMV2_MISSING = "simple_switch_grpc / p4c-bm2-ss not on PATH"
BMV2_BINARIES = ("simple_switch_grpc", "p4c-bm2-ss", "simple_switch_CLI")


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class EmbeddedSwitch:
    """An embedded switch on ``address`` with ``n_ports`` UDP tunnel ports (1..n)."""
    n_ports: int = 4
    address: str = ""
    switch_ports: list[int] = field(default_factory=list)    # UDP port of each switch port
    worker_ports: list[int] = field(default_factory=list)    # UDP port of each worker's tunnel

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
        from softswitch.p4runtime_server import serve
        from softswitch.ports import UdpPort
        from softswitch.switch import Switch
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

    def job(self, job_id: int = 1, n_workers: int = 2, codec: str = "fixedpoint",
            **kwargs) -> JobConfig:
        kwargs.setdefault("n_slots", 4)
        return JobConfig(job_id=job_id, codec=codec,
                         workers=tuple(self.worker(w) for w in range(n_workers)),
                         words=TEST_WORDS, **kwargs)


def bmv2_missing() -> Optional[str]:
    if any(shutil.which(b) is None for b in BMV2_BINARIES):
        return BMV2_MISSING
    return None


@dataclass
class Bmv2Switch:
    """``simple_switch_grpc --no-p4`` without ports (control-plane tests only)."""
    address: str
    thrift_port: int
    proc: subprocess.Popen

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=10)




#: sketched_sgd parameters of the tests: demo/digits.py's "sketch" mode (rows 3, columns 128,
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


def join_and_allreduce(address: str, job_id: int, steps, timeout: float = 60.0):
    """Every worker of ``steps`` joins ``job_id`` through the job service (one thread each),
    meets the others at a barrier and all-reduces its gradient of every step with the codec
    and transport its seat gives.

    Returns:
        ``(seats, codecs, means)`` in worker-index order; ``means[w][t]`` is worker w's step t.
    """
    from concurrent.futures import ThreadPoolExecutor

    from worker.jobclient import JobClient
    from worker.transport import allreduce
    n_workers = len(steps[0])

    def worker(_):
        with JobClient(address) as client:
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
