"""The switch targets the dataplane tests run on, behind one small interface.

:class:`Target` is what a test body uses: load a program, write table entries and multicast
groups by P4Info name, send a frame into a port and collect what comes out, read counters and
registers. Two implementations:

* :class:`EmbeddedTarget` -- the embedded software target (``softswitch``), in process: a
  :class:`softswitch.switch.Switch` hosting the compiled program; always available.
* :class:`EmbeddedTnaTarget` -- the same, running the TNA program (``p4/tna/hina_tna.p4``) on
  the embedded target's TNA dataplane in place of ``p4/hina.p4``: the same test bodies, the
  same expected bytes (what it lacks: ``bmv2_tests/conftest.py``, ``TNA_UNSUPPORTED``).
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
from hina import pipeline, programs
from hina import protocol as P

HINA_P4 = programs.HINA_P4
HINA_TNA_P4 = programs.HINA_TNA_P4

def bmv2_missing() -> Optional[str]:
    """Why real BMv2 cannot run here (one line), or ``None`` when it can."""
    from hina.controller.bmv2_dataplane import harness_missing
    return harness_missing()


class Target(abc.ABC):
    """A switch running one P4 program."""

    name: str
    #: the loaded program's names and entry shapes (:class:`hina.pipeline.Layout`)
    layout: pipeline.Layout = pipeline.V1MODEL

    @abc.abstractmethod
    def load(self, p4_path: Path = HINA_P4, defines: Optional[Mapping[str, int]] = None) -> None:
        """Compile (cached) and load ``p4_path``; all state starts afresh."""

    @abc.abstractmethod
    def insert(self, entries: Iterable[TableEntry]) -> None:
        """Insert table entries (P4Info names, as :mod:`hina.pipeline` builds them)."""

    @abc.abstractmethod
    def modify(self, entries: Iterable[TableEntry]) -> None:
        """Modify existing entries (same keys, new action arguments)."""

    def delete(self, entries: Iterable[TableEntry]) -> None:
        """Delete existing entries (by key)."""
        raise NotImplementedError(f"{self.name}: deleting entries")

    def update(self, updates: Iterable[tuple[str, TableEntry]]) -> None:
        """Apply ``(INSERT|MODIFY|DELETE, entry)`` updates in order
        (:func:`hina.pipeline.generation_updates`)."""
        do = {"INSERT": self.insert, "MODIFY": self.modify, "DELETE": self.delete}
        for kind, entry in updates:
            do[kind]([entry])

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

    def lane_read(self, word: int, copy: int) -> int:
        """Payload word ``word`` (unsigned) as stored for slot copy ``copy``
        (``2 * (reg_base + slot) + pool``), wherever the program keeps it."""
        return self.register_read(*self.layout.lane_cell(word, copy)) & 0xFFFFFFFF

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
        self.layout = pipeline.layout_for(program.info.tables)

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

    def delete(self, entries: Iterable[TableEntry]) -> None:
        dp = self.dataplane
        for entry in entries:
            dp.table_delete(entry)

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


class EmbeddedTnaTarget(EmbeddedTarget):
    """The embedded target running the TNA program (``p4/tna/hina_tna.p4``) on its TNA
    dataplane (``softswitch/engine/runtime_tna.py``). ``load()`` of the v1model program
    (the default) loads the TNA program instead, at the same packet size: ``HINA_WORDS`` words
    are ``TNA_LANES = HINA_WORDS / 2`` lanes (two blocks per packet, a pass each; 32 lanes is
    the Tofino 2 build's, Tofino 1 fits 16), and ``HINA_PAIRS`` pairs per PAIRS packet.
    It is the program's block-sparse profile (``TNA_BLOCK_SPARSE=1``, unless ``defines`` say
    otherwise): the v1model program aggregates block-sparse too, and the profile only adds the
    block-sparse ops to the default (docs/dataplane.md, "Tofino (TNA)").

    Registers and counters are read by the v1model program's names (``hina.pipeline``), which
    :class:`hina.pipeline.TnaLayout` translates; a register the TNA program has not is an error
    naming it. Lane registers: :meth:`lane_read`."""

    name = "embedded-tna"

    def load(self, p4_path: Path = HINA_P4, defines: Optional[Mapping[str, int]] = None) -> None:
        defines = dict(defines or {})
        if Path(p4_path) == HINA_P4:
            p4_path = HINA_TNA_P4
            words = int(defines.pop("HINA_WORDS", P.WORDS))
            for name, value in programs.embedded_defines("tna", words).items():
                defines.setdefault(name, value)
        super().load(p4_path, defines)

    def _name(self, kind: str, name: str) -> str:
        found = getattr(self.layout, kind)(name)
        if found is None:
            raise LookupError(f"the TNA program has no {kind} standing for {name!r} "
                              "(hina.pipeline.TnaLayout)")
        return found

    def counter_packets(self, name: str, index: int) -> int:
        return super().counter_packets(self._name("counter", name), index)

    def register_read(self, name: str, index: int) -> int:
        return super().register_read(self._name("register", name), index)

    def register_write(self, name: str, index: int, value: int) -> None:
        super().register_write(self._name("register", name), index, value)


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

    def delete(self, entries: Iterable[TableEntry]) -> None:
        for entry in entries:
            self.dp.table_delete(entry)

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
