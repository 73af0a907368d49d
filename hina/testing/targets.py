"""The switch targets the dataplane tests run on, behind one small interface.

:class:`Target` is what a test body uses: load a program, write table entries and multicast
groups by P4Info name, send a frame into a port and collect what comes out, read counters and
registers. Two implementations:

* :class:`EmbeddedTarget` -- the embedded software target (``softswitch``), in process: a
  :class:`softswitch.switch.Switch` hosting the compiled program; always available.
* :class:`Bmv2Target` -- real BMv2: the program compiled by ``p4c-bm2-ss``, run by
  ``simple_switch_grpc`` with one veth pair per port, entries and groups over P4Runtime
  (p4runtime-shell), registers and counters through ``simple_switch_CLI`` (BMv2's P4Runtime does
  not implement RegisterEntry), frames through raw sockets on the veths
  (:mod:`controller.bmv2_dataplane`). Used when the toolchain is installed and the tests run as
  root; otherwise its cases skip with the reason.
"""
from __future__ import annotations

import abc
import atexit
import functools
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from hina.softswitch.api import CompiledProgram, ProgramInfo, Replica, TableEntry
from hina import programs

HINA_P4 = programs.HINA_P4

def bmv2_missing() -> Optional[str]:
    """Why real BMv2 cannot run here (one line), or ``None`` when it can."""
    from hina.controller.bmv2_dataplane import harness_missing
    return harness_missing()


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
    def modify(self, entries: Iterable[TableEntry]) -> None:
        """Modify existing entries (same keys, new action arguments)."""

    @abc.abstractmethod
    def set_mcast_group(self, group: int, replicas: Sequence[Replica]) -> None: ...

    @abc.abstractmethod
    def send(self, port: int, frame: bytes, expected: Optional[int] = None
             ) -> list[tuple[int, bytes]]:
        """Send ``frame`` into ``port``; return every (port, frame) it produced, in order per
        port. ``expected`` (how many frames the caller expects) lets a real switch stop
        waiting as soon as they are in."""

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
    from hina.softswitch.compiler import compile_file
    return compile_file(p4_path, defines=dict(defines) or None)


class EmbeddedTarget(Target):
    """The softswitch engine in process, behind a :class:`softswitch.switch.Switch`."""

    name = "embedded"

    def __init__(self):
        from hina.softswitch.switch import Switch
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

    def modify(self, entries: Iterable[TableEntry]) -> None:
        dp = self.dataplane
        for entry in entries:
            dp.table_modify(entry)

    def set_mcast_group(self, group: int, replicas: Sequence[Replica]) -> None:
        self.dataplane.mcast_group_set(group, list(replicas))

    def send(self, port: int, frame: bytes, expected: Optional[int] = None
             ) -> list[tuple[int, bytes]]:
        return list(self.switch.receive(port, bytes(frame)))

    def counter_packets(self, name: str, index: int) -> int:
        return self.dataplane.counter_read(name, index)[1]

    def register_read(self, name: str, index: int) -> int:
        return self.dataplane.register_read(name, index)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.dataplane.register_write(name, index, value)


# --------------------------------------------------------------------------------------------
# Real BMv2
# --------------------------------------------------------------------------------------------
_SHARED: dict[str, object] = {}


def shared_bmv2():
    """The session's one BMv2 switch (:class:`controller.bmv2_dataplane.Bmv2Dataplane` on
    :data:`Bmv2Target.PORTS`), started on first use: each test loads its program afresh on it
    instead of starting a switch and 32 interfaces of its own. :func:`close_shared_bmv2`
    (a session finalizer in ``conftest.py``) stops it."""
    from hina.controller.bmv2_dataplane import Bmv2Dataplane
    dp = _SHARED.get("bmv2")
    if dp is None or not dp.switch.alive():
        if dp is not None:
            dp.close()
        info = compile_embedded(str(HINA_P4), (("HINA_WORDS", 64),)).info
        dp = Bmv2Dataplane(HINA_P4, {"HINA_WORDS": 64}, ports=Bmv2Target.PORTS, info=info)
        _SHARED["bmv2"] = dp
        atexit.register(close_shared_bmv2)      # also when the session finalizer never runs
    return dp


def close_shared_bmv2() -> None:
    dp = _SHARED.pop("bmv2", None)
    if dp is not None:
        dp.close()


class Bmv2Target(Target):
    """Real BMv2 (``simple_switch_grpc``, the program compiled by ``p4c-bm2-ss``), through
    :class:`controller.bmv2_dataplane.Bmv2Dataplane`: veth ports, P4Runtime for entries and
    groups, Thrift for registers and counters. Needs root and the toolchain."""

    name = "bmv2"
    PORTS = tuple(range(0, 33))    # port 0 too (golden vectors use it); worker n is on port n + 1

    def __init__(self):
        self.dp = shared_bmv2()
        self.info: Optional[ProgramInfo] = None

    def load(self, p4_path: Path = HINA_P4, defines: Optional[Mapping[str, int]] = None) -> None:
        key = tuple(sorted((defines or {}).items()))
        info = compile_embedded(str(p4_path), key).info
        self.dp.load(p4_path, dict(key), info=info)
        self.info = info

    def insert(self, entries: Iterable[TableEntry]) -> None:
        self.dp.table_insert_many(entries)

    def modify(self, entries: Iterable[TableEntry]) -> None:
        for entry in entries:
            self.dp.table_modify(entry)

    def set_mcast_group(self, group: int, replicas: Sequence[Replica]) -> None:
        self.dp.mcast_group_set(group, list(replicas))

    def send(self, port: int, frame: bytes, expected: Optional[int] = None
             ) -> list[tuple[int, bytes]]:
        outputs = self.dp.process(port, bytes(frame), expected=expected).outputs
        if self.dp.late:       # an earlier send's output arrived after that send had ended
            late, self.dp.late = list(self.dp.late), []
            raise AssertionError(f"BMv2 sent {len(late)} frame(s) after their send had ended "
                                 f"(ports {[p for p, _ in late]}): raise Bmv2Dataplane.quiet_s?")
        return outputs

    def counter_packets(self, name: str, index: int) -> int:
        return self.dp.counter_read(name, index)[1]

    def register_read(self, name: str, index: int) -> int:
        return self.dp.register_read(name, index)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.dp.register_write(name, index, value)

    def close(self) -> None:
        """The shared switch stays up for the next test; its state is reset by the next load."""
