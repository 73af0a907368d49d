"""Entities: P4Runtime messages <-> :mod:`softswitch.api` objects (matches, actions, entries,
replicas), shared by :mod:`.writer` and :mod:`.reader`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence

import grpc
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from .. import api
from ..api import ActionCall
from .errors import P4RuntimeError, invalid, unimplemented
from .pipeline import Pipeline, Table, decode_bytes, encode_bytes

#: Replica ports (multicast groups, clone sessions) must be below this: BMv2's P4Runtime server
#: fails from here on (bmv2_tests/test_p4runtime_differential.py).
REPLICA_PORT_END = 1 << 31

if TYPE_CHECKING:
    from ..p4runtime_server import P4RuntimeServicer


class Codec:
    """Translation between P4Runtime entity messages and :mod:`softswitch.api` objects."""

    def __init__(self, server: P4RuntimeServicer, pipeline: Pipeline, dp: api.Dataplane):
        self.server, self.pipeline, self.dp = server, pipeline, dp

    # -- table entries -------------------------------------------------------------------------
    def matches(self, table: Table, fields) -> tuple:
        """The api match tuple of a TableEntry's ``match`` list (None for omitted fields)."""
        name = table.info.name
        matches: list = [None] * len(table.info.match_fields)
        seen = set()
        for fm in fields:
            if fm.field_id not in table.fields:
                raise invalid(f"match field id {fm.field_id} is not in table {name!r}")
            if fm.field_id in seen:
                raise invalid(f"match field id {fm.field_id} of table {name!r} is given twice")
            seen.add(fm.field_id)
            index, field = table.fields[fm.field_id]
            matches[index] = self.field_match(fm, field, name)
        for index, field in enumerate(table.info.match_fields):
            if matches[index] is None and field.match_kind == "exact":
                raise invalid(f"exact match field {field.name!r} of table {name!r} is missing")
        return tuple(matches)

    @staticmethod
    def field_match(fm, field: api.MatchFieldInfo, table: str):
        what = f"match field {field.name!r} of table {table!r}"
        kind = fm.WhichOneof("field_match_type")
        if kind != field.match_kind:
            raise invalid(f"{what} is {field.match_kind}, the request gives {kind}")
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
                raise invalid(f"{what}: a ternary mask of 0 must be omitted (don't care)")
            if value & ~mask:
                raise invalid(f"{what}: value 0x{value:x} has bits outside mask 0x{mask:x}")
            return api.Ternary(value, mask)
        if kind == "lpm":
            value = decode_bytes(fm.lpm.value, width, what)
            plen = fm.lpm.prefix_len
            if not 0 < plen <= width:
                raise invalid(f"{what}: prefix length {plen} is not in 1..{width} "
                               "(a /0 match must be omitted)")
            if value & (full >> plen):
                raise invalid(f"{what}: value 0x{value:x} has bits beyond its /{plen} prefix")
            return api.Lpm(value, plen)
        if kind == "range":
            low = decode_bytes(fm.range.low, width, what + " low")
            high = decode_bytes(fm.range.high, width, what + " high")
            if low > high:
                raise invalid(f"{what}: range low {low} is above high {high}")
            if low == 0 and high == full:
                raise invalid(f"{what}: a full range must be omitted (don't care)")
            return api.Range(low, high)
        raise invalid(f"{what}: match kind {kind} is not supported")

    def encode_matches(self, table: Table, matches) -> list:
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

    def action_call(self, table: Table, table_action, default: bool, member: bool = False):
        """The api action of a TableAction (``member``: an action profile member's action,
        checked as an entry's action of ``table``)."""
        kind = table_action.WhichOneof("type")
        profile = table.info.implementation
        if kind in ("action_profile_member_id", "action_profile_group_id"):
            if profile is None:
                raise invalid(f"table {table.info.name!r} has no action profile: its entries "
                               f"take an action, not a {kind}")
            if kind == "action_profile_member_id":
                return api.MemberRef(table_action.action_profile_member_id)
            return api.GroupRef(table_action.action_profile_group_id)
        if kind == "action" and profile is not None and not default and not member:
            raise invalid(f"table {table.info.name!r} is implemented by action profile "
                           f"{profile!r}: its entries take a member or group id, not an action")
        if kind != "action":
            raise unimplemented(f"table {table.info.name!r}: {kind or 'no'} action: "
                                 "action_profile_action_set is not supported")
        msg = table_action.action
        action = self.pipeline.action(msg.action_id)
        name = action.info.name
        if msg.action_id not in table.actions:
            raise invalid(f"action {name!r} is not an action of table {table.info.name!r}")
        scope = table.actions[msg.action_id]
        if default and scope == p4info_pb2.ActionRef.TABLE_ONLY:
            raise invalid(f"action {name!r} is @tableonly in table {table.info.name!r}")
        if not default and scope == p4info_pb2.ActionRef.DEFAULT_ONLY:
            raise invalid(f"action {name!r} is @defaultonly in table {table.info.name!r}")
        args: list[Optional[int]] = [None] * len(action.param_ids)
        for p in msg.params:
            if p.param_id not in action.params:
                raise invalid(f"parameter id {p.param_id} is not in action {name!r}")
            index, param = action.params[p.param_id]
            if args[index] is not None:
                raise invalid(f"parameter {param.name!r} of action {name!r} is given twice")
            args[index] = decode_bytes(p.value, param.bitwidth,
                                       f"parameter {param.name!r} of action {name!r}")
        missing = [action.info.params[i].name for i, a in enumerate(args) if a is None]
        if missing:
            raise invalid(f"action {name!r} is missing parameters {', '.join(missing)}")
        return ActionCall(name, tuple(args))

    def encode_action(self, call) -> p4runtime_pb2.TableAction:
        table_action = p4runtime_pb2.TableAction()
        if isinstance(call, api.MemberRef):
            table_action.action_profile_member_id = call.member_id
            return table_action
        if isinstance(call, api.GroupRef):
            table_action.action_profile_group_id = call.group_id
            return table_action
        action_id = self.pipeline.action_ids.get(call.action)
        if action_id is None:
            raise P4RuntimeError(grpc.StatusCode.INTERNAL,
                                 f"action {call.action!r} has no id in the P4Info")
        table_action.action.action_id = action_id
        for param_id, value in zip(self.pipeline.actions[action_id].param_ids, call.args):
            table_action.action.params.add(param_id=param_id, value=encode_bytes(value))
        return table_action

    def table_entry(self, table: Table, msg, need_action: bool) -> api.TableEntry:
        """The api entry of a (non-default) TableEntry message."""
        matches = self.matches(table, msg.match)
        if table.info.needs_priority:
            if msg.priority <= 0:
                raise invalid(f"table {table.info.name!r} has ternary, range or optional "
                               "fields: entries need a priority > 0")
        elif msg.priority != 0:
            raise invalid(f"table {table.info.name!r} entries take no priority "
                           f"(got {msg.priority})")
        if need_action:
            if not msg.HasField("action"):
                raise invalid(f"entry of table {table.info.name!r} has no action")
            action = self.action_call(table, msg.action, default=False)
        else:
            action = ActionCall("")          # identity only: (table, matches, priority)
        return api.TableEntry(table.info.name, matches, action, msg.priority)

    def fill_entry(self, msg, table: Table, entry: api.TableEntry,
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

    # -- action profiles ---------------------------------------------------------------------------
    def profile_action(self, profile, action_msg) -> ActionCall:
        """The action of an ActionProfileMember: an action of the profile's tables (checked
        against the first; the dataplane checks every table)."""
        tables = [t for t in self.pipeline.tables.values()
                  if t.info.name in profile.info.tables]
        if not tables:
            raise invalid(f"action profile {profile.name!r} implements no table")
        table_action = p4runtime_pb2.TableAction()
        table_action.action.CopyFrom(action_msg)
        try:
            return self.action_call(tables[0], table_action, default=False, member=True)
        except P4RuntimeError as exc:
            raise P4RuntimeError(exc.code, f"member of action profile {profile.name!r}: "
                                           f"{exc.message}") from None

    # -- parser value sets -----------------------------------------------------------------------
    @staticmethod
    def value_set_members(value_set, messages) -> list[tuple[int, ...]]:
        """The members of a ValueSetEntry: one exact FieldMatch per match field of the set
        (P4Info ids), each member given once."""
        info: api.ValueSetInfo = value_set.info
        p4info_ids = [mf.id for mf in value_set.msg.match]
        members: list[tuple[int, ...]] = []
        for n, member in enumerate(messages):
            what = f"member {n} of value set {info.name!r}"
            values: dict[int, int] = {}
            for fm in member.match:
                if fm.field_id not in p4info_ids:
                    raise invalid(f"{what}: match field id {fm.field_id} is not in the set")
                if fm.field_id in values:
                    raise invalid(f"{what}: match field id {fm.field_id} is given twice")
                field = info.match_fields[p4info_ids.index(fm.field_id)]
                if fm.WhichOneof("field_match_type") != "exact":
                    raise invalid(f"{what}: BMv2 value sets match exactly; field "
                                   f"{fm.field_id} is {fm.WhichOneof('field_match_type')}")
                values[fm.field_id] = decode_bytes(fm.exact.value, field.bitwidth,
                                                   f"{what}, field {fm.field_id}")
            missing = [i for i in p4info_ids if i not in values]
            if missing:
                raise invalid(f"{what}: match field ids {missing} are missing")
            value = tuple(values[i] for i in p4info_ids)
            if value in members:
                raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS,
                                     f"{what} repeats member {value}")
            members.append(value)
        return members

    def fill_value_set(self, entity, value_set, members) -> None:
        entry = entity.value_set_entry
        entry.value_set_id = value_set.id
        ids = [mf.id for mf in value_set.msg.match]
        for member in members:
            msg = entry.members.add()
            for field_id, value in zip(ids, member):
                msg.match.add(field_id=field_id).exact.value = encode_bytes(value)

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
            raise invalid(f"{what}: counts must not be negative (bytes {data.byte_count}, "
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
            if port >= REPLICA_PORT_END:
                # BMv2's server reads the port as a signed 32-bit number: from 2**31 it answers
                # UNKNOWN, and 0xFFFFFFFF stops simple_switch_grpc altogether
                raise invalid(f"{what}: replica port {port} is not below {REPLICA_PORT_END}")
            replicas.append(api.Replica(port=port, rid=r.instance))
        if len(set(replicas)) != len(replicas):
            raise invalid(f"{what} lists a replica (port, instance) twice")
        return tuple(replicas)

    @staticmethod
    def encode_replicas(target, replicas) -> None:
        for r in replicas:
            target.add(egress_port=r.port, instance=r.rid)
