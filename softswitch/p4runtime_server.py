"""A P4Runtime gRPC server (``p4.v1.P4Runtime``) over a :class:`~softswitch.switch.Switch`.

What a controller sees is what PI/BMv2 (``simple_switch_grpc``) offers, plus RegisterEntry:

* **Arbitration** (``StreamChannel``): the connected client with the highest election id is the
  primary; it gets ``MasterArbitrationUpdate`` with status OK, the others ALREADY_EXISTS (or
  NOT_FOUND while no client is primary). Every client is told when the primary changes; when the
  primary's stream ends, the next highest connected client takes over (as PI does). A second
  client with an election id in use ends its stream with INVALID_ARGUMENT. Only the primary may
  Write, set the pipeline and send PacketOut; as in PI, while no client is connected at all,
  requests with election id 0 are served too (handy for one-shot tools). Only the default role
  is supported: a named role is refused with UNIMPLEMENTED.
* **Pipeline** (``SetForwardingPipelineConfig``): VERIFY, VERIFY_AND_SAVE, VERIFY_AND_COMMIT,
  COMMIT and RECONCILE_AND_COMMIT. The device config is this target's JSON document (see
  :func:`make_device_config`, :func:`make_bundle_device_config`): P4 source only, compiled here
  as untrusted input (includes confined to its own files and p4include, cpp under limits, at
  most :data:`MAX_DEVICE_CONFIG_BYTES`; see :mod:`softswitch.frontend.bundle`).
  RECONCILE_AND_COMMIT acts as VERIFY_AND_COMMIT: run-time state starts afresh. The pushed P4Info is kept verbatim and its
  ids are the ones every later request uses, so a P4Info from real p4c works; it must describe
  the program (names, widths, match kinds) or the push fails with INVALID_ARGUMENT. A program
  loaded on the switch directly (``softswitch --program``) is served with the P4Info
  :func:`softswitch.p4info.build_p4info` generates for it, until a controller pushes another.
* **Write**: CONTINUE_ON_ERROR (the default, and all BMv2 offers), ROLLBACK_ON_ERROR and
  DATAPLANE_ATOMIC (the same here: a batch runs under the switch lock, so no frame sees part of
  it; on the first failure every applied update is undone and the others report ABORTED).
  TableEntry (with default entries),
  MulticastGroupEntry, CloneSessionEntry, CounterEntry, DirectCounterEntry, RegisterEntry,
  MeterEntry, DigestEntry. Failed updates are reported as PI does: overall status UNKNOWN with
  one ``p4.v1.Error`` per update in ``grpc-status-details-bin``.
* **Read** with wildcards for the same entities, streamed in batches. An answer is one
  snapshot, copied under the switch lock and encoded after the lock is released. One request
  returns at most :data:`MAX_READ_ENTITIES` entities: a request whose answer would hold more
  (say, a wildcard over every cell of every register of a large program) is refused with
  RESOURCE_EXHAUSTED, so read such state one register (or index) per entity.
* **Values**: bytestrings are accepted padded or canonical; a value wider than its field is
  OUT_OF_RANGE, an empty one INVALID_ARGUMENT. Reads answer in canonical form (no leading zero
  bytes). Writes to tables with ``const entries`` and to const default actions are
  PERMISSION_DENIED; don't-care matches (ternary mask 0, lpm /0, full range) must be omitted.
* **Packet I/O**: PacketOut becomes ``packet_out`` header + payload entering ingress on the CPU
  port; frames the dataplane sends to the CPU port lose their ``packet_in`` header, whose fields
  become PacketIn metadata for the primary. Digests go to the primary as DigestList once a
  DigestEntry enabled them (one digest per list; acks are accepted and ignored).
* **Not supported** (UNIMPLEMENTED): action profiles and selectors, value sets, extern entries,
  DirectMeterEntry and meter config in table entries, resetting a MeterEntry. DigestEntry config
  knobs are accepted and ignored.

Example::

    >>> switch = Switch(device_id=0, cpu_port=255)
    >>> server = serve(switch, "127.0.0.1:9559")
    >>> ...                                    # p4runtime-shell, ONOS, hina-ctl ...
    >>> server.stop(grace=None).wait()
    >>> server.servicer.close()
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import queue
import threading
from concurrent import futures
from typing import Callable, Iterable, Optional, Sequence, Union

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from . import api
from .api import ActionCall, CompiledProgram, ControlError, ProgramInfo
from .frontend.bundle import SourceBundle, check_bundle
from .frontend.cpp_sandbox import CppLimitError
from .switch import Switch

log = logging.getLogger("softswitch.p4runtime")

DEFAULT_ADDRESS = "127.0.0.1:9559"
DEVICE_CONFIG_FORMAT = "softswitch-p4"
DEVICE_CONFIG_VERSION = 1
DEVICE_CONFIG_FIELDS = ("format", "version", "name", "source", "files")   # nothing else is read
# p4/hina.p4 at 256 words makes a 0.45 MiB device config. Below gRPC's default 4 MiB message
# limit, so that an oversize config gets this target's message (with room for the P4Info).
MAX_DEVICE_CONFIG_BYTES = 3 << 20
READ_BATCH_SIZE = 100            # entities per ReadResponse
# Entities one Read request may return. A wildcard RegisterEntry of p4/hina.p4 (every cell of
# every register) is 269,312 entities at 64 words: about a minute of pure-Python protobuf
# encoding and decoding, which no client deadline waits for. Every single register of hina.p4
# (at most 65,536 cells, a sketch row) still reads in one request.
MAX_READ_ENTITIES = 1 << 16
# Requested entities, tables, table entries and cells one Read request may look at, as a
# multiple of its answer's limit: a read by match scans its table, a wildcard every table, and
# a request of many such entities would otherwise hold the switch lock as long as its size
# allows.
READ_SCAN_FACTOR = 16
DEFAULT_MAX_WORKERS = 16         # each open StreamChannel holds one worker thread
COMPILED_PROGRAM_CACHE_SIZE = 4  # compiled device configs kept for re-pushes

SetPipelineRequest = p4runtime_pb2.SetForwardingPipelineConfigRequest
# RECONCILE_AND_COMMIT commits like VERIFY_AND_COMMIT: run-time state is not carried over.
COMMITTING_ACTIONS = (SetPipelineRequest.VERIFY_AND_COMMIT, SetPipelineRequest.RECONCILE_AND_COMMIT)
GetRequest = p4runtime_pb2.GetForwardingPipelineConfigRequest
WriteRequest = p4runtime_pb2.WriteRequest
Update = p4runtime_pb2.Update


def api_version() -> str:
    """The P4Runtime API version this server implements (the installed ``p4runtime`` protos)."""
    try:
        from importlib.metadata import version
        return version("p4runtime")
    except Exception:   # metadata missing (vendored protos): the version these were written for
        return "1.4.1"


# --------------------------------------------------------------------------------------------
# Errors: the one place where failures become gRPC statuses
# --------------------------------------------------------------------------------------------
class P4RuntimeError(Exception):
    """A request the server refuses; ``code`` is the ``grpc.StatusCode`` to answer with."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message

    @classmethod
    def from_control_error(cls, exc: ControlError) -> "P4RuntimeError":
        return cls(getattr(grpc.StatusCode, exc.code, grpc.StatusCode.UNKNOWN), exc.message)

    @property
    def rpc_code(self) -> int:
        """The ``google.rpc.Code`` number of ``code``."""
        return self.code.value[0]


def _invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def _not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.NOT_FOUND, message)


def _unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)


def _as_p4runtime_error(exc: BaseException, what: str) -> P4RuntimeError:
    """Map any exception raised while serving ``what`` to a P4RuntimeError (INTERNAL if a bug)."""
    if isinstance(exc, P4RuntimeError):
        return exc
    if isinstance(exc, ControlError):
        return P4RuntimeError.from_control_error(exc)
    log.exception("internal error while serving %s", what)
    return P4RuntimeError(grpc.StatusCode.INTERNAL, f"internal error while serving {what}: {exc}")


def _abort(context: grpc.ServicerContext, exc: BaseException, what: str):
    err = _as_p4runtime_error(exc, what)
    context.abort(err.code, err.message)


# --------------------------------------------------------------------------------------------
# Device config
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    """This target's ``p4_device_config``: P4 source text, never compiled code.

    Attributes:
        name: the main file's name (a label for diagnostics; never opened on the switch).
        source: the main file: cpp's output (what :func:`make_device_config` sends), or raw P4
            whose ``#include "..."`` name ``files``.
        files: ``(relative path, text)`` pairs: the other files of a raw program's bundle.
    """
    name: str
    source: str
    files: tuple = ()

    @property
    def bundle(self) -> SourceBundle:
        """The program as a :class:`softswitch.frontend.bundle.SourceBundle`."""
        return SourceBundle(self.name, self.source, self.files)


class DeviceConfigTooLarge(ValueError):
    """A device config over :data:`MAX_DEVICE_CONFIG_BYTES` (answered RESOURCE_EXHAUSTED)."""


def make_device_config(program: Union[CompiledProgram, str, os.PathLike]) -> bytes:
    """The ``p4_device_config`` bytes for a program (what ``p4c-bm2-ss``'s JSON is for BMv2).

    Args:
        program: a compiled program, or the path of a ``.p4`` file to compile.

    Returns:
        UTF-8 JSON ``{"format": "softswitch-p4", "version": 1, "name": ..., "source": ...}``.

    Example::

        >>> open("build/hina.bin", "wb").write(make_device_config("p4/hina.p4"))
    """
    if not isinstance(program, CompiledProgram):
        from .compiler import compile_file
        program = compile_file(os.fspath(program))
    document = {"format": DEVICE_CONFIG_FORMAT, "version": DEVICE_CONFIG_VERSION,
                "name": program.name, "source": program.source}
    return json.dumps(document).encode("utf-8")


def make_bundle_device_config(name: str, source: str,
                              files: Optional[dict] = None) -> bytes:
    """The ``p4_device_config`` bytes for raw P4 source: a main file and the files it includes,
    preprocessed on the switch (confined to these files and ``core.p4`` / ``v1model.p4``).

    Args:
        name: the main file's name (for diagnostics).
        source: the main file's text.
        files: relative path -> text of every file the program includes (paths relative to the
            main file's directory, ``/``-separated, no ``..``).

    Returns:
        UTF-8 JSON ``{"format": "softswitch-p4", "version": 1, "name", "source", "files"}``.

    Raises:
        ValueError: a file name the switch would refuse.

    Example::

        >>> main = '#include <v1model.p4>\\n#include "lib/x.p4"\\n...'
        >>> make_bundle_device_config("main.p4", main, {"lib/x.p4": "const bit<8> X = 1;\\n"})
    """
    config = DeviceConfig(name, source, tuple(sorted((files or {}).items())))
    check_bundle(config.bundle)
    document = {"format": DEVICE_CONFIG_FORMAT, "version": DEVICE_CONFIG_VERSION,
                "name": name, "source": source, "files": dict(config.files)}
    data = json.dumps(document).encode("utf-8")
    if len(data) > MAX_DEVICE_CONFIG_BYTES:
        raise DeviceConfigTooLarge(_too_large(len(data)))
    return data


def parse_device_config(data: bytes) -> DeviceConfig:
    """Parse :func:`make_device_config`'s (or :func:`make_bundle_device_config`'s) output.

    Only P4 source text is accepted: a document with any other field (compiled or generated
    code, a pickle, ...) or anything that is not such a JSON document is refused. Nothing in it
    is executed or unpickled; the switch compiles the P4 itself.

    Raises:
        DeviceConfigTooLarge: over :data:`MAX_DEVICE_CONFIG_BYTES`.
        ValueError: not such a document (the message says what is wrong).
    """
    if len(data) > MAX_DEVICE_CONFIG_BYTES:
        raise DeviceConfigTooLarge(_too_large(len(data)))
    if not data:
        raise ValueError("device config is empty: this target needs the P4 program "
                         "(make it with softswitch.p4runtime_server.make_device_config)")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"device config is not a {DEVICE_CONFIG_FORMAT!r} JSON document "
                         f"({_shorten(exc)}); this target accepts only P4 source text: "
                         "compiled code, pickles and other binary artifacts are refused") from None
    if not isinstance(document, dict) or document.get("format") != DEVICE_CONFIG_FORMAT:
        raise ValueError(f"device config is not a {DEVICE_CONFIG_FORMAT!r} document "
                         "(make it with softswitch.p4runtime_server.make_device_config)")
    if document.get("version") != DEVICE_CONFIG_VERSION:
        raise ValueError(f"device config version {_shorten(document.get('version'))} is not "
                         f"supported (this target reads version {DEVICE_CONFIG_VERSION})")
    unknown = sorted(set(document) - set(DEVICE_CONFIG_FIELDS))
    if unknown:
        raise ValueError(f"device config field {_shorten(unknown[0])!r} is not known: this target "
                         f"accepts only P4 source text (fields {', '.join(DEVICE_CONFIG_FIELDS)})")
    name, source = document.get("name"), document.get("source")
    if not isinstance(name, str) or not isinstance(source, str):
        raise ValueError("device config needs string fields 'name' and 'source'")
    files = document.get("files", {})
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise ValueError("device config field 'files' must map relative paths to P4 source text")
    config = DeviceConfig(name=name, source=source, files=tuple(sorted(files.items())))
    check_bundle(config.bundle)
    return config


def _too_large(size: int) -> str:
    return (f"device config is {size} bytes; this target accepts at most "
            f"{MAX_DEVICE_CONFIG_BYTES} ({MAX_DEVICE_CONFIG_BYTES >> 20} MiB)")


def _shorten(value: object, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


# --------------------------------------------------------------------------------------------
# Bytestrings
# --------------------------------------------------------------------------------------------
def decode_bytes(value: bytes, bitwidth: int, what: str) -> int:
    """A P4Runtime bytestring as an int; padded (non-canonical) strings are accepted.

    Raises:
        P4RuntimeError: INVALID_ARGUMENT for an empty string, OUT_OF_RANGE for a value wider
            than ``bitwidth``.
    """
    if not value:
        raise _invalid(f"{what}: empty bytestring")
    number = int.from_bytes(value, "big")
    if number >> bitwidth:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE,
                             f"{what}: value 0x{value.hex()} does not fit in {bitwidth} bits")
    return number


def encode_bytes(value: int) -> bytes:
    """``value`` in P4Runtime's canonical form: the shortest big-endian string (0 -> b'\\0')."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


# --------------------------------------------------------------------------------------------
# The pipeline: the pushed P4Info joined with the compiled program
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass
class _Table:
    id: int
    info: api.TableInfo
    fields: dict[int, tuple[int, api.MatchFieldInfo]]     # field id -> (key index, field)
    field_ids: list[int]                                  # key index -> field id
    actions: dict[int, int]                               # action id -> ActionRef scope


@dataclasses.dataclass
class _Action:
    id: int
    info: api.ActionInfo
    params: dict[int, tuple[int, api.ParamInfo]]          # param id -> (index, param)
    param_ids: list[int]


@dataclasses.dataclass
class _Resource:
    """A register, counter, meter or digest: its id, name and program description."""
    id: int
    name: str
    info: object


@dataclasses.dataclass
class _ControllerHeader:
    id: int
    fields: list[tuple[int, str, int]]                    # (metadata id, name, bitwidth)

    @property
    def bitwidth(self) -> int:
        return sum(width for _, _, width in self.fields)


class Pipeline:
    """A committed (or saved) forwarding pipeline: P4Info + device config + compiled program.

    Checks that the P4Info describes the program (every object it names exists there with the
    same widths) and indexes both by P4Info id.

    Raises:
        P4RuntimeError: INVALID_ARGUMENT when the P4Info does not match the program.
    """

    def __init__(self, p4info: p4info_pb2.P4Info, device_config: bytes, cookie: int,
                 program: CompiledProgram):
        self.p4info, self.device_config, self.cookie = p4info, device_config, cookie
        self.program = program
        info: ProgramInfo = program.info
        _check_unique_ids(p4info)
        self.actions: dict[int, _Action] = {}
        self.action_ids: dict[str, int] = {}
        for action in p4info.actions:
            program_action = _find(info.actions, action.preamble.name, "action")
            params: dict[int, tuple[int, api.ParamInfo]] = {}
            if len(action.params) != len(program_action.params):
                raise _invalid(f"P4Info action {action.preamble.name!r} has "
                               f"{len(action.params)} parameters, the program's has "
                               f"{len(program_action.params)}")
            for index, (p, program_param) in enumerate(zip(action.params,
                                                           program_action.params)):
                _check_width(f"parameter {p.name!r} of action {action.preamble.name!r}",
                             p.bitwidth, program_param.bitwidth)
                if p.id in params:
                    raise _invalid(f"P4Info action {action.preamble.name!r} uses parameter "
                                   f"id {p.id} twice")
                params[p.id] = (index, program_param)
            self.actions[action.preamble.id] = _Action(
                action.preamble.id, program_action, params, [p.id for p in action.params])
            self.action_ids[action.preamble.name] = action.preamble.id

        self.tables: dict[int, _Table] = {}
        self.table_ids: dict[str, int] = {}
        for table in p4info.tables:
            self._add_table(table, info)

        self.registers = self._resources(p4info.registers, info.registers, "register",
                                         lambda m, i: _check_width(
                                             f"register {i.name!r}", _bits_of(m.type_spec),
                                             i.bitwidth))
        self.counters = self._resources(p4info.counters, info.counters, "counter")
        self.direct_counters = self._resources(p4info.direct_counters, info.direct_counters,
                                               "direct counter")
        self.meters = self._resources(p4info.meters, info.meters, "meter")
        self.direct_meters = self._resources(p4info.direct_meters, info.direct_meters,
                                             "direct meter")
        self.digests = self._resources(p4info.digests, info.digests, "digest")
        self.digest_ids = {r.name: r.id for r in self.digests.values()}
        self.packet_in: Optional[_ControllerHeader] = None
        self.packet_out: Optional[_ControllerHeader] = None
        for header in p4info.controller_packet_metadata:
            fields = [(m.id, m.name, m.bitwidth) for m in header.metadata]
            if header.preamble.name == "packet_in":
                self.packet_in = _ControllerHeader(header.preamble.id, fields)
            elif header.preamble.name == "packet_out":
                self.packet_out = _ControllerHeader(header.preamble.id, fields)
        for name in ("packet_in", "packet_out"):
            ours = getattr(self, name)
            program_header = next((h for h in info.controller_headers if h.name == name), None)
            if ours is not None and program_header is None:
                raise _invalid(f"P4Info has controller header {name!r}, the program has none")
            if ours is not None:
                _check_width(f"controller header {name!r}", ours.bitwidth,
                             sum(f.bitwidth for f in program_header.metadata))

    def _add_table(self, table: p4info_pb2.Table, info: ProgramInfo) -> None:
        name = table.preamble.name
        program_table = _find(info.tables, name, "table")
        if len(table.match_fields) != len(program_table.match_fields):
            raise _invalid(f"P4Info table {name!r} has {len(table.match_fields)} match fields, "
                           f"the program's has {len(program_table.match_fields)}")
        fields = {}
        for index, (mf, program_field) in enumerate(zip(table.match_fields,
                                                        program_table.match_fields)):
            what = f"match field {mf.name!r} of table {name!r}"
            _check_width(what, mf.bitwidth, program_field.bitwidth)
            kind = _enum_name(p4info_pb2.MatchField.MatchType, mf.match_type).lower()
            if kind != program_field.match_kind:
                raise _invalid(f"P4Info {what} is {kind}, the program's is "
                               f"{program_field.match_kind}")
            if mf.id in fields:
                raise _invalid(f"P4Info table {name!r} uses match field id {mf.id} twice")
            fields[mf.id] = (index, program_field)
        actions = {}
        for ref in table.action_refs:
            # p4c refers to a table's @hidden actions without declaring them: no entry or
            # default action can name such an action (the P4Info gives it no name or params).
            if ref.id in self.actions:
                actions[ref.id] = ref.scope
        self.tables[table.preamble.id] = _Table(table.preamble.id, program_table, fields,
                                                [mf.id for mf in table.match_fields], actions)
        self.table_ids[name] = table.preamble.id

    @staticmethod
    def _resources(messages, program_objects, kind: str,
                   check: Optional[Callable] = None) -> dict[int, _Resource]:
        found = {}
        for msg in messages:
            obj = _find(program_objects, msg.preamble.name, kind)
            if check is not None:
                check(msg, obj)
            found[msg.preamble.id] = _Resource(msg.preamble.id, msg.preamble.name, obj)
        return found

    # -- lookups (NOT_FOUND names the kind and the id) ----------------------------------------
    def table(self, table_id: int) -> _Table:
        if table_id not in self.tables:
            raise _not_found(f"table id {table_id} is not in the P4Info")
        return self.tables[table_id]

    def action(self, action_id: int) -> _Action:
        if action_id not in self.actions:
            raise _not_found(f"action id {action_id} is not in the P4Info")
        return self.actions[action_id]

    def resource(self, kind: str, resource_id: int) -> _Resource:
        table = getattr(self, kind.replace(" ", "_") + "s")
        if resource_id not in table:
            raise _not_found(f"{kind} id {resource_id} is not in the P4Info")
        return table[resource_id]


def _check_unique_ids(p4info: p4info_pb2.P4Info) -> None:
    seen: dict[int, str] = {}
    for kind in ("tables", "actions", "action_profiles", "counters", "direct_counters",
                 "meters", "direct_meters", "controller_packet_metadata", "value_sets",
                 "registers", "digests"):
        for obj in getattr(p4info, kind):
            name, id_ = obj.preamble.name, obj.preamble.id
            if id_ in seen:
                raise _invalid(f"P4Info id {id_} is used by both {seen[id_]!r} and {name!r}")
            seen[id_] = name


def _enum_name(enum, value: int) -> str:
    """The name of a protobuf enum value, or the number for a value the enum does not define."""
    try:
        return enum.Name(value)
    except ValueError:
        return str(value)


def _find(objects, name: str, kind: str):
    for obj in objects:
        if obj.name == name:
            return obj
    raise _invalid(f"P4Info {kind} {name!r} is not in the program")


def _check_width(what: str, p4info_width: int, program_width: int) -> None:
    if p4info_width != program_width:
        raise _invalid(f"P4Info {what} is {p4info_width} bits wide, the program's is "
                       f"{program_width}")


def _bits_of(type_spec) -> int:
    bits = type_spec.bitstring
    which = bits.WhichOneof("type_spec")
    return getattr(bits, which).bitwidth if which in ("bit", "int") else 0


# --------------------------------------------------------------------------------------------
# Arbitration
# --------------------------------------------------------------------------------------------
_CLOSE = object()   # end-of-stream marker in a client's outgoing queue


class _Client:
    """One StreamChannel: its election id (``None`` before arbitration) and outgoing queue."""

    def __init__(self):
        self.election_id: Optional[int] = None
        self.outgoing: "queue.Queue" = queue.Queue()
        self.abort_with: Optional[P4RuntimeError] = None

    def send(self, message) -> None:
        self.outgoing.put(message)

    def close(self, error: Optional[P4RuntimeError] = None) -> None:
        if error is not None:
            self.abort_with = error
        self.outgoing.put(_CLOSE)


def _election_id(msg) -> int:
    return (msg.high << 64) | msg.low


class Arbiter:
    """Primary election among the open streams of one device (default role only)."""

    def __init__(self, device_id: int):
        self.device_id = device_id
        self._lock = threading.Lock()
        self._clients: list[_Client] = []
        self._primary: Optional[_Client] = None

    @property
    def primary(self) -> Optional[_Client]:
        return self._primary

    def is_primary(self, election_id: int) -> bool:
        primary = self._primary
        return primary is not None and primary.election_id == election_id

    def update(self, client: _Client, election_id: int) -> None:
        """Handle a MasterArbitrationUpdate from ``client``.

        Raises:
            P4RuntimeError: INVALID_ARGUMENT if another client already uses ``election_id``.
        """
        with self._lock:
            if any(c is not client and c.election_id == election_id for c in self._clients):
                raise _invalid(f"election id {_format_election_id(election_id)} is already "
                               "used by another client")
            if client not in self._clients:
                self._clients.append(client)
            client.election_id = election_id
            changed = self._elect()
            if changed:
                for c in self._clients:
                    c.send(self._arbitration_for(c))
            else:
                client.send(self._arbitration_for(client))

    def remove(self, client: _Client) -> None:
        with self._lock:
            if client in self._clients:
                self._clients.remove(client)
                if self._elect():
                    for c in self._clients:
                        c.send(self._arbitration_for(c))

    def _elect(self) -> bool:
        candidates = [c for c in self._clients if c.election_id is not None]
        best = max(candidates, key=lambda c: c.election_id, default=None)
        changed = best is not self._primary
        self._primary = best
        if changed:
            log.info("device %d: primary is now election id %s", self.device_id,
                     "none" if best is None else _format_election_id(best.election_id))
        return changed

    def _arbitration_for(self, client: _Client) -> p4runtime_pb2.StreamMessageResponse:
        response = p4runtime_pb2.StreamMessageResponse()
        arbitration = response.arbitration
        arbitration.device_id = self.device_id
        highest = self._primary.election_id if self._primary else client.election_id
        arbitration.election_id.high, arbitration.election_id.low = (highest >> 64,
                                                                     highest & (2**64 - 1))
        if client is self._primary:
            arbitration.status.code = code_pb2.OK
            arbitration.status.message = "is primary"
        elif self._primary is not None:
            arbitration.status.code = code_pb2.ALREADY_EXISTS
            arbitration.status.message = "is backup: a client with a higher election id is primary"
        else:
            arbitration.status.code = code_pb2.NOT_FOUND
            arbitration.status.message = "is backup: no primary"
        return response


def _format_election_id(value: int) -> str:
    return f"({value >> 64}, {value & (2**64 - 1)})"


# --------------------------------------------------------------------------------------------
# The servicer
# --------------------------------------------------------------------------------------------
class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    """The P4Runtime service for one :class:`Switch`.

    Args:
        switch: the device served; its ``device_id`` is the P4Runtime device id.
        compile_source: ``(source, filename) -> CompiledProgram``; defaults to
            ``softswitch.compiler.compile_source``.
        max_read_entities: the most entities one Read request may return; a request whose
            answer would hold more is refused with RESOURCE_EXHAUSTED.
    """

    def __init__(self, switch: Switch,
                 compile_source: Optional[Callable[[str, str], CompiledProgram]] = None,
                 max_read_entities: int = MAX_READ_ENTITIES):
        self.switch = switch
        self.max_read_entities = max_read_entities
        self.arbiter = Arbiter(switch.device_id)
        self._compile_source = compile_source
        # Lock order: self._lock (pipeline changes), then switch.lock (the dataplane and
        # everything read with it: pipeline, digest_enabled).
        self._lock = threading.RLock()
        self.pipeline: Optional[Pipeline] = None
        self._saved: Optional[Pipeline] = None
        self._digest_enabled: set[int] = set()
        self._programs: dict[tuple[str, str], CompiledProgram] = {}   # by (name, source)
        self._digest_list_id = 0
        self._digest_lock = threading.Lock()          # taken under switch.lock: nothing inside
        switch.add_packet_in_sink(self._on_packet_in)
        switch.add_digest_sink(self._on_digest)

    def close(self) -> None:
        """Detach from the switch (the server keeps no other resources)."""
        self.switch.remove_packet_in_sink(self._on_packet_in)
        self.switch.remove_digest_sink(self._on_digest)

    # -- common checks -------------------------------------------------------------------------
    def _check_device(self, device_id: int) -> None:
        if device_id != self.switch.device_id:
            raise _not_found(f"device id {device_id} is not served here "
                             f"(this is device {self.switch.device_id})")

    @staticmethod
    def _check_role(role: str) -> None:
        if role:
            raise _unimplemented(f"role {role!r}: only the default role is supported")

    def _check_primary(self, election_id_msg, what: str) -> None:
        election_id = _election_id(election_id_msg)
        if election_id == 0 and self.arbiter.primary is None:
            return          # as PI: with no client connected, unarbitrated requests are served
        if not self.arbiter.is_primary(election_id):
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"{what}: election id {_format_election_id(election_id)} is "
                                 "not the primary client's")

    def _current_pipeline(self) -> Optional[Pipeline]:
        """The pipeline of the program the switch runs.

        A program loaded on the switch directly (``softswitch --program``) rather than pushed
        over P4Runtime is served with the P4Info generated from it, as if a controller had
        pushed that P4Info and :func:`make_device_config`'s document.
        """
        with self.switch.lock:
            program, pipeline = self.switch.program, self.pipeline
            if program is not None and (pipeline is None or pipeline.program is not program):
                from .p4info import build_p4info
                pipeline = Pipeline(build_p4info(program.info), make_device_config(program),
                                    self.switch.cookie, program)
                self.pipeline = pipeline
                self._digest_enabled.clear()
            return pipeline

    def _require_pipeline(self) -> Pipeline:
        pipeline = self._current_pipeline()
        if pipeline is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "no forwarding pipeline config is set on the device")
        return pipeline

    # -- Capabilities --------------------------------------------------------------------------
    def Capabilities(self, request, context):
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=api_version())

    # -- pipeline ------------------------------------------------------------------------------
    def SetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            self._check_primary(request.election_id, "SetForwardingPipelineConfig")
            self._set_pipeline(request)
            return p4runtime_pb2.SetForwardingPipelineConfigResponse()
        except Exception as exc:  # every failure becomes a status; INTERNAL ones are logged
            _abort(context, exc, "SetForwardingPipelineConfig")

    def _set_pipeline(self, request) -> None:
        action = request.action
        with self._lock:
            if action == SetPipelineRequest.COMMIT:
                if self._saved is None:
                    raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                         "COMMIT: no config was saved with VERIFY_AND_SAVE")
                self._commit(self._saved)
                return
            if action not in (SetPipelineRequest.VERIFY, SetPipelineRequest.VERIFY_AND_SAVE,
                              *COMMITTING_ACTIONS):
                raise _invalid(f"SetForwardingPipelineConfig action "
                               f"{_enum_name(SetPipelineRequest.Action, action)} is not valid")
            pipeline = self._verify(request.config)
            if action == SetPipelineRequest.VERIFY_AND_SAVE:
                self._saved = pipeline
            elif action in COMMITTING_ACTIONS:
                self._commit(pipeline)

    def _verify(self, config) -> Pipeline:
        if not config.HasField("p4info"):
            raise _invalid("forwarding pipeline config has no P4Info")
        try:
            device_config = parse_device_config(config.p4_device_config)
        except DeviceConfigTooLarge as exc:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)) from None
        except ValueError as exc:
            raise _invalid(str(exc)) from None
        program = self._compile(device_config)
        p4info = p4info_pb2.P4Info()
        p4info.CopyFrom(config.p4info)
        return Pipeline(p4info, config.p4_device_config, config.cookie.cookie, program)

    def _compile(self, device_config: DeviceConfig) -> CompiledProgram:
        """Compile the device config's program; the last few results are reused, so pushing
        the same pipeline again (controller restart, tests) costs no compilation.

        The program is untrusted: it is compiled by :func:`softswitch.compiler.compile_bundle`,
        confined to its own files and ``p4include`` and under the preprocessor's limits (a
        ``compile_source`` given to the constructor is trusted and called instead)."""
        key = (device_config.name, device_config.source, device_config.files)
        program = self._programs.get(key)
        if program is not None:
            return program
        try:
            if self._compile_source is not None:
                program = self._compile_source(device_config.source, filename=device_config.name)
            else:
                from .compiler import compile_bundle
                program = compile_bundle(device_config.bundle)
        except CppLimitError as exc:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)) from None
        except api.P4UnsupportedError as exc:
            raise _unimplemented(str(exc)) from None
        except api.P4CompileError as exc:
            raise _invalid(str(exc)) from None
        except RecursionError:
            raise _invalid(f"{device_config.name}: the program nests too deeply for this "
                           "target's compiler") from None
        if len(self._programs) >= COMPILED_PROGRAM_CACHE_SIZE:
            self._programs.pop(next(iter(self._programs)))
        self._programs[key] = program
        return program

    def _commit(self, pipeline: Pipeline) -> None:
        with self.switch.lock:      # no frame or request sees the new dataplane with old ids
            self.switch.load(pipeline.program, cookie=pipeline.cookie,
                             p4info_bytes=pipeline.p4info.SerializeToString())
            self.pipeline, self._saved = pipeline, None
            self._digest_enabled.clear()

    def GetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            pipeline = self._require_pipeline()
            response = p4runtime_pb2.GetForwardingPipelineConfigResponse()
            config = response.config
            config.cookie.cookie = pipeline.cookie
            kind = request.response_type
            if kind in (GetRequest.ALL, GetRequest.P4INFO_AND_COOKIE):
                config.p4info.CopyFrom(pipeline.p4info)
            if kind in (GetRequest.ALL, GetRequest.DEVICE_CONFIG_AND_COOKIE):
                config.p4_device_config = pipeline.device_config
            return response
        except Exception as exc:
            _abort(context, exc, "GetForwardingPipelineConfig")

    # -- Write ---------------------------------------------------------------------------------
    def Write(self, request, context):
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            self._check_primary(request.election_id, "Write")
            atomic = request.atomicity != WriteRequest.CONTINUE_ON_ERROR
            if request.atomicity not in (WriteRequest.CONTINUE_ON_ERROR,
                                         WriteRequest.ROLLBACK_ON_ERROR,
                                         WriteRequest.DATAPLANE_ATOMIC):
                raise _invalid(f"atomicity "
                               f"{_enum_name(WriteRequest.Atomicity, request.atomicity)} "
                               "is not valid")
            results: list[Optional[P4RuntimeError]] = []
            with self.switch.lock:   # no frame is processed in the middle of a batch
                writer = _Writer(self, self._require_pipeline(),
                                 self.switch.require_dataplane(), undoable=atomic)
                for index, update in enumerate(request.updates):
                    try:
                        writer.apply(update)
                        results.append(None)
                    except Exception as exc:   # reported per update
                        results.append(_as_p4runtime_error(exc, f"Write update {index}"))
                        if atomic:
                            writer.rollback()
                            break
            if atomic and any(results):
                aborted = P4RuntimeError(grpc.StatusCode.ABORTED,
                                         "not applied: another update of the batch failed")
                results += [None] * (len(request.updates) - len(results))
                results = [r or aborted for r in results]
        except Exception as exc:
            _abort(context, exc, "Write")
            return None
        if any(results):
            _abort_write(context, results)
        return p4runtime_pb2.WriteResponse()

    # -- Read ----------------------------------------------------------------------------------
    def Read(self, request, context):
        # The switch lock is held only while the answer is copied (bounded by
        # max_read_entities); it is encoded batch by batch after the lock is released, and not
        # at all once the client has gone (deadline passed, cancelled).
        try:
            self._check_device(request.device_id)
            self._check_role(request.role)
            with self.switch.lock:
                reader = _Reader(self, self._require_pipeline(), self.switch.require_dataplane(),
                                 self.max_read_entities)
                for entity in request.entities:
                    reader.snapshot(entity)
            for sent, response in enumerate(reader.responses()):
                if not context.is_active():
                    log.debug("Read abandoned after %d of %d entities: the client is gone",
                              sent * READ_BATCH_SIZE, len(reader))
                    return
                yield response
        except Exception as exc:
            _abort(context, exc, "Read")

    # -- StreamChannel -------------------------------------------------------------------------
    def StreamChannel(self, request_iterator, context):
        client = _Client()
        context.add_callback(lambda: client.close())
        reader = threading.Thread(target=self._stream_reader, args=(client, request_iterator),
                                  name="p4rt-stream", daemon=True)
        reader.start()
        try:
            while True:
                message = client.outgoing.get()
                if message is _CLOSE:
                    break
                yield message
        finally:
            self.arbiter.remove(client)
        if client.abort_with is not None:
            context.abort(client.abort_with.code, client.abort_with.message)

    def _stream_reader(self, client: _Client, request_iterator) -> None:
        try:
            for request in request_iterator:
                try:
                    self._stream_message(client, request)
                except P4RuntimeError as exc:
                    if request.HasField("arbitration"):
                        client.close(exc)   # a bad arbitration ends the stream, as in PI
                        return
                    client.send(_stream_error(exc, request))
                except Exception as exc:
                    client.send(_stream_error(_as_p4runtime_error(exc, "StreamChannel"),
                                              request))
        except grpc.RpcError:
            pass            # the client went away
        except Exception:   # a broken request stream must not leave the client dangling
            log.exception("StreamChannel reader failed")
        client.close(client.abort_with)

    def _stream_message(self, client: _Client, request) -> None:
        kind = request.WhichOneof("update")
        if kind == "arbitration":
            update = request.arbitration
            if client.election_id is not None and update.device_id != self.switch.device_id:
                raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"arbitration: this stream is bound to device "
                                     f"{self.switch.device_id}, not {update.device_id}")
            self._check_device(update.device_id)
            if update.HasField("role") and (update.role.name or update.role.HasField("config")):
                raise _unimplemented(f"role {update.role.name!r}: only the default role is "
                                     "supported")
            self.arbiter.update(client, _election_id(update.election_id))
        elif kind == "packet":
            if client.election_id is None or self.arbiter.primary is not client:
                raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                     "PacketOut: only the primary client may send packets")
            self._packet_out(request.packet)
        elif kind == "digest_ack":
            pass            # digests are not retransmitted, acks need no bookkeeping
        else:
            raise _invalid(f"stream message {kind or 'with no update'} is not supported")

    # -- packet I/O ----------------------------------------------------------------------------
    def _packet_out(self, packet: p4runtime_pb2.PacketOut) -> None:
        pipeline = self._require_pipeline()
        if self.switch.cpu_port is None:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "PacketOut: the device has no CPU port")
        header = b""
        if pipeline.packet_out is not None:
            header = _pack_header(pipeline.packet_out, packet.metadata)
        elif packet.metadata:
            raise _invalid("PacketOut has metadata but the P4Info has no packet_out header")
        self.switch.receive(self.switch.cpu_port, header + packet.payload)

    def _on_packet_in(self, frame: bytes) -> None:
        primary, pipeline = self.arbiter.primary, self._current_pipeline()
        if primary is None or pipeline is None:
            return
        response = p4runtime_pb2.StreamMessageResponse()
        packet = response.packet
        header = pipeline.packet_in
        if header is not None:
            size = (header.bitwidth + 7) // 8
            if len(frame) < size:
                log.warning("dropping PacketIn of %d bytes: shorter than its packet_in header",
                            len(frame))
                return
            value = int.from_bytes(frame[:size], "big") >> (size * 8 - header.bitwidth)
            shift = header.bitwidth
            for md_id, _, width in header.fields:
                shift -= width
                md = packet.metadata.add()
                md.metadata_id = md_id
                md.value = encode_bytes((value >> shift) & ((1 << width) - 1))
            frame = frame[size:]
        packet.payload = frame
        primary.send(response)

    def _on_digest(self, digest: api.Digest) -> None:
        primary, pipeline = self.arbiter.primary, self._current_pipeline()
        if primary is None or pipeline is None:
            return
        digest_id = pipeline.digest_ids.get(digest.name)
        if digest_id is None or digest_id not in self._digest_enabled:
            return
        with self._digest_lock:
            self._digest_list_id += 1
            list_id = self._digest_list_id
        response = p4runtime_pb2.StreamMessageResponse()
        response.digest.digest_id, response.digest.list_id = digest_id, list_id
        members = response.digest.data.add().struct.members
        for value in digest.values:
            members.add().bitstring = encode_bytes(value)
        primary.send(response)


def _pack_header(header: _ControllerHeader, metadata) -> bytes:
    values = {}
    by_id = {md_id: (name, width) for md_id, name, width in header.fields}
    for md in metadata:
        if md.metadata_id not in by_id:
            raise _invalid(f"PacketOut metadata id {md.metadata_id} is not in the "
                           "packet_out header")
        name, width = by_id[md.metadata_id]
        values[md.metadata_id] = decode_bytes(md.value, width, f"PacketOut metadata {name!r}")
    packed = 0
    for md_id, _, width in header.fields:
        packed = (packed << width) | values.get(md_id, 0)
    size = (header.bitwidth + 7) // 8
    return (packed << (size * 8 - header.bitwidth)).to_bytes(size, "big")


def _stream_error(exc: P4RuntimeError, request) -> p4runtime_pb2.StreamMessageResponse:
    response = p4runtime_pb2.StreamMessageResponse()
    error = response.error
    error.canonical_code, error.message = exc.rpc_code, exc.message
    if request.HasField("packet"):
        error.packet_out.packet_out.CopyFrom(request.packet)
    elif request.HasField("digest_ack"):
        error.digest_list_ack.digest_list_ack.CopyFrom(request.digest_ack)
    return response


def _abort_write(context, results: list[Optional[P4RuntimeError]]) -> None:
    """Fail a Write as PI does: UNKNOWN, one p4.v1.Error per update in the status details."""
    status = status_pb2.Status(code=code_pb2.UNKNOWN,
                               message=f"{sum(1 for r in results if r)} of {len(results)} "
                                       "updates failed")
    for result in results:
        error = p4runtime_pb2.Error()
        if result is None:
            error.canonical_code = code_pb2.OK
        else:
            error.canonical_code, error.message = result.rpc_code, result.message
        status.details.add().Pack(error)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(grpc.StatusCode.UNKNOWN, status.message)


# --------------------------------------------------------------------------------------------
# Entities: P4Runtime messages <-> api objects
# --------------------------------------------------------------------------------------------
class _Codec:
    """Translation between P4Runtime entity messages and :mod:`softswitch.api` objects."""

    def __init__(self, server: P4RuntimeServicer, pipeline: Pipeline, dp: api.Dataplane):
        self.server, self.pipeline, self.dp = server, pipeline, dp

    # -- table entries -------------------------------------------------------------------------
    def matches(self, table: _Table, fields) -> tuple:
        """The api match tuple of a TableEntry's ``match`` list (None for omitted fields)."""
        name = table.info.name
        matches: list = [None] * len(table.info.match_fields)
        seen = set()
        for fm in fields:
            if fm.field_id not in table.fields:
                raise _invalid(f"match field id {fm.field_id} is not in table {name!r}")
            if fm.field_id in seen:
                raise _invalid(f"match field id {fm.field_id} of table {name!r} is given twice")
            seen.add(fm.field_id)
            index, field = table.fields[fm.field_id]
            matches[index] = self.field_match(fm, field, name)
        for index, field in enumerate(table.info.match_fields):
            if matches[index] is None and field.match_kind == "exact":
                raise _invalid(f"exact match field {field.name!r} of table {name!r} is missing")
        return tuple(matches)

    @staticmethod
    def field_match(fm, field: api.MatchFieldInfo, table: str):
        what = f"match field {field.name!r} of table {table!r}"
        kind = fm.WhichOneof("field_match_type")
        if kind != field.match_kind:
            raise _invalid(f"{what} is {field.match_kind}, the request gives {kind}")
        width = field.bitwidth
        full = (1 << width) - 1
        if kind == "exact":
            return api.Exact(decode_bytes(fm.exact.value, width, what))
        if kind == "optional":
            return api.Optional_(decode_bytes(fm.optional.value, width, what))
        if kind == "ternary":
            value = decode_bytes(fm.ternary.value, width, what)
            mask = decode_bytes(fm.ternary.mask, width, what + " mask")
            if mask == 0:
                raise _invalid(f"{what}: a ternary mask of 0 must be omitted (don't care)")
            if value & ~mask:
                raise _invalid(f"{what}: value 0x{value:x} has bits outside mask 0x{mask:x}")
            return api.Ternary(value, mask)
        if kind == "lpm":
            value = decode_bytes(fm.lpm.value, width, what)
            plen = fm.lpm.prefix_len
            if not 0 < plen <= width:
                raise _invalid(f"{what}: prefix length {plen} is not in 1..{width} "
                               "(a /0 match must be omitted)")
            if value & (full >> plen):
                raise _invalid(f"{what}: value 0x{value:x} has bits beyond its /{plen} prefix")
            return api.Lpm(value, plen)
        if kind == "range":
            low = decode_bytes(fm.range.low, width, what + " low")
            high = decode_bytes(fm.range.high, width, what + " high")
            if low > high:
                raise _invalid(f"{what}: range low {low} is above high {high}")
            if low == 0 and high == full:
                raise _invalid(f"{what}: a full range must be omitted (don't care)")
            return api.Range(low, high)
        raise _invalid(f"{what}: match kind {kind} is not supported")

    def encode_matches(self, table: _Table, matches) -> list:
        out = []
        for index, match in enumerate(matches):
            if match is None:
                continue
            fm = p4runtime_pb2.FieldMatch(field_id=table.field_ids[index])
            if isinstance(match, api.Exact):
                fm.exact.value = encode_bytes(match.value)
            elif isinstance(match, api.Ternary):
                fm.ternary.value, fm.ternary.mask = (encode_bytes(match.value),
                                                     encode_bytes(match.mask))
            elif isinstance(match, api.Lpm):
                fm.lpm.value, fm.lpm.prefix_len = encode_bytes(match.value), match.prefix_len
            elif isinstance(match, api.Range):
                fm.range.low, fm.range.high = encode_bytes(match.low), encode_bytes(match.high)
            elif isinstance(match, api.Optional_):
                fm.optional.value = encode_bytes(match.value)
            out.append(fm)
        return out

    def action_call(self, table: _Table, table_action, default: bool) -> ActionCall:
        kind = table_action.WhichOneof("type")
        if kind != "action":
            raise _unimplemented(f"table {table.info.name!r}: {kind or 'no'} action: only "
                                 "direct actions are supported")
        msg = table_action.action
        action = self.pipeline.action(msg.action_id)
        name = action.info.name
        if msg.action_id not in table.actions:
            raise _invalid(f"action {name!r} is not an action of table {table.info.name!r}")
        scope = table.actions[msg.action_id]
        if default and scope == p4info_pb2.ActionRef.TABLE_ONLY:
            raise _invalid(f"action {name!r} is @tableonly in table {table.info.name!r}")
        if not default and scope == p4info_pb2.ActionRef.DEFAULT_ONLY:
            raise _invalid(f"action {name!r} is @defaultonly in table {table.info.name!r}")
        args: list[Optional[int]] = [None] * len(action.param_ids)
        for p in msg.params:
            if p.param_id not in action.params:
                raise _invalid(f"parameter id {p.param_id} is not in action {name!r}")
            index, param = action.params[p.param_id]
            if args[index] is not None:
                raise _invalid(f"parameter {param.name!r} of action {name!r} is given twice")
            args[index] = decode_bytes(p.value, param.bitwidth,
                                       f"parameter {param.name!r} of action {name!r}")
        missing = [action.info.params[i].name for i, a in enumerate(args) if a is None]
        if missing:
            raise _invalid(f"action {name!r} is missing parameters {', '.join(missing)}")
        return ActionCall(name, tuple(args))

    def encode_action(self, call: ActionCall) -> p4runtime_pb2.TableAction:
        table_action = p4runtime_pb2.TableAction()
        action_id = self.pipeline.action_ids.get(call.action)
        if action_id is None:
            raise P4RuntimeError(grpc.StatusCode.INTERNAL,
                                 f"action {call.action!r} has no id in the P4Info")
        table_action.action.action_id = action_id
        for param_id, value in zip(self.pipeline.actions[action_id].param_ids, call.args):
            table_action.action.params.add(param_id=param_id, value=encode_bytes(value))
        return table_action

    def table_entry(self, table: _Table, msg, need_action: bool) -> api.TableEntry:
        """The api entry of a (non-default) TableEntry message."""
        matches = self.matches(table, msg.match)
        if table.info.needs_priority:
            if msg.priority <= 0:
                raise _invalid(f"table {table.info.name!r} has ternary, range or optional "
                               "fields: entries need a priority > 0")
        elif msg.priority != 0:
            raise _invalid(f"table {table.info.name!r} entries take no priority "
                           f"(got {msg.priority})")
        if need_action:
            if not msg.HasField("action"):
                raise _invalid(f"entry of table {table.info.name!r} has no action")
            action = self.action_call(table, msg.action, default=False)
        else:
            action = ActionCall("")          # identity only: (table, matches, priority)
        return api.TableEntry(table.info.name, matches, action, msg.priority)

    def fill_entry(self, msg, table: _Table, entry: api.TableEntry,
                   counter: Optional[tuple[int, int]] = None) -> None:
        """Fill the TableEntry message ``msg`` with ``entry`` (and its direct counter's
        ``(bytes, packets)`` when given)."""
        msg.table_id = table.id
        msg.match.extend(self.encode_matches(table, entry.matches))
        msg.action.CopyFrom(self.encode_action(entry.action))
        msg.priority = entry.priority
        msg.is_const = entry.is_const
        if counter is not None:
            msg.counter_data.byte_count, msg.counter_data.packet_count = counter

    @staticmethod
    def _indices(msg, size: int, what: str) -> Sequence[int]:
        if not msg.HasField("index"):
            return range(size)
        index = msg.index.index
        if not 0 <= index < size:
            raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE,
                                 f"{what}: index {index} is not in 0..{size - 1}")
        return (index,)

    # -- PRE -----------------------------------------------------------------------------------
    @staticmethod
    def counter_data(data, what: str) -> tuple[int, int]:
        """(bytes, packets) of a CounterData; P4Runtime's int64 counts must not be negative."""
        if data.byte_count < 0 or data.packet_count < 0:
            raise _invalid(f"{what}: counts must not be negative (bytes {data.byte_count}, "
                           f"packets {data.packet_count})")
        return data.byte_count, data.packet_count

    @staticmethod
    def replicas(messages, what: str) -> tuple:
        replicas = []
        for r in messages:
            if r.WhichOneof("port_kind") == "port":
                port = decode_bytes(r.port, 32, f"{what} replica port")
            else:
                port = r.egress_port
            replicas.append(api.Replica(port=port, rid=r.instance))
        if len(set(replicas)) != len(replicas):
            raise _invalid(f"{what} lists a replica (port, instance) twice")
        return tuple(replicas)

    @staticmethod
    def encode_replicas(target, replicas) -> None:
        for r in replicas:
            target.add(egress_port=r.port, instance=r.rid)


class _Writer(_Codec):
    """Applies one Update to the dataplane; raises P4RuntimeError/ControlError on refusal.

    Every change that succeeds records its inverse, so :meth:`rollback` can undo a batch
    (ROLLBACK_ON_ERROR, DATAPLANE_ATOMIC). A meter that had no config before cannot be returned
    to that state (the dataplane API has no meter reset) and keeps its new config.
    """

    def __init__(self, server: "P4RuntimeServicer", pipeline: Pipeline, dp: api.Dataplane,
                 undoable: bool = False):
        super().__init__(server, pipeline, dp)
        self.undoable = undoable         # record inverses (costs a read per change)
        self._undo: list[Callable[[], None]] = []

    def _remember(self, undo: Callable[[], None]) -> None:
        if self.undoable:
            self._undo.append(undo)

    def rollback(self) -> None:
        """Undo every change this writer made, newest first."""
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception:   # the dataplane refused its own previous state: a bug
                log.exception("rolling back a Write update failed; dataplane state may be "
                              "partly updated")

    def _existing(self, table: _Table, entry: api.TableEntry) -> Optional[api.TableEntry]:
        for old in self.dp.table_entries(table.info.name):
            if (old.matches, old.priority) == (entry.matches, entry.priority):
                return old
        return None

    def apply(self, update) -> None:
        if update.type not in (Update.INSERT, Update.MODIFY, Update.DELETE):
            raise _invalid(f"update type {_enum_name(Update.Type, update.type)} is not "
                           "valid: use INSERT, MODIFY or DELETE")
        entity = update.entity
        kind = entity.WhichOneof("entity")
        handler = getattr(self, f"_write_{kind}", None)
        if handler is None:
            raise _unimplemented(f"writing {kind or 'an empty entity'} is not supported")
        handler(update.type, getattr(entity, kind))

    @staticmethod
    def _modify_only(kind: int, what: str) -> None:
        if kind != Update.MODIFY:
            raise _invalid(f"{what} can only be modified (got {_enum_name(Update.Type, kind)})")

    def _write_table_entry(self, kind: int, msg) -> None:
        table = self.pipeline.table(msg.table_id)
        name = table.info.name
        if msg.HasField("meter_config") or msg.HasField("meter_counter_data"):
            raise _unimplemented(f"table {name!r}: direct meter config in table entries is "
                                 "not supported")
        if msg.is_default_action:
            self._write_default_entry(kind, table, msg)
            return
        if table.info.is_const:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"table {name!r} has const entries: it cannot be written")
        entry = self.table_entry(table, msg, need_action=kind != Update.DELETE)
        counts = None
        if msg.HasField("counter_data") and table.info.direct_counter and kind != Update.DELETE:
            counts = self.counter_data(msg.counter_data, f"direct counter of table {name!r}")
        old = None
        if self.undoable and kind != Update.INSERT:
            old = self._existing(table, entry)
        old_counts = None
        if old is not None and table.info.direct_counter:
            old_counts = self.dp.direct_counter_read(name, old)
        if kind == Update.INSERT:
            self.dp.table_insert(entry)
            self._remember(lambda: self.dp.table_delete(entry))
        elif kind == Update.MODIFY:
            self.dp.table_modify(entry)
            self._remember(lambda: self._restore_entry(table, old, old_counts, modify=True))
        else:
            self.dp.table_delete(entry)
            self._remember(lambda: self._restore_entry(table, old, old_counts, modify=False))
            return
        if counts is not None:
            self.dp.direct_counter_write(name, entry, *counts)

    def _restore_entry(self, table: _Table, old: api.TableEntry,
                       counts: Optional[tuple[int, int]], modify: bool) -> None:
        (self.dp.table_modify if modify else self.dp.table_insert)(old)
        if counts is not None:
            self.dp.direct_counter_write(table.info.name, old, *counts)

    def _write_default_entry(self, kind: int, table: _Table, msg) -> None:
        name = table.info.name
        self._modify_only(kind, f"the default entry of table {name!r}")
        if msg.match or msg.priority:
            raise _invalid(f"the default entry of table {name!r} takes no match or priority")
        if table.info.const_default_action:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"table {name!r} has a const default action "
                                 f"({table.info.const_default_action})")
        old = self.dp.table_get_default(name)
        if msg.HasField("action"):
            self.dp.table_set_default(name, self.action_call(table, msg.action, default=True))
        else:
            self.dp.table_reset_default(name)
        self._remember(lambda: self.dp.table_set_default(name, old))

    def _write_packet_replication_engine_entry(self, kind: int, msg) -> None:
        which = msg.WhichOneof("type")
        if which == "multicast_group_entry":
            group = msg.multicast_group_entry
            group_id = group.multicast_group_id
            what = f"multicast group {group_id}"
            if group_id == 0:
                raise _invalid("multicast group id 0 is not valid")
            old = self.dp.mcast_groups().get(group_id)
            _check_existence(kind, old is not None, what)
            if kind == Update.DELETE:
                self.dp.mcast_group_delete(group_id)
            else:
                self.dp.mcast_group_set(group_id, self.replicas(group.replicas, what))
            self._remember(lambda: self.dp.mcast_group_delete(group_id) if old is None
                              else self.dp.mcast_group_set(group_id, old))
        elif which == "clone_session_entry":
            session = msg.clone_session_entry
            what = f"clone session {session.session_id}"
            if session.session_id == 0:
                raise _invalid("clone session id 0 is not valid")
            session_id = session.session_id
            old = self.dp.clone_sessions().get(session_id)
            _check_existence(kind, old is not None, what)
            if kind == Update.DELETE:
                self.dp.clone_session_delete(session_id)
            else:
                self.dp.clone_session_set(api.CloneSession(
                    session_id, self.replicas(session.replicas, what),
                    session.class_of_service, session.packet_length_bytes))
            self._remember(lambda: self.dp.clone_session_delete(session_id) if old is None
                              else self.dp.clone_session_set(old))
        else:
            raise _invalid("PacketReplicationEngineEntry has neither a multicast group "
                           "nor a clone session")

    def _write_counter_entry(self, kind: int, msg) -> None:
        counter = self.pipeline.resource("counter", msg.counter_id)
        what = f"counter {counter.name!r}"
        self._modify_only(kind, what)
        counts = self.counter_data(msg.data, what)
        for index in self._indices(msg, counter.info.size, what):
            old = self.dp.counter_read(counter.name, index) if self.undoable else None
            self.dp.counter_write(counter.name, index, *counts)
            self._remember(lambda i=index, old=old: self.dp.counter_write(counter.name, i,
                                                                             *old))

    def _write_direct_counter_entry(self, kind: int, msg) -> None:
        table = self.pipeline.table(msg.table_entry.table_id)
        self._modify_only(kind, f"direct counter of table {table.info.name!r}")
        if not table.info.direct_counter:
            raise _invalid(f"table {table.info.name!r} has no direct counter")
        entry = self.table_entry(table, msg.table_entry, need_action=False)
        counts = self.counter_data(msg.data, f"direct counter of table {table.info.name!r}")
        old = self.dp.direct_counter_read(table.info.name, entry) if self.undoable else None
        self.dp.direct_counter_write(table.info.name, entry, *counts)
        self._remember(lambda: self.dp.direct_counter_write(table.info.name, entry, *old))

    def _write_register_entry(self, kind: int, msg) -> None:
        register = self.pipeline.resource("register", msg.register_id)
        what = f"register {register.name!r}"
        self._modify_only(kind, what)
        if msg.data.WhichOneof("data") != "bitstring":
            raise _invalid(f"{what}: data must be a bitstring")
        value = decode_bytes(msg.data.bitstring, register.info.bitwidth, what)
        for index in self._indices(msg, register.info.size, what):
            old = self.dp.register_read(register.name, index) if self.undoable else None
            self.dp.register_write(register.name, index, value)
            self._remember(lambda i=index, old=old: self.dp.register_write(register.name, i,
                                                                              old))

    def _write_meter_entry(self, kind: int, msg) -> None:
        meter = self.pipeline.resource("meter", msg.meter_id)
        what = f"meter {meter.name!r}"
        self._modify_only(kind, what)
        if not msg.HasField("config"):
            raise _unimplemented(f"{what}: resetting a meter to its default is not supported")
        c = msg.config
        for index in self._indices(msg, meter.info.size, what):
            old = self.dp.meter_get(meter.name, index) if self.undoable else None
            self.dp.meter_set(meter.name, index, c.cir, c.cburst, c.pir, c.pburst)
            if old is not None:
                self._remember(lambda i=index, old=old: self.dp.meter_set(meter.name, i,
                                                                             *old))

    def _write_digest_entry(self, kind: int, msg) -> None:
        digest = self.pipeline.resource("digest", msg.digest_id)
        enabled = self.server._digest_enabled
        _check_existence(kind, digest.id in enabled, f"digest config of {digest.name!r}")
        if kind == Update.DELETE:
            enabled.discard(digest.id)
            self._remember(lambda: enabled.add(digest.id))
        elif kind == Update.INSERT:
            enabled.add(digest.id)
            self._remember(lambda: enabled.discard(digest.id))


def _check_existence(kind: int, exists: bool, what: str) -> None:
    if kind == Update.INSERT and exists:
        raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"{what} already exists")
    if kind != Update.INSERT and not exists:
        raise _not_found(f"{what} does not exist")


class _Reader(_Codec):
    """Answers one Read request in two steps, so that its cost is bounded and the dataplane
    waits only for a copy.

    :meth:`snapshot` runs under the switch lock: it expands each (possibly wildcard) entity,
    checks it, and copies the values the answer needs as plain Python values (no protobuf:
    building messages in Python costs tens of microseconds each). The work is bounded: once
    the answer would hold more than ``limit`` entities, or the request would look at more than
    ``limit * READ_SCAN_FACTOR`` entities, tables, table entries and cells, it is refused with
    RESOURCE_EXHAUSTED before anything more is copied. :meth:`responses` then encodes the copy
    into ReadResponses of :data:`READ_BATCH_SIZE` entities, one batch at a time, outside the
    lock (the caller stops iterating when the client is gone). The answer is still one
    consistent snapshot.
    """

    def __init__(self, server: P4RuntimeServicer, pipeline: Pipeline, dp: api.Dataplane,
                 limit: int):
        super().__init__(server, pipeline, dp)
        self.limit = limit
        self._items: list[tuple] = []      # (fill, *args): fill(Entity message, *args)
        self._scanned = 0                  # entities, table entries and cells looked at

    def __len__(self) -> int:
        return len(self._items)

    def snapshot(self, entity) -> None:
        """Check one requested entity and copy what answers it."""
        self._scan(1, "the requested entities")
        kind = entity.WhichOneof("entity")
        handler = getattr(self, f"_read_{kind}", None)
        if handler is None:
            raise _unimplemented(f"reading {kind or 'an empty entity'} is not supported")
        handler(getattr(entity, kind))

    def responses(self) -> Iterable[p4runtime_pb2.ReadResponse]:
        """The ReadResponses of the snapshot (one, empty, when nothing matched)."""
        items = self._items
        for start in range(0, max(len(items), 1), READ_BATCH_SIZE):
            response = p4runtime_pb2.ReadResponse()
            add = response.entities.add
            for fill, *args in items[start:start + READ_BATCH_SIZE]:
                fill(add(), *args)
            yield response

    def _reserve(self, count: int, what: str) -> None:
        """Make room for ``count`` more entities of the answer, or refuse the request."""
        total = len(self._items) + count
        if total > self.limit:
            raise P4RuntimeError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Read: the answer would hold at least {total} entities ({what}: {count}); "
                f"this target answers at most {self.limit} per Read request: ask for fewer "
                "in each request (one register, counter or table per entity, or an index)")

    def _scan(self, count: int, what: str) -> None:
        """Count ``count`` more things looked at (requested entities, tables, resources, table
        entries, cells), or refuse the request."""
        self._scanned += count
        budget = self.limit * READ_SCAN_FACTOR
        if self._scanned > budget:
            raise P4RuntimeError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Read: the request looks at more than {budget} entities, tables, table entries "
                f"and cells (at {what}); this target looks at most {budget} per Read request: "
                "split it into smaller requests")

    # -- table entries ---------------------------------------------------------------------
    def _tables(self, table_id: int) -> list[_Table]:
        if table_id == 0:
            self._scan(len(self.pipeline.tables), "the tables")
            return list(self.pipeline.tables.values())
        return [self.pipeline.table(table_id)]

    def _read_table_entry(self, msg) -> None:
        for table in self._tables(msg.table_id):
            name = table.info.name
            if msg.is_default_action:
                self._reserve(1, f"default entry of table {name!r}")
                self._items.append((self._fill_default, table, self.dp.table_get_default(name)))
                continue
            wanted = None
            if msg.match:
                wanted = (self.matches(table, msg.match), msg.priority)
            entries = self.dp.table_entries(name)
            self._scan(len(entries), f"entries of table {name!r}")
            entries = [entry for entry in entries
                       if (wanted is None or (entry.matches, entry.priority) == wanted)
                       and (not msg.priority or entry.priority == msg.priority)]
            self._reserve(len(entries), f"entries of table {name!r}")
            with_counter = msg.HasField("counter_data") and table.info.direct_counter
            for entry in entries:
                counter = self.dp.direct_counter_read(name, entry) if with_counter else None
                self._items.append((self._fill_table_entry, table, entry, counter))

    def _fill_default(self, entity, table: _Table, call: ActionCall) -> None:
        entity.table_entry.table_id = table.id
        entity.table_entry.is_default_action = True
        entity.table_entry.action.CopyFrom(self.encode_action(call))

    def _fill_table_entry(self, entity, table: _Table, entry: api.TableEntry,
                          counter: Optional[tuple[int, int]]) -> None:
        self.fill_entry(entity.table_entry, table, entry, counter)

    # -- packet replication engine -----------------------------------------------------------
    def _read_packet_replication_engine_entry(self, msg) -> None:
        which = msg.WhichOneof("type")
        if which == "multicast_group_entry":
            wanted = msg.multicast_group_entry.multicast_group_id
            every = self.dp.mcast_groups()
            self._scan(len(every), "multicast groups")
            groups = [(group_id, replicas) for group_id, replicas in sorted(every.items())
                      if wanted in (0, group_id)]
            self._reserve(len(groups), "multicast groups")
            self._items.extend((self._fill_group, group_id, replicas)
                               for group_id, replicas in groups)
        elif which == "clone_session_entry":
            wanted = msg.clone_session_entry.session_id
            every = self.dp.clone_sessions()
            self._scan(len(every), "clone sessions")
            sessions = [session for session_id, session in sorted(every.items())
                        if wanted in (0, session_id)]
            self._reserve(len(sessions), "clone sessions")
            self._items.extend((self._fill_clone_session, session) for session in sessions)
        else:
            raise _invalid("PacketReplicationEngineEntry has neither a multicast group "
                           "nor a clone session")

    def _fill_group(self, entity, group_id: int, replicas) -> None:
        group = entity.packet_replication_engine_entry.multicast_group_entry
        group.multicast_group_id = group_id
        self.encode_replicas(group.replicas, replicas)

    def _fill_clone_session(self, entity, session: api.CloneSession) -> None:
        clone = entity.packet_replication_engine_entry.clone_session_entry
        clone.session_id = session.session_id
        self.encode_replicas(clone.replicas, session.replicas)
        clone.class_of_service = session.class_of_service
        clone.packet_length_bytes = session.packet_length_bytes

    # -- indexed externs ---------------------------------------------------------------------
    def _resources(self, kind: str, resource_id: int) -> list[_Resource]:
        if resource_id == 0:
            every = getattr(self.pipeline, kind.replace(" ", "_") + "s")
            self._scan(len(every), f"the {kind}s")
            return list(every.values())
        return [self.pipeline.resource(kind, resource_id)]

    def _cells(self, msg, resource: _Resource, kind: str) -> Sequence[int]:
        """The indices a (wildcard) entity names in ``resource``, with room reserved for them."""
        what = f"{kind} {resource.name!r}"
        indices = self._indices(msg, resource.info.size, what)
        self._scan(len(indices), f"cells of {what}")
        self._reserve(len(indices), f"cells of {what}")
        return indices

    def _read_counter_entry(self, msg) -> None:
        for counter in self._resources("counter", msg.counter_id):
            read = self.dp.counter_read
            self._items.extend((_fill_counter, counter.id, index, *read(counter.name, index))
                               for index in self._cells(msg, counter, "counter"))

    def _read_direct_counter_entry(self, msg) -> None:
        request = msg.table_entry
        for table in self._tables(request.table_id):
            name = table.info.name
            if not table.info.direct_counter:
                if request.table_id:
                    raise _invalid(f"table {name!r} has no direct counter")
                continue
            wanted = self.matches(table, request.match) if request.match else None
            entries = self.dp.table_entries(name)
            self._scan(len(entries), f"entries of table {name!r}")
            entries = [entry for entry in entries
                       if wanted is None or (entry.matches == wanted
                                             and entry.priority == request.priority)]
            self._reserve(len(entries), f"direct counter cells of table {name!r}")
            self._items.extend((self._fill_direct_counter, table, entry,
                                self.dp.direct_counter_read(name, entry)) for entry in entries)

    def _fill_direct_counter(self, entity, table: _Table, entry: api.TableEntry,
                             counter: tuple[int, int]) -> None:
        self.fill_entry(entity.direct_counter_entry.table_entry, table, entry)
        data = entity.direct_counter_entry.data
        data.byte_count, data.packet_count = counter

    def _read_register_entry(self, msg) -> None:
        for register in self._resources("register", msg.register_id):
            read = self.dp.register_read
            self._items.extend((_fill_register, register.id, index, read(register.name, index))
                               for index in self._cells(msg, register, "register"))

    def _read_meter_entry(self, msg) -> None:
        for meter in self._resources("meter", msg.meter_id):
            get = self.dp.meter_get
            self._items.extend((_fill_meter, meter.id, index, get(meter.name, index))
                               for index in self._cells(msg, meter, "meter"))

    def _read_digest_entry(self, msg) -> None:
        digests = [digest for digest in self._resources("digest", msg.digest_id)
                   if digest.id in self.server._digest_enabled]
        self._reserve(len(digests), "digests")
        self._items.extend((_fill_digest, digest.id) for digest in digests)


def _fill_counter(entity, counter_id: int, index: int, byte_count: int, packet_count: int):
    entry = entity.counter_entry
    entry.counter_id, entry.index.index = counter_id, index
    entry.data.byte_count, entry.data.packet_count = byte_count, packet_count


def _fill_register(entity, register_id: int, index: int, value: int) -> None:
    entry = entity.register_entry
    entry.register_id, entry.index.index = register_id, index
    entry.data.bitstring = encode_bytes(value)


def _fill_meter(entity, meter_id: int, index: int,
                config: Optional[tuple[int, int, int, int]]) -> None:
    entry = entity.meter_entry
    entry.meter_id, entry.index.index = meter_id, index
    if config is not None:
        entry.config.cir, entry.config.cburst, entry.config.pir, entry.config.pburst = config


def _fill_digest(entity, digest_id: int) -> None:
    entity.digest_entry.digest_id = digest_id
    entity.digest_entry.config.SetInParent()


# --------------------------------------------------------------------------------------------
# Serving
# --------------------------------------------------------------------------------------------
def server_credentials(cert: str, key: str,
                       client_ca: Optional[str] = None) -> grpc.ServerCredentials:
    """TLS credentials for :func:`serve` from PEM files, as Stratum takes them: the server's
    certificate and key and, for mutual TLS, the CA whose client certificates are accepted
    (every other client is refused at the handshake).

    Raises:
        ValueError: a file cannot be read or is not PEM, or the key does not match the
            certificate (named by its flag: ``--tls-cert``, ``--tls-key``, ``--tls-client-ca``).
    """
    import ssl

    def read(path: str, flag: str) -> bytes:
        try:
            data = open(path, "rb").read()
        except OSError as exc:
            raise ValueError(f"{flag} {path}: {exc.strerror or exc}") from None
        if b"-----BEGIN " not in data:
            raise ValueError(f"{flag} {path}: not a PEM file")
        return data

    cert_pem, key_pem = read(cert, "--tls-cert"), read(key, "--tls-key")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ValueError(f"--tls-key {key} does not go with --tls-cert {cert} "
                         f"({exc.reason or exc})") from None
    ca_pem = read(client_ca, "--tls-client-ca") if client_ca else None
    return grpc.ssl_server_credentials([(key_pem, cert_pem)], root_certificates=ca_pem,
                                       require_client_auth=ca_pem is not None)


def serve(switch: Switch, address: str = DEFAULT_ADDRESS,
          max_workers: int = DEFAULT_MAX_WORKERS,
          credentials: Optional[grpc.ServerCredentials] = None,
          max_read_entities: int = MAX_READ_ENTITIES) -> grpc.Server:
    """Start a P4Runtime server for ``switch`` on ``address`` (plaintext, like BMv2's, unless
    ``credentials`` are given).

    Args:
        switch: the device to serve.
        address: ``host:port`` to listen on; 127.0.0.1 by default, so only local clients.
        max_workers: gRPC worker threads; each open StreamChannel holds one.
        credentials: serve TLS only (:func:`server_credentials`; with a client CA, mutual
            TLS: a client without a certificate that CA signed is refused). A switch reachable
            from a shared network must use them: any client that reaches a plaintext server can
            arbitrate with a higher election id and rewrite the tables.
        max_read_entities: the most entities one Read request may return (larger answers
            are refused with RESOURCE_EXHAUSTED).

    Returns:
        the started ``grpc.Server``, with its :class:`P4RuntimeServicer` as ``server.servicer``
        (attribute added here). Shut down with ``server.stop(grace).wait()``, then
        ``server.servicer.close()`` to detach it from the switch.

    Raises:
        OSError: the address cannot be bound.

    Example::

        >>> server = serve(Switch(device_id=0, cpu_port=64), "127.0.0.1:9559")
    """
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="p4rt"))
    servicer = P4RuntimeServicer(switch, max_read_entities=max_read_entities)
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(servicer, server)
    try:
        port = (server.add_secure_port(address, credentials) if credentials is not None
                else server.add_insecure_port(address))
        problem = "" if port else ": no address could be bound"
    except RuntimeError as exc:
        port, problem = 0, f": {exc}"
    if not port:
        server.stop(grace=None)
        servicer.close()
        raise OSError(f"P4Runtime server cannot listen on {address}{problem}")
    server.start()
    server.servicer = servicer
    log.info("P4Runtime server for device %d listening on %s (%s)", switch.device_id, address,
             "plaintext" if credentials is None else "TLS")
    return server
