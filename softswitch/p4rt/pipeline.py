"""A committed pipeline: the pushed P4Info checked against the compiled program, its ids
mapped to the program's tables, actions and resources; P4Runtime bytestrings <-> ints.

A P4Info written by the Tofino compiler (``bf-p4c --p4runtime-files``; ``pkg_info.arch`` ``tna``
or ``t2na``) describes a TNA program as that compiler names it, which this target serves too:

* in its default flavour, tables (and TNA externs) carry the name of the ``Pipeline`` instance
  first (``pipe.HinaTnaIngress.t`` for the program's ``HinaTnaIngress.t``): such a name is
  matched without that first component (this target runs one pipeline, so every prefixed name
  must carry the same one); actions carry none;
* TNA externs (P4Info ``externs``) are not served: P4Runtime has no entity for them here, as
  on PI and Stratum;
* with ``--p4runtime-force-std-externs``, a ``Register`` of a struct (``Register<pair, _>``) is
  a P4Info register whose ``type_spec`` names a struct of ``type_info``. The program's own
  struct register of that name serves it (RegisterEntry data: a ``struct`` of one bitstring
  per field) once the struct's members match its fields in number and widths; a struct
  register the program does not have is accepted at the push and each RegisterEntry of it is
  UNIMPLEMENTED.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import grpc
from p4.config.v1 import p4info_pb2

from .. import api
from ..api import CompiledProgram, ProgramInfo
from .errors import P4RuntimeError, invalid, not_found, unimplemented

#: ``pkg_info.arch`` of the Tofino compiler's P4Info (its names carry the pipeline's).
TOFINO_ARCHS = ("tna", "t2na")


def decode_bytes(value: bytes, bitwidth: int, what: str) -> int:
    """A P4Runtime bytestring as an int; padded (non-canonical) strings of any length are
    accepted (P4Runtime spec, "Bytestrings": the receiver checks the value, not the length).

    Raises:
        P4RuntimeError: OUT_OF_RANGE for an empty string ("the server always rejects" it: a
            bytestring encodes 0 as ``b'\\x00'``) and for a value wider than ``bitwidth``.
    """
    if not value:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE, f"{what}: empty bytestring")
    number = int.from_bytes(value, "big")
    if number >> bitwidth:
        raise P4RuntimeError(grpc.StatusCode.OUT_OF_RANGE,
                             f"{what}: value 0x{value.hex()} does not fit in {bitwidth} bits")
    return number


def encode_bytes(value: int) -> bytes:
    """``value`` in P4Runtime's canonical form: the shortest big-endian string (0 -> b'\\0')."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


@dataclasses.dataclass
class Table:
    id: int
    info: api.TableInfo
    fields: dict[int, tuple[int, api.MatchFieldInfo]]     # field id -> (key index, field)
    field_ids: list[int]                                  # key index -> field id
    actions: dict[int, int]                               # action id -> ActionRef scope


@dataclasses.dataclass
class Action:
    id: int
    info: api.ActionInfo
    params: dict[int, tuple[int, api.ParamInfo]]          # param id -> (index, param)
    param_ids: list[int]


@dataclasses.dataclass
class Resource:
    """A register, counter, meter, digest or value set: its id, name and program description
    (``msg``: its P4Info message)."""
    id: int
    name: str
    info: object
    msg: object = None


@dataclasses.dataclass
class ControllerHeader:
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
        # the Tofino compiler's pipeline prefixes seen (one pipeline: at most one)
        self._pipe_prefixes: Optional[set[str]] = (
            set() if p4info.pkg_info.arch in TOFINO_ARCHS else None)
        #: P4Info registers of struct cells the program does not have (UNIMPLEMENTED)
        self.unserved_registers: dict[int, str] = {}
        self.actions: dict[int, Action] = {}
        self.action_ids: dict[str, int] = {}
        for action in p4info.actions:
            program_action = _find(info.actions, action.preamble.name, "action")
            params: dict[int, tuple[int, api.ParamInfo]] = {}
            if len(action.params) != len(program_action.params):
                raise invalid(f"P4Info action {action.preamble.name!r} has "
                               f"{len(action.params)} parameters, the program's has "
                               f"{len(program_action.params)}")
            for index, (p, program_param) in enumerate(zip(action.params,
                                                           program_action.params)):
                _check_width(f"parameter {p.name!r} of action {action.preamble.name!r}",
                             p.bitwidth, program_param.bitwidth)
                if p.id in params:
                    raise invalid(f"P4Info action {action.preamble.name!r} uses parameter "
                                   f"id {p.id} twice")
                params[p.id] = (index, program_param)
            self.actions[action.preamble.id] = Action(
                action.preamble.id, program_action, params, [p.id for p in action.params])
            self.action_ids[action.preamble.name] = action.preamble.id

        self.tables: dict[int, Table] = {}
        self.table_ids: dict[str, int] = {}
        for table in p4info.tables:
            self._add_table(table, info)

        served = []
        for msg in p4info.registers:
            if msg.type_spec.WhichOneof("type_spec") == "struct" and not any(
                    r.name == msg.preamble.name for r in info.registers):
                self.unserved_registers[msg.preamble.id] = msg.preamble.name
            else:
                served.append(msg)
        self.registers = self._resources(served, info.registers, "register",
                                         lambda m, i: _check_register(m, i, p4info.type_info))
        self.counters = self._resources(p4info.counters, info.counters, "counter")
        self.direct_counters = self._resources(p4info.direct_counters, info.direct_counters,
                                               "direct counter")
        self.meters = self._resources(p4info.meters, info.meters, "meter")
        self.direct_meters = self._resources(p4info.direct_meters, info.direct_meters,
                                             "direct meter")
        self.digests = self._resources(p4info.digests, info.digests, "digest")
        self.action_profiles = self._resources(p4info.action_profiles, info.action_profiles,
                                               "action profile")
        self.value_sets = self._resources(p4info.value_sets, info.value_sets, "value set",
                                          _check_value_set)
        self.digest_ids = {r.name: r.id for r in self.digests.values()}
        self.packet_in: Optional[ControllerHeader] = None
        self.packet_out: Optional[ControllerHeader] = None
        for header in p4info.controller_packet_metadata:
            fields = [(m.id, m.name, m.bitwidth) for m in header.metadata]
            if header.preamble.name == "packet_in":
                self.packet_in = ControllerHeader(header.preamble.id, fields)
            elif header.preamble.name == "packet_out":
                self.packet_out = ControllerHeader(header.preamble.id, fields)
        for name in ("packet_in", "packet_out"):
            ours = getattr(self, name)
            program_header = next((h for h in info.controller_headers if h.name == name), None)
            if ours is not None and program_header is None:
                raise invalid(f"P4Info has controller header {name!r}, the program has none")
            if ours is not None:
                _check_width(f"controller header {name!r}", ours.bitwidth,
                             sum(f.bitwidth for f in program_header.metadata))

    def _find_prefixed(self, objects, name: str, kind: str):
        """``_find``, and for a Tofino compiler's P4Info the name without its pipeline's."""
        if self._pipe_prefixes is None or any(o.name == name for o in objects):
            return _find(objects, name, kind)
        prefix, _, rest = name.partition(".")
        obj = _find(objects, rest, kind) if rest else _find(objects, name, kind)
        self._pipe_prefixes.add(prefix)
        if len(self._pipe_prefixes) > 1:
            raise invalid(f"P4Info names {kind}s of several pipelines "
                          f"({', '.join(sorted(self._pipe_prefixes))}): this target runs one")
        return obj

    def _add_table(self, table: p4info_pb2.Table, info: ProgramInfo) -> None:
        name = table.preamble.name
        program_table = self._find_prefixed(info.tables, name, "table")
        if len(table.match_fields) != len(program_table.match_fields):
            raise invalid(f"P4Info table {name!r} has {len(table.match_fields)} match fields, "
                           f"the program's has {len(program_table.match_fields)}")
        fields = {}
        for index, (mf, program_field) in enumerate(zip(table.match_fields,
                                                        program_table.match_fields)):
            what = f"match field {mf.name!r} of table {name!r}"
            _check_width(what, mf.bitwidth, program_field.bitwidth)
            kind = enum_name(p4info_pb2.MatchField.MatchType, mf.match_type).lower()
            if kind != program_field.match_kind:
                raise invalid(f"P4Info {what} is {kind}, the program's is "
                               f"{program_field.match_kind}")
            if mf.id in fields:
                raise invalid(f"P4Info table {name!r} uses match field id {mf.id} twice")
            fields[mf.id] = (index, program_field)
        actions = {}
        for ref in table.action_refs:
            # p4c refers to a table's @hidden actions without declaring them: no entry or
            # default action can name such an action (the P4Info gives it no name or params).
            if ref.id in self.actions:
                actions[ref.id] = ref.scope
        self.tables[table.preamble.id] = Table(table.preamble.id, program_table, fields,
                                                [mf.id for mf in table.match_fields], actions)
        self.table_ids[name] = table.preamble.id

    @staticmethod
    def _resources(messages, program_objects, kind: str,
                   check: Optional[Callable] = None) -> dict[int, Resource]:
        found = {}
        for msg in messages:
            obj = _find(program_objects, msg.preamble.name, kind)
            if check is not None:
                check(msg, obj)
            found[msg.preamble.id] = Resource(msg.preamble.id, msg.preamble.name, obj, msg)
        return found

    # -- lookups (NOT_FOUND names the kind and the id) ----------------------------------------
    def table(self, table_id: int) -> Table:
        if table_id not in self.tables:
            raise not_found(f"table id {table_id} is not in the P4Info")
        return self.tables[table_id]

    def action(self, action_id: int) -> Action:
        if action_id not in self.actions:
            raise not_found(f"action id {action_id} is not in the P4Info")
        return self.actions[action_id]

    def resource(self, kind: str, resource_id: int) -> Resource:
        if kind == "register" and resource_id in self.unserved_registers:
            raise unimplemented(f"register {self.unserved_registers[resource_id]!r} holds "
                                "structs and is not in the program: this target has no "
                                "such register to serve")
        table = getattr(self, kind.replace(" ", "_") + "s")
        if resource_id not in table:
            raise not_found(f"{kind} id {resource_id} is not in the P4Info")
        return table[resource_id]


def _check_value_set(msg, info: api.ValueSetInfo) -> None:
    if len(msg.match) != len(info.match_fields):
        raise invalid(f"P4Info value set {info.name!r} has {len(msg.match)} match fields, the "
                       f"program's has {len(info.match_fields)}")
    for mf, field in zip(msg.match, info.match_fields):
        _check_width(f"match field {mf.id} of value set {info.name!r}", mf.bitwidth,
                     field.bitwidth)


def _check_register(msg, info: api.RegisterInfo, type_info) -> None:
    """The P4Info register ``msg`` describes the program's register ``info``: both of
    ``bit<N>`` cells of the same width, or both of structs whose members (``type_info``) match
    the program's fields in number and widths."""
    what = f"register {info.name!r}"
    if msg.type_spec.WhichOneof("type_spec") != "struct":
        if info.is_struct:
            raise invalid(f"P4Info {what} holds bitstrings, the program's holds structs "
                          f"{info.type_name}")
        _check_width(what, _bits_of(msg.type_spec), info.bitwidth)
        return
    type_name = msg.type_spec.struct.name
    if not info.is_struct:
        raise invalid(f"P4Info {what} holds structs {type_name!r}, the program's holds "
                      f"bit<{info.bitwidth}>")
    if type_name not in type_info.structs:
        raise invalid(f"P4Info {what} holds structs {type_name!r}, which its type_info does "
                      "not describe")
    members = type_info.structs[type_name].members
    if len(members) != len(info.fields):
        raise invalid(f"P4Info {what} holds structs {type_name} of {len(members)} members, "
                      f"the program's of {len(info.fields)} fields")
    for member, field in zip(members, info.fields):
        _check_width(f"member {member.name!r} of {what}", _bits_of(member.type_spec),
                     field.bitwidth)


def _check_unique_ids(p4info: p4info_pb2.P4Info) -> None:
    seen: dict[int, str] = {}
    for kind in ("tables", "actions", "action_profiles", "counters", "direct_counters",
                 "meters", "direct_meters", "controller_packet_metadata", "value_sets",
                 "registers", "digests"):
        for obj in getattr(p4info, kind):
            name, id_ = obj.preamble.name, obj.preamble.id
            if id_ in seen:
                raise invalid(f"P4Info id {id_} is used by both {seen[id_]!r} and {name!r}")
            seen[id_] = name


def enum_name(enum, value: int) -> str:
    """The name of a protobuf enum value, or the number for a value the enum does not define."""
    try:
        return enum.Name(value)
    except ValueError:
        return str(value)


def _find(objects, name: str, kind: str):
    for obj in objects:
        if obj.name == name:
            return obj
    raise invalid(f"P4Info {kind} {name!r} is not in the program")


def _check_width(what: str, p4info_width: int, program_width: int) -> None:
    if p4info_width != program_width:
        raise invalid(f"P4Info {what} is {p4info_width} bits wide, the program's is "
                       f"{program_width}")


def _bits_of(type_spec) -> int:
    bits = type_spec.bitstring
    which = bits.WhichOneof("type_spec")
    return getattr(bits, which).bitwidth if which in ("bit", "int") else 0


