"""The v1model runtime: helpers the generated code calls (``RT``), the per-packet context
(``C``), the registry of tables and externs (``REG``) and :class:`V1Dataplane`, which implements
:class:`softswitch.api.Dataplane` the way BMv2 simple_switch runs a packet:

parser -> verifyChecksum -> ingress -> traffic manager (I2E clones, resubmit, multicast, drop,
unicast) -> egress -> (E2E clones, drop, recirculate) -> computeChecksum -> deparser.
"""
from __future__ import annotations

import logging
import random as _random
import struct  # noqa: F401 (generated code calls RT.struct)
import sys
from typing import Optional, Sequence

from ..api import ActionCall, CloneSession, ControlError, Digest, ProcessResult, Replica, TableEntry
from ..frontend.controlplane import ControlPlaneView
from . import externs
from .externs import (crc32_packed, csum16_int, csum16_packed, csum16_parts,  # noqa: F401
                      hash_crc32, hash_csum16, hash_csum16_sum,
                      hash_packed, hash_v1model, TnaChecksum, tna_xor)   # (generated code calls these as RT.*)
from .externs import StructRegister
from .profiles import ActionProfile
from .registry import (COUNTER_UNITS, METER_UNITS, DirectCounter, DirectMeter,  # noqa: F401
                       Registry, ValueSet)
from .tables import Table

log = logging.getLogger("softswitch.engine")

# v1model constants (BMv2 simple_switch).
DROP_PORT = 511
RECIRC_PORT = 0                  # BMv2 gives resubmitted/recirculated packets ingress_port 0
MAX_PASSES = 16                  # bound on resubmit + recirculate + E2E clone passes per frame
PKT_INSTANCE_TYPE_NORMAL = 0
PKT_INSTANCE_TYPE_INGRESS_CLONE = 1
PKT_INSTANCE_TYPE_EGRESS_CLONE = 2
PKT_INSTANCE_TYPE_COALESCED = 3
PKT_INSTANCE_TYPE_RECIRC = 4
PKT_INSTANCE_TYPE_REPLICATION = 5
PKT_INSTANCE_TYPE_RESUBMIT = 6
CLONE_I2E, CLONE_E2E = 0, 1      # CloneType enum order in v1model.p4
# error codes: order of core.p4's error declaration
ERR_NO_ERROR, ERR_PACKET_TOO_SHORT, ERR_NO_MATCH, ERR_STACK_OUT_OF_BOUNDS = 0, 1, 2, 3
ERR_HEADER_TOO_SHORT, ERR_PARSER_TIMEOUT, ERR_PARSER_INVALID_ARGUMENT = 4, 5, 6
BITS_PER_BYTE = 8


# ------------------------------------------------------------------------------ RT helpers
class ParserError(Exception):
    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


class ParserReject(Exception):
    """``transition reject`` without an error."""


class ExitControl(Exception):
    """``exit``: ends the top-level control being run."""


def reject():
    raise ParserReject()


def shl(a: int, b: int, width: int, signed: bool) -> int:
    if b >= width:
        return 0
    v = (a << b) & ((1 << width) - 1)
    if signed and v >> (width - 1):
        v -= 1 << width
    return v


def div(a: int, b: int) -> int:
    return a // b if b else 0


def mod(a: int, b: int) -> int:
    return a % b if b else 0


def equal(a, b) -> bool:
    """P4's ``==`` on headers, structs and header stacks: two headers are equal when both are
    invalid, or both valid with equal fields; structs and stacks field by field (element by
    element)."""
    if isinstance(a, Stack):
        return all(equal(x, y) for x, y in zip(a.items, b.items))
    if not hasattr(a, "values"):
        return a == b
    valid = getattr(a, "_v", None)
    if valid is not None and not (valid and b._v):
        return valid == b._v
    return all(equal(x, y) for x, y in zip(a.values(), b.values()))


def pack_valid(parts: tuple) -> tuple:
    """(packed int, bits) of (valid, value, width) parts, leaving out invalid headers' fields
    as BMv2's field-list deparser does."""
    acc, nbits = 0, 0
    for valid, value, width in parts:
        if valid:
            acc = (acc << width) | value
            nbits += width
    return acc, nbits


def checksum_packed(algo: int, packed: int, nbits: int, payload: bytes = b"") -> int:
    """verify/update_checksum over a packed field list (plus the payload for *_with_payload)."""
    if payload:
        pad = (-nbits) % BITS_PER_BYTE
        packed = (packed << (pad + BITS_PER_BYTE * len(payload))) | int.from_bytes(payload, "big")
        nbits += pad + BITS_PER_BYTE * len(payload)
    return externs.compute_hash_v1model(algo, packed, nbits)


def truncate(cut: Optional[int], length: int) -> int:
    """v1model ``truncate(length)`` as BMv2 keeps it: the smallest length asked of a packet
    instance wins (``bm::Packet::truncate``), in ingress and egress alike; ``cut`` is the
    length asked so far (``None``: none). 0 leaves nothing of the frame."""
    return length if cut is None else min(cut, length)


def random_value(lo: int, hi: int) -> int:
    return _random.randint(lo, hi) if hi >= lo else lo


class Stack:
    """A header stack: ``size`` headers and ``next_index``."""

    __slots__ = ("cls", "items", "next_index")

    def __init__(self, cls, size: int):
        self.cls = cls
        self.items = [cls() for _ in range(size)]
        self.next_index = 0

    def copy(self):
        n = Stack.__new__(Stack)
        n.cls, n.items, n.next_index = self.cls, [h.copy() for h in self.items], self.next_index
        return n

    def at(self, i: int):
        if 0 <= i < len(self.items):
            return self.items[i]
        raise ParserError(ERR_STACK_OUT_OF_BOUNDS)

    def put(self, i: int, h) -> None:
        if 0 <= i < len(self.items):
            self.items[i] = h
        else:
            raise ParserError(ERR_STACK_OUT_OF_BOUNDS)

    def next_for_extract(self):
        if self.next_index >= len(self.items):
            raise ParserError(ERR_STACK_OUT_OF_BOUNDS)
        h = self.items[self.next_index]
        self.next_index += 1
        return h

    def next(self):
        if self.next_index >= len(self.items):
            raise ParserError(ERR_STACK_OUT_OF_BOUNDS)
        return self.items[self.next_index]

    def last(self):
        if self.next_index == 0:
            raise ParserError(ERR_STACK_OUT_OF_BOUNDS)
        return self.items[self.next_index - 1]

    def push_front(self, n: int) -> None:
        size = len(self.items)
        n = min(n, size)
        self.items = [self.cls() for _ in range(n)] + self.items[:size - n]
        self.next_index = min(size, self.next_index + n)

    def pop_front(self, n: int) -> None:
        size = len(self.items)
        n = min(n, size)
        self.items = self.items[n:] + [self.cls() for _ in range(n)]
        self.next_index = max(0, self.next_index - n)

    def emit(self, out: list) -> None:
        for h in self.items:
            h.emit(out)


# ------------------------------------------------------------------------------ context
class Context:
    """Per-packet state the generated code reads and writes (one per dataplane, reset per pass)."""

    def __init__(self):
        self.buf = b""
        self.off = 0
        self.n = 0
        self.length = 0
        # The packet's length as BMv2 keeps it (its packet register 0): the length received,
        # changed by every setValid/setInvalid that changes a header's validity (p4c's
        # add_header/remove_header), in the parser too. Egress reads it as packet_length.
        self.plen = 0
        # the local headers declared in this packet, by declaration and control instance
        # (StmtGen.local_header_redeclared): None until the first
        self.hdr_locals = None
        self.out: list = []
        self.checksum_error = 0
        self.clone_req = None
        self.resubmit = 0
        self.recirculate = 0
        #: truncate(): the length the frame leaves cut to, None for whole (see runtime.truncate)
        self.truncate = None
        self.learn = None
        self.trace: Optional[list] = None

    def start(self, frame: bytes) -> None:
        self.buf, self.off, self.n = frame, 0, len(frame)
        self.length = self.plen = len(frame)
        self.hdr_locals = None
        self.checksum_error = 0
        self.clone_req = None
        self.learn = None
        self.resubmit = self.recirculate = 0
        self.truncate = None

    def extract(self, h) -> None:
        n = h.NBYTES
        if self.off + n > self.n:
            raise ParserError(ERR_PACKET_TOO_SHORT)
        h.extract(self.buf, self.off)
        self.off += n
        if self.trace is not None:
            self.trace.append(f"  extract {h.TYPE_NAME} ({n} bytes)")

    def lookahead(self, width: int) -> int:
        nb = (width + BITS_PER_BYTE - 1) // BITS_PER_BYTE
        if self.off + nb > self.n:
            raise ParserError(ERR_PACKET_TOO_SHORT)
        return int.from_bytes(self.buf[self.off:self.off + nb], "big") >> (nb * BITS_PER_BYTE - width)

    def peek(self, cls):
        """``lookahead<H>()`` of a header type: a valid header read without advancing."""
        n = cls.NBYTES
        if self.off + n > self.n:
            raise ParserError(ERR_PACKET_TOO_SHORT)
        h = cls()
        h.extract(self.buf, self.off)
        return h

    def advance(self, bits: int) -> None:
        nb = bits // BITS_PER_BYTE
        if self.off + nb > self.n:
            raise ParserError(ERR_PACKET_TOO_SHORT)
        self.off += nb

    def payload(self) -> bytes:
        """The bytes after the parsed headers, as a ``*_checksum_with_payload`` covers them:
        cut to a ``truncate`` length asked of the packet so far (BMv2 updates checksums over
        ``bm::Packet::get_data_size()``, the truncated length, before the headers go in
        front: the cut counts against the payload, not the frame)."""
        p = self.buf[self.off:]
        return p if self.truncate is None else p[:self.truncate]

    def trace_state(self, name: str) -> None:
        if self.trace is not None:
            self.trace.append(f"parser state {name}")

    def clone(self, kind: int, session: int, field_list: int) -> None:
        self.clone_req = (kind, session, field_list)

    def digest(self, name: str, values, masks: tuple) -> None:
        """``digest()``: ``values`` are the data's values at the call (p4c copies them into
        temporaries there; BMv2 reads those at the end of ingress); a later call in the same
        pass replaces an earlier one (BMv2 keeps one learn list id per packet)."""
        self.learn = (name, tuple(int(v) & m for v, m in zip(values, masks)))

    def log(self, msg: str, values: tuple) -> None:
        if self.trace is not None:
            text = msg
            for v in values:
                text = text.replace("{}", str(v), 1)
            self.trace.append(f"log_msg: {text}")


# ------------------------------------------------------------------------------ dataplane
class V1Dataplane:
    """One running instance of a compiled v1model program (implements ``api.Dataplane``)."""

    drop_port = DROP_PORT

    def __init__(self, module_ns: dict, digests: dict, controller_headers: tuple,
                 view: ControlPlaneView):
        self.C = Context()
        self.REG = Registry()
        blocks = module_ns["build"](sys.modules[__name__], self.C, self.REG)
        # Controls with an empty body are not called at all (None).
        b = {role: None if getattr(blk, "empty", False) else blk for role, blk in blocks.items()}
        self._parser, self._verify, self._ingress = b["parser"], b["verify"], b["ingress"]
        self._egress, self._compute, self._deparser = b["egress"], b["compute"], b["deparser"]
        self._H, self._M, self._STD = self.REG.classes
        self.info = self.REG.program_info(digests, controller_headers, view)
        self.cpu_port: Optional[int] = None
        self.mcast: dict = {}
        self.sessions: dict = {}
        self._tracing = False

    # ------------------------------------------------------------------ packets
    def process(self, ingress_port: int, frame: bytes, trace: bool = False) -> ProcessResult:
        result = ProcessResult()
        C = self.C
        if trace or self._tracing:
            self._set_trace(result.trace if trace else None)
        data = frame if type(frame) is bytes else bytes(frame)
        work: list = []
        passes = 1
        try:
            # The first pass directly; resubmitted and recirculated packets queue in ``work``.
            self._ingress_pass(ingress_port, data, PKT_INSTANCE_TYPE_NORMAL, None, result, work)
            while work:
                port, data, itype, preserved = work.pop(0)
                passes += 1
                if passes > MAX_PASSES:
                    if trace:
                        result.trace.append(f"dropped: more than {MAX_PASSES} passes")
                    break
                self._ingress_pass(port, data, itype, preserved, result, work)
        except Exception as exc:   # noqa: BLE001 - no frame may take the switch down
            log.exception("dropping frame from port %d after an engine error", ingress_port)
            if trace:
                result.trace.append(f"dropped: engine error {type(exc).__name__}: {exc}")
        return result

    def _set_trace(self, sink: Optional[list]) -> None:
        self.C.trace = sink
        self._tracing = sink is not None
        for t in self.REG.tables.values():
            t.tracer = sink.append if sink is not None else None

    def _parse(self, data: bytes, hdr, meta, std) -> None:
        C = self.C
        C.start(data)
        try:
            self._parser(C, hdr, meta, std)
        except ParserError as e:
            std.parser_error = e.code
            if C.trace is not None:
                names = self.REG.error_names
                name = names[e.code] if 0 <= e.code < len(names) else str(e.code)
                C.trace.append(f"parser error {name}")
        except ParserReject:
            if C.trace is not None:
                C.trace.append("parser reject")

    def _ingress_pass(self, port, data, itype, preserved, result, work) -> None:
        C = self.C
        hdr, meta, std = self._H(), self._M(), self._STD()
        std.ingress_port = port
        std.instance_type = itype
        std.packet_length = len(data)
        if preserved:
            self._restore(meta, preserved)
        if C.trace is not None:
            C.trace.append(f"ingress port {port}, {len(data)} bytes, instance_type {itype}")
        self._parse(data, hdr, meta, std)
        payload_off = C.off
        if self._verify is not None:
            self._run(self._verify, hdr, meta)
            if C.checksum_error:
                std.checksum_error = 1
        if self._ingress is not None:
            try:
                self._ingress(hdr, meta, std)
            except ExitControl:
                pass
        payload = data[payload_off:]
        plen = C.plen             # the length egress sees: ingress's headers counted
        clone_req, resubmit = C.clone_req, C.resubmit
        # truncate() in ingress: BMv2 keeps it with the packet that goes on to egress; a
        # copy made from it (multicast replica, clone, resubmitted packet) starts whole
        cut = C.truncate
        if C.learn is not None:
            # BMv2 learns once per packet, at the end of ingress, from the call's copies.
            # (Before the I2E clone: its parse starts the context afresh.)
            name, values = C.learn
            C.learn = None
            result.digests.append(Digest(name, values))
        if clone_req is not None and clone_req[0] == CLONE_I2E:
            self._clone_i2e(port, data, meta, clone_req, result, work)
        if resubmit:
            if C.trace is not None:
                C.trace.append("resubmit")
            work.append((RECIRC_PORT, data, PKT_INSTANCE_TYPE_RESUBMIT,
                         self._preserve(meta, resubmit)))
            return
        grp = std.mcast_grp
        if grp:
            replicas = self.mcast.get(grp, ())
            if C.trace is not None:
                C.trace.append(f"multicast group {grp}: {len(replicas)} replicas")
            last = len(replicas) - 1
            for i, r in enumerate(replicas):
                s2 = std.copy()
                s2.egress_rid = r.rid
                s2.instance_type = PKT_INSTANCE_TYPE_REPLICATION
                # The last replica takes the packet's own headers and metadata: every earlier
                # replica has copied them already and nothing reads them afterwards.
                # (BMv2 makes each replica with clone_with_phv: a new packet, uncut)
                if i == last:
                    self._egress_pass(hdr, meta, s2, payload, r.port, result, work, plen)
                else:
                    self._egress_pass(hdr.copy(), meta.copy(), s2, payload, r.port, result, work,
                                      plen)
            return
        if std.egress_spec == DROP_PORT:
            if C.trace is not None:
                C.trace.append("dropped in ingress (egress_spec == drop port)")
            return
        std.instance_type = PKT_INSTANCE_TYPE_NORMAL
        self._egress_pass(hdr, meta, std, payload, std.egress_spec, result, work, plen, cut)

    def _clone_i2e(self, port, data, meta, req, result, work) -> None:
        _, session, fl = req
        sess = self.sessions.get(session)
        if sess is None:
            return
        preserved = self._preserve(meta, fl) if fl else None
        for r in sess.replicas:
            # BMv2 parses the original frame again (with the same ingress_port), then resets
            # the metadata and copies the preserved field list into it. Its length is the
            # length received and what that parse added (setValid in the parser).
            hdr, m2, std = self._H(), self._M(), self._STD()
            std.ingress_port = port
            self._parse(data, hdr, m2, std)
            payload, plen = data[self.C.off:], self.C.plen
            m2, std = self._M(), self._STD()
            if preserved:
                self._restore(m2, preserved)
            std.instance_type = PKT_INSTANCE_TYPE_INGRESS_CLONE
            std.egress_rid = r.rid
            self._egress_pass(hdr, m2, std, payload, r.port, result, work, plen,
                              truncate=sess.packet_length_bytes or None)

    def _egress_pass(self, hdr, meta, std, payload, port, result, work, plen, truncate=None,
                     depth=0) -> None:
        """Egress for one packet instance; E2E clones run after it (bounded by MAX_PASSES).
        ``plen``: the packet's length as BMv2 keeps it (``Context.plen``), what egress reads
        as packet_length (not what ingress wrote there); truncate() does not change it.
        ``truncate``: the length the frame is cut to (a clone session's, or what ingress
        asked; ``None``: whole), or less if egress asks for less (:func:`truncate`). The
        frame of a recirculated packet is the one deparsed, whole (BMv2 copies the buffer)."""
        C = self.C
        C.plen = std.packet_length = plen
        std.egress_port = port
        std.egress_spec = 0
        C.clone_req = None
        C.recirculate = 0
        C.truncate = truncate
        if self._egress is not None:
            try:
                self._egress(hdr, meta, std)
            except ExitControl:
                pass
        clone_req, recirc = C.clone_req, C.recirculate
        clones = []
        if clone_req is not None and clone_req[0] == CLONE_E2E:
            sess = self.sessions.get(clone_req[1])
            if sess is not None:
                # BMv2: a copy with the headers as egress left them, metadata reset but for the
                # preserved field list, instance_type EGRESS_CLONE.
                preserved = self._preserve(meta, clone_req[2]) if clone_req[2] else None
                for r in sess.replicas:
                    m2, s2 = self._M(), self._STD()
                    if preserved:
                        self._restore(m2, preserved)
                    s2.instance_type = PKT_INSTANCE_TYPE_EGRESS_CLONE
                    s2.egress_rid = r.rid
                    # the length as egress left it (its setValid/setInvalid counted)
                    clones.append((hdr.copy(), m2, s2, r.port, C.plen,
                                   sess.packet_length_bytes or None))
        if std.egress_spec == DROP_PORT:
            if C.trace is not None:
                C.trace.append("dropped in egress (mark_to_drop)")
        else:
            if self._compute is not None:
                self._run(self._compute, hdr, meta)
            C.out = out = []
            self._deparser(C, hdr)
            frame = b"".join(out) + payload
            cut = C.truncate
            if recirc:
                if C.trace is not None:
                    C.trace.append("recirculate")
                work.append((RECIRC_PORT, frame, PKT_INSTANCE_TYPE_RECIRC,
                             self._preserve(meta, recirc)))
            elif cut == 0:
                # truncate(0): nothing of the frame, and no frame leaves (as on BMv2)
                if C.trace is not None:
                    C.trace.append(f"output port {port}: truncated to nothing")
            else:
                if cut is not None:
                    frame = frame[:cut]
                if C.trace is not None:
                    C.trace.append(f"output port {port}, {len(frame)} bytes")
                result.outputs.append((port, frame))
        for h2, m2, s2, p2, plen2, cut2 in clones:
            if depth + 1 >= MAX_PASSES:
                if C.trace is not None:
                    C.trace.append(f"dropped: more than {MAX_PASSES} egress clones")
                break
            self._egress_pass(h2, m2, s2, payload, p2, result, work, plen2, cut2, depth + 1)

    @staticmethod
    def _run(block, *args) -> None:
        try:
            block(*args)
        except ExitControl:
            pass

    def _preserve(self, meta, field_list: int) -> list:
        paths = self.REG.field_lists.get(field_list, []) if field_list > 0 else []
        vals = []
        for p in paths:
            o = meta
            for a in p:
                o = getattr(o, a)
            vals.append((p, o))
        return vals

    @staticmethod
    def _restore(meta, preserved: list) -> None:
        for p, v in preserved:
            o = meta
            for a in p[:-1]:
                o = getattr(o, a)
            setattr(o, p[-1], v)

    # ------------------------------------------------------------------ tables
    def _table(self, name: str) -> Table:
        t = self.REG.tables.get(name)
        if t is None:
            raise ControlError("NOT_FOUND", f"table {name!r} is not in the program")
        return t

    def table_insert(self, entry: TableEntry) -> None:
        self._table(entry.table).insert(_user_entry(entry))

    def table_modify(self, entry: TableEntry) -> None:
        self._table(entry.table).modify(_user_entry(entry))

    def table_delete(self, entry: TableEntry) -> None:
        self._table(entry.table).delete(_user_entry(entry))

    def table_entries(self, table: str) -> list:
        return self._table(table).entries()

    def table_clear(self, table: str) -> None:
        self._table(table).clear()

    def table_set_default(self, table: str, action: ActionCall) -> None:
        self._table(table).set_default(action)

    def table_get_default(self, table: str) -> ActionCall:
        return self._table(table).get_default()

    def table_reset_default(self, table: str) -> None:
        t = self._table(table)
        t.set_default_unchecked(t.initial_default)

    def direct_counter_read(self, table: str, entry: TableEntry) -> tuple:
        e = self._table(table).counter(entry)
        return (e.bytes, e.packets)

    def direct_counter_write(self, table: str, entry: TableEntry, bytes_: int, packets: int) -> None:
        e = self._table(table).counter(entry)
        e.bytes, e.packets = int(bytes_), int(packets)

    def direct_meter_set(self, table: str, entry: TableEntry, cir: int, cburst: int,
                         pir: int, pburst: int) -> None:
        t = self._table(table)
        if t.info.direct_meter is None:
            raise ControlError("NOT_FOUND", f"table {table} has no direct meter")
        if cir > pir:
            raise ControlError("INVALID_ARGUMENT", f"direct meter of {table}: CIR {cir} > "
                                                   f"PIR {pir}")
        t.counter(entry, kind="meter").meter = externs.MeterCell(cir, cburst, pir, pburst)

    def direct_meter_get(self, table: str, entry: TableEntry):
        t = self._table(table)
        if t.info.direct_meter is None:
            raise ControlError("NOT_FOUND", f"table {table} has no direct meter")
        c = t.counter(entry, kind="meter").meter
        return None if c is None else (c.cir, c.cburst, c.pir, c.pburst)

    # ------------------------------------------------------------------ PRE
    def mcast_group_set(self, group_id: int, replicas: Sequence[Replica]) -> None:
        if not 0 < group_id < (1 << 16):
            raise ControlError("INVALID_ARGUMENT", f"multicast group id {group_id} not in 1..65535")
        self.mcast[group_id] = tuple(replicas)

    def mcast_group_delete(self, group_id: int) -> None:
        if group_id not in self.mcast:
            raise ControlError("NOT_FOUND", f"multicast group {group_id} does not exist")
        del self.mcast[group_id]

    def mcast_groups(self) -> dict:
        return dict(self.mcast)

    def clone_session_set(self, session: CloneSession) -> None:
        if session.session_id <= 0:
            raise ControlError("INVALID_ARGUMENT", f"clone session id {session.session_id} must be > 0")
        self.sessions[session.session_id] = session

    def clone_session_delete(self, session_id: int) -> None:
        if session_id not in self.sessions:
            raise ControlError("NOT_FOUND", f"clone session {session_id} does not exist")
        del self.sessions[session_id]

    def clone_sessions(self) -> dict:
        return dict(self.sessions)

    # ------------------------------------------------------------------ externs
    def _extern(self, kind: dict, what: str, name: str, index: int):
        obj = kind.get(name)
        if obj is None:
            raise ControlError("NOT_FOUND", f"{what} {name!r} is not in the program")
        if not isinstance(index, int) or not 0 <= index < obj.size:
            raise ControlError("OUT_OF_RANGE", f"index {index} of {what} {name} not in 0..{obj.size - 1}")
        return obj

    def register_read(self, name: str, index: int):
        """An int, or for a register of structs a tuple of ints (one per field, in order)."""
        r = self._extern(self.REG.registers, "register", name, index)
        if isinstance(r, StructRegister):
            return r.read(index)
        v = r.values[index]
        return v & ((1 << r.width) - 1)

    def register_write(self, name: str, index: int, value) -> None:
        """``value`` as :meth:`register_read` gives it; INVALID_ARGUMENT when it does not fit."""
        r = self._extern(self.REG.registers, "register", name, index)
        if isinstance(r, StructRegister):
            r.write(index, _struct_cell(r, value))
            return
        if not _fits(value, r.width):
            raise ControlError("INVALID_ARGUMENT", f"value {value!r} does not fit register {name} ({r.width} bits)")
        if r.signed and value >> (r.width - 1):
            value -= 1 << r.width
        r.values[index] = value

    def register_reset(self, name: str) -> None:
        r = self.REG.registers.get(name)
        if r is None:
            raise ControlError("NOT_FOUND", f"register {name!r} is not in the program")
        r.reset()

    def counter_read(self, name: str, index: int) -> tuple:
        c = self._extern(self.REG.counters, "counter", name, index)
        return (c.bytes[index], c.packets[index])

    def counter_write(self, name: str, index: int, bytes_: int, packets: int) -> None:
        c = self._extern(self.REG.counters, "counter", name, index)
        c.bytes[index], c.packets[index] = int(bytes_), int(packets)

    def meter_set(self, name: str, index: int, cir: int, cburst: int, pir: int, pburst: int) -> None:
        m = self._extern(self.REG.meters, "meter", name, index)
        if cir > pir:
            raise ControlError("INVALID_ARGUMENT", f"meter {name}: CIR {cir} > PIR {pir}")
        m.cells[index] = externs.MeterCell(cir, cburst, pir, pburst)

    def meter_get(self, name: str, index: int):
        m = self._extern(self.REG.meters, "meter", name, index)
        c = m.cells.get(index)
        return None if c is None else (c.cir, c.cburst, c.pir, c.pburst)

    # ------------------------------------------------------------------ action profiles
    def _profile(self, name: str) -> ActionProfile:
        p = self.REG.action_profiles.get(name)
        if p is None or name not in {x.name for x in self.info.action_profiles}:
            raise ControlError("NOT_FOUND", f"action profile {name!r} is not in the program")
        return p

    def act_prof_member_set(self, profile: str, member_id: int, action: ActionCall) -> None:
        self._profile(profile).member_set(member_id, action)

    def act_prof_member_delete(self, profile: str, member_id: int) -> None:
        self._profile(profile).member_delete(member_id)

    def act_prof_members(self, profile: str) -> dict:
        return {m: call for m, (_, call) in sorted(self._profile(profile).members.items())}

    def act_prof_group_set(self, profile: str, group_id: int, members) -> None:
        self._profile(profile).group_set(group_id, members)

    def act_prof_group_delete(self, profile: str, group_id: int) -> None:
        self._profile(profile).group_delete(group_id)

    def act_prof_groups(self, profile: str) -> dict:
        return dict(sorted(self._profile(profile).groups.items()))

    # ------------------------------------------------------------------ parser value sets
    def _value_set(self, name: str) -> ValueSet:
        v = self.REG.value_sets.get(name)
        if v is None or not v.used:
            raise ControlError("NOT_FOUND", f"value set {name!r} is not in the program")
        return v

    def value_set_set(self, name: str, members) -> None:
        v = self._value_set(name)
        checked = []
        for member in members:
            member = tuple(member)
            if len(member) != len(v.fields):
                raise ControlError("INVALID_ARGUMENT", f"value set {name}: a member has "
                                   f"{len(member)} values, the set {len(v.fields)} fields")
            for value, (fname, width, _) in zip(member, v.fields):
                if not isinstance(value, int) or value < 0 or value >> width:
                    raise ControlError("OUT_OF_RANGE", f"value set {name}: value {value!r} of "
                                       f"{fname or 'the member'} does not fit in {width} bits")
            if member not in checked:
                checked.append(member)
        if len(checked) > v.size:
            raise ControlError("RESOURCE_EXHAUSTED", f"value set {name} holds at most {v.size} "
                               f"members, {len(checked)} given")
        v.order, v.members = tuple(checked), frozenset(checked)

    def value_set_get(self, name: str) -> list:
        return list(self._value_set(name).order)


def _fits(value, width: int) -> bool:
    """Whether ``value`` is an unsigned int of at most ``width`` bits."""
    return isinstance(value, int) and value >= 0 and not value >> width


def _struct_cell(r: StructRegister, value) -> tuple:
    """``value`` checked as a cell of struct register ``r``: a tuple of one unsigned int per
    field, each within its field's width (ControlError INVALID_ARGUMENT naming the field)."""
    names = ", ".join(f"{n}: {'int' if signed else 'bit'}<{w}>" for n, w, signed in r.fields)
    if not isinstance(value, tuple):
        raise ControlError("INVALID_ARGUMENT", f"register {r.name} holds structs "
                           f"{r.type_name} {{{names}}}: a value is a tuple of {len(r.fields)} "
                           f"ints, not {value!r}")
    if len(value) != len(r.fields):
        raise ControlError("INVALID_ARGUMENT", f"register {r.name} holds structs "
                           f"{r.type_name} {{{names}}}: {len(value)} field values given, "
                           f"{len(r.fields)} expected")
    for v, (field, width, _) in zip(value, r.fields):
        if not _fits(v, width):
            raise ControlError("INVALID_ARGUMENT", f"value {v!r} of field {field} does not fit "
                               f"register {r.name} ({width} bits)")
    return value


def _user_entry(entry: TableEntry) -> TableEntry:
    """Entries from the control plane are never const."""
    if entry.is_const:
        return TableEntry(entry.table, entry.matches, entry.action, entry.priority, False,
                          entry.counter_data)
    return entry
