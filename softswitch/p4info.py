"""P4Info generation: :class:`~softswitch.api.ProgramInfo` -> ``p4.config.v1.P4Info``, as p4c does.

The message is what ``p4c --p4runtime-files x.p4info.txt`` writes for a v1model program, ids
included, so a controller written against a P4Info from real p4c works unchanged here:

* ids follow p4c's scheme: the top 8 bits are the resource type (``P4Ids.Prefix``: action
  ``0x01``, table ``0x02``, value set ``0x03``, controller header ``0x04``, action profile ``0x11``, counter ``0x12``, direct counter ``0x13``,
  meter ``0x14``, direct meter ``0x15``, register ``0x16``, digest ``0x17``), the low 24 bits the
  Jenkins one-at-a-time hash of the fully qualified name. Names of one type are hashed in sorted
  order and a collision probes the next hash value (p4c ``P4RuntimeSymbolTable``).
* aliases are the shortest unique dot-separated suffix of each name among all the program's
  P4Runtime symbols (p4c ``P4SymbolSuffixSet``).
* match fields, action parameters and controller metadata are numbered 1..n in order.
* initial default action arguments are big-endian, padded to the parameter's width in bytes, as
  p4c's ``stringReprConstant`` writes them (``8w0xEE`` -> ``"\\356"``).
* annotations are copied as written, except ``@id`` and ``@name`` (ids and names say them),
  ``@brief`` and ``@description`` (the ``doc`` field) and ``@hidden``: tables and actions so
  annotated get ids and count for aliases, but are not listed.
* a TNA ``Register<S, I>`` of a struct ``S`` is a register with ``type_spec.struct.name`` ``S``
  and ``S``'s members (one bitstring each) in ``type_info.structs``, as bf-p4c writes it with
  ``--p4runtime-force-std-externs``.
* ``type_info`` is present when p4c touches it: a table, an action parameter, a register, a
  counter, a meter, a digest or a controller header is listed, or a control calls an extern
  function.

Example::

    >>> from softswitch.compiler import compile_file
    >>> info = compile_file("tests/golden/tables.p4").info
    >>> build_p4info(info).tables[0].preamble.id
    34336371
    >>> write_p4info_text(info, "/tmp/tables.p4info.txt")
"""
from __future__ import annotations

import re
from typing import Iterable, Mapping, Optional

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

from .api import (ActionCall, ActionInfo, ActionProfileInfo, ActionRefInfo, ControllerHeaderInfo, CounterInfo,
                  DigestInfo, DirectCounterInfo, DirectMeterInfo, MatchFieldInfo, MeterInfo,
                  ParamInfo, ProgramInfo, RegisterInfo, SerializableEnumInfo, StructFieldInfo,
                  TableInfo, ValueSetInfo)

# p4c prints these two comment lines at the top of every text P4Info.
TEXT_HEADER = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"

_ID_HASH_BITS = 24
_ID_HASH_MASK = (1 << _ID_HASH_BITS) - 1
_U32 = 0xFFFFFFFF

PREFIX = p4info_pb2.P4Ids   # PREFIX.TABLE, PREFIX.ACTION, ... (the spec's P4Ids.Prefix)

# Annotations p4c turns into P4Info fields rather than copying them.
_ID_ANNOTATION = re.compile(r"@id\(\s*(0[xX][0-9a-fA-F]+|\d+)\s*\)$")
_DOC_ANNOTATION = re.compile(r'@(brief|description)\(\s*"(.*)"\s*\)$', re.DOTALL)
_NOT_COPIED = ("@id(", "@name(", "@brief(", "@description(")
# Objects so annotated are P4Runtime symbols (ids, aliases) that P4Info does not list.
_HIDDEN = "@hidden"

_MATCH_TYPES = {
    "exact": p4info_pb2.MatchField.EXACT,
    "ternary": p4info_pb2.MatchField.TERNARY,
    "lpm": p4info_pb2.MatchField.LPM,
    "range": p4info_pb2.MatchField.RANGE,
    "optional": p4info_pb2.MatchField.OPTIONAL,
}
_SCOPES = {
    "TABLE_AND_DEFAULT": (p4info_pb2.ActionRef.TABLE_AND_DEFAULT, None),
    "TABLE_ONLY": (p4info_pb2.ActionRef.TABLE_ONLY, "@tableonly"),
    "DEFAULT_ONLY": (p4info_pb2.ActionRef.DEFAULT_ONLY, "@defaultonly"),
}


# --------------------------------------------------------------------------------------------
# p4c's ids and aliases
# --------------------------------------------------------------------------------------------
def jenkins_one_at_a_time(name: str) -> int:
    """The 32-bit Jenkins one-at-a-time hash of ``name``'s bytes (p4c's id hash)."""
    h = 0
    for byte in name.encode():
        h = (h + byte) & _U32
        h = (h + (h << 10)) & _U32
        h ^= h >> 6
    h = (h + (h << 3)) & _U32
    h ^= h >> 11
    return (h + (h << 15)) & _U32


def assign_ids(prefix: int, names: Iterable[str],
               fixed: Optional[Mapping[str, int]] = None) -> dict[str, int]:
    """p4c's ids for the ``names`` of one resource type.

    Args:
        prefix: the resource type, a ``P4Ids.Prefix`` value (e.g. ``P4Ids.TABLE``).
        names: fully qualified names; duplicates are allowed and get one id.
        fixed: ids the program assigns with ``@id(N)``; ``prefix`` is added when N has none.

    Returns:
        name -> id, with ``prefix`` in the top 8 bits and the name's hash (linearly probed on
        collision, in sorted name order) in the low 24 bits.

    Raises:
        ValueError: an ``@id`` with another resource type's prefix, or used twice.
    """
    ids: dict[str, int] = {}
    for name, value in (fixed or {}).items():
        if value >> _ID_HASH_BITS not in (0, prefix):
            raise ValueError(f"@id({value}) of {name!r} has the wrong 8-bit prefix "
                             f"(0x{value >> _ID_HASH_BITS:02x}, expected 0x{prefix:02x})")
        ids[name] = value | (prefix << _ID_HASH_BITS)
    if len(set(ids.values())) != len(ids):
        raise ValueError(f"an @id is assigned to more than one of {sorted(ids)}")
    taken: set[int] = set(ids.values())
    for name in sorted(set(names) - set(ids)):
        value = jenkins_one_at_a_time(name)
        while (prefix << _ID_HASH_BITS) | (value & _ID_HASH_MASK) in taken:
            value = (value + 1) & _U32
        ids[name] = (prefix << _ID_HASH_BITS) | (value & _ID_HASH_MASK)
        taken.add(ids[name])
    return ids


def shortest_unique_suffixes(names: Iterable[str]) -> dict[str, str]:
    """Each name's alias: its shortest dot-separated suffix that no other name ends with."""
    unique = sorted(set(names))
    counts: dict[tuple[str, ...], int] = {}
    for name in unique:
        parts = tuple(name.split("."))
        for i in range(len(parts)):
            counts[parts[i:]] = counts.get(parts[i:], 0) + 1
    aliases = {}
    for name in unique:
        parts = tuple(name.split("."))
        for n in range(1, len(parts) + 1):
            if counts[parts[-n:]] < 2 or n == len(parts):
                aliases[name] = ".".join(parts[-n:])
                break
    return aliases


def encode_value(value: int, bitwidth: int) -> bytes:
    """``value`` as p4c writes constants: big-endian on ceil(bitwidth / 8) bytes."""
    if value < 0 or value >> bitwidth:
        raise ValueError(f"value {value} does not fit in bit<{bitwidth}>")
    return value.to_bytes(max(1, (bitwidth + 7) // 8), "big")


class SymbolIds:
    """The ids and aliases p4c gives the P4Runtime symbols of ``info``.

    Attributes are dicts name -> id per resource type (``tables``, ``actions``, ``counters``,
    ``direct_counters``, ``meters``, ``direct_meters``, ``registers``, ``digests``,
    ``controller_headers``, the last keyed by the header *type* name) and ``alias`` name -> alias.
    """

    def __init__(self, info: ProgramInfo):
        self.tables = assign_ids(PREFIX.TABLE, (t.name for t in info.tables),
                                 _id_annotations(info.tables))
        self.actions = assign_ids(PREFIX.ACTION, (a.name for a in info.actions),
                                  _id_annotations(info.actions))
        self.counters = assign_ids(PREFIX.COUNTER, (c.name for c in info.counters),
                                   _id_annotations(info.counters))
        self.direct_counters = assign_ids(PREFIX.DIRECT_COUNTER,
                                          (c.name for c in info.direct_counters))
        self.meters = assign_ids(PREFIX.METER, (m.name for m in info.meters))
        self.direct_meters = assign_ids(PREFIX.DIRECT_METER, (m.name for m in info.direct_meters))
        self.registers = assign_ids(PREFIX.REGISTER, (r.name for r in info.registers),
                                    _id_annotations(info.registers))
        self.digests = assign_ids(PREFIX.DIGEST, (d.name for d in info.digests))
        self.controller_headers = assign_ids(PREFIX.CONTROLLER_HEADER,
                                             (h.type_name for h in info.controller_headers))
        self.value_sets = assign_ids(PREFIX.VALUE_SET, (v.name for v in info.value_sets))
        self.action_profiles = assign_ids(PREFIX.ACTION_PROFILE,
                                          (p.name for p in info.action_profiles))
        every_symbol: list[str] = []
        for table in (self.tables, self.actions, self.counters, self.direct_counters,
                      self.meters, self.direct_meters, self.registers, self.digests,
                      self.controller_headers, self.value_sets, self.action_profiles):
            every_symbol.extend(table)
        self.alias = shortest_unique_suffixes(every_symbol)


# --------------------------------------------------------------------------------------------
# The P4Info message
# --------------------------------------------------------------------------------------------
def build_p4info(info: ProgramInfo) -> p4info_pb2.P4Info:
    """The P4Info p4c would write for the program ``info`` describes.

    Args:
        info: the program description from the compiler (``CompiledProgram.info``).

    Returns:
        a new ``p4.config.v1.P4Info``; objects appear in ``info``'s order.

    Raises:
        ValueError: ``info`` is inconsistent (an action, table or value the program lacks).
    """
    ids = SymbolIds(info)
    p4info = p4info_pb2.P4Info()
    p4info.pkg_info.arch = info.arch
    actions = {a.name: a for a in info.actions}
    direct_of_table = _direct_resources(info, ids)

    for table in info.tables:
        if _listed(table):
            _add_table(p4info.tables.add(), table, ids, actions,
                       direct_of_table.get(table.name, ()))
    for action in info.actions:
        if _listed(action):
            _add_action(p4info.actions.add(), action, ids)
    for profile in info.action_profiles:
        msg = p4info.action_profiles.add()
        _set_preamble(msg.preamble, ids.action_profiles[profile.name], profile.name, ids)
        msg.table_ids.extend(_lookup(ids.tables, t, "table") for t in profile.tables)
        msg.with_selector = profile.with_selector
        msg.size = profile.size
    for counter in info.counters:
        msg = p4info.counters.add()
        _set_preamble(msg.preamble, ids.counters[counter.name], counter.name, ids,
                      counter.annotations)
        msg.spec.unit = p4info_pb2.CounterSpec.Unit.Value(counter.unit)
        msg.size = counter.size
    for counter in info.direct_counters:
        msg = p4info.direct_counters.add()
        _set_preamble(msg.preamble, ids.direct_counters[counter.name], counter.name, ids)
        msg.spec.unit = p4info_pb2.CounterSpec.Unit.Value(counter.unit)
        msg.direct_table_id = _lookup(ids.tables, counter.table, "table")
    for meter in info.meters:
        msg = p4info.meters.add()
        _set_preamble(msg.preamble, ids.meters[meter.name], meter.name, ids)
        msg.spec.unit = p4info_pb2.MeterSpec.Unit.Value(meter.unit)
        msg.size = meter.size
    for meter in info.direct_meters:
        msg = p4info.direct_meters.add()
        _set_preamble(msg.preamble, ids.direct_meters[meter.name], meter.name, ids)
        msg.spec.unit = p4info_pb2.MeterSpec.Unit.Value(meter.unit)
        msg.direct_table_id = _lookup(ids.tables, meter.table, "table")
    for header in info.controller_headers:
        msg = p4info.controller_packet_metadata.add()
        msg.preamble.id = ids.controller_headers[header.type_name]
        msg.preamble.name = header.name          # p4c: the annotation's name, not the type's
        msg.preamble.alias = header.name
        msg.preamble.annotations.append(f'@controller_header("{header.name}")')
        for i, field in enumerate(header.metadata, start=1):
            md = msg.metadata.add()
            md.id, md.name, md.bitwidth = i, field.name, field.bitwidth
    for value_set in info.value_sets:
        msg = p4info.value_sets.add()
        _set_preamble(msg.preamble, ids.value_sets[value_set.name], value_set.name, ids)
        for i, field in enumerate(value_set.match_fields, start=1):
            mf = msg.match.add()
            mf.id, mf.bitwidth = i, field.bitwidth
            if field.name:
                mf.name = field.name
            mf.match_type = _MATCH_TYPES[field.match_kind]
        msg.size = value_set.size
    for register in info.registers:
        msg = p4info.registers.add()
        _set_preamble(msg.preamble, ids.registers[register.name], register.name, ids,
                      register.annotations)
        if register.is_struct:
            # a TNA Register of structs, as bf-p4c --p4runtime-force-std-externs writes it: the
            # struct's name here, its members in type_info (below)
            msg.type_spec.struct.name = register.type_name
        else:
            _set_bits(msg.type_spec, register.bitwidth, register.signed)
        msg.size = register.size
    type_info = p4info.type_info
    if (p4info.tables or p4info.registers or p4info.counters or p4info.meters
            or p4info.controller_packet_metadata or info.digests or info.calls_extern_functions
            or any(a.params for a in p4info.actions)):
        type_info.SetInParent()      # p4c's type converter ran: `type_info {}` even if empty
    for register in info.registers:
        if register.is_struct:
            _add_struct(type_info, register.type_name, register.fields)
    for enum in info.serializable_enums:
        msg = type_info.serializable_enums[enum.name]
        msg.underlying_type.bitwidth = enum.bitwidth
        for name, value in enum.members:
            member = msg.members.add()
            member.name = name
            member.value = encode_value(value & ((1 << enum.bitwidth) - 1), enum.bitwidth)
    for digest in info.digests:
        msg = p4info.digests.add()
        _set_preamble(msg.preamble, ids.digests[digest.name], digest.name, ids)
        msg.type_spec.struct.name = digest.name
        _add_struct(type_info, digest.name, digest.fields)
    return p4info


def p4info_to_text(p4info: p4info_pb2.P4Info) -> str:
    """``p4info`` in protobuf text format with p4c's two header comment lines."""
    return TEXT_HEADER + text_format.MessageToString(p4info)


def write_p4info_text(info: ProgramInfo, path: str) -> None:
    """Write the P4Info of ``info`` to ``path`` in text format, as ``p4c --p4runtime-files``.

    Example::

        >>> write_p4info_text(compile_file("p4/hina.p4").info, "build/hina.p4info.txt")
    """
    with open(path, "w", encoding="utf-8") as out:
        out.write(p4info_to_text(build_p4info(info)))


def parse_p4info_text(text: str) -> p4info_pb2.P4Info:
    """Parse a text P4Info; fields this ``p4runtime`` version does not know are skipped."""
    p4info = p4info_pb2.P4Info()
    text_format.Merge(text, p4info, allow_unknown_field=True)
    return p4info


def read_p4info_text(path: str) -> p4info_pb2.P4Info:
    """Parse a text P4Info file (as p4c or :func:`write_p4info_text` wrote it)."""
    with open(path, encoding="utf-8") as src:
        return parse_p4info_text(src.read())


def program_info_from_p4info(p4info: p4info_pb2.P4Info) -> ProgramInfo:
    """The :class:`ProgramInfo` a P4Info describes (the inverse of :func:`build_p4info`, as far
    as P4Info says it): how a program p4c compiled is driven by name (the STF runner over real
    BMv2) without the embedded front end. Left out because P4Info does not carry them: initial
    default action arguments, annotations, hidden objects, controller header type names.
    """
    actions = {a.preamble.id: a.preamble.name for a in p4info.actions}
    tables = {t.preamble.id: t.preamble.name for t in p4info.tables}
    profiles = {p.preamble.id: p.preamble.name for p in p4info.action_profiles}
    directs = {c.preamble.id: c.preamble.name
               for c in list(p4info.direct_counters) + list(p4info.direct_meters)}
    scopes = {v[0]: k for k, v in _SCOPES.items()}
    kinds = {v: k for k, v in _MATCH_TYPES.items()}

    def counter_unit(spec) -> str:
        return p4info_pb2.CounterSpec.Unit.Name(spec.unit)

    def meter_unit(spec) -> str:
        return p4info_pb2.MeterSpec.Unit.Name(spec.unit)

    def direct(t, kind) -> Optional[str]:
        names = [directs[i] for i in t.direct_resource_ids if i in directs]
        named = {c.preamble.name for c in getattr(p4info, kind)}
        return next((n for n in names if n in named), None)

    def bits(type_spec) -> tuple[int, bool]:
        b = type_spec.bitstring
        return (b.int.bitwidth, True) if b.HasField("int") else (b.bit.bitwidth, False)

    def struct_fields(type_name: str) -> tuple[StructFieldInfo, ...]:
        if type_name not in p4info.type_info.structs:
            raise ValueError(f"P4Info type_info has no struct {type_name!r}")
        return tuple(StructFieldInfo(m.name, *bits(m.type_spec))
                     for m in p4info.type_info.structs[type_name].members)

    def register(r) -> RegisterInfo:
        if r.type_spec.WhichOneof("type_spec") == "struct":    # a TNA Register of structs
            fields = struct_fields(r.type_spec.struct.name)
            return RegisterInfo(r.preamble.name, sum(f.bitwidth for f in fields), r.size,
                                fields=fields, type_name=r.type_spec.struct.name)
        width, signed = bits(r.type_spec)
        return RegisterInfo(r.preamble.name, width, r.size, signed=signed)

    return ProgramInfo(
        arch=p4info.pkg_info.arch or "v1model",
        tables=tuple(TableInfo(
            name=t.preamble.name,
            match_fields=tuple(MatchFieldInfo(m.name, m.bitwidth, kinds[m.match_type])
                               for m in t.match_fields),
            action_refs=tuple(ActionRefInfo(actions[r.id], scopes[r.scope])
                              for r in t.action_refs),
            size=t.size,
            const_default_action=(actions[t.const_default_action_id]
                                  if t.const_default_action_id else None),
            is_const=t.is_const_table,
            has_initial_entries=getattr(t, "has_initial_entries", False),
            direct_counter=direct(t, "direct_counters"),
            direct_meter=direct(t, "direct_meters"),
            implementation=profiles.get(t.implementation_id)) for t in p4info.tables),
        actions=tuple(ActionInfo(a.preamble.name,
                                 tuple(ParamInfo(p.name, p.bitwidth) for p in a.params))
                      for a in p4info.actions),
        registers=tuple(register(r) for r in p4info.registers),
        counters=tuple(CounterInfo(c.preamble.name, counter_unit(c.spec), c.size)
                       for c in p4info.counters),
        direct_counters=tuple(DirectCounterInfo(c.preamble.name, counter_unit(c.spec),
                                                tables[c.direct_table_id])
                              for c in p4info.direct_counters),
        meters=tuple(MeterInfo(m.preamble.name, meter_unit(m.spec), m.size)
                     for m in p4info.meters),
        direct_meters=tuple(DirectMeterInfo(m.preamble.name, meter_unit(m.spec),
                                            tables[m.direct_table_id])
                            for m in p4info.direct_meters),
        digests=tuple(DigestInfo(d.preamble.name, tuple(
            StructFieldInfo(m.name, bits(m.type_spec)[0])
            for m in p4info.type_info.structs[d.type_spec.struct.name].members))
            for d in p4info.digests),
        controller_headers=tuple(ControllerHeaderInfo(
            h.preamble.name, h.preamble.name,
            tuple(StructFieldInfo(m.name, m.bitwidth) for m in h.metadata))
            for h in p4info.controller_packet_metadata),
        serializable_enums=tuple(SerializableEnumInfo(
            name, e.underlying_type.bitwidth, False,
            tuple((m.name, int.from_bytes(m.value, "big")) for m in e.members))
            for name, e in sorted(p4info.type_info.serializable_enums.items())),
        action_profiles=tuple(ActionProfileInfo(
            p.preamble.name, tuple(tables[i] for i in p.table_ids), p.with_selector, p.size)
            for p in p4info.action_profiles),
        value_sets=tuple(ValueSetInfo(v.preamble.name, tuple(
            MatchFieldInfo(m.name, m.bitwidth, kinds.get(m.match_type, "exact"))
            for m in v.match), v.size) for v in p4info.value_sets))


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _lookup(ids: Mapping[str, int], name: str, kind: str) -> int:
    if name not in ids:
        raise ValueError(f"{kind} {name!r} is referenced but not declared in the program")
    return ids[name]


def _id_annotations(objects) -> dict[str, int]:
    """name -> N for the objects annotated ``@id(N)``."""
    fixed = {}
    for obj in objects:
        for annotation in obj.annotations:
            match = _ID_ANNOTATION.match(annotation.strip())
            if match:
                fixed[obj.name] = int(match.group(1), 0)
    return fixed


def _listed(obj) -> bool:
    """Whether P4Info lists ``obj`` (a table or action): not when it is ``@hidden``."""
    return _HIDDEN not in (a.strip() for a in obj.annotations)


def _add_annotations(msg, annotations: Iterable[str]) -> None:
    """Copy ``annotations`` into ``msg`` (a preamble, match field or action parameter) as p4c
    does: ``@brief``/``@description`` become ``msg.doc``, ``@id``/``@name``/``@hidden`` go."""
    for annotation in annotations:
        text = annotation.strip()
        doc = _DOC_ANNOTATION.match(text)
        if doc:
            setattr(msg.doc, doc.group(1), doc.group(2))
        elif not text.startswith(_NOT_COPIED) and text != _HIDDEN:
            msg.annotations.append(annotation)


def _set_preamble(preamble, id_: int, name: str, ids: SymbolIds,
                  annotations: Iterable[str] = ()) -> None:
    preamble.id, preamble.name, preamble.alias = id_, name, ids.alias[name]
    _add_annotations(preamble, annotations)


def _set_bits(type_spec, bitwidth: int, signed: bool) -> None:
    if signed:
        type_spec.bitstring.int.bitwidth = bitwidth
    else:
        type_spec.bitstring.bit.bitwidth = bitwidth


def _add_struct(type_info: p4info_pb2.P4TypeInfo, name: str,
                fields: Iterable[StructFieldInfo]) -> None:
    """``type_info.structs[name]``: one bitstring member per field. A struct that a digest and
    a register (or two registers) share is described once."""
    if name in type_info.structs:
        return
    struct = type_info.structs[name]
    for field in fields:
        member = struct.members.add()
        member.name = field.name
        _set_bits(member.type_spec, field.bitwidth, field.signed)


def _direct_resources(info: ProgramInfo, ids: SymbolIds) -> dict[str, list[int]]:
    direct: dict[str, list[int]] = {}
    for counter in info.direct_counters:
        direct.setdefault(counter.table, []).append(ids.direct_counters[counter.name])
    for meter in info.direct_meters:
        direct.setdefault(meter.table, []).append(ids.direct_meters[meter.name])
    return direct


def _add_table(msg: p4info_pb2.Table, table: TableInfo, ids: SymbolIds,
               actions: Mapping[str, ActionInfo], direct_ids: Iterable[int]) -> None:
    _set_preamble(msg.preamble, ids.tables[table.name], table.name, ids, table.annotations)
    for i, field in enumerate(table.match_fields, start=1):
        mf = msg.match_fields.add()
        mf.id, mf.name, mf.bitwidth = i, field.name, field.bitwidth
        _add_annotations(mf, field.annotations)
        if field.match_kind in _MATCH_TYPES:
            mf.match_type = _MATCH_TYPES[field.match_kind]
        else:
            mf.other_match_type = field.match_kind
    for ref in table.action_refs:
        msg_ref = msg.action_refs.add()
        msg_ref.id = _lookup(ids.actions, ref.name, f"action of table {table.name!r}:")
        scope, annotation = _SCOPES[ref.scope]
        msg_ref.annotations.extend(ref.annotations)
        if annotation and annotation not in ref.annotations:
            msg_ref.annotations.append(annotation)
        msg_ref.scope = scope
    if table.const_default_action:
        msg.const_default_action_id = _lookup(ids.actions, table.const_default_action,
                                              f"default action of table {table.name!r}:")
    default = table.initial_default_action
    if default is None and table.const_default_action:
        default = ActionCall(table.const_default_action)
    if default is not None:
        _set_default_action(msg.initial_default_action, table, default, ids, actions)
    if table.implementation:
        msg.implementation_id = _lookup(ids.action_profiles, table.implementation,
                                        "action profile")
    msg.direct_resource_ids.extend(direct_ids)
    msg.size = table.size
    msg.is_const_table = table.is_const
    msg.has_initial_entries = table.has_initial_entries


def _set_default_action(msg, table: TableInfo, call: ActionCall, ids: SymbolIds,
                        actions: Mapping[str, ActionInfo]) -> None:
    what = f"default action of table {table.name!r}:"
    msg.action_id = _lookup(ids.actions, call.action, what)
    params = actions[call.action].params
    if len(params) != len(call.args):
        raise ValueError(f"{what} {call.action} takes {len(params)} arguments, "
                         f"got {len(call.args)}")
    for i, (param, value) in enumerate(zip(params, call.args), start=1):
        arg = msg.arguments.add()
        arg.param_id = i
        arg.value = encode_value(value, param.bitwidth)


def _add_action(msg: p4info_pb2.Action, action: ActionInfo, ids: SymbolIds) -> None:
    _set_preamble(msg.preamble, ids.actions[action.name], action.name, ids, action.annotations)
    for i, param in enumerate(action.params, start=1):
        p = msg.params.add()
        p.id, p.name, p.bitwidth = i, param.name, param.bitwidth
        _add_annotations(p, param.annotations)
