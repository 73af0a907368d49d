"""The switch targets the dataplane tests run on, behind one small interface.

:class:`Target` is what a test body uses: load a program, write table entries and multicast
groups by P4Info name, send a frame into a port and collect what comes out, read counters and
registers. Two implementations:

* :class:`EmbeddedTarget` -- the embedded software target (``softswitch``), in process: a
  :class:`softswitch.switch.Switch` hosting the compiled program; always available.
* :class:`Bmv2Target` -- real BMv2: the program compiled by ``p4c-bm2-ss``, run by
  ``simple_switch_grpc`` with one veth pair per port, entries and groups over P4Runtime
  (p4runtime-shell), registers and counters through ``simple_switch_CLI`` (BMv2's P4Runtime does
  not implement RegisterEntry), frames through scapy on the veths. Used only when the binaries
  are on PATH and the tests run as root. It has NOT been run here (no BMv2 in this
  environment): expect to adjust it on first contact with BMv2.
"""
from __future__ import annotations

import abc
import functools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from softswitch.api import CompiledProgram, Exact, ProgramInfo, Replica, TableEntry

ROOT = Path(__file__).resolve().parent.parent
HINA_P4 = ROOT / "p4" / "hina.p4"

BMV2_BINARIES = ("simple_switch_grpc", "p4c-bm2-ss", "simple_switch_CLI")


def bmv2_missing() -> Optional[str]:
    """Why real BMv2 cannot run here, or ``None`` when it can."""
    missing = [b for b in BMV2_BINARIES if shutil.which(b) is None]
    if missing:
        return "simple_switch_grpc / p4c-bm2-ss not on PATH"
    if os.geteuid() != 0:
        return "BMv2 tests need root (veth pairs)"
    return None


class Target(abc.ABC):
    """A switch running one P4 program."""

    name: str

    @abc.abstractmethod
    def load(self, p4_path: Path = HINA_P4, defines: Optional[Mapping[str, int]] = None) -> None:
        """Compile (cached) and load ``p4_path``; all state starts afresh."""

    @abc.abstractmethod
    def insert(self, entries: Iterable[TableEntry]) -> None:
        """Insert table entries (P4Info names, as :mod:`hina.pipeline` builds them)."""

    @abc.abstractmethod
    def set_mcast_group(self, group: int, replicas: Sequence[Replica]) -> None: ...

    @abc.abstractmethod
    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Send ``frame`` into ``port``; return every (port, frame) it produced, in order."""

    @abc.abstractmethod
    def counter_packets(self, name: str, index: int) -> int: ...

    @abc.abstractmethod
    def register_read(self, name: str, index: int) -> int: ...

    def close(self) -> None:
        """Release processes and interfaces."""


# --------------------------------------------------------------------------------------------
# Embedded target
# --------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def compile_embedded(p4_path: str, defines: tuple[tuple[str, int], ...]) -> CompiledProgram:
    """Compile once per (program, defines) for the whole test session."""
    from softswitch.compiler import compile_file
    return compile_file(p4_path, defines=dict(defines) or None)


class EmbeddedTarget(Target):
    """The softswitch engine in process, behind a :class:`softswitch.switch.Switch`."""

    name = "embedded"

    def __init__(self):
        from softswitch.switch import Switch
        self.switch = Switch(device_id=0)
        self.info: Optional[ProgramInfo] = None

    def load(self, p4_path: Path = HINA_P4, defines: Optional[Mapping[str, int]] = None) -> None:
        program = compile_embedded(str(p4_path), tuple(sorted((defines or {}).items())))
        self.switch.load(program)
        self.info = program.info

    @property
    def dataplane(self):
        return self.switch.require_dataplane()

    def insert(self, entries: Iterable[TableEntry]) -> None:
        dp = self.dataplane
        for entry in entries:
            dp.table_insert(entry)

    def set_mcast_group(self, group: int, replicas: Sequence[Replica]) -> None:
        self.dataplane.mcast_group_set(group, list(replicas))

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return list(self.switch.receive(port, bytes(frame)))

    def counter_packets(self, name: str, index: int) -> int:
        return self.dataplane.counter_read(name, index)[1]

    def register_read(self, name: str, index: int) -> int:
        return self.dataplane.register_read(name, index)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.dataplane.register_write(name, index, value)


# --------------------------------------------------------------------------------------------
# Real BMv2 (not exercised here: no BMv2 binaries in this environment)
# --------------------------------------------------------------------------------------------
class Bmv2Target(Target):
    """``simple_switch_grpc`` with one veth pair per port (``hina-sN`` on the switch side,
    ``hina-hN`` on the host side), frames sent and sniffed with scapy on the host side."""

    name = "bmv2"
    GRPC_PORT = 9559
    THRIFT_PORT = 9090
    PORTS = tuple(range(1, 17))
    SETTLE_S = 0.2          # quiet time after which a frame's outputs are considered complete

    def __init__(self):
        self.workdir = Path(tempfile.mkdtemp(prefix="hina-bmv2-"))
        self.proc: Optional[subprocess.Popen] = None
        self.client = None
        self.sniffer = None
        self.captured: list[tuple[int, bytes]] = []
        for p in self.PORTS:
            subprocess.run(["ip", "link", "add", f"hina-s{p}", "type", "veth", "peer", "name",
                            f"hina-h{p}"], check=True)
            for dev in (f"hina-s{p}", f"hina-h{p}"):
                subprocess.run(["sysctl", "-q", f"net.ipv6.conf.{dev}.disable_ipv6=1"], check=False)
                subprocess.run(["ip", "link", "set", dev, "up"], check=True)

    def load(self, p4_path: Path = HINA_P4, defines: Optional[Mapping[str, int]] = None) -> None:
        import p4runtime_sh.shell as sh
        from scapy.sendrecv import AsyncSniffer
        self.close_switch()
        out = self.workdir / "hina.json"
        p4info = self.workdir / "hina.p4info.txt"
        cmd = ["p4c-bm2-ss", "--arch", "v1model", "-o", str(out),
               "--p4runtime-files", str(p4info), str(p4_path)]
        cmd += [f"-D{k}={v}" for k, v in (defines or {}).items()]
        subprocess.run(cmd, check=True)
        ifaces = [a for p in self.PORTS for a in ("-i", f"{p}@hina-s{p}")]
        self.proc = subprocess.Popen(
            ["simple_switch_grpc", "--no-p4", *ifaces, "--thrift-port", str(self.THRIFT_PORT),
             "--", "--grpc-server-addr", f"127.0.0.1:{self.GRPC_PORT}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        sh.setup(device_id=0, grpc_addr=f"127.0.0.1:{self.GRPC_PORT}", election_id=(0, 1),
                 config=sh.FwdPipeConfig(str(p4info), str(out)))
        self.client = sh
        names = {f"hina-h{p}": p for p in self.PORTS}
        self.sniffer = AsyncSniffer(
            iface=list(names), store=False,
            prn=lambda pkt: self.captured.append((names[pkt.sniffed_on], bytes(pkt))))
        self.sniffer.start()
        time.sleep(0.5)

    def insert(self, entries: Iterable[TableEntry]) -> None:
        sh = self.client
        for e in entries:
            te = sh.TableEntry(e.table)(action=e.action.action)
            info = sh.context.get_obj("TABLE", e.table)
            for mf, m in zip(info.match_fields, e.matches):
                if not isinstance(m, Exact):
                    raise ValueError(f"{e.table}: HINA tables are exact-match, got {m!r}")
                te.match[mf.name] = str(m.value)
            action_info = sh.context.get_obj("ACTION", e.action.action)
            for param, value in zip(action_info.params, e.action.args):
                te.action[param.name] = str(value)
            te.insert()

    def set_mcast_group(self, group: int, replicas: Sequence[Replica]) -> None:
        mg = self.client.MulticastGroupEntry(group)
        for r in replicas:
            mg.add(r.port, r.rid)
        mg.insert()

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        from scapy.sendrecv import sendp
        self.captured.clear()
        sendp(frame, iface=f"hina-h{port}", verbose=False)
        seen = -1
        while seen != len(self.captured):
            seen = len(self.captured)
            time.sleep(self.SETTLE_S)
        # The host side also sees its own transmission: leave it out.
        return [(p, f) for p, f in self.captured if not (p == port and f == bytes(frame))]

    def _cli(self, command: str) -> str:
        proc = subprocess.run(["simple_switch_CLI", "--thrift-port", str(self.THRIFT_PORT)],
                              input=command, capture_output=True, text=True, check=True)
        return proc.stdout

    def counter_packets(self, name: str, index: int) -> int:
        out = self._cli(f"counter_read {name} {index}")
        return int(out.split("packets=")[1].split(")")[0])

    def register_read(self, name: str, index: int) -> int:
        out = self._cli(f"register_read {name} {index}")
        return int(out.rsplit("=", 1)[1].split()[0])

    def close_switch(self) -> None:
        if self.sniffer is not None:
            self.sniffer.stop()
            self.sniffer = None
        if self.client is not None:
            self.client.teardown()
            self.client = None
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def close(self) -> None:
        self.close_switch()
        for p in self.PORTS:
            subprocess.run(["ip", "link", "del", f"hina-s{p}"], check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)
