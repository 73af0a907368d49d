"""Mininet switch classes that run a P4 target as one process on the switch's interfaces.

* :class:`SoftSwitch`: the embedded target, ``python -m softswitch --no-p4 -i 1@s1-eth1 ...``.
* :class:`Bmv2Switch`: BMv2's ``simple_switch_grpc``, with the options of the p4lang tutorials'
  ``P4RuntimeSwitch`` (gRPC and Thrift ports, device id, log and pcap).

Both start without a program (``--no-p4``): a P4Runtime controller pushes the pipeline once the
switch is up, exactly as with the tutorials. Both run in the root namespace (Mininet's default
for switches), so the controller reaches their gRPC server on ``127.0.0.1``.

Example::

    >>> net = Mininet(topo=StarTopo(4), switch=SoftSwitch, controller=None)   # doctest: +SKIP
    >>> net.start()                                  # the switch is up and serving P4Runtime
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from mininet.log import debug, info
from mininet.node import Switch

ROOT = Path(__file__).resolve().parents[2]
#: The interpreter that runs the embedded target (the one running Mininet: the project's venv).
PYTHON = sys.executable
BMV2_BINARY = "simple_switch_grpc"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.05
SOFTSWITCH_READY = "softswitch ready"
LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")


class SwitchStartError(RuntimeError):
    """The switch process exited or did not come up; the message has its log's tail."""


class P4ProcessSwitch(Switch):
    """A Mininet switch whose dataplane is one P4 target process started on its interfaces.

    Args:
        name: the node name (``s1``); its interfaces are ``s1-eth1``, ``s1-eth2``, ...
        grpc_port: TCP port of the P4Runtime server on 127.0.0.1 (default: 9559 for the first
            switch made in this process, then 9560, ...).
        device_id: the P4Runtime device id.
        log_level: the target's log level (one of ``LOG_LEVELS``).
        log_dir: where ``hina-<name>.log`` (the target's output) is written (default:
            ``$TMPDIR`` or ``/tmp``).
        pcap_dir: record every port into pcap files here (default: no capture).
        extra_args: more command-line arguments for the target.
    """

    target = "abstract"
    #: P4Runtime gRPC ports handed out so far in this process (several switches per network).
    _next_grpc_port = 9559

    def __init__(self, name: str, grpc_port: Optional[int] = None, device_id: int = 0,
                 log_level: str = "warn", log_dir: Optional[str] = None,
                 pcap_dir: Optional[str] = None, extra_args: tuple[str, ...] = (), **kwargs):
        if log_level not in LOG_LEVELS:
            raise ValueError(f"log_level={log_level!r}: one of {LOG_LEVELS}")
        Switch.__init__(self, name, **kwargs)
        if grpc_port is None:
            grpc_port = P4ProcessSwitch._next_grpc_port
            P4ProcessSwitch._next_grpc_port += 1
        self.grpc_port, self.device_id = grpc_port, device_id
        self.log_level, self.pcap_dir, self.extra_args = log_level, pcap_dir, tuple(extra_args)
        self.log_dir = Path(log_dir or os.environ.get("TMPDIR", "/tmp"))
        self.log_path = self.log_dir / f"hina-{name}.log"
        self.proc: Optional[subprocess.Popen] = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def dataplane_ports(self) -> dict[int, str]:
        """Switch port number -> interface name, without the loopback control interface."""
        return {port: intf.name for intf, port in self.ports.items()
                if intf.name != "lo" and not intf.IP()}

    def command(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def start(self, controllers) -> None:
        """Start the target process on the switch's interfaces and wait until it serves."""
        if _tcp_port_in_use(self.grpc_port):
            raise SwitchStartError(f"{self.name}: 127.0.0.1:{self.grpc_port} is already in use "
                                   "(another switch or a leftover process); pick grpc_port")
        for intf in self.dataplane_ports().values():
            # As the tutorials do: no IPv6 chatter from the switch's own interfaces.
            subprocess.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{intf}.disable_ipv6=1"],
                           check=False, capture_output=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.pcap_dir:
            Path(self.pcap_dir).mkdir(parents=True, exist_ok=True)
        cmd = self.command()
        info(f"*** Starting {self.target} switch {self.name}: {' '.join(cmd)}\n")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                         start_new_session=True)
        self._wait_ready()

    def _ready(self) -> bool:
        """Whether the target serves P4Runtime (by default: its gRPC port accepts connections)."""
        return _tcp_port_in_use(self.grpc_port)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SwitchStartError(f"{self.name}: {self.target} exited with status "
                                       f"{self.proc.returncode}:\n{self.log_tail()}")
            if self._ready():
                debug(f"{self.name} ready\n")
                return
            time.sleep(POLL_S)
        self.stop_process()
        raise SwitchStartError(f"{self.name}: {self.target} not ready after {START_TIMEOUT_S:.0f}s:"
                               f"\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop_process(self) -> None:
        """Stop the target process (SIGTERM to its process group, SIGKILL after a grace time)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's signature)
        self.stop_process()
        Switch.stop(self, deleteIntfs)


class SoftSwitch(P4ProcessSwitch):
    """The embedded target (``softswitch``) on the switch's interfaces (AF_PACKET ports).

    Args:
        loss: drop probability per port in both directions (the switch's own loss emulation,
            ``--loss``); for kernels without netem.
        loss_seed: seed of that loss (reproducible drops).
        Other arguments: :class:`P4ProcessSwitch`.
    """

    target = "embedded"

    def __init__(self, name: str, loss: float = 0.0, loss_seed: Optional[int] = None, **kwargs):
        P4ProcessSwitch.__init__(self, name, **kwargs)
        if not 0.0 <= loss < 1.0:
            raise ValueError(f"loss={loss!r}: a drop probability in [0, 1)")
        self.loss, self.loss_seed = loss, loss_seed

    def command(self) -> list[str]:
        cmd = [PYTHON, "-m", "softswitch", "--no-p4", "--grpc-server-addr", self.grpc_address,
               "--device-id", str(self.device_id), "--log-level", self.log_level]
        for port, intf in sorted(self.dataplane_ports().items()):
            cmd += ["-i", f"{port}@{intf}"]
            if self.loss:
                cmd += ["--loss", f"{port}:{self.loss}"]
        if self.loss and self.loss_seed is not None:
            cmd += ["--loss-seed", str(self.loss_seed)]
        if self.pcap_dir:
            cmd += ["--pcap", str(self.pcap_dir)]
        return cmd + list(self.extra_args)

    def _ready(self) -> bool:
        try:
            return any(line.startswith(SOFTSWITCH_READY)
                       for line in self.log_path.read_text(errors="replace").splitlines())
        except OSError:
            return False


class Bmv2Switch(P4ProcessSwitch):
    """BMv2's ``simple_switch_grpc`` on the switch's interfaces (the tutorials' P4RuntimeSwitch).

    Args:
        thrift_port: BMv2's Thrift runtime port (``simple_switch_CLI``; default: 9090 for the
            first BMv2 switch made in this process, then 9091, ...).
        binary: the BMv2 executable.
        Other arguments: :class:`P4ProcessSwitch`.
    """

    target = "bmv2"
    _next_thrift_port = 9090

    def __init__(self, name: str, thrift_port: Optional[int] = None,
                 binary: str = BMV2_BINARY, **kwargs):
        P4ProcessSwitch.__init__(self, name, **kwargs)
        if shutil.which(binary) is None:
            raise SwitchStartError(f"{binary} is not on PATH: install BMv2 (behavioral-model) "
                                   "or use the embedded target (--target embedded)")
        if thrift_port is None:
            thrift_port = Bmv2Switch._next_thrift_port
            Bmv2Switch._next_thrift_port += 1
        self.thrift_port, self.binary = thrift_port, binary

    def command(self) -> list[str]:
        cmd = [self.binary, "--no-p4", "--device-id", str(self.device_id),
               "--thrift-port", str(self.thrift_port)]
        for port, intf in sorted(self.dataplane_ports().items()):
            cmd += ["-i", f"{port}@{intf}"]
        if self.pcap_dir:
            cmd += [f"--pcap={self.pcap_dir}"]      # an implicit-value option: '=' needed
        if self.log_level != "off":
            cmd += ["--log-console", "--log-level", self.log_level]
        cmd += list(self.extra_args)
        return cmd + ["--", "--grpc-server-addr", self.grpc_address]


def _tcp_port_in_use(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


#: ``--target`` name -> switch class.
TARGETS = {"embedded": SoftSwitch, "bmv2": Bmv2Switch}
