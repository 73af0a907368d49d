"""A P4Runtime client for one device: arbitration, pipeline, entries, PRE, counters, registers.

It speaks plain P4Runtime (the ``p4runtime`` package's protos, the same versions p4runtime-shell
pins) so it drives real BMv2 (``simple_switch_grpc``) and the embedded target alike. Entities
are named by their P4Info names (``HinaIngress.admission.job_config``) and values are Python
ints; :class:`P4InfoIndex` turns both into ids and canonical bytestrings and refuses values too
wide for their field. Every gRPC failure is turned into one :class:`P4RuntimeClientError` here,
with each failed update's code and message, so callers print one line.

Example::

    >>> with SwitchConnection("127.0.0.1:9559") as sw:                 # doctest: +SKIP
    ...     sw.set_pipeline(p4info, device_config)
    ...     sw.insert_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000001, 32)},
    ...                     "MyIngress.ipv4_forward", {"dstAddr": 1, "port": 2})
"""
from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence, Union

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from hina.tls import ClientTls, open_channel, wait_ready

__all__ = ["P4RuntimeClientError", "NotPrimaryError", "P4InfoIndex", "SwitchConnection",
           "TOFINO_ARCHS", "pipeline_prefix", "p4data_values",
           "MatchValue", "encode_value"]

log = logging.getLogger("hina.controller")

#: A match value: exact int; (value, mask) ternary; (value, prefix_len) lpm;
#: (low, high) range — which one is decided by the field's match kind.
MatchValue = Union[int, tuple[int, int]]

_GRPC_TIMEOUT_S = 10.0
# A failed Write carries one p4.v1.Error per update in its trailing metadata (PI and the embedded
# target alike): a batch of hundreds of updates exceeds gRPC's default 16 KiB metadata limit,
# and the client would see RESOURCE_EXHAUSTED instead of the errors.
#: Seconds a pipeline push may take: the device compiles or loads the program (the embedded
#: target compiles the P4 source, several seconds for hina.p4), far longer than an entry write.
PIPELINE_TIMEOUT_S = 300.0
_CHANNEL_OPTIONS = [("grpc.max_metadata_size", 16 << 20),
                    ("grpc.max_receive_message_length", 64 << 20)]


class P4RuntimeClientError(RuntimeError):
    """A P4Runtime request failed; ``str()`` is one line for the user.

    Attributes:
        code: the gRPC status code name (``NOT_FOUND``, ``UNAVAILABLE``, ...).
        errors: for Write, ``[(update index, code name, message)]`` of the failed updates.
    """

    def __init__(self, message: str, code: str = "UNKNOWN",
                 errors: Sequence[tuple[int, str, str]] = ()):
        super().__init__(message)
        self.code, self.errors = code, list(errors)


class NotPrimaryError(P4RuntimeClientError):
    """Another controller with a higher election id is primary for the device."""


def encode_value(value: int, bitwidth: int, what: str) -> bytes:
    """The canonical P4Runtime bytestring of ``value`` (no leading zero bytes, at least one).

    Raises:
        ValueError: ``value`` is negative or wider than ``bitwidth`` bits.
    """
    if not isinstance(value, int) or value < 0 or value >> bitwidth:
        raise ValueError(f"{what}: value {value!r} does not fit in bit<{bitwidth}>")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def _decode_value(data: bytes) -> int:
    return int.from_bytes(data, "big")


def register_value(data: p4runtime_pb2.P4Data) -> Union[int, tuple]:
    """A register cell's value: an integer (a bit string), or a tuple of the members' values
    (a struct cell: a TNA ``Register`` of a struct, e.g. ``slot_bitmap``'s pairs)."""
    which = data.WhichOneof("data")
    if which == "bitstring":
        return _decode_value(data.bitstring)
    if which == "struct":
        return tuple(register_value(m) for m in data.struct.members)
    if which is None:
        return 0
    raise P4RuntimeClientError(f"register value of kind {which} is not decoded", "UNIMPLEMENTED")


def p4data_values(data: p4runtime_pb2.P4Data) -> tuple[int, ...]:
    """The values of a digest's ``P4Data`` (a struct or tuple of bitstrings, or one
    bitstring), unsigned, in member order."""
    which = data.WhichOneof("data")
    if which in ("struct", "tuple"):
        return tuple(v for member in getattr(data, which).members for v in p4data_values(member))
    if which == "bitstring":
        return (_decode_value(data.bitstring),)
    if which == "bool":
        return (int(data.bool),)
    raise P4RuntimeClientError(f"digest data of kind {which!r} is not supported", "UNIMPLEMENTED")


def _code_name(code: int) -> str:
    return code_pb2.Code.Name(code) if code in code_pb2.Code.values() else str(code)


def _wrap_rpc_error(exc: grpc.RpcError, what: str) -> P4RuntimeClientError:
    """Turn a gRPC error (with p4.v1.Error details for Write) into one client error."""
    code = exc.code().name if exc.code() else "UNKNOWN"
    errors: list[tuple[int, str, str]] = []
    for key, value in (exc.trailing_metadata() or ()):
        if key != "grpc-status-details-bin":
            continue
        status = status_pb2.Status()
        status.ParseFromString(value)
        for i, detail in enumerate(status.details):
            err = p4runtime_pb2.Error()
            if detail.Unpack(err) and err.canonical_code != code_pb2.OK:
                errors.append((i, _code_name(err.canonical_code), err.message))
    if errors:
        first = "; ".join(f"update {i}: {c}: {m}" for i, c, m in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        return P4RuntimeClientError(f"{what}: {first}{more}", code, errors)
    return P4RuntimeClientError(f"{what}: {code}: {exc.details()}", code)


@dataclass(frozen=True)
class _Field:
    id: int
    bitwidth: int
    match_type: int


#: ``pkg_info.arch`` of a P4Info the Tofino compiler wrote (``bf-p4c --p4runtime-files``).
TOFINO_ARCHS = ("tna", "t2na")


def pipeline_prefix(p4info: p4info_pb2.P4Info) -> str:
    """The ``Pipeline`` instance's name the Tofino compiler puts before every table name in its
    default P4Info flavour (``pipe`` for ``pipe.HinaTnaIngress.admission.job_config``), or "".

    A P4Info of arch ``tna``/``t2na`` has one when every table and extern instance starts with
    one same first component that starts no action's name (actions are named
    ``<control>.<action>`` in both flavours, never after the pipeline). The standard-externs
    flavour (``--p4runtime-force-std-externs``) names tables ``HinaTnaIngress.x``: a control,
    no prefix. A program of several pipelines (``pipe0.x``, ``pipe1.x``) has no single prefix
    either: its names are used as they are.
    """
    if p4info.pkg_info.arch not in TOFINO_ARCHS or not p4info.tables:
        return ""
    names = [t.preamble.name for t in p4info.tables]
    names += [i.preamble.name for e in p4info.externs for i in e.instances]
    firsts = {n.partition(".")[0] if "." in n else "" for n in names}
    controls = {a.preamble.name.partition(".")[0] for a in p4info.actions}
    prefix = firsts.pop() if len(firsts) == 1 else ""
    return "" if prefix in controls else prefix


class P4InfoIndex:
    """Names to ids and widths, from a P4Info message.

    Every object is found by its P4Info name and by its alias when that is unique; in a P4Info
    of the Tofino compiler (:func:`pipeline_prefix`) tables, registers and counters are also
    found by their name without the pipeline's prefix (``HinaTnaIngress.admission.job_config``
    finds ``pipe.HinaTnaIngress.admission.job_config``), the program's own name, which is what
    :mod:`hina.pipeline` writes. Actions carry no prefix there.
    """

    def __init__(self, p4info: p4info_pb2.P4Info):
        self.p4info = p4info
        self.tables = {t.preamble.name: t for t in p4info.tables}
        self.actions = {a.preamble.name: a for a in p4info.actions}
        self.counters = {c.preamble.name: c for c in p4info.counters}
        self.registers = {r.preamble.name: r for r in p4info.registers}
        self.digests = {d.preamble.name: d for d in p4info.digests}
        self.digest_names = {d.preamble.id: d.preamble.name for d in p4info.digests}
        self.table_names = {t.preamble.id: t.preamble.name for t in p4info.tables}
        self.action_names = {a.preamble.id: a.preamble.name for a in p4info.actions}
        self.pipe_prefix = pipeline_prefix(p4info)
        if self.pipe_prefix:
            cut = len(self.pipe_prefix) + 1
            for kind in (self.tables, self.counters, self.registers):
                for name, msg in list(kind.items()):
                    if name.startswith(self.pipe_prefix + "."):
                        kind.setdefault(name[cut:], msg)
        for kind in (self.tables, self.actions, self.counters, self.registers):
            for msg in list(kind.values()):     # aliases, when unique, work as names too
                kind.setdefault(msg.preamble.alias, msg)

    def program_name(self, name: str) -> str:
        """``name`` without the Tofino compiler's pipeline prefix (the program's own name)."""
        if self.pipe_prefix and name.startswith(self.pipe_prefix + "."):
            return name[len(self.pipe_prefix) + 1:]
        return name

    def _get(self, kind: Mapping, name: str, what: str):
        try:
            return kind[name]
        except KeyError:
            where = (f" (nor as {self.pipe_prefix}.{name}: the Tofino compiler's names)"
                     if self.pipe_prefix and what != "action" else "")
            raise P4RuntimeClientError(f"{what} {name!r} is not in the P4Info{where}",
                                       "NOT_FOUND") from None

    def table(self, name: str) -> p4info_pb2.Table:
        return self._get(self.tables, name, "table")

    def action(self, name: str) -> p4info_pb2.Action:
        return self._get(self.actions, name, "action")

    def counter(self, name: str) -> p4info_pb2.Counter:
        return self._get(self.counters, name, "counter")

    def register(self, name: str) -> p4info_pb2.Register:
        return self._get(self.registers, name, "register")

    def digest(self, name: str) -> p4info_pb2.Digest:
        return self._get(self.digests, name, "digest")

    def register_width(self, name: str) -> int:
        """Bits of a cell of register ``name`` (``bit<N>`` or ``int<N>``: the Tofino compiler
        gives a ``Register<int<32>, _>`` a signed type; its cells are written unsigned)."""
        bits = self.register(name).type_spec.bitstring
        which = bits.WhichOneof("type_spec")
        return getattr(bits, which).bitwidth if which in ("bit", "int") else 0

    def match_fields(self, table: str) -> dict[str, _Field]:
        return {f.name: _Field(f.id, f.bitwidth, f.match_type)
                for f in self.table(table).match_fields}

    # -- building messages -----------------------------------------------------------------
    def field_match(self, table: str, name: str, value: MatchValue) -> p4runtime_pb2.FieldMatch:
        fields = self.match_fields(table)
        if name not in fields:
            raise P4RuntimeClientError(f"table {table!r} has no match field {name!r} "
                                       f"(fields: {', '.join(fields)})", "INVALID_ARGUMENT")
        f = fields[name]
        what = f"{table} field {name}"
        m = p4runtime_pb2.FieldMatch(field_id=f.id)
        kind = p4info_pb2.MatchField.MatchType
        try:
            if f.match_type == kind.Value("EXACT"):
                m.exact.value = encode_value(value, f.bitwidth, what)
            elif f.match_type == kind.Value("TERNARY"):
                v, mask = value
                m.ternary.value = encode_value(v & mask, f.bitwidth, what)
                m.ternary.mask = encode_value(mask, f.bitwidth, what)
            elif f.match_type == kind.Value("LPM"):
                v, plen = value
                if not 0 <= plen <= f.bitwidth:
                    raise ValueError(f"{what}: prefix length {plen} not in [0, {f.bitwidth}]")
                keep = ((1 << plen) - 1) << (f.bitwidth - plen)
                m.lpm.value = encode_value(v & keep, f.bitwidth, what)
                m.lpm.prefix_len = plen
            elif f.match_type == kind.Value("RANGE"):
                # Both bounds padded to the field's bytes (the spec lets a client send either
                # form). simple_switch_grpc's server (PI) takes a range whose bounds, as sent,
                # are all zeros and all ones *for their own length* as "don't care" and
                # refuses it: canonical, [0, 255] on a bit<16> field (b'\x00', b'\xff') is
                # refused; padded, only the real full range looks so (and is left out).
                low, high = value
                size = (f.bitwidth + 7) // 8
                m.range.low = encode_value(low, f.bitwidth, what).rjust(size, b"\0")
                m.range.high = encode_value(high, f.bitwidth, what).rjust(size, b"\0")
            elif f.match_type == kind.Value("OPTIONAL"):
                m.optional.value = encode_value(value, f.bitwidth, what)
            else:
                raise ValueError(f"{what}: match kind {f.match_type} is not supported")
        except (TypeError, ValueError) as exc:
            raise P4RuntimeClientError(str(exc), "INVALID_ARGUMENT") from None
        return m

    def action_msg(self, name: str, params: Mapping[str, int]) -> p4runtime_pb2.Action:
        info = self.action(name)
        declared = {p.name: p for p in info.params}
        unknown = set(params) - set(declared)
        missing = set(declared) - set(params)
        if unknown or missing:
            raise P4RuntimeClientError(
                f"action {name}: parameters {sorted(declared)} expected; "
                f"unknown {sorted(unknown)}, missing {sorted(missing)}", "INVALID_ARGUMENT")
        msg = p4runtime_pb2.Action(action_id=info.preamble.id)
        for p in info.params:
            try:
                value = encode_value(params[p.name], p.bitwidth, f"action {name} param {p.name}")
            except ValueError as exc:
                raise P4RuntimeClientError(str(exc), "INVALID_ARGUMENT") from None
            msg.params.add(param_id=p.id, value=value)
        return msg

    def table_entry(self, table: str, match: Mapping[str, MatchValue], action: Optional[str],
                    params: Mapping[str, int] = {}, priority: int = 0,
                    default: bool = False) -> p4runtime_pb2.TableEntry:
        entry = p4runtime_pb2.TableEntry(table_id=self.table(table).preamble.id,
                                         priority=priority, is_default_action=default)
        for name, value in match.items():
            entry.match.append(self.field_match(table, name, value))
        if action is not None:
            entry.action.action.CopyFrom(self.action_msg(action, params))
        return entry


class SwitchConnection:
    """A primary P4Runtime session with one device.

    Args:
        address: ``host:port`` of the device's P4Runtime server.
        device_id: the P4Runtime device id.
        election_id: this controller's election id (higher wins primaryship).
        timeout: seconds to wait for the connection and for each request.
        primary: arbitrate for primaryship (needed to write and to push pipelines). A read-only
            session (``primary=False``) opens no stream, so it never disturbs the primary: the
            CLI's read commands use it.
        tls: connect with TLS (the switch's CA; a client certificate where the switch wants
            one); ``None``: plaintext.

    Attributes:
        is_primary: whether the device last told this session it is primary (a controller with
            a higher election id may take over, and give it back when it leaves).
        stream_ended: set when the arbitration stream ends (closed, or the switch went away).

    Raises:
        P4RuntimeClientError: the device cannot be reached (code ``UNAVAILABLE``).
        NotPrimaryError: another controller holds a higher election id.
    """

    def __init__(self, address: str, device_id: int = 0, election_id: int = 1,
                 timeout: float = _GRPC_TIMEOUT_S, primary: bool = True,
                 tls: Optional[ClientTls] = None):
        self.address, self.device_id, self.election_id = address, device_id, election_id
        self.timeout = timeout
        self.index: Optional[P4InfoIndex] = None
        self.is_primary = False
        self.stream_ended = threading.Event()
        self._channel = open_channel(address, tls, _CHANNEL_OPTIONS)
        problem = wait_ready(self._channel, address, tls, timeout)
        if problem is not None:
            self._channel.close()
            raise P4RuntimeClientError(f"cannot reach the P4Runtime server at {address}: "
                                       f"{problem}", "UNAVAILABLE")
        self._stub = p4runtime_pb2_grpc.P4RuntimeStub(self._channel)
        self.primary = primary
        self._requests: "queue.Queue[Optional[p4runtime_pb2.StreamMessageRequest]]" = queue.Queue()
        self._arbitration: "queue.Queue[p4runtime_pb2.MasterArbitrationUpdate]" = queue.Queue()
        self.packet_ins: "queue.Queue[p4runtime_pb2.PacketIn]" = queue.Queue()
        #: every DigestList the device sent (each is acknowledged as it arrives)
        self.digest_lists: "queue.Queue[p4runtime_pb2.DigestList]" = queue.Queue()
        self._stream = None
        if primary:
            self._stream = self._stub.StreamChannel(iter(self._requests.get, None))
            self._reader = threading.Thread(target=self._read_stream, daemon=True,
                                            name=f"p4rt-stream-{address}")
            self._reader.start()
            self._become_primary()

    # -- stream ----------------------------------------------------------------------------
    def _read_stream(self) -> None:
        try:
            for msg in self._stream:
                which = msg.WhichOneof("update")
                if which == "arbitration":
                    self.is_primary = msg.arbitration.status.code == code_pb2.OK
                    self._arbitration.put(msg.arbitration)
                elif which == "packet":
                    self.packet_ins.put(msg.packet)
                elif which == "digest":
                    self.digest_lists.put(msg.digest)
                    ack = p4runtime_pb2.StreamMessageRequest()
                    ack.digest_ack.digest_id = msg.digest.digest_id
                    ack.digest_ack.list_id = msg.digest.list_id
                    self._requests.put(ack)
                elif which == "error":
                    log.warning("stream error from %s: %s", self.address, msg.error)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                log.info("stream to %s ended: %s", self.address, exc.details())
                # wake an arbitration in progress: the server closed the stream instead of
                # answering (e.g. INVALID_ARGUMENT: our election id is already in use)
                self._arbitration.put(_wrap_rpc_error(exc, f"{self.address}: arbitration"))
        finally:
            self.is_primary = False
            self.stream_ended.set()

    def _become_primary(self) -> None:
        req = p4runtime_pb2.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.high = self.election_id >> 64
        req.arbitration.election_id.low = self.election_id & ((1 << 64) - 1)
        self._requests.put(req)
        try:
            reply = self._arbitration.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise P4RuntimeClientError(f"{self.address}: no arbitration answer within "
                                       f"{self.timeout:g}s", "DEADLINE_EXCEEDED") from None
        if isinstance(reply, P4RuntimeClientError):
            self.close()
            if reply.code == "INVALID_ARGUMENT":
                raise NotPrimaryError(f"{self.address}: election id {self.election_id} is "
                                      "already used by another controller", reply.code) from None
            raise reply
        if reply.status.code != code_pb2.OK:
            self.close()
            primary = (reply.election_id.high << 64) | reply.election_id.low
            raise NotPrimaryError(f"{self.address}: another controller is primary for device "
                                  f"{self.device_id} (election id {self.election_id} is lower "
                                  f"than its {primary})", "PERMISSION_DENIED")

    def close(self) -> None:
        """End the session (a primary gives up primaryship); idempotent."""
        if self._stream is not None:
            self._requests.put(None)
            self._stream.cancel()
            self._stream = None
        self._channel.close()

    def __enter__(self) -> "SwitchConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request, what: str):
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise _wrap_rpc_error(exc, what) from None

    def _election(self, msg) -> None:
        msg.election_id.high = self.election_id >> 64
        msg.election_id.low = self.election_id & ((1 << 64) - 1)

    # -- pipeline --------------------------------------------------------------------------
    def set_pipeline(self, p4info: p4info_pb2.P4Info, device_config: bytes,
                     cookie: int = 0) -> None:
        """Push (verify and commit) a pipeline; all entries of the device are lost."""
        req = p4runtime_pb2.SetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            action=p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
        self._election(req)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        try:
            self._stub.SetForwardingPipelineConfig(req, timeout=max(self.timeout,
                                                                    PIPELINE_TIMEOUT_S))
        except grpc.RpcError as exc:
            err = _wrap_rpc_error(exc, "set pipeline")
            if err.code == "RESOURCE_EXHAUSTED":   # a Tofino config is megabytes
                err = P4RuntimeClientError(
                    f"{err} (the request is {req.ByteSize()} bytes: the switch's P4Runtime "
                    "server must accept gRPC messages that large)", err.code)
            raise err from None
        self.index = P4InfoIndex(p4info)

    def fetch_pipeline(self) -> Optional[p4info_pb2.P4Info]:
        """The device's P4Info (None when no pipeline is set); also indexes it."""
        req = p4runtime_pb2.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=p4runtime_pb2.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        try:
            reply = self._stub.GetForwardingPipelineConfig(req, timeout=self.timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                return None
            raise _wrap_rpc_error(exc, "get pipeline") from None
        if not reply.config.HasField("p4info") or not reply.config.p4info.tables:
            return None
        self.index = P4InfoIndex(reply.config.p4info)
        return reply.config.p4info

    def require_index(self) -> P4InfoIndex:
        if self.index is None and self.fetch_pipeline() is None:
            raise P4RuntimeClientError(f"{self.address}: no pipeline is set on device "
                                       f"{self.device_id}; push one first", "FAILED_PRECONDITION")
        return self.index

    # -- write / read ----------------------------------------------------------------------
    def write(self, updates: Iterable[p4runtime_pb2.Update], what: str = "write") -> None:
        req = p4runtime_pb2.WriteRequest(device_id=self.device_id)
        self._election(req)
        req.updates.extend(updates)
        if req.updates:
            self._call(self._stub.Write, req, what)

    def read(self, entities: Iterable[p4runtime_pb2.Entity],
             what: str = "read") -> list[p4runtime_pb2.Entity]:
        req = p4runtime_pb2.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        out: list[p4runtime_pb2.Entity] = []
        try:
            for reply in self._stub.Read(req, timeout=self.timeout):
                out.extend(reply.entities)
        except grpc.RpcError as exc:
            raise _wrap_rpc_error(exc, what) from None
        return out

    @staticmethod
    def update(kind: str, **entity) -> p4runtime_pb2.Update:
        """An Update of type ``kind`` (INSERT, MODIFY, DELETE) for one entity keyword."""
        return p4runtime_pb2.Update(type=p4runtime_pb2.Update.Type.Value(kind),
                                    entity=p4runtime_pb2.Entity(**entity))

    # -- digests ---------------------------------------------------------------------------
    def configure_digest(self, name: str, kind: str = "INSERT", max_timeout_ns: int = 0,
                         max_list_size: int = 1, ack_timeout_ns: int = 0) -> None:
        """Ask the device to stream digest ``name`` (a ``DigestEntry``); the lists arrive in
        :attr:`digest_lists`. The defaults send each digest at once, alone, and switch off the
        server's duplicate filter (with ``ack_timeout_ns`` 0, PI keeps no cache of data not yet
        acknowledged, so a repeated digest is sent again)."""
        index = self.require_index()
        entry = p4runtime_pb2.DigestEntry(digest_id=index.digest(name).preamble.id)
        entry.config.max_timeout_ns = max_timeout_ns
        entry.config.max_list_size = max_list_size
        entry.config.ack_timeout_ns = ack_timeout_ns
        self.write([self.update(kind, digest_entry=entry)], f"configure digest {name}")

    # -- tables ----------------------------------------------------------------------------
    def table_update(self, kind: str, table: str, match: Mapping[str, MatchValue],
                     action: Optional[str] = None, params: Mapping[str, int] = {},
                     priority: int = 0) -> p4runtime_pb2.Update:
        entry = self.require_index().table_entry(table, match, action, params, priority)
        return self.update(kind, table_entry=entry)

    def insert_entry(self, table: str, match: Mapping[str, MatchValue], action: str,
                     params: Mapping[str, int] = {}, priority: int = 0) -> None:
        self.write([self.table_update("INSERT", table, match, action, params, priority)],
                   f"insert into {table}")

    def delete_entry(self, table: str, match: Mapping[str, MatchValue], priority: int = 0) -> None:
        self.write([self.table_update("DELETE", table, match, priority=priority)],
                   f"delete from {table}")

    def read_entries(self, table: str) -> list[dict]:
        """Entries of ``table`` as dicts: match (field name -> raw FieldMatch), action, params."""
        index = self.require_index()
        t = index.table(table)
        fields = {f.id: f.name for f in t.match_fields}
        out = []
        for ent in self.read([p4runtime_pb2.Entity(
                table_entry=p4runtime_pb2.TableEntry(table_id=t.preamble.id))], f"read {table}"):
            te = ent.table_entry
            action = te.action.action
            a_info = index.action(index.action_names.get(action.action_id, ""))
            pnames = {p.id: p.name for p in a_info.params}
            out.append({
                "match": {fields[m.field_id]: m for m in te.match},
                "priority": te.priority,
                "action": a_info.preamble.name,
                "params": {pnames[p.param_id]: _decode_value(p.value) for p in action.params},
            })
        return out

    # -- packet replication engine ---------------------------------------------------------
    def multicast_update(self, kind: str, group_id: int,
                         replicas: Sequence[tuple[int, int]] = ()) -> p4runtime_pb2.Update:
        group = p4runtime_pb2.MulticastGroupEntry(multicast_group_id=group_id)
        for port, rid in replicas:
            group.replicas.add(egress_port=port, instance=rid)
        pre = p4runtime_pb2.PacketReplicationEngineEntry(multicast_group_entry=group)
        return self.update(kind, packet_replication_engine_entry=pre)

    def read_multicast_groups(self) -> dict[int, list[tuple[int, int]]]:
        pre = p4runtime_pb2.PacketReplicationEngineEntry(
            multicast_group_entry=p4runtime_pb2.MulticastGroupEntry())
        groups = {}
        for ent in self.read([p4runtime_pb2.Entity(packet_replication_engine_entry=pre)],
                             "read multicast groups"):
            g = ent.packet_replication_engine_entry.multicast_group_entry
            groups[g.multicast_group_id] = [(r.egress_port, r.instance) for r in g.replicas]
        return groups

    def clone_session_update(self, kind: str, session_id: int,
                             replicas: Sequence[tuple[int, int]] = (), class_of_service: int = 0,
                             packet_length_bytes: int = 0) -> p4runtime_pb2.Update:
        """An Update of a clone (mirror) session: ``replicas`` are ``(egress port, instance)``."""
        session = p4runtime_pb2.CloneSessionEntry(session_id=session_id,
                                                  class_of_service=class_of_service,
                                                  packet_length_bytes=packet_length_bytes)
        for port, rid in replicas:
            session.replicas.add(egress_port=port, instance=rid)
        pre = p4runtime_pb2.PacketReplicationEngineEntry(clone_session_entry=session)
        return self.update(kind, packet_replication_engine_entry=pre)

    def read_clone_sessions(self) -> dict[int, list[tuple[int, int]]]:
        """{session id: [(egress port, instance)]} of every clone session."""
        pre = p4runtime_pb2.PacketReplicationEngineEntry(
            clone_session_entry=p4runtime_pb2.CloneSessionEntry())
        out = {}
        for ent in self.read([p4runtime_pb2.Entity(packet_replication_engine_entry=pre)],
                             "read clone sessions"):
            c = ent.packet_replication_engine_entry.clone_session_entry
            out[c.session_id] = [(r.egress_port, r.instance) for r in c.replicas]
        return out

    # -- counters and registers ------------------------------------------------------------
    def read_counter(self, name: str, index: Optional[int] = None) -> dict[int, tuple[int, int]]:
        """{index: (bytes, packets)} of counter ``name`` (all indices when ``index`` is None)."""
        c = self.require_index().counter(name)
        entry = p4runtime_pb2.CounterEntry(counter_id=c.preamble.id)
        if index is not None:
            entry.index.index = index
        return {e.counter_entry.index.index: (e.counter_entry.data.byte_count,
                                              e.counter_entry.data.packet_count)
                for e in self.read([p4runtime_pb2.Entity(counter_entry=entry)], f"read {name}")}

    def counter_update(self, name: str, index: Optional[int], packets: int = 0,
                       byte_count: int = 0) -> p4runtime_pb2.Update:
        """MODIFY of one counter cell (all cells when ``index`` is None), e.g. to zero it."""
        c = self.require_index().counter(name)
        entry = p4runtime_pb2.CounterEntry(counter_id=c.preamble.id)
        if index is not None:
            entry.index.index = index
        entry.data.packet_count, entry.data.byte_count = packets, byte_count
        return self.update("MODIFY", counter_entry=entry)

    def read_register(self, name: str, index: Optional[int] = None) -> dict[int, Union[int, tuple]]:
        """{index: value} of register ``name`` (RegisterEntry: the embedded target has it;
        BMv2's P4Runtime does not, see ``controller.bmv2``); a struct cell's value is a tuple
        (:func:`register_value`)."""
        r = self.require_index().register(name)
        entry = p4runtime_pb2.RegisterEntry(register_id=r.preamble.id)
        if index is not None:
            entry.index.index = index
        out = {}
        for e in self.read([p4runtime_pb2.Entity(register_entry=entry)], f"read {name}"):
            out[e.register_entry.index.index] = register_value(e.register_entry.data)
        return out

    def read_register_cells(self, cells: Sequence[tuple[str, int]]) -> list[Union[int, tuple]]:
        """Values of many ``(register, index)`` cells in one Read request, in order (a struct
        cell's value is a tuple, :func:`register_value`)."""
        index = self.require_index()
        entities, ids = [], {}
        for name, i in cells:
            r = index.register(name)
            ids[r.preamble.id] = name
            entry = p4runtime_pb2.RegisterEntry(register_id=r.preamble.id)
            entry.index.index = i
            entities.append(p4runtime_pb2.Entity(register_entry=entry))
        got = {(ids[e.register_entry.register_id], e.register_entry.index.index):
               register_value(e.register_entry.data)
               for e in self.read(entities, "read registers")}
        try:
            return [got[cell] for cell in cells]
        except KeyError as exc:
            raise P4RuntimeClientError(f"register cell {exc.args[0]} missing from the answer",
                                       "INTERNAL") from None

    def register_update(self, name: str, index: Optional[int], value: int) -> p4runtime_pb2.Update:
        """MODIFY of one register cell (all cells when ``index`` is None)."""
        index_info = self.require_index()
        r = index_info.register(name)
        entry = p4runtime_pb2.RegisterEntry(register_id=r.preamble.id)
        if index is not None:
            entry.index.index = index
        try:
            entry.data.bitstring = encode_value(value, index_info.register_width(name),
                                                f"register {name}")
        except ValueError as exc:
            raise P4RuntimeClientError(str(exc), "INVALID_ARGUMENT") from None
        return self.update("MODIFY", register_entry=entry)
