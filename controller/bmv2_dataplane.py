"""Real BMv2 behind the embedded target's :class:`softswitch.api.Dataplane` interface.

:class:`Bmv2Dataplane` runs one program on ``simple_switch_grpc`` with a veth pair per port and
offers what the embedded engine offers in process: ``process(port, frame)`` returns the frames
the switch sent, table entries and multicast groups by P4Info name (over P4Runtime), registers
and counters (over BMv2's Thrift runtime). So the STF runner, the dataplane tests, the
differential tests and the benches drive either target with the same code.

Ports are veth pairs named ``hv<owner>-<n>s<port>`` (the switch's end) and ``hv<owner>-<n>h<port>``
(ours), where ``<owner>`` is the creating process id in base 36: two runs never collide, and
:func:`sweep_stale` removes the pairs (and switches) of processes that no longer exist, which is
what a crashed or killed run leaves. Frames are sent and received on raw ``AF_PACKET`` sockets
that ignore their own transmissions.

A send is complete when the frames the caller expects have arrived (``expected=N``) and no
more came within a short grace period, or, when the caller cannot say, when the ports have been
quiet for :attr:`Bmv2Dataplane.quiet_s`. BMv2 serves one ingress queue in arrival order, so a
frame that produces nothing is fully processed once a later frame's output is seen; counters
read right after a dropped frame are polled by the callers that compare them
(:mod:`controller.differential`).

Needs root (veth pairs, raw sockets) and the BMv2 toolchain (:func:`controller.bmv2.missing`).
"""
from __future__ import annotations

import json
import logging
import os
import queue
import re
import selectors
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from p4.v1 import p4runtime_pb2

from hina.softswitch.api import (ActionCall, CloneSession, ControlError, Digest, Exact, GroupRef,
                            Lpm, MemberRef, Optional_,
                            ProcessResult, ProgramInfo, Range, Replica, TableEntry, Ternary)
from hina.softswitch.ports import (AUXDATA_SPACE, ETH_P_ALL, PACKET_AUXDATA, PACKET_OUTGOING,
                                  SOL_PACKET, restore_vlan_tag)

from .bmv2 import WORKDIR_PREFIX, Bmv2Error, Bmv2Process, Bmv2Thrift, compile_p4c
from .p4runtime_client import P4RuntimeClientError, SwitchConnection, p4data_values

__all__ = ["VethPorts", "Bmv2Dataplane", "bmv2_on_veths", "sweep_stale", "leftovers",
           "IFACE_PREFIX", "harness_missing"]

log = logging.getLogger("hina.bmv2")

IFACE_PREFIX = "hv"
_IFACE_RE = re.compile(rf"^{IFACE_PREFIX}([0-9a-z]+)-(\d+)([sh])(\d+)$")
_PACKET_IGNORE_OUTGOING = 23
#: Ethernet MTU of the veths: jumbo, so that no test frame is refused by the kernel.
VETH_MTU = 9500
_instances = 0


def harness_missing() -> Optional[str]:
    """Why :class:`Bmv2Dataplane` cannot run here, or ``None``."""
    from .bmv2 import missing
    reason = missing()
    if reason:
        return reason
    if os.geteuid() != 0:
        return "BMv2 dataplane runs need root (veth pairs, raw sockets)"
    return None


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _ip_batch(commands: Sequence[str], check: bool = True) -> None:
    if not commands:
        return
    done = subprocess.run(["ip", "-force", "-batch", "-"], input="\n".join(commands) + "\n",
                          capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip -batch failed: {done.stderr.strip()}")


def _interfaces() -> list[str]:
    return sorted(os.listdir("/sys/class/net"))


def _workdirs() -> Iterable[tuple[int, Path]]:
    """``(owner pid, folder)`` of every :class:`Bmv2Process` work folder."""
    for path in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*-*"):
        owner = path.name[len(WORKDIR_PREFIX):].split("-", 1)[0]
        if owner.isdigit():
            yield int(owner), path


def leftovers(owner_pid: Optional[int] = None) -> dict[str, list]:
    """Interfaces, switch processes and switch work folders of this harness that exist now (of
    one owner process, or of every owner): ``{"interfaces": [...], "processes": [pid, ...],
    "folders": [...]}``."""
    tag = f"{IFACE_PREFIX}{_base36(owner_pid)}-" if owner_pid is not None else None
    ifaces = [n for n in _interfaces() if _IFACE_RE.match(n) and (tag is None or
                                                                  n.startswith(tag))]
    procs = []
    for pid, cmdline in _switch_processes():
        if any(tag is None or f"@{tag}" in arg for arg in cmdline if f"@{IFACE_PREFIX}" in arg):
            procs.append(pid)
    folders = sorted(str(p) for pid, p in _workdirs() if owner_pid is None or pid == owner_pid)
    return {"interfaces": ifaces, "processes": procs, "folders": folders}


def _switch_processes() -> Iterable[tuple[int, list[str]]]:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        args = raw.decode(errors="replace").split("\0")
        if args and os.path.basename(args[0]).startswith("simple_switch") and \
                any(f"@{IFACE_PREFIX}" in a for a in args):
            yield int(entry), args


def sweep_stale() -> list[str]:
    """Remove what crashed runs left: the veth pairs, BMv2 processes and switch work folders of
    this harness whose owner process is gone. Returns the names of what was removed."""
    removed = []
    for pid, args in _switch_processes():
        owners = {_IFACE_RE.match(a.split("@", 1)[1]) for a in args if f"@{IFACE_PREFIX}" in a}
        owner_pids = {int(m.group(1), 36) for m in owners if m}
        if owner_pids and not any(_alive(p) for p in owner_pids):
            try:
                os.kill(pid, 9)
                removed.append(f"process {pid}")
            except ProcessLookupError:
                pass
    stale = []
    for name in _interfaces():
        m = _IFACE_RE.match(name)
        if m and m.group(3) == "s" and not _alive(int(m.group(1), 36)):
            stale.append(name)
    _ip_batch([f"link del {n}" for n in stale], check=False)
    removed += stale
    for pid, folder in _workdirs():
        if not _alive(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(str(folder))
    if removed:
        log.warning("removed leftovers of an earlier run: %s", ", ".join(removed))
    return removed


class VethPorts:
    """One veth pair per switch port, up, IPv6 off (so the kernel sends nothing on them),
    jumbo MTU; removed by :meth:`close` (and by :func:`sweep_stale` if this process dies)."""

    def __init__(self, ports: Sequence[int]):
        global _instances
        _instances += 1
        self.ports = tuple(ports)
        self.tag = f"{IFACE_PREFIX}{_base36(os.getpid())}-{_instances}"
        if len(self.host(max(self.ports))) > 15:
            raise ValueError(f"interface names too long for tag {self.tag}")
        self._created: list[str] = []
        try:
            _ip_batch([f"link add {self.switch(p)} mtu {VETH_MTU} type veth peer name "
                       f"{self.host(p)} mtu {VETH_MTU}" for p in self.ports])
            self._created = [self.switch(p) for p in self.ports]
            for p in self.ports:
                for dev in (self.switch(p), self.host(p)):
                    try:
                        Path(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6").write_text("1")
                    except OSError:
                        pass              # no IPv6 in this kernel: nothing to silence
            _ip_batch([f"link set {dev} up" for p in self.ports
                       for dev in (self.switch(p), self.host(p))])
        except BaseException:
            self.close()
            raise

    def switch(self, port: int) -> str:
        return f"{self.tag}s{port}"

    def host(self, port: int) -> str:
        return f"{self.tag}h{port}"

    def close(self) -> None:
        existing = set(_interfaces())
        _ip_batch([f"link del {n}" for n in self._created if n in existing], check=False)
        self._created = []


def bmv2_on_veths(ports: Sequence[int], **process_args) -> tuple[VethPorts, Bmv2Process]:
    """``simple_switch_grpc`` (:class:`Bmv2Process`, ``process_args`` passed on) with a fresh
    veth pair per port of ``ports``, after sweeping what dead runs left; the pairs are removed
    again when the switch does not start. The caller closes both."""
    sweep_stale()
    veths = VethPorts(ports)
    try:
        return veths, Bmv2Process({p: veths.switch(p) for p in veths.ports}, **process_args)
    except BaseException:
        veths.close()
        raise


class _PortIO:
    """Raw sockets on the host ends: send a frame into a switch port, collect what comes out."""

    def __init__(self, veths: VethPorts):
        self.sockets: dict[int, socket.socket] = {}
        self.selector = selectors.DefaultSelector()
        try:
            for port in veths.ports:
                # protocol 0 until bound: a socket opened for ETH_P_ALL takes frames from every
                # interface (loopback gRPC included) until bind() names one, and keeps them
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                try:
                    s.setsockopt(SOL_PACKET, _PACKET_IGNORE_OUTGOING, 1)
                except OSError:
                    pass                   # older kernels: outgoing frames are filtered below
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                # the 802.1Q tag of a frame BMv2 sent, which the veth's VLAN offload moves
                # out of the frame, comes back in the ancillary data and is put back
                s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
                s.bind((veths.host(port), ETH_P_ALL))     # (CPython applies htons)
                s.setblocking(False)
                self.sockets[port] = s
                self.selector.register(s, selectors.EVENT_READ, port)
        except BaseException:
            self.close()
            raise

    def send(self, port: int, frame: bytes) -> None:
        if port not in self.sockets:
            raise ValueError(f"port {port} is not wired: this switch has ports "
                             f"{min(self.sockets)}..{max(self.sockets)}")
        self.sockets[port].send(frame)

    def receive(self, timeout: float) -> list[tuple[int, bytes]]:
        """Every frame available within ``timeout`` seconds (returns at the first arrival)."""
        out = []
        for key, _ in self.selector.select(timeout):
            s = key.fileobj
            while True:
                try:
                    data, ancillary, _flags, addr = s.recvmsg(65535, AUXDATA_SPACE)
                except BlockingIOError:
                    break
                if addr[2] != PACKET_OUTGOING:
                    out.append((key.data, restore_vlan_tag(data, ancillary)))
        return out

    def close(self) -> None:
        for s in self.sockets.values():
            try:
                self.selector.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()
        self.sockets = {}
        self.selector.close()


def _dont_care(m, width: int) -> bool:
    """P4Runtime wants a match that matches everything omitted, not written out."""
    full = (1 << width) - 1
    return (m is None or (isinstance(m, Lpm) and m.prefix_len == 0)
            or (isinstance(m, Ternary) and m.mask == 0)
            or (isinstance(m, Range) and m.low == 0 and m.high == full))


def _entry_match(entry: TableEntry, fields) -> dict:
    match = {}
    for field, m in zip(fields, entry.matches):
        if _dont_care(m, field.bitwidth):
            continue
        if isinstance(m, (Exact, Optional_)):
            match[field.name] = m.value
        elif isinstance(m, Ternary):
            match[field.name] = (m.value, m.mask)
        elif isinstance(m, Lpm):
            match[field.name] = (m.value, m.prefix_len)
        elif isinstance(m, Range):
            match[field.name] = (m.low, m.high)
        else:
            raise ControlError("INVALID_ARGUMENT", f"{entry.table}: match {m!r} not supported")
    return match


def _control_error(exc: P4RuntimeClientError) -> ControlError:
    """The embedded target's error for a P4Runtime failure (codes it has no name for, such as
    PI's UNKNOWN for a write the BMv2 target refused, become INTERNAL)."""
    code = exc.errors[0][1] if exc.errors else exc.code
    return ControlError(code if code in ControlError.CODES else "INTERNAL", str(exc))


class Bmv2Dataplane:
    """One program on ``simple_switch_grpc``, driven like an embedded-target dataplane.

    Args:
        p4: the P4_16 program (compiled with ``p4c-bm2-ss``, cached).
        defines: ``-D`` macros.
        ports: the switch ports to wire (a veth pair each).
        info: the program's :class:`ProgramInfo` (names, match fields) as the embedded front
            end derives it; compiled here when not given. Its names equal p4c's (the P4Info
            parity test checks it), so entries written by name mean the same on both targets.
        quiet_s: seconds without a new frame after which a send with no expectation is over.
        grace_s: seconds to wait for extra frames once the expected ones have arrived.

    Raises:
        controller.config.ConfigError: the program does not compile.
        controller.bmv2.Bmv2Error: the switch does not start.

    Example::

        >>> dp = Bmv2Dataplane("bench/programs/basic.p4", ports=(1, 2))    # doctest: +SKIP
        >>> dp.process(1, frame).outputs                                    # doctest: +SKIP
        [(2, b'...')]
        >>> dp.close()                                                      # doctest: +SKIP
    """

    drop_port = 511
    cpu_port: Optional[int] = None

    def __init__(self, p4: str | os.PathLike, defines: Optional[Mapping[str, object]] = None, *,
                 ports: Sequence[int] = tuple(range(1, 9)), info: Optional[ProgramInfo] = None,
                 quiet_s: float = 0.05, grace_s: float = 0.005, timeout_s: float = 5.0,
                 log_console: bool = False):
        self.p4, self.defines = str(p4), dict(defines or {})
        self.quiet_s, self.grace_s, self.timeout_s = quiet_s, grace_s, timeout_s
        self.build = compile_p4c(self.p4, self.defines)
        if info is None:
            from hina.softswitch.compiler import compile_file
            info = compile_file(self.p4, defines=self.defines or None).info
        self.info = info
        self.late: list[tuple[int, bytes]] = []
        self.veths = self.switch = self.conn = self.thrift = self.io = None
        self._groups: dict[int, tuple[Replica, ...]] = {}
        self._sessions: dict[int, CloneSession] = {}
        self._value_sets: dict[str, list[tuple[int, ...]]] = {}
        self._ap_members: dict[str, dict[int, ActionCall]] = {}
        self._ap_groups: dict[str, dict[int, tuple[int, ...]]] = {}
        try:
            sweep_stale()
            self.veths = VethPorts(ports)
            self.io = _PortIO(self.veths)
            self.switch = Bmv2Process({p: self.veths.switch(p) for p in self.veths.ports},
                                      log_console=log_console)
            self.conn = SwitchConnection(self.switch.address, election_id=1)
            self.thrift = Bmv2Thrift(self.switch.thrift_port)
            self.reset()
        except BaseException:
            self.close()
            raise

    @property
    def ports(self) -> tuple[int, ...]:
        return self.veths.ports

    def load(self, p4: str | os.PathLike, defines: Optional[Mapping[str, object]] = None,
             info: Optional[ProgramInfo] = None) -> None:
        """Run another program on the same switch and ports (compiled with p4c, cached); all
        state starts afresh."""
        p4, defines = str(p4), dict(defines or {})
        build = compile_p4c(p4, defines)
        if info is None:
            from hina.softswitch.compiler import compile_file
            info = compile_file(p4, defines=defines or None).info
        self.p4, self.defines, self.build, self.info = p4, defines, build, info
        self.reset()

    def reset(self) -> None:
        """Push the pipeline again: every table, register, counter and group starts afresh."""
        from hina.softswitch.p4info import read_p4info_text
        for group in list(self._groups):
            self.mcast_group_delete(group)
        for session in list(self._sessions):
            self.clone_session_delete(session)
        self._value_sets.clear()
        self._ap_members.clear()        # the pipeline push below empties the profiles
        self._ap_groups.clear()
        p4info = read_p4info_text(str(self.build.p4info))
        self.conn.set_pipeline(p4info, self.build.device_config())
        self.late.clear()
        self._take_digests()                 # the last program's, if any came late
        if p4info.digests:
            learn_lists = json.loads(Path(self.build.json).read_text())["learn_lists"]
            # every digest streams, one per list, at once; a digest whose every call p4c
            # removed as dead has no learn list, and PI refuses its config (INTERNAL)
            learned = {learn_list["name"] for learn_list in learn_lists}
            for digest in p4info.digests:
                if digest.preamble.name not in learned:
                    continue
                try:
                    self.conn.configure_digest(digest.preamble.name)
                except P4RuntimeClientError as exc:
                    raise _control_error(exc) from None
            for learn_list in learn_lists:
                self.thrift.learning_send_at_once(learn_list["id"])

    # -- digests -----------------------------------------------------------------------------
    def _decode_digests(self, msg: p4runtime_pb2.DigestList) -> list[Digest]:
        """A DigestList's data in order, named by the current P4Info (a list of another
        program's digest id, arriving late, is dropped)."""
        names = self.conn.index.digest_names if self.conn.index is not None else {}
        name = names.get(msg.digest_id)
        return [] if name is None else [Digest(name, p4data_values(d)) for d in msg.data]

    def _take_digests(self) -> list[Digest]:
        """The digests the switch has sent so far."""
        out: list[Digest] = []
        while True:
            try:
                out += self._decode_digests(self.conn.digest_lists.get_nowait())
            except queue.Empty:
                return out

    def late_digests(self, wait_s: Optional[float] = None) -> list[Digest]:
        """Digests that arrived after the :meth:`process` call of their frame returned: those
        in by now, and any that arrive within ``wait_s`` (default :attr:`quiet_s`) of the last.
        BMv2 learns at the end of ingress and PI streams the list from another thread, so a
        digest may trail its frame's output."""
        got = self._take_digests()
        wait = self.quiet_s if wait_s is None else wait_s
        while True:
            try:
                got += self._decode_digests(self.conn.digest_lists.get(timeout=wait))
            except queue.Empty:
                return got

    # -- packets -----------------------------------------------------------------------------
    def _drain(self) -> None:
        late = self.io.receive(0)
        while late:
            self.late += late
            late = self.io.receive(0)

    def process(self, ingress_port: int, frame: bytes, trace: bool = False, *,
                expected: Optional[int] = None) -> ProcessResult:
        """Send ``frame`` into ``ingress_port``; the frames that came out, in arrival order per
        port (ports in increasing order). Frames shorter than 14 bytes leave Linux zero-padded
        to 14. A frame that arrives before the send (late output of an earlier one) goes to
        :attr:`late`.

        Args:
            expected: how many frames the caller expects; the send ends once they are in and
                :attr:`grace_s` passed without more (or after :attr:`timeout_s`). Without it,
                the send ends after :attr:`quiet_s` without a frame.
        """
        self._drain()
        got: list[tuple[int, bytes]] = []
        self.io.send(ingress_port, bytes(frame))
        start = last = time.monotonic()
        while True:
            now = time.monotonic()
            if expected is not None and len(got) >= expected:
                wait = last + self.grace_s - now
            elif expected is not None:
                wait = start + self.timeout_s - now
            else:
                wait = last + self.quiet_s - now
            if wait <= 0:
                break
            arrived = self.io.receive(wait)
            if arrived:
                got += arrived
                last = time.monotonic()
        got.sort(key=lambda pf: pf[0])            # stable: per-port order kept
        return ProcessResult(outputs=got, digests=self._take_digests())

    # -- tables ------------------------------------------------------------------------------
    def _write(self, updates, what: str) -> None:
        try:
            self.conn.write(updates, what)
        except P4RuntimeClientError as exc:
            raise _control_error(exc) from None

    def _table_update(self, kind: str, entry: TableEntry):
        fields = self.info.table(entry.table).match_fields
        if isinstance(entry.action, (MemberRef, GroupRef)):
            try:
                msg = self.conn.require_index().table_entry(
                    entry.table, _entry_match(entry, fields), None, priority=entry.priority)
            except P4RuntimeClientError as exc:
                raise _control_error(exc) from None
            if isinstance(entry.action, MemberRef):
                msg.action.action_profile_member_id = entry.action.member_id
            else:
                msg.action.action_profile_group_id = entry.action.group_id
            return self.conn.update(kind, table_entry=msg)
        params = {}
        if kind != "DELETE":
            action = self.info.action(entry.action.action)
            params = {p.name: v for p, v in zip(action.params, entry.action.args)}
        try:
            return self.conn.table_update(kind, entry.table, _entry_match(entry, fields),
                                          entry.action.action if kind != "DELETE" else None,
                                          params, entry.priority)
        except P4RuntimeClientError as exc:
            raise _control_error(exc) from None

    def table_insert(self, entry: TableEntry) -> None:
        self._write([self._table_update("INSERT", entry)], f"insert into {entry.table}")

    def table_insert_many(self, entries: Iterable[TableEntry]) -> None:
        """Insert several entries in one P4Runtime Write."""
        updates = [self._table_update("INSERT", e) for e in entries]
        if updates:
            self._write(updates, "insert entries")

    def table_modify(self, entry: TableEntry) -> None:
        self._write([self._table_update("MODIFY", entry)], f"modify {entry.table}")

    def table_delete(self, entry: TableEntry) -> None:
        self._write([self._table_update("DELETE", entry)], f"delete from {entry.table}")

    def table_clear(self, table: str) -> None:
        """Delete every entry of ``table`` (read over P4Runtime, then deleted in one Write)."""
        try:
            table_id = self.conn.require_index().table(table).preamble.id
            found = self.conn.read([p4runtime_pb2.Entity(
                table_entry=p4runtime_pb2.TableEntry(table_id=table_id))], f"entries of {table}")
        except P4RuntimeClientError as exc:
            raise _control_error(exc) from None
        updates = []
        for entity in found:
            entry = p4runtime_pb2.TableEntry()
            entry.CopyFrom(entity.table_entry)
            if entry.is_const:
                continue
            entry.ClearField("action")
            updates.append(self.conn.update("DELETE", table_entry=entry))
        if updates:
            self._write(updates, f"clear {table}")

    def table_set_default(self, table: str, action: ActionCall) -> None:
        info = self.info.action(action.action)
        index = self.conn.require_index()
        try:
            entry = index.table_entry(table, {}, action.action,
                                      {p.name: v for p, v in zip(info.params, action.args)},
                                      default=True)
        except P4RuntimeClientError as exc:
            raise _control_error(exc) from None
        self._write([self.conn.update("MODIFY", table_entry=entry)], f"default of {table}")

    # -- packet replication engine -------------------------------------------------------------
    def mcast_group_set(self, group_id: int, replicas: Sequence[Replica]) -> None:
        kind = "MODIFY" if group_id in self._groups else "INSERT"
        self._write([self.conn.multicast_update(kind, group_id,
                                                [(r.port, r.rid) for r in replicas])],
                    f"multicast group {group_id}")
        self._groups[group_id] = tuple(replicas)

    def mcast_group_delete(self, group_id: int) -> None:
        self._write([self.conn.multicast_update("DELETE", group_id)],
                    f"delete multicast group {group_id}")
        self._groups.pop(group_id, None)

    def mcast_groups(self) -> dict[int, tuple[Replica, ...]]:
        return dict(self._groups)

    def clone_session_set(self, session: CloneSession) -> None:
        kind = "MODIFY" if session.session_id in self._sessions else "INSERT"
        self._write([self.conn.clone_session_update(
            kind, session.session_id, [(r.port, r.rid) for r in session.replicas],
            session.class_of_service, session.packet_length_bytes)],
            f"clone session {session.session_id}")
        self._sessions[session.session_id] = session

    def clone_session_delete(self, session_id: int) -> None:
        self._write([self.conn.clone_session_update("DELETE", session_id)],
                    f"delete clone session {session_id}")
        self._sessions.pop(session_id, None)

    def clone_sessions(self) -> dict[int, CloneSession]:
        return dict(self._sessions)

    # -- externs (Thrift) ------------------------------------------------------------------------
    def register_read(self, name: str, index: int) -> int:
        return self.thrift.register_read(name, index)

    def register_read_all(self, name: str) -> list[int]:
        return self.thrift.register_read_all(name)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.thrift.register_write(name, index, value)

    def register_reset(self, name: str) -> None:
        self.thrift.register_reset(name)

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        return self.thrift.counter_read(name, index)

    def counter_write(self, name: str, index: int, bytes_: int, packets: int) -> None:
        self.thrift.counter_write(name, index, bytes_, packets)

    def meter_set(self, name: str, index: int, cir: int, cburst: int, pir: int,
                  pburst: int) -> None:
        """Configure a meter cell (rates in units per second, as P4Runtime's MeterConfig;
        BMv2 takes units per microsecond), over Thrift ``bm_meter_set_rates``."""
        try:
            self.thrift.meter_set_rates(name, index, [(cir / 1e6, cburst), (pir / 1e6, pburst)])
        except Bmv2Error as exc:
            raise ControlError("INVALID_ARGUMENT", str(exc)) from None

    def meter_get(self, name: str, index: int) -> Optional[tuple[int, int, int, int]]:
        try:
            rates = self.thrift.meter_get_rates(name, index)
        except Bmv2Error as exc:
            raise ControlError("INVALID_ARGUMENT", str(exc)) from None
        if len(rates) != 2:
            return None
        (cir, cburst), (pir, pburst) = rates
        return round(cir * 1e6), cburst, round(pir * 1e6), pburst

    def direct_meter_set(self, table: str, entry: TableEntry, cir: int, cburst: int,
                         pir: int, pburst: int) -> None:
        """The direct meter cell of ``entry`` (P4Runtime ``DirectMeterEntry`` MODIFY)."""
        fields = self.info.table(table).match_fields
        try:
            match = self.conn.require_index().table_entry(table, _entry_match(entry, fields),
                                                          None, priority=entry.priority)
        except P4RuntimeClientError as exc:
            raise _control_error(exc) from None
        msg = p4runtime_pb2.DirectMeterEntry(table_entry=match)
        msg.config.cir, msg.config.cburst, msg.config.pir, msg.config.pburst = (
            cir, cburst, pir, pburst)
        self._write([self.conn.update("MODIFY", direct_meter_entry=msg)],
                    f"direct meter of {table}")

    def direct_counter_read(self, table: str, entry: TableEntry) -> tuple[int, int]:
        """(bytes, packets) of ``entry``'s direct counter, read over P4Runtime
        (``DirectCounterEntry``: the entry named by its match and priority)."""
        fields = self.info.table(table).match_fields
        try:
            match = self.conn.require_index().table_entry(table, _entry_match(entry, fields),
                                                          None, priority=entry.priority)
            request = p4runtime_pb2.DirectCounterEntry(table_entry=match)
            found = self.conn.read([p4runtime_pb2.Entity(direct_counter_entry=request)],
                                   f"direct counter of {table}")
        except P4RuntimeClientError as exc:
            raise _control_error(exc) from None
        if len(found) != 1:
            raise ControlError("NOT_FOUND", f"{table}: no entry with that match for its "
                                            f"direct counter ({len(found)} answers)")
        data = found[0].direct_counter_entry.data
        return data.byte_count, data.packet_count

    # -- action profiles and selectors (P4Runtime) ---------------------------------------------
    def _profile_id(self, profile: str) -> int:
        from hina.softswitch.p4info import read_p4info_text
        for p in read_p4info_text(str(self.build.p4info)).action_profiles:
            if p.preamble.name == profile:
                return p.preamble.id
        raise ControlError("NOT_FOUND", f"action profile {profile!r} is not in the P4Info")

    def act_prof_member_set(self, profile: str, member_id: int, action: ActionCall) -> None:
        members = self._ap_members.setdefault(profile, {})
        info = self.info.action(action.action)
        try:
            msg = self.conn.require_index().action_msg(
                action.action, {p.name: v for p, v in zip(info.params, action.args)})
        except P4RuntimeClientError as exc:
            raise _control_error(exc) from None
        member = p4runtime_pb2.ActionProfileMember(action_profile_id=self._profile_id(profile),
                                                   member_id=member_id, action=msg)
        kind = "MODIFY" if member_id in members else "INSERT"
        self._write([self.conn.update(kind, action_profile_member=member)],
                    f"member {member_id} of {profile}")
        members[member_id] = action

    def act_prof_member_delete(self, profile: str, member_id: int) -> None:
        member = p4runtime_pb2.ActionProfileMember(action_profile_id=self._profile_id(profile),
                                                   member_id=member_id)
        self._write([self.conn.update("DELETE", action_profile_member=member)],
                    f"delete member {member_id} of {profile}")
        self._ap_members.get(profile, {}).pop(member_id, None)

    def act_prof_members(self, profile: str) -> dict[int, ActionCall]:
        return dict(sorted(self._ap_members.get(profile, {}).items()))

    def act_prof_group_set(self, profile: str, group_id: int, members: Sequence[int]) -> None:
        groups = self._ap_groups.setdefault(profile, {})
        group = p4runtime_pb2.ActionProfileGroup(action_profile_id=self._profile_id(profile),
                                                 group_id=group_id)
        for m in members:
            group.members.add(member_id=m, weight=1)
        kind = "MODIFY" if group_id in groups else "INSERT"
        self._write([self.conn.update(kind, action_profile_group=group)],
                    f"group {group_id} of {profile}")
        groups[group_id] = tuple(members)

    def act_prof_group_delete(self, profile: str, group_id: int) -> None:
        group = p4runtime_pb2.ActionProfileGroup(action_profile_id=self._profile_id(profile),
                                                 group_id=group_id)
        self._write([self.conn.update("DELETE", action_profile_group=group)],
                    f"delete group {group_id} of {profile}")
        self._ap_groups.get(profile, {}).pop(group_id, None)

    def act_prof_groups(self, profile: str) -> dict[int, tuple[int, ...]]:
        return dict(sorted(self._ap_groups.get(profile, {}).items()))

    # -- parser value sets (Thrift: PI's P4Runtime server refuses ValueSetEntry writes) -----------
    def _value_set_widths(self, name: str) -> list[int]:
        for vs in self.info.value_sets:
            if vs.name == name:
                return [f.bitwidth for f in vs.match_fields]
        raise ControlError("NOT_FOUND", f"value set {name!r} is not in the program")

    def value_set_set(self, name: str, members: Sequence[tuple[int, ...]]) -> None:
        """Replace the members of value set ``name``: BMv2's ``bm_parse_vset_clear`` then one
        ``bm_parse_vset_add`` per member (its fields packed as BMv2's ``compressed_bitwidth``
        value, first field in the high bits, as ``simple_switch_CLI``'s ``pvs_add`` takes it)."""
        widths = self._value_set_widths(name)
        values = []
        for member in members:
            if len(member) != len(widths):
                raise ControlError("INVALID_ARGUMENT", f"value set {name}: a member has "
                                   f"{len(member)} values, the set {len(widths)} fields")
            packed = 0
            for value, width in zip(member, widths):
                if value < 0 or value >> width:
                    raise ControlError("OUT_OF_RANGE", f"value set {name}: {value} does not "
                                       f"fit in {width} bits")
                packed = (packed << width) | value
            values.append(packed.to_bytes(max(1, (sum(widths) + 7) // 8), "big"))
        try:
            self.thrift.parse_vset_clear(name)
            for value in values:
                self.thrift.parse_vset_add(name, value)
        except Bmv2Error as exc:
            raise ControlError("RESOURCE_EXHAUSTED" if "FULL" in str(exc).upper()
                               else "INVALID_ARGUMENT", str(exc)) from None
        self._value_sets[name] = [tuple(m) for m in members]

    def value_set_get(self, name: str) -> list[tuple[int, ...]]:
        self._value_set_widths(name)
        return list(self._value_sets.get(name, []))

    # -- teardown ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the switch, close the sockets, remove the veths (idempotent)."""
        for part in ("thrift", "conn"):
            obj = getattr(self, part)
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - teardown goes on whatever one part does
                    log.debug("closing %s", part, exc_info=True)
                setattr(self, part, None)
        if self.switch is not None:
            self.switch.stop()
            self.switch = None
        if self.io is not None:
            self.io.close()
            self.io = None
        if self.veths is not None:
            self.veths.close()
            self.veths = None

    def __enter__(self) -> "Bmv2Dataplane":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
