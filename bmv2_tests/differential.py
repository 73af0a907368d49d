"""Differential runs: the same program, entries, groups and frames on both targets, compared.

:class:`Differential` drives the embedded target (an in-process instance of the program compiled
by ``softswitch``) and real BMv2 (the program compiled by ``p4c-bm2-ss``, on the session's
shared switch) in lock step. Every control-plane write goes to both (accepted by both or refused
by both); every frame goes into the same port of both, and what came out is compared per output
port, every frame in order. :meth:`Differential.check_state` compares every cell of every
register and indirect counter of the program. A disagreement raises :class:`TargetsDisagree`,
whose message shows both sides, frames as scapy dissections.

BMv2 is the reference: where they disagree, the embedded target is wrong unless the P4_16
spec says otherwise.

Example::

    >>> with Differential.open("bench/programs/basic.p4") as diff:       # doctest: +SKIP
    ...     diff.insert([TableEntry(...)])
    ...     diff.send(1, frame)
    ...     diff.check_state()
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from hina.softswitch.api import ActionCall, ControlError, Dataplane, Replica, TableEntry

from hina.testing.targets import compile_embedded, shared_bmv2

#: Seconds to wait for BMv2's counters and registers to reach the embedded target's values
#: (a frame that produced no output may still be in BMv2's pipeline when a send returns).
STATE_SETTLE_S = 2.0


class TargetsDisagree(AssertionError):
    """The embedded target and BMv2 did different things with the same input."""


def dissect(frame: bytes) -> str:
    """A frame as scapy shows it (HINA layers bound), and its bytes in hex."""
    import hina.layers  # noqa: F401 - binds the HINA layers to their UDP ports
    from scapy.layers.l2 import Ether
    try:
        shown = Ether(frame).show(dump=True)
    except Exception as exc:  # noqa: BLE001 - a frame scapy cannot dissect is still shown
        shown = f"(scapy cannot dissect it: {exc})"
    return f"{len(frame)} bytes: {frame.hex()}\n{shown}"


def _by_port(outputs: Iterable[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for port, frame in outputs:
        out.setdefault(port, []).append(bytes(frame))
    return out


def describe_outputs(label: str, outputs: Mapping[int, list[bytes]]) -> str:
    if not outputs:
        return f"--- {label}: no frame\n"
    parts = [f"--- {label}:"]
    for port in sorted(outputs):
        for i, frame in enumerate(outputs[port]):
            parts.append(f"port {port}, frame {i}: {dissect(frame)}")
    return "\n".join(parts) + "\n"


class Differential:
    """One program on both targets, in lock step.

    Args:
        p4: the program.
        defines: ``-D`` macros (both compilers get the same).

    Attributes:
        embedded: the embedded target's dataplane instance.
        bmv2: the session's BMv2 dataplane (:class:`controller.bmv2_dataplane.Bmv2Dataplane`),
            loaded with the program afresh.
        frames: frames sent so far.
    """

    def __init__(self, p4: str | Path, defines: Optional[Mapping[str, int]] = None):
        key = tuple(sorted((defines or {}).items()))
        program = compile_embedded(str(p4), key)
        self.info = program.info
        self.embedded: Dataplane = program.instantiate()
        self.bmv2 = shared_bmv2()
        self.bmv2.load(p4, dict(key), info=program.info)
        self.frames = 0

    @property
    def ports(self) -> tuple[int, ...]:
        return self.bmv2.ports

    # -- control plane ---------------------------------------------------------------------------
    def _both(self, what: str, on_embedded, on_bmv2) -> bool:
        """Run a write on both; True when both accepted it, False when both refused it."""
        errors = []
        for side, call in (("embedded", on_embedded), ("bmv2", on_bmv2)):
            try:
                call()
                errors.append(None)
            except ControlError as exc:
                errors.append(f"{side}: {exc}")
        if (errors[0] is None) != (errors[1] is None):
            raise TargetsDisagree(f"{what}: accepted by one target only: "
                                  f"{errors[0] or 'embedded: accepted'}; "
                                  f"{errors[1] or 'bmv2: accepted'}")
        return errors[0] is None

    def insert(self, entries: Iterable[TableEntry], *, strict: bool = True) -> int:
        """Insert ``entries`` one by one on both targets; returns how many both accepted.

        Args:
            strict: an entry refused by both targets is an error (for generated entries,
                ``strict=False`` skips it: both refusing is agreement).
        """
        accepted = 0
        for e in entries:
            ok = self._both(f"insert into {e.table}: {e}",
                            lambda: self.embedded.table_insert(e),
                            lambda: self.bmv2.table_insert(e))
            if not ok and strict:
                raise ControlError("INVALID_ARGUMENT", f"both targets refused {e}")
            accepted += ok
        return accepted

    def modify(self, entries: Iterable[TableEntry]) -> None:
        """Modify ``entries`` (existing keys, new arguments) on both targets, one by one.

        Raises:
            TargetsDisagree: one target accepted an update the other refused.
            ControlError: both refused one.
        """
        for e in entries:
            if not self._both(f"modify {e.table}: {e}", lambda: self.embedded.table_modify(e),
                              lambda: self.bmv2.table_modify(e)):
                raise ControlError("INVALID_ARGUMENT", f"both targets refused to modify {e}")

    def set_default(self, table: str, action: ActionCall) -> bool:
        return self._both(f"default action of {table}: {action}",
                          lambda: self.embedded.table_set_default(table, action),
                          lambda: self.bmv2.table_set_default(table, action))

    def set_mcast_group(self, group: int, replicas: Sequence[Replica]) -> None:
        self._both(f"multicast group {group}",
                   lambda: self.embedded.mcast_group_set(group, list(replicas)),
                   lambda: self.bmv2.mcast_group_set(group, list(replicas)))

    def register_write(self, name: str, index: int, value: int) -> None:
        self.embedded.register_write(name, index, value)
        self.bmv2.register_write(name, index, value)

    # -- data plane ------------------------------------------------------------------------------
    def send(self, port: int, frame: bytes) -> dict[int, list[bytes]]:
        """Send ``frame`` into ``port`` of both; returns the outputs (per port) they agree on.

        Raises:
            TargetsDisagree: the outputs differ (frames, their order on a port, or their
                number), or BMv2 sent a frame late (after an earlier send had ended).
        """
        frame = bytes(frame)
        self.frames += 1
        # BMv2 has an interface for its wired ports only; what the program sends elsewhere
        # leaves neither target.
        want = _by_port((p, f) for p, f in self.embedded.process(port, frame).outputs
                        if p in self.bmv2.ports)
        expected = sum(len(v) for v in want.values())
        got = _by_port(self.bmv2.process(port, frame, expected=expected).outputs)
        late = list(self.bmv2.late)
        if got != want or late:
            self.bmv2.late.clear()
            note = (f"\nBMv2 also sent {len(late)} frame(s) after an earlier send had ended: "
                    f"{late}" if late else "")
            raise TargetsDisagree(
                f"frame {self.frames} into port {port} ({dissect(frame)}):\n"
                + describe_outputs("embedded target", want)
                + describe_outputs("BMv2 (the reference)", got) + note)
        return got

    # -- state -----------------------------------------------------------------------------------
    def _state_diffs(self, registers: Sequence[str], counters: Sequence[str]) -> list[str]:
        diffs = []
        for r in self.info.registers:
            if r.name not in registers:
                continue
            mask = (1 << r.bitwidth) - 1
            got = [v & mask for v in self.bmv2.register_read_all(r.name)]
            for i, bmv2_value in enumerate(got):
                mine = self.embedded.register_read(r.name, i)
                if mine != bmv2_value:
                    diffs.append(f"register {r.name}[{i}]: embedded {mine}, BMv2 {bmv2_value}")
                    if len(diffs) > 20:
                        return diffs
        for c in self.info.counters:
            if c.name not in counters:
                continue
            cells = self.bmv2.conn.read_counter(c.name)
            for i in range(c.size):
                mine = self.embedded.counter_read(c.name, i)
                theirs = cells.get(i, (0, 0))
                if c.unit == "PACKETS":
                    mine, theirs = (0, mine[1]), (0, theirs[1])
                elif c.unit == "BYTES":
                    mine, theirs = (mine[0], 0), (theirs[0], 0)
                if mine != theirs:
                    diffs.append(f"counter {c.name}[{i}] (bytes, packets): embedded {mine}, "
                                 f"BMv2 {theirs}")
        return diffs

    def check_state(self, registers: Optional[Sequence[str]] = None,
                    counters: Optional[Sequence[str]] = None) -> None:
        """Compare every cell of the registers and indirect counters (all of the program's
        when not named) of both targets; BMv2 gets :data:`STATE_SETTLE_S` to finish the frames
        still in its pipeline.

        Raises:
            TargetsDisagree: listing up to 20 differing cells.
        """
        registers = [r.name for r in self.info.registers] if registers is None else registers
        counters = [c.name for c in self.info.counters] if counters is None else counters
        deadline = time.monotonic() + STATE_SETTLE_S
        while True:
            diffs = self._state_diffs(registers, counters)
            if not diffs:
                return
            if time.monotonic() > deadline:
                raise TargetsDisagree(f"after {self.frames} frames the state differs:\n  "
                                      + "\n  ".join(diffs))
            time.sleep(0.1)
