"""Mininet switch classes that run a P4 target as one process on the switch's interfaces.

* :class:`SoftSwitch`: the embedded target, ``python -m hina.softswitch --no-p4 -i 1@s1-eth1 ...``.
* :class:`Bmv2Switch`: BMv2's ``simple_switch_grpc``, started by
  :class:`controller.bmv2.Bmv2Process` (the options of the p4lang tutorials' ``P4RuntimeSwitch``:
  gRPC and Thrift ports, device id, log and pcap).

Both start without a program (``--no-p4``): a P4Runtime controller pushes the pipeline once the
switch is up, exactly as with the tutorials. Both run in the root namespace (Mininet's default
for switches), so the controller reaches their gRPC server on ``127.0.0.1``. Their ports (gRPC,
and BMv2's Thrift) are picked free when the switch starts, so concurrent networks do not
collide, and the switch process is killed by the kernel if the thread that started it dies
(``PR_SET_PDEATHSIG``): not even a SIGKILLed launcher leaves a switch behind.

Example::

    >>> net = Mininet(topo=StarTopo(4), switch=SoftSwitch, controller=None)   # doctest: +SKIP
    >>> net.start()                                  # the switch is up and serving P4Runtime
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from mininet.log import debug, info
from mininet.node import Switch

from hina.loopback import free_tcp_port
from hina.procs import stop_group, with_parent_death_signal

#: The interpreter that runs the embedded target (the one running Mininet: the project's venv).
PYTHON = sys.executable
BMV2_BINARY = "simple_switch_grpc"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.05
#: Attempts with a new free port when the one picked was taken before the switch bound it.
START_ATTEMPTS = 3
SOFTSWITCH_READY = "softswitch ready"
LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")


class SwitchStartError(RuntimeError):
    """The switch process exited or did not come up; the message has its log's tail."""


class P4ProcessSwitch(Switch):
    """A Mininet switch whose dataplane is one P4 target process started on its interfaces.

    Args:
        name: the node name (``s1``); its interfaces are ``s1-eth1``, ``s1-eth2``, ...
        grpc_port: TCP port of the P4Runtime server on 127.0.0.1 (default: a free port picked
            when the switch starts; read :attr:`grpc_address` after ``start``).
        device_id: the P4Runtime device id.
        log_level: the target's log level (one of ``LOG_LEVELS``).
        log_dir: where ``hina-<name>.log`` (the target's output) is written (default:
            ``$TMPDIR`` or ``/tmp``).
        pcap_dir: record every port into pcap files here (default: no capture).
        extra_args: more command-line arguments for the target.
    """

    target = "abstract"

    def __init__(self, name: str, grpc_port: Optional[int] = None, device_id: int = 0,
                 log_level: str = "warn", log_dir: Optional[str] = None,
                 pcap_dir: Optional[str] = None, extra_args: tuple[str, ...] = (), **kwargs):
        if log_level not in LOG_LEVELS:
            raise ValueError(f"log_level={log_level!r}: one of {LOG_LEVELS}")
        Switch.__init__(self, name, **kwargs)
        self._fixed_grpc_port = grpc_port is not None
        self.grpc_port, self.device_id = grpc_port or 0, device_id
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

    def _prepare(self) -> None:
        for intf in self.dataplane_ports().values():
            # As the tutorials do: no IPv6 chatter from the switch's own interfaces.
            subprocess.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{intf}.disable_ipv6=1"],
                           check=False, capture_output=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.pcap_dir:
            Path(self.pcap_dir).mkdir(parents=True, exist_ok=True)

    def start(self, controllers) -> None:
        """Start the target process on the switch's interfaces and wait until it serves.

        Raises:
            SwitchStartError: the process exited or did not serve within ``START_TIMEOUT_S``
                (the message has the tail of its log), or a fixed ``grpc_port`` is taken.
        """
        if self._fixed_grpc_port and _tcp_port_in_use(self.grpc_port):
            raise SwitchStartError(f"{self.name}: 127.0.0.1:{self.grpc_port} is already in use "
                                   "(another switch or a leftover process); pick grpc_port")
        self._prepare()
        for attempt in range(1, START_ATTEMPTS + 1):
            if not self._fixed_grpc_port:
                self.grpc_port = free_tcp_port()
            cmd = self.command()
            info(f"*** Starting {self.target} switch {self.name}: {' '.join(cmd)}\n")
            with open(self.log_path, "w") as log:
                self.proc = subprocess.Popen(with_parent_death_signal(cmd), stdout=log,
                                             stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                self._wait_ready()
                return
            except SwitchStartError:
                # the free port was taken before the switch bound it: again, on another one
                tail = self.log_tail().lower()
                if self._fixed_grpc_port or attempt == START_ATTEMPTS or not any(
                        why in tail for why in ("cannot listen", "in use", "bind")):
                    raise

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
        """Stop the target process (SIGTERM to its process group, SIGKILL after a grace time);
        idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_group(proc, grace=STOP_TIMEOUT_S)

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
        cmd = [PYTHON, "-m", "hina.softswitch", "--no-p4", "--grpc-server-addr", self.grpc_address,
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
    """BMv2's ``simple_switch_grpc`` on the switch's interfaces (the tutorials' P4RuntimeSwitch),
    started and stopped by :class:`controller.bmv2.Bmv2Process`: free gRPC and Thrift ports,
    ready when both answer, killed with the thread that started it.

    Attributes (after ``start``):
        grpc_port, thrift_port: the ports the switch serves (P4Runtime, BMv2's Thrift runtime).
        log_path: the switch's output, ``<log_dir>/hina-<name>/simple_switch.log``.

    Args:
        Those of :class:`P4ProcessSwitch` (``grpc_port`` cannot be fixed: it is picked).
    """

    target = "bmv2"

    def __init__(self, name: str, **kwargs):
        if kwargs.get("grpc_port") is not None:
            raise ValueError(f"{name}: Bmv2Switch picks its gRPC and Thrift ports; grpc_port "
                             "cannot be given")
        P4ProcessSwitch.__init__(self, name, **kwargs)
        if shutil.which(BMV2_BINARY) is None:
            raise SwitchStartError(f"{BMV2_BINARY} is not on PATH: install BMv2 "
                                   "(behavioral-model) or use the embedded target "
                                   "(--target embedded)")
        self.thrift_port = 0
        self.process = None

    def extra_command_args(self) -> list[str]:
        """``simple_switch_grpc`` options besides ports, interfaces and device id."""
        args = []
        if self.pcap_dir:
            args.append(f"--pcap={self.pcap_dir}")      # an implicit-value option: '=' needed
        if self.log_level != "off":
            args += ["--log-level", self.log_level]
        return args + list(self.extra_args)

    def command(self) -> list[str]:
        """The command line of the running switch (after ``start``)."""
        if self.process is None or self.process.proc is None:
            raise SwitchStartError(f"{self.name}: not started")
        return list(self.process.proc.args)

    def start(self, controllers) -> None:
        from hina.controller.bmv2 import Bmv2Error, Bmv2Process
        self._prepare()
        info(f"*** Starting bmv2 switch {self.name} on {self.dataplane_ports()}\n")
        try:
            self.process = Bmv2Process(self.dataplane_ports(), device_id=self.device_id,
                                       log_console=self.log_level != "off",
                                       extra_args=self.extra_command_args(),
                                       workdir=self.log_dir / f"hina-{self.name}")
        except Bmv2Error as exc:
            raise SwitchStartError(f"{self.name}: {exc}") from None
        self.proc = self.process.proc
        self.grpc_port, self.thrift_port = self.process.grpc_port, self.process.thrift_port
        self.log_path = self.process.log_path

    def stop_process(self) -> None:
        process, self.process, self.proc = self.process, None, None
        if process is not None:
            process.stop()


def _tcp_port_in_use(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


#: ``--target`` name -> switch class.
TARGETS = {"embedded": SoftSwitch, "bmv2": Bmv2Switch}
